//! One AG-UI thread's session: its harness conversation (or none while hibernated), the
//! current turn, and what was already forwarded.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use harness_proto::lh::UsageMetadata;

use crate::backend::ConversationHandle;
use crate::bridge::Bridge;
use crate::contract::Contract;
use crate::store::{ForwardedIds, PendingTool, ThreadRecord};
use crate::turn::Turn;

/// A thread's session. Runs hold [`Session::state`] for their whole duration, which
/// serialises runs of one thread and keeps the sweeper away from a run in flight.
pub(crate) struct Session {
    pub(crate) thread_id: String,
    pub(crate) bridge: Arc<Bridge>,
    pub(crate) state: tokio::sync::Mutex<SessionState>,
    last_activity: Mutex<Instant>,
    /// Set when the session is closed (swept or shut down): it is no longer the thread's
    /// session, and a run that was waiting for its state must use the thread's current one.
    retired: AtomicBool,
}

/// What only a run (or the sweeper, when no run holds it) may touch.
pub(crate) struct SessionState {
    pub(crate) conversation: Option<Box<dyn ConversationHandle>>,
    pub(crate) conversation_id: String,
    pub(crate) workspace: PathBuf,
    /// The contract of the open conversation.
    pub(crate) contract: Option<Contract>,
    forwarded: ForwardedIds,
    /// The turn in flight (sent and not yet ended), spanning runs.
    pub(crate) turn: Option<Turn>,
    /// Why the harness process of this thread died, for the warning of the run that starts
    /// over on a new one. (A closed connection needs no flag: the next run sees the
    /// conversation is not open and re-attaches.)
    pub(crate) harness_lost: Option<String>,
    /// Frontend tool calls that were parked when the server last stopped.
    pub(crate) restart_pending: Vec<PendingTool>,
    /// Cumulative usage of the conversation at the last usage report.
    pub(crate) usage: Option<UsageMetadata>,
}

impl Session {
    pub(crate) fn new(
        thread_id: String,
        record: Option<ThreadRecord>,
        fresh_workspace: PathBuf,
    ) -> Arc<Self> {
        let bridge = Bridge::new(thread_id.clone());
        let state = match record {
            Some(record) => SessionState {
                conversation: None,
                conversation_id: record.conversation_id,
                workspace: if record.workspace.as_os_str().is_empty() {
                    fresh_workspace
                } else {
                    record.workspace
                },
                contract: None,
                forwarded: record.forwarded,
                turn: None,
                harness_lost: None,
                restart_pending: record.pending_frontend_tools,
                usage: None,
            },
            None => SessionState {
                conversation: None,
                conversation_id: uuid::Uuid::new_v4().simple().to_string(),
                workspace: fresh_workspace,
                contract: None,
                forwarded: ForwardedIds::default(),
                turn: None,
                harness_lost: None,
                restart_pending: Vec::new(),
                usage: None,
            },
        };
        Arc::new(Self {
            thread_id,
            bridge,
            state: tokio::sync::Mutex::new(state),
            last_activity: Mutex::new(Instant::now()),
            retired: AtomicBool::new(false),
        })
    }

    /// Marks activity (runs, steps), keeping the session away from the idle sweeper.
    pub(crate) fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Marks the session closed (see [`Session::is_retired`]).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    /// Whether the session was closed; a run holding its state must not use it.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Time since the last activity.
    pub(crate) fn idle_for(&self) -> std::time::Duration {
        self.last_activity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }
}

impl SessionState {
    /// Whether the user message `message_id` was already sent to the harness.
    pub(crate) fn is_forwarded(&self, message_id: &str) -> bool {
        self.forwarded.contains(message_id)
    }

    /// Records the user message `message_id` as sent (see [`ForwardedIds`]).
    pub(crate) fn record_forwarded(&mut self, message_id: String) {
        self.forwarded.record(message_id);
    }

    /// The record persisted for this thread.
    pub(crate) fn record(&self, pending: Vec<PendingTool>) -> ThreadRecord {
        ThreadRecord {
            conversation_id: self.conversation_id.clone(),
            forwarded: self.forwarded.clone(),
            pending_frontend_tools: pending,
            workspace: self.workspace.clone(),
            ..ThreadRecord::default()
        }
    }
}
