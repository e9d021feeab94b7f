//! Errors of the server crate.

/// Why the server could not start or serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is invalid (names the key or file and why).
    #[error("configuration error: {0}")]
    Config(String),
    /// The command line asked for help or the version: the text to print (to stdout), after
    /// which a program ends successfully. Not a failure, but not a configuration either.
    #[error("{0}")]
    HelpRequested(String),
    /// An agent could not be built.
    #[error(transparent)]
    Session(#[from] agui_session::SessionError),
    /// The harness side failed at start-up.
    #[error(transparent)]
    Harness(#[from] harness_client::HarnessError),
    /// The embedded demo model could not start.
    #[error("the demo model could not start: {0}")]
    Demo(#[from] gemini_script::Error),
    /// The model proxy could not start.
    #[error("the model proxy could not start: {0}")]
    ModelProxy(String),
    /// Binding or serving failed.
    #[error("could not {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
