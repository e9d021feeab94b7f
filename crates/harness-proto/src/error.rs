/// Result alias for this crate.
pub type Result<T, E = ProtoError> = std::result::Result<T, E>;

/// Errors decoding or encoding harness messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// A JSON frame did not match the expected message.
    #[error("invalid {message} JSON: {source}")]
    Json {
        /// The protobuf message that was expected.
        message: &'static str,
        /// The parse error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A binary protobuf message could not be decoded.
    #[error("invalid {message} protobuf: {source}")]
    Protobuf {
        /// The protobuf message that was expected.
        message: &'static str,
        /// The decode error.
        #[source]
        source: prost::DecodeError,
    },
    /// A stdio frame was truncated or larger than [`crate::MAX_STDIO_FRAME`].
    #[error("invalid stdio frame: {0}")]
    Frame(String),
    /// Reading a stdio frame failed.
    #[error("reading a stdio frame: {0}")]
    Io(#[from] std::io::Error),
}

/// The last path segment of `T`'s type name, for error messages (`OutputEvent`, not the path).
pub(crate) fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}
