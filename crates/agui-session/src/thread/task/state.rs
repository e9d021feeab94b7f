//! The typed state a thread's task keeps beside its conversation: its lease, where its
//! conversation stands in the harness, the failure it owes someone, the runs it serves or holds,
//! and why it ends.

use std::path::PathBuf;
use std::time::Duration;

use agui_types::{Event, RunAgentInput};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::super::command::Command;
use super::super::output::RunChannel;
use crate::contract::Contract;
use crate::error::RunFailure;
use crate::lease::LeaseDenied;
use crate::owner::Owner;
use crate::places::Place;
use crate::prompt::Prompt;

/// What a thread brings into its place when it next opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Moving {
    /// Its workspace from before places existed (`<workspace_root>/<hash>`).
    Legacy(PathBuf),
    /// Its place in the tree of its earlier owner (the local owner, before identities).
    From(Place, Owner),
}

/// The thread's lease, when replicas share the save dir (see `crate::lease`).
pub(super) enum Lease {
    /// The agent has no leases: it alone owns its save dir.
    NotNeeded,
    /// Not held, so the thread's record is not read. The commands that need it wait in `queue`
    /// while the child `taking` tries to take it.
    Missing {
        taking: Option<JoinHandle<Result<Granted, LeaseDenied>>>,
        queue: Vec<Command>,
    },
    /// Held until `valid_until` unless renewed; renewed from `renew_at` by the child
    /// `renewing` (the store's file work never holds the loop up). `wanted`: another replica
    /// asked for the thread (read at the last renewal), so it is handed over as soon as it is
    /// idle.
    Held {
        renew_at: Instant,
        valid_until: Instant,
        wanted: bool,
        renewing: Option<JoinHandle<Renewed>>,
    },
    /// Lost to another replica: the record is not ours any more, and the task is ending.
    Lost,
}

impl Lease {
    /// Whether runs or connects wait for the lease: the task is not idle (its idle timers
    /// would end it and hand them to a new task, whose wait starts over: a client waited
    /// forever for a thread whose holder would not let it go).
    pub(super) fn has_waiting_commands(&self) -> bool {
        matches!(self, Self::Missing { queue, .. } if !queue.is_empty())
    }

    /// Whether the thread's record is this task's to read and write.
    pub(super) fn is_ours(&self) -> bool {
        matches!(self, Self::NotNeeded | Self::Held { .. })
    }

    /// Whether another replica asked for the thread.
    pub(super) fn is_wanted(&self) -> bool {
        matches!(self, Self::Held { wanted: true, .. })
    }

    /// Resolves when the child taking or renewing the lease is done (never when none is at
    /// it).
    pub(super) async fn child_done(&mut self) -> LeaseChild {
        match self {
            Self::Missing {
                taking: Some(child),
                ..
            } => LeaseChild::Taken(
                child
                    .await
                    .unwrap_or_else(|e| Err(LeaseDenied::task_failed(&e))),
            ),
            Self::Held {
                renewing: Some(child),
                ..
            } => {
                let renewed = child.await.unwrap_or_else(|e| Renewed {
                    result: Err(LeaseDenied::task_failed(&e)),
                    wanted: false,
                });
                if let Self::Held { renewing, .. } = self {
                    *renewing = None;
                }
                LeaseChild::Renewed(renewed)
            }
            _ => std::future::pending().await,
        }
    }
}

/// What a child of the lease brought back.
pub(super) enum LeaseChild {
    /// The lease was taken, or not.
    Taken(Result<Granted, LeaseDenied>),
    /// A renewal is done.
    Renewed(Renewed),
}

/// The lease taken or renewed: for `valid_for` from `asked_at`, the moment before the store was
/// asked, so the end this task counts (and its records are written by) never comes after the
/// end the store keeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Granted {
    pub(super) asked_at: Instant,
    pub(super) valid_for: Duration,
}

/// What a renewal of the lease found: whether it was renewed (for how long), and whether
/// another replica asked for the thread.
pub(super) struct Renewed {
    pub(super) result: Result<Granted, LeaseDenied>,
    pub(super) wanted: bool,
}

/// Where the thread's conversation stands in the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Harnessed {
    /// Not created yet: the next open creates it.
    New,
    /// The harness has it, and the message log holds its messages.
    Known,
    /// The harness has it; the message log is rebuilt from it when it next opens (the thread
    /// was read back from its record).
    KnownUnread,
}

impl Harnessed {
    /// Whether the harness has the conversation (so it is resumed, never silently recreated).
    pub(super) fn is_known(self) -> bool {
        self != Self::New
    }
}

/// How the runs watching a turn end when it ends.
#[derive(Debug, Clone)]
pub(super) enum Verdict {
    /// It was stopped: `RUN_FINISHED` with outcome `cancelled`.
    Stopped,
    /// It failed, stalled or filled the disk: `RUN_ERROR`.
    Failed(RunFailure),
}

/// A failure (or a stop) waiting to be reported, and who reports it.
#[derive(Debug, Clone)]
pub(super) enum Owed {
    /// The runs watching the current turn end with it; dropped when nobody watches any more.
    Watchers(Verdict),
    /// Nobody watched when the turn failed (or the thread came back from a server that died
    /// mid-turn): the next run reports it first.
    NextRun(RunFailure),
}

/// The run that drives the thread now (its prompt is the next to send).
pub(super) struct ActiveRun {
    pub(super) run_id: String,
    /// The span of its log lines (the thread's, with the run id).
    pub(super) span: tracing::Span,
    /// Its client's stream, to notice the client leaving while the thread is quiet.
    pub(super) events: mpsc::Sender<Event>,
    /// The user message to send once no turn is in flight and the conversation is open.
    pub(super) prompt: Option<Prompt>,
    /// Tool messages whose results travel in the prompt (recorded as forwarded with it).
    pub(super) consumed: Vec<String>,
    /// The client tools the conversation must have.
    pub(super) contract: Contract,
    /// Neither an answer nor a new message: it only restates what waits.
    pub(super) bare: bool,
}

/// A run waiting for the thread's current run to end.
pub(super) struct WaitingRun {
    pub(super) input: RunAgentInput,
    pub(super) events: RunChannel,
    pub(super) deadline: Instant,
}

/// A connect waiting for the open that brings the thread's history back from the harness.
pub(super) struct WaitingConnect {
    pub(super) input: RunAgentInput,
    pub(super) events: RunChannel,
}

/// A running turn's tree measured against the disk cap (`workspace_max_bytes`): a turn that
/// grows it past the cap is stopped; one that shrinks it (cleaning up) is not. The process's
/// own watcher stops the commands that pass it whenever they run; a turn during which it did
/// (`stops_at_turn_start` behind) filled the disk too.
#[derive(Debug, Clone, Copy)]
pub(super) struct DiskWatch {
    pub(super) at_turn_start: Option<u64>,
    pub(super) stops_at_turn_start: u64,
    /// The process's failed writes for want of room when the turn began
    /// ([`harness_client::HarnessProcess::storage_full_writes`]).
    pub(super) storage_full_at_turn_start: u64,
    /// The harness's storage was found with (almost) no room during the turn.
    pub(super) saw_no_room: bool,
    /// When that room was last sampled.
    pub(super) room_sampled: Instant,
    pub(super) checked: Instant,
}

/// Why the task ends.
pub(super) enum Exit {
    /// Nothing keeps the thread live: idle past its timeouts, hibernated while leases are in
    /// use, its lease refused with nothing left to serve, or the agent let go of it.
    Idle,
    /// It waited for its client past `parked_timeout`: what is parked is released.
    Abandoned,
    /// Deleted by its owner: its record and files go; `reply` hears it.
    Deleted { reply: oneshot::Sender<bool> },
    /// The server shuts down; `done` hears when the thread is closed.
    Shutdown { done: oneshot::Sender<()> },
    /// Another replica took the lease (or it expired unrenewed).
    LeaseLost(LeaseDenied),
}

/// What the loop does after a step.
pub(super) enum Flow {
    Continue,
    Exit(Exit),
}
