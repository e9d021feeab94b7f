//! The crate's single error type.

use std::{io, path::PathBuf};

/// Everything that can go wrong while loading a script or starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The script text is not valid JSON or does not have the documented shape.
    #[error(
        "script JSON is malformed at `{path}` (line {line}, column {column}): {message}; \
         see the gemini-script README for the script format"
    )]
    Parse {
        /// Where in the document the problem is, e.g. `[2].reply.text`.
        path: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What serde found wrong.
        message: String,
    },
    /// The script parsed but one of its values is not allowed.
    #[error("script {location}: `{field}` {problem}")]
    Invalid {
        /// Which entry: `entry 2 ("greeting")` or `default reply`.
        location: String,
        /// The offending field, e.g. `reply.error.code`.
        field: String,
        /// What is wrong and what is allowed instead.
        problem: String,
    },
    /// A script file could not be read.
    #[error("cannot read script file {path}: {source}")]
    ReadFile {
        /// The file that was asked for.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// The server could not listen on the requested port.
    #[error(
        "cannot bind the scripted model server to 127.0.0.1:{port}: {source} \
         (choose another port, or 0 for an ephemeral one)"
    )]
    Bind {
        /// The requested port (0 means ephemeral).
        port: u16,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
