//! How the harness side of a thread (its callbacks, server tools) reaches the thread's task:
//! requests on a channel, each answered on a oneshot channel — never on a lock.

use std::sync::Arc;

use agui_translate::ToolCallIds;
use agui_types::{Event, Interrupt};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::parking::{InterruptKind, ToolAnswer};
use super::shared::Shared;
use crate::interrupts::InterruptAnswer;

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
    /// The link of thread `thread_id`, whose task reads `requests`.
    pub(super) fn new(
        thread_id: &str,
        requests: mpsc::UnboundedSender<Request>,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            thread_id: Arc::from(thread_id),
            requests,
            shared,
            tool_call_ids: ToolCallIds::new(),
        }
    }

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
