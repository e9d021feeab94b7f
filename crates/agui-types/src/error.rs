//! The crate's error type.

use crate::violation::Violation;

/// Result alias with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong parsing, decoding or verifying AG-UI data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A JSON document (a `RunAgentInput`, an event) is malformed or breaks a protocol rule.
    ///
    /// `path` locates the offending value (`messages[2].content[0].source.mimeType`, `.` for
    /// the document itself); `reason` says what is wrong with it.
    #[error("invalid {document} at `{path}`: {reason}")]
    Invalid {
        /// What was being read, e.g. `RunAgentInput` or `event`.
        document: &'static str,
        /// JSON path of the bad value.
        path: String,
        /// Why it was rejected.
        reason: String,
    },
    /// An event's `type` names no AG-UI 1.0 event.
    ///
    /// Decoders report it and carry on with the next frame: the official client drops such
    /// events with a warning, so callers may choose to skip them.
    #[error("unknown event type `{0}`")]
    UnknownEventType(String),
    /// An SSE frame that the official client would reject (not a JSON object, no `type`,
    /// oversized buffer).
    #[error("SSE frame: {0}")]
    SseFrame(String),
    /// A protobuf byte stream with a broken length prefix, an oversized or truncated frame.
    #[error("protobuf framing: {0}")]
    ProtoFrame(String),
    /// A protobuf event that decodes but does not map to an AG-UI event (missing `base_event`,
    /// type mismatch, unknown enum value, …).
    #[error("protobuf event: {0}")]
    ProtoEvent(String),
    /// Bytes that are not a valid `ag_ui.Event` message.
    #[error("protobuf decode: {0}")]
    ProtoDecode(#[from] prost::DecodeError),
    /// An event sequence broke an ordering rule (see [`crate::StreamVerifier`]).
    #[error(transparent)]
    Violation(#[from] Violation),
}

impl Error {
    pub(crate) fn invalid(
        document: &'static str,
        path: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            document,
            path: path.into(),
            reason: reason.into(),
        }
    }
}
