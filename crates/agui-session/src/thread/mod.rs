//! One live thread: a task that owns everything about it.
//!
//! Each live AG-UI thread is owned by one task ([`task`]): its conversation (hibernated, open,
//! or gone with its harness), the turn in flight, the requests parked on the client, the run
//! streams subscribed to it, its message log and what it has forwarded. Everything else talks
//! to it by message:
//! - runs, connects, stops, hibernation requests and shutdown arrive as [`Command`]s from the
//!   agent ([`ThreadHandle`]);
//! - the harness's callbacks (tools, hooks, questions) and server tools send [`Request`]s
//!   through a [`ThreadLink`], and wait for their answer on a oneshot channel — never on a
//!   lock;
//! - the harness's events are read by the task itself, even while no run is attached, so a
//!   turn goes on whether or not anyone watches.
//!
//! A run is a subscription to the thread's events, not the owner of the turn: a client that
//! leaves or falls behind only loses its stream.

mod callbacks;
pub(crate) mod conversation;
mod history;
mod output;
pub(crate) mod parking;
mod shared;
mod task;

use crate::owner::Owner;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use agui_translate::ToolCallIds;
use agui_types::{Event, Interrupt, RunAgentInput};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

pub(crate) use callbacks::CallbackPolicy;
pub use callbacks::{APP_CONTEXT_TOOL, APP_STATE_TOOL};
pub(crate) use conversation::LiveSlot;
pub(crate) use output::{RunChannel, negotiate};
pub(crate) use parking::{InterruptKind, ToolAnswer};
pub(crate) use shared::Shared;
pub(crate) use task::spawn;

use crate::interrupts::InterruptAnswer;

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
    /// Close the conversation if the thread is idle (another thread needs the slot).
    Hibernate,
    /// End everything and exit (the server shuts down).
    Shutdown { done: oneshot::Sender<()> },
}

/// What the harness side (callbacks, server tools) asks of a thread's task.
pub(crate) enum Request {
    /// Deliver events produced by a callback of `trajectory` (a tool call made there).
    Emit {
        trajectory: Option<String>,
        events: Vec<Event>,
    },
    /// The harness called a frontend tool; the answer comes on `reply`.
    FrontendTool {
        harness_id: String,
        name: String,
        arguments: Map<String, Value>,
        trajectory: String,
        reply: oneshot::Sender<ToolAnswer>,
    },
    /// Park an interrupt of `trajectory`; the answer comes on `reply`.
    Interrupt {
        interrupt: Interrupt,
        kind: InterruptKind,
        trajectory: String,
        reply: oneshot::Sender<InterruptAnswer>,
    },
    /// Count a tool call against the turn's budget of `max`; false once it is exceeded.
    CountToolCall {
        max: u32,
        reply: oneshot::Sender<bool>,
    },
}

/// What the harness side holds of a thread: where to send requests, the shared state, and the
/// thread's record of tool call ids.
#[derive(Clone)]
pub(crate) struct ThreadLink {
    pub(crate) thread_id: Arc<str>,
    requests: mpsc::UnboundedSender<Request>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) tool_call_ids: ToolCallIds,
}

impl ThreadLink {
    /// Sends a request (dropped if the thread's task has exited: the harness side of a thread
    /// outlives it only while its connection is being torn down).
    pub(crate) fn send(&self, request: Request) {
        let _ = self.requests.send(request);
    }

    /// Queues events produced by a callback of `trajectory`.
    pub(crate) fn emit(&self, trajectory: Option<&str>, events: impl IntoIterator<Item = Event>) {
        self.send(Request::Emit {
            trajectory: trajectory.map(str::to_owned),
            events: events.into_iter().collect(),
        });
    }

    /// Parks an interrupt and waits for its answer.
    pub(crate) async fn interrupt(
        &self,
        interrupt: Interrupt,
        kind: InterruptKind,
        trajectory: &str,
    ) -> InterruptAnswer {
        let (reply, answer) = oneshot::channel();
        self.send(Request::Interrupt {
            interrupt,
            kind,
            trajectory: trajectory.to_owned(),
            reply,
        });
        answer.await.unwrap_or(InterruptAnswer::Closed)
    }

    /// The AG-UI id of a call the session shows itself: the harness's id unless it was used
    /// before on this thread, else a fresh one.
    pub(crate) fn tool_call_id(&self, harness_id: &str) -> String {
        self.tool_call_ids
            .assign(Some(harness_id), || uuid::Uuid::new_v4().to_string())
    }
}

/// What the agent can see of a thread without asking its task (for stats and for choosing
/// which idle thread to hibernate).
#[derive(Debug)]
pub(crate) struct ThreadStatus {
    created: Instant,
    /// Milliseconds since `created` of the last activity.
    last_activity: AtomicU64,
    parked: AtomicBool,
    /// Open conversation, no turn, no run, nothing parked: can be hibernated at once.
    idle_live: AtomicBool,
}

impl ThreadStatus {
    fn new() -> Self {
        Self {
            created: Instant::now(),
            last_activity: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            idle_live: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity.store(ms, Ordering::Relaxed);
    }

    /// When the thread was last active.
    pub(crate) fn last_activity(&self) -> Instant {
        self.created + std::time::Duration::from_millis(self.last_activity.load(Ordering::Relaxed))
    }

    /// Whether something waits for the client.
    pub(crate) fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Relaxed)
    }

    /// Whether the thread could hibernate at once.
    pub(crate) fn is_idle_live(&self) -> bool {
        self.idle_live.load(Ordering::Relaxed)
    }
}

/// The agent's handle on a thread's task.
#[derive(Clone)]
pub(crate) struct ThreadHandle {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) status: Arc<ThreadStatus>,
    /// Tells this task apart from a later one of the same thread in the registry.
    pub(crate) generation: u64,
}
