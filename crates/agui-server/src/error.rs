//! Errors of the server crate.

/// Why the server could not start or serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is invalid.
    #[error("configuration error: {message}")]
    Config {
        /// Which part of the configuration, for a caller that decides on it.
        kind: ConfigProblem,
        /// The key or file, why, and the fix: for people.
        message: String,
    },
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
    /// The model proxy's HTTP client could not be built (the system's TLS roots).
    #[error("the model proxy could not build its HTTP client: {0}")]
    ModelProxyClient(#[source] reqwest::Error),
    /// The system gave no randomness for a secret token.
    #[error("no randomness for a secret token: {0}")]
    Randomness(#[source] getrandom::Error),
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

impl ServerError {
    /// A configuration error of `kind`, explained by `message`.
    pub(crate) fn config(kind: ConfigProblem, message: impl Into<String>) -> ServerError {
        ServerError::Config {
            kind,
            message: message.into(),
        }
    }
}

/// Which part of the configuration stopped the server: what a caller decides on (a setup
/// screen pointing at the right field, a supervisor that must not restart in a loop), while
/// the message says the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// The command line could not be parsed.
    Arguments,
    /// The configuration file could not be read or parsed.
    File,
    /// A server-wide key has an unusable value (a mount path, `replica_id`).
    Server,
    /// The access settings (tokens, `user_header`, `proxy_token`, a bind without a token).
    Access,
    /// A model key file is unreadable or empty.
    Secret,
    /// An agent's settings are invalid (its model, headers, egress hosts, paths, limits).
    Agent,
    /// Two agents claim the same mount path or directory.
    Conflict,
    /// What is asked cannot be confined: an unconfined agent shared by several callers, or a
    /// confined harness that would need its own network.
    Confinement,
    /// The program cannot start sandboxes: its launcher is not installed.
    NoSandboxLauncher,
    /// Start-up work on the configured directories (a migration) failed.
    Migration,
}
