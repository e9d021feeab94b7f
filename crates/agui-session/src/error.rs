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
        }
    }
}

/// Why a run failed, before it becomes a `RUN_ERROR` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    /// The code.
    pub code: RunErrorCode,
    /// A message a user can act on.
    pub message: String,
}

impl RunFailure {
    pub(crate) fn new(code: RunErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
