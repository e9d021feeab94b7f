//! What the agent asks of a thread's task.

use agui_types::{Event, RunAgentInput};
use tokio::sync::{mpsc, oneshot};

use super::output::RunChannel;
use crate::error::RunFailure;
use crate::owner::Owner;
use crate::places::Place;

/// What the agent asks of a thread's task.
pub(crate) enum Command {
    /// Serve a run: its events go to `events`, which has its `RUN_STARTED` already.
    Run {
        input: RunAgentInput,
        events: RunChannel,
        owner: Owner,
    },
    /// Restate the thread on `events` and follow its live turn, if any, to its end.
    Connect {
        input: RunAgentInput,
        events: mpsc::Sender<Event>,
        owner: Owner,
    },
    /// Stop the turn in flight; the answer says whether there was one.
    Stop { reply: oneshot::Sender<bool> },
    /// Delete the thread with its files, if it is `owner`'s; the answer says whether it was.
    Delete {
        owner: Owner,
        reply: oneshot::Sender<bool>,
    },
    /// Change the thread's title, archiving or branch (a checked patch), if it is `owner`'s;
    /// the answer is its record after the change (`None` when it is not `owner`'s), or why the
    /// branch could not be switched.
    Update {
        owner: Owner,
        patch: crate::threads::model::ThreadPatch,
        reply: oneshot::Sender<
            Option<Result<crate::store::ThreadRecord, crate::threads::model::SwitchRefused>>,
        >,
    },
    /// Give the thread its directories for `owner` (placing it, a new thread becoming theirs)
    /// without opening a conversation; the answer is its place, `None` when it is someone
    /// else's.
    Place {
        owner: Owner,
        reply: oneshot::Sender<Result<Option<Place>, RunFailure>>,
    },
    /// Close the conversation if the thread is idle (another thread needs the slot).
    Hibernate,
    /// End everything and exit (the server shuts down).
    Shutdown { done: oneshot::Sender<()> },
}
