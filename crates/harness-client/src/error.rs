use std::path::PathBuf;
use std::time::Duration;

/// Result alias for this crate.
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

/// Everything that can go wrong while hosting the harness.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// No harness binary was found in any of the places discovery looks.
    #[error(
        "the localharness binary was not found. Tried:\n{tried}\nFix: run `cargo xtask fetch-harness` \
         (installs it from the google-antigravity wheel), or set ANTIGRAVITY_HARNESS_PATH to the binary"
    )]
    NotFound {
        /// Every place tried, one per line, with why it did not qualify.
        tried: String,
    },

    /// Installing the harness from the wheel failed.
    #[error(transparent)]
    Install(#[from] harness_install::InstallError),

    /// The binary could not be started.
    #[error("could not start the harness {}: {source}", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// The harness did not answer the stdio handshake in time.
    #[error("the harness {} did not send its OutputConfig within {timeout:?}. Stderr tail:\n{stderr_tail}", binary.display())]
    BootTimeout {
        /// The binary.
        binary: PathBuf,
        /// The boot timeout.
        timeout: Duration,
        /// The last lines the harness wrote to stderr.
        stderr_tail: String,
    },

    /// The stdio handshake failed (the harness exited or wrote garbage).
    #[error("the harness {} failed to start: {reason}. Stderr tail:\n{stderr_tail}", binary.display())]
    Handshake {
        /// The binary.
        binary: PathBuf,
        /// What went wrong.
        reason: String,
        /// The last lines the harness wrote to stderr.
        stderr_tail: String,
    },

    /// The WebSocket could not be opened.
    #[error(
        "could not connect to the harness WebSocket on 127.0.0.1:{port} after {attempts} attempts: {last_error}"
    )]
    Connect {
        /// The harness port.
        port: u16,
        /// How many attempts were made.
        attempts: u32,
        /// The last connection error.
        last_error: String,
    },

    /// The harness refused to initialize a conversation (it drops the connection and explains
    /// on stderr: unknown id with RESUME, existing id with CREATE_ONLY, id already attached,
    /// invalid policy config, …).
    #[error("the harness refused to initialize the conversation: {reason}")]
    InitFailed {
        /// Why, as a kind to decide on.
        kind: InitRefusal,
        /// The harness's stderr explanation, or what was observed: for people, not decisions.
        reason: String,
    },

    /// The conversation's socket or process went away.
    #[error("{0}")]
    Closed(crate::events::CloseReason),

    /// A conversation config is invalid (caught before it reaches the harness).
    #[error("invalid conversation config: {0}")]
    Config(String),

    /// A frame could not be encoded or decoded.
    #[error(transparent)]
    Protocol(#[from] harness_proto::ProtoError),

    /// The pool was shut down.
    #[error("the harness pool is shut down")]
    PoolClosed,

    /// A harness process another conversation was waiting for could not be started.
    #[error("a harness process could not be started: {reason}")]
    BootFailed {
        /// Why the boot failed.
        reason: String,
    },

    /// A directory of the harness could not be reached or made: a confined process's
    /// directories are reached through the door, which refuses what its agent planted there.
    #[error(transparent)]
    Sandbox(#[from] harness_sandbox::SandboxError),

    /// An I/O operation on the harness's pipes or directories failed.
    #[error("could not {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Why the harness did not open a conversation. The harness says why only in prose on its
/// stderr; this crate reads it once, here, so its callers decide on a kind, never on text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitRefusal {
    /// A resume of a conversation the harness has no record of.
    NotFound,
    /// The conversation's record exists but cannot be read (corrupt or malformed).
    Unreadable,
    /// A create-only open of a conversation that already exists.
    AlreadyExists,
    /// The conversation is attached to another socket (released shortly after that closes).
    InUse,
    /// The harness did not answer the config within the init timeout.
    NoAnswer,
    /// The config could not be sent (the socket failed).
    SendFailed,
    /// Refused for a reason this crate does not recognise (an invalid policy config, …).
    Other,
}

impl InitRefusal {
    /// The kind of refusal a harness's stderr explanation states.
    pub(crate) fn from_explanation(explanation: &str) -> InitRefusal {
        let lower = explanation.to_ascii_lowercase();
        if lower.contains("already in use") {
            InitRefusal::InUse
        } else if lower.contains("not found") || lower.contains("cannot resume") {
            InitRefusal::NotFound
        } else if lower.contains("corrupt") || lower.contains("malformed") {
            InitRefusal::Unreadable
        } else if lower.contains("already exists") {
            InitRefusal::AlreadyExists
        } else {
            InitRefusal::Other
        }
    }

    /// Whether the conversation to resume is gone for good (absent or unreadable): a host
    /// starts a new one instead.
    pub fn conversation_lost(self) -> bool {
        matches!(self, InitRefusal::NotFound | InitRefusal::Unreadable)
    }
}

impl HarnessError {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let action = action.into();
        move |source| Self::Io { action, source }
    }
}

#[cfg(test)]
mod tests {
    use super::InitRefusal;

    #[test]
    fn the_harness_explanations_map_to_their_kinds() {
        // The lines the harness prints (docs: the protocol notes' init failures).
        for (line, kind) in [
            (
                r#"Failed to create agent: conversation "c1" not found in "/save" (cannot resume)"#,
                InitRefusal::NotFound,
            ),
            (
                "Failed to create agent: Cascade ID c1 is already in use",
                InitRefusal::InUse,
            ),
            (
                r#"Failed to create agent: conversation "c1" already exists in "/save""#,
                InitRefusal::AlreadyExists,
            ),
            (
                "Failed to create agent: trajectory file is corrupt",
                InitRefusal::Unreadable,
            ),
            (
                "Failed to create agent: malformed state",
                InitRefusal::Unreadable,
            ),
            ("invalid policy config", InitRefusal::Other),
        ] {
            assert_eq!(InitRefusal::from_explanation(line), kind, "{line}");
        }
        assert!(InitRefusal::NotFound.conversation_lost());
        assert!(InitRefusal::Unreadable.conversation_lost());
        assert!(!InitRefusal::InUse.conversation_lost());
    }
}
