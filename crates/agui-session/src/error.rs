//! Errors, and the `RUN_ERROR` codes runs end with.

/// Errors of this crate (run failures travel as `RUN_ERROR` events, see [`RunErrorCode`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The agent's configuration cannot work.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The harness side failed.
    #[error(transparent)]
    Harness(#[from] harness_client::HarnessError),
    /// Preparing a directory or file the agent needs failed.
    #[error("could not {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server tool tried to set a shared state that is not a JSON object.
    #[error("the shared state must be a JSON object")]
    StateNotAnObject,
    /// A thread record could not be encoded (e.g. a workspace path that is not UTF-8).
    #[error("could not encode the thread record {}: {source}", path.display())]
    RecordEncode {
        /// The file it was meant for.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

impl SessionError {
    /// Whether it is a write that failed because the volume is full.
    pub(crate) fn is_storage_full(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull)
    }
}

/// The `code` of a `RUN_ERROR`, a stable vocabulary clients can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunErrorCode {
    /// Every session slot is held by a parked or running thread.
    SessionLimit,
    /// Another run on the thread did not finish in time.
    ThreadBusy,
    /// The model or the agent failed (the message names the HTTP status when there is one).
    AgentError,
    /// The harness process died or its connection broke; the next run starts over on a new one.
    HarnessLost,
    /// The turn was cancelled or the session closed under the run.
    Cancelled,
    /// The turn hit `max_tool_calls_per_turn`.
    MaxToolCallsExceeded,
    /// The request cannot be served (e.g. no agent configuration for it).
    InvalidInput,
    /// The harness lost the thread's conversation (its saved state is missing or unreadable);
    /// the next message starts a new one.
    ConversationLost,
    /// The harness made no progress on the turn for `turn_stall_timeout`; it was halted.
    TurnStalled,
    /// Another replica drives this thread (it holds the thread's lease); retry shortly, the
    /// message says when. With a proxy routing by thread id this happens only while a thread
    /// moves between replicas.
    ThreadElsewhere,
    /// This replica lost the thread's lease while driving it (it could not renew it in time);
    /// the turn was stopped so that two replicas never drive one conversation.
    LeaseLost,
    /// The turn in flight (or parked on a question or approval) when the server that drove
    /// the thread stopped was lost with it; the conversation is kept up to that point, and the
    /// next message continues it.
    TurnInterrupted,
    /// The agent keeps as many threads as it may (`max_remembered_threads`), or the caller has
    /// as many as one identity may: delete some (or wait for old ones to expire).
    ThreadLimit,
    /// The owner's workspaces and state grew past their disk cap (`workspace_max_mb`) during
    /// the turn; the turn was stopped. Ask the agent to delete files to continue.
    WorkspaceFull,
    /// The run's messages change the thread's past (a message edited under its id, or the
    /// history cut short before the last answer: a regenerate) and the thread cannot continue
    /// from that point; the message says why.
    CannotFork,
    /// The server's own storage (its save dir's volume) is full, so what a turn does could not
    /// be kept: the run is refused before anything is sent; retry once space is freed.
    StorageFull,
}

impl RunErrorCode {
    /// The wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionLimit => "SESSION_LIMIT",
            Self::ThreadBusy => "THREAD_BUSY",
            Self::AgentError => "AGENT_ERROR",
            Self::HarnessLost => "HARNESS_LOST",
            Self::Cancelled => "CANCELLED",
            Self::MaxToolCallsExceeded => "MAX_TOOL_CALLS_EXCEEDED",
            Self::InvalidInput => "INVALID_INPUT",
            Self::ConversationLost => "CONVERSATION_LOST",
            Self::TurnStalled => "TURN_STALLED",
            Self::ThreadElsewhere => "THREAD_ELSEWHERE",
            Self::LeaseLost => "LEASE_LOST",
            Self::TurnInterrupted => "TURN_INTERRUPTED",
            Self::ThreadLimit => "THREAD_LIMIT",
            Self::WorkspaceFull => "WORKSPACE_FULL",
            Self::CannotFork => "CANNOT_FORK",
            Self::StorageFull => "STORAGE_FULL",
        }
    }
}

/// Why a run failed, before it becomes a `RUN_ERROR` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    /// The code.
    pub code: RunErrorCode,
    /// A message a user can act on. Sent to the client: never a host path, a URL, a process id
    /// or harness output.
    pub message: String,
    /// What only the operator may see (paths, harness stderr, upstream errors): logged with a
    /// reference that the client's message names.
    pub detail: Option<String>,
}

impl RunFailure {
    pub(crate) fn new(code: RunErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: None,
        }
    }

    /// This failure with an internal `detail`, kept out of the client's message.
    pub(crate) fn with_detail(mut self, detail: impl std::fmt::Display) -> Self {
        self.detail = Some(detail.to_string());
        self
    }

    /// The failure as the client gets it, logging it: with a detail, the log line carries the
    /// detail under a fresh `error_ref`, and the message ends with `(ref <error_ref>)`.
    pub(crate) fn published(self, elapsed_ms: u64) -> Self {
        let code = self.code.as_str();
        let Some(detail) = self.detail else {
            tracing::warn!(code, message = %self.message, elapsed_ms, "run failed");
            return self;
        };
        let error_ref = error_ref();
        tracing::warn!(code, message = %self.message, %error_ref, %detail, elapsed_ms, "run failed");
        let message = format!("{} (ref {error_ref}).", self.message.trim_end_matches('.'));
        Self {
            code: self.code,
            message,
            detail: None,
        }
    }
}

/// A short random reference joining a client's error message to the log line with its detail.
fn error_ref() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_failure_names_a_reference_instead_of_its_detail() {
        let failure = RunFailure::new(RunErrorCode::HarnessLost, "The harness stopped.")
            .with_detail("exit status: 2. Stderr tail:\n/home/me/.cache/localharness: panic");
        let published = failure.published(0);
        assert_eq!(published.detail, None);
        let (text, reference) = published.message.split_once(" (ref ").expect("a reference");
        assert_eq!(text, "The harness stopped");
        let reference = reference.strip_suffix(").").expect("closed");
        assert!(
            reference.len() == 8 && reference.chars().all(|c| c.is_ascii_hexdigit()),
            "{reference}"
        );
        // Without a detail, the message is sent as it is.
        let plain = RunFailure::new(RunErrorCode::ThreadBusy, "Busy.").published(0);
        assert_eq!(plain.message, "Busy.");
    }
}
