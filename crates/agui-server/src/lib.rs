//! The agui-antigravity HTTP service: Antigravity agents served over AG-UI.
//!
//! The binary (`agui-antigravity serve`) is a thin wrapper around [`Server`]; embed the same
//! server in your own program to add server tools to an agent:
//!
//! ```no_run
//! # async fn demo() -> Result<(), agui_server::ServerError> {
//! use agui_server::{Server, ServerConfig};
//! use agui_session::{FnTool, ToolRegistry};
//! use serde_json::json;
//!
//! let config = ServerConfig::from_args(["agui-antigravity", "--demo"])?;
//! let mut tools = ToolRegistry::new();
//! tools.register(FnTool::new("roll_die", "Rolls a die", json!({"type": "object"}), |_, _| async {
//!     Ok(json!(4))
//! }));
//! let server = Server::new(config).with_tools("/", tools).start().await?;
//! println!("serving on http://{}", server.addr());
//! server.run_until_signal().await;
//! # Ok(()) }
//! ```
//!
//! `examples/minimal.rs` is this as a program; `examples/dojo` serves the AG-UI dojo's demo
//! agents (server tools with shared state and interrupts, its own offline script).

mod access;
mod build;
mod capabilities;
mod choices;
pub mod cli;
mod config;
mod defaults;
pub mod demo;
mod egress;
mod endpoint;
mod error;
mod files;
mod http;
mod identities;
mod ids;
mod layers;
mod leases;
mod metrics;
#[cfg(feature = "internals")]
pub mod model_proxy;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, reason = "public with the internals feature")]
mod model_proxy;
mod playground;
mod routing;
pub mod sandbox;
mod stream;
mod threads;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agui_session::ToolRegistry;
use axum::serve::ListenerExt as _;
use tokio::sync::watch;

pub use build::{MountedAgent, Runtime};
pub use config::{
    AgentSettings, AuthTokens, BuiltinToolChoice, FileConfig, LogFormat, SandboxMode, ServerConfig,
    SystemInstructionsMode, ThinkingLevel, normalise_path,
};
pub use error::{ConfigProblem, ServerError};

/// What agui-bench and this crate's own tests reach beyond the API contract (ARCHITECTURE.md,
/// "agui-server"): only with the `internals` feature, and free to change with any release.
#[cfg(feature = "internals")]
pub mod internals {
    pub use crate::build::options;
    pub use crate::defaults::{POOL_SIZE, PRESTART_HARNESS, documented};
    pub use crate::model_proxy::{CallLimits, ModelProxy, uses_ambient_credentials};
}

impl ServerConfig {
    /// The configuration a command line (`serve` options, as the binary takes them) describes,
    /// including the `--config` file and environment variables.
    pub fn from_args<I, S>(args: I) -> Result<Self, ServerError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::from_serve_args(&cli::ServeArgs::from_args(args)?)
    }

    /// The configuration of parsed `serve` options.
    pub fn from_serve_args(args: &cli::ServeArgs) -> Result<Self, ServerError> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        Self::merge(file, args)
    }
}

impl cli::ServeArgs {
    /// The `serve` options of a command line as the binary takes them (program name first,
    /// `serve` optional), with environment variables; the `--config` file is not read yet.
    /// `--help` and `--version` give [`ServerError::HelpRequested`] with the text to print: the
    /// caller prints it and ends successfully (library code never exits the process).
    pub fn from_args<I, S>(args: I) -> Result<Self, ServerError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut args: Vec<String> = args.into_iter().map(Into::into).collect();
        if args.get(1).map(String::as_str) != Some("serve") {
            args.insert(1.min(args.len()), "serve".into());
        }
        let cli = match cli::Cli::try_parse_args(args) {
            Ok(cli) => cli,
            Err(e)
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
            {
                return Err(ServerError::HelpRequested(e.render().to_string()));
            }
            Err(e) => {
                return Err(ServerError::config(
                    error::ConfigProblem::Arguments,
                    e.to_string(),
                ));
            }
        };
        let (cli::Command::Serve(serve) | cli::Command::CheckConfig(serve)) = cli.command;
        Ok(*serve)
    }
}

/// A server to start: configuration plus the server tools of each agent.
pub struct Server {
    config: ServerConfig,
    tools: HashMap<String, ToolRegistry>,
    demo_script: Option<gemini_script::Script>,
    launcher: Option<harness_client::sandbox::Launcher>,
}

impl Server {
    /// A server for `config`.
    pub fn new(config: ServerConfig) -> Self {
        Self {
            config,
            tools: HashMap::new(),
            demo_script: None,
            launcher: None,
        }
    }

    /// The configuration it will serve.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Gives the agent mounted at `path` these server tools.
    pub fn with_tools(mut self, path: &str, tools: ToolRegistry) -> Self {
        let path = config::normalise_path(path).unwrap_or_else(|_| path.to_owned());
        self.tools.insert(path, tools);
        self
    }

    /// Runs `script` as the offline demo model instead of [`gemini_script::demo::script`], for
    /// agents served by the demo model. Such agents then get only the tools given with
    /// [`with_tools`](Self::with_tools), not the built-in demo's `get_weather`. Keep the script
    /// stateless (entries that repeat forever and look only at the request), since every
    /// conversation shares it.
    pub fn with_demo_script(mut self, script: gemini_script::Script) -> Self {
        self.demo_script = Some(script);
        self
    }

    /// Starts sandboxes (`sandbox = "owner"` or `"thread"`) with `launcher` — a program whose
    /// `main` calls [`sandbox::launcher_if_asked`], e.g. [`sandbox::launcher_at`] the
    /// `agui-antigravity` binary — instead of this program (which can only if its `main` calls
    /// it; otherwise a confined agent is refused at start, naming this fix).
    pub fn with_sandbox_launcher(mut self, launcher: harness_client::sandbox::Launcher) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Builds the agents (installing the harness if it is missing), binds and starts serving.
    pub async fn start(self) -> Result<RunningServer, ServerError> {
        // Checked again here: an embedder may build the configuration by hand.
        let access = access::AccessPolicy::new(&self.config)?;
        if access.is_exposed_without_auth() {
            tracing::warn!(
                bind = %self.config.bind,
                "serving a non-loopback address with no authentication (insecure_no_auth): anyone who reaches it can run commands through the agent, unless something in front authenticates every request"
            );
        }
        if access.metrics_closed() {
            tracing::warn!(
                "/metrics refuses every request: callers have identities (user_header) and no token could open it; set metrics_token (--metrics-token, AGUI_METRICS_TOKEN) for your scraper"
            );
        }
        let tools = self.tools;
        let runtime = build::build(
            &self.config,
            |path| tools.get(path).cloned().unwrap_or_default(),
            self.demo_script,
            self.launcher,
        )
        .await?;
        let metrics =
            Arc::new(metrics::Metrics::new().with_model_calls(runtime.model_proxy.calls()));
        let options = endpoint::HttpOptions {
            access,
            max_body_bytes: self.config.max_body_bytes,
            keep_alive: self.config.keep_alive,
            ready_without_sandbox: self.config.ready_without_sandbox,
        };
        let app = http::router(&runtime.agents, options, metrics);
        let listener = tokio::net::TcpListener::bind(self.config.bind)
            .await
            .map_err(|source| ServerError::Io {
                action: format!("listen on {}", self.config.bind),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Io {
            action: "read the address".into(),
            source,
        })?;
        let (stop, mut stopped) = watch::channel(false);
        let serving = tokio::spawn(async move {
            let graceful = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            // Every event is a small write that must leave at once: with Nagle's algorithm a
            // write waits for the ACK of the previous one, which the client delays (~40 ms).
            let listener = listener.tap_io(|tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::warn!(error = %e, "could not set TCP_NODELAY on an accepted socket");
                }
            });
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(graceful)
                .await
            {
                tracing::error!(error = %e, "the HTTP server failed");
            }
        });
        for agent in &runtime.agents {
            tracing::info!(url = %format!("http://{addr}{}", agent.path), demo = agent.demo, "serving agent");
        }
        Ok(RunningServer {
            addr,
            stop,
            serving,
            runtime: Arc::new(runtime),
        })
    }
}

/// A started server.
pub struct RunningServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    serving: tokio::task::JoinHandle<()>,
    runtime: Arc<Runtime>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The agents and what they run on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The loopback address of the model proxy, where every harness sends its model requests.
    pub fn model_proxy_addr(&self) -> SocketAddr {
        self.runtime.model_proxy_addr()
    }

    /// Stops accepting, ends open runs (with `RUN_ERROR`), closes conversations so the harness
    /// checkpoints them, and reaps every harness process.
    pub async fn shutdown(self) {
        tracing::info!("shutting down");
        let _ = self.stop.send(true);
        self.runtime.shutdown().await;
        if tokio::time::timeout(Duration::from_secs(10), self.serving)
            .await
            .is_err()
        {
            tracing::warn!("open connections did not close within 10 s");
        }
        tracing::info!("stopped");
    }

    /// Serves until SIGINT or SIGTERM, then shuts down.
    pub async fn run_until_signal(self) {
        shutdown_signal().await;
        self.shutdown().await;
    }
}

/// Logs to stderr the way the binary does: `format` lines, level from `RUST_LOG` (default
/// `info`). Does nothing if a global subscriber is already set.
pub fn init_logging(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second call (a test, an embedder with its own subscriber) keeps the first one.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}
