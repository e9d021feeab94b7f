//! Configuration: a TOML file, environment variables and flags, merged into [`ServerConfig`].
//!
//! Precedence, lowest first: built-in defaults, the file's `[agent]` table (defaults for every
//! agent), environment variables and flags (which also set defaults for every agent), then each
//! `[[agents]]` entry's own keys. With no `[[agents]]`, one agent is served at `/`.
//! A `save_dir` or `workspace_root` that `[[agents]]` entries inherit gets one subfolder per
//! agent (named after its path), so agents never share conversations.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agui_session::{
    Behavior, InterruptReasons, OnDisconnect, StructuredOutputMode, SubagentEvents,
};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{ConfigProblem, ServerError};

pub(crate) use crate::choices::builtin_tools;
pub use crate::choices::{
    BuiltinToolChoice, LogFormat, SandboxMode, SystemInstructionsMode, ThinkingLevel,
};
pub(crate) use crate::choices::{BuiltinToolParser, choice_name};

/// Declares [`AgentSettings`] and its overlay from one field list, so a new key cannot be
/// forgotten by the merge. Every field is an `Option`: unset keys let lower layers show through.
macro_rules! agent_settings {
    (
        $(#[$meta:meta])*
        pub struct AgentSettings {
            $( $(#[$field_meta:meta])* pub $field:ident: Option<$ty:ty>, )*
        }
    ) => {
        $(#[$meta])*
        pub struct AgentSettings {
            $( $(#[$field_meta])* pub $field: Option<$ty>, )*
        }

        impl AgentSettings {
            /// These settings with every key `top` sets taking precedence.
            pub fn overlaid(mut self, top: &AgentSettings) -> Self {
                // `api_key` and `api_key_file` are two spellings of one setting: a layer that
                // gives either replaces both, so a lower layer's file cannot beat its key.
                if top.api_key.is_some() || top.api_key_file.is_some() {
                    self.api_key = None;
                    self.api_key_file = None;
                }
                $( if top.$field.is_some() { self.$field = top.$field.clone(); } )*
                self
            }
        }
    };
}

agent_settings! {
    /// Settings of one agent; every key is optional so layers can be merged. Defaults are in the
    /// README's configuration table.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    pub struct AgentSettings {
        /// Path the agent is mounted at (`[[agents]]` only).
        #[arg(skip)]
        pub path: Option<String>,
        /// Name shown in logs and capabilities.
        #[arg(long = "agent-name", env = "AGUI_AGENT_NAME")]
        pub name: Option<String>,
        /// Text model name.
        #[arg(long, env = "AGUI_MODEL")]
        pub model: Option<String>,
        /// Gemini API key.
        #[arg(long, env = "GEMINI_API_KEY", hide_env_values = true)]
        pub api_key: Option<String>,
        /// A file holding the API key (read at start-up, surrounding blanks ignored); wins over
        /// `api_key` given at the same level.
        #[arg(long, env = "AGUI_API_KEY_FILE")]
        pub api_key_file: Option<PathBuf>,
        /// Gemini API base URL (a gateway or a mock).
        #[arg(long, env = "AGUI_GEMINI_BASE_URL")]
        pub gemini_base_url: Option<String>,
        /// Extra HTTP headers on every model request (`name=value`, repeatable).
        #[arg(long = "model-header", value_parser = parse_name_value, env = "AGUI_MODEL_HEADERS", value_delimiter = ',', hide_env_values = true)]
        #[serde(default, deserialize_with = "headers")]
        pub model_headers: Option<Vec<(String, String)>>,
        /// Gemini thinking level.
        #[arg(long, env = "AGUI_THINKING_LEVEL")]
        pub thinking_level: Option<ThinkingLevel>,
        /// Vertex AI project (selects Vertex with `vertex_location`).
        #[arg(long, env = "AGUI_VERTEX_PROJECT")]
        pub vertex_project: Option<String>,
        /// Vertex AI location, e.g. `us-central1`.
        #[arg(long, env = "AGUI_VERTEX_LOCATION")]
        pub vertex_location: Option<String>,
        /// An OpenAI-compatible server root (Ollama, LM Studio); the harness appends `/v1/chat/completions`.
        #[arg(long, env = "AGUI_OPENAI_BASE_URL")]
        pub openai_base_url: Option<String>,
        /// Image model name.
        #[arg(long, env = "AGUI_IMAGE_MODEL")]
        pub image_model: Option<String>,
        /// Extra system instructions.
        #[arg(long, env = "AGUI_SYSTEM_INSTRUCTIONS")]
        pub system_instructions: Option<String>,
        /// Whether the extra instructions are appended to Antigravity's prompt or replace it.
        #[arg(long, env = "AGUI_SYSTEM_INSTRUCTIONS_MODE")]
        pub system_instructions_mode: Option<SystemInstructionsMode>,
        /// Built-in tools to enable (comma-separated; `all`, or `none` for none).
        #[arg(long, env = "AGUI_BUILTIN_TOOLS", value_delimiter = ',', value_parser = BuiltinToolParser)]
        pub builtin_tools: Option<Vec<BuiltinToolChoice>>,
        /// Whether the model works alone or may ask the user questions.
        #[arg(long, env = "AGUI_BEHAVIOR")]
        pub behavior: Option<Behavior>,
        /// Ask the user to approve every tool call.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_TOOL_APPROVAL")]
        pub tool_approval: Option<bool>,
        /// Tools that never need approval (comma-separated).
        #[arg(long, env = "AGUI_AUTO_APPROVE_TOOLS", value_delimiter = ',')]
        pub auto_approve_tools: Option<Vec<String>>,
        /// Let the model call the client's tools (`RunAgentInput.tools`).
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_FRONTEND_TOOLS")]
        pub frontend_tools: Option<bool>,
        /// Turn the model's `ask_question` into interrupts.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_ASK_QUESTION")]
        pub ask_question: Option<bool>,
        /// Interrupt `reason` names: `namespaced` (`antigravity:ask_question`) or `reference`
        /// (`ask_question`, as the Python integration).
        #[arg(long, env = "AGUI_INTERRUPT_REASONS")]
        pub interrupt_reasons: Option<InterruptReasons>,
        /// Run each frontend tool at most once per turn.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_DEDUPLICATE_TOOL_CALLS")]
        pub deduplicate_tool_calls: Option<bool>,
        /// An edit or a regenerate rewinds the files the file tools changed after the fork
        /// point, when the run does not say (`forwardedProps.rewindFiles`).
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_REWIND_FILES")]
        pub rewind_files: Option<bool>,
        /// Experimental: the silent `get_app_context` tool.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_APP_CONTEXT_TOOL")]
        pub app_context_tool: Option<bool>,
        /// Experimental: the silent `get_shared_state` tool.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_APP_STATE_TOOL")]
        pub app_state_tool: Option<bool>,
        /// JSON Schema (JSON text) of structured output.
        #[arg(long, env = "AGUI_RESPONSE_SCHEMA", value_parser = parse_json)]
        pub response_schema: Option<Value>,
        /// How structured output is delivered: as a `STATE_SNAPSHOT` or a `CUSTOM` event.
        #[arg(long, env = "AGUI_STRUCTURED_OUTPUT")]
        pub structured_output: Option<StructuredOutputMode>,
        /// Show built-in tool calls as tool-call events.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_EMIT_BUILTIN_TOOL_CALLS")]
        pub emit_builtin_tool_calls: Option<bool>,
        /// How subagents are shown: `subagent` (AG-UI subagent events) or `steps` (the older
        /// STEP_STARTED/STEP_FINISHED brackets).
        #[arg(long, env = "AGUI_SUBAGENT_EVENTS")]
        pub subagent_events: Option<SubagentEvents>,
        /// Report file changes and commands as activities.
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_ACTIVITIES")]
        pub activities: Option<bool>,
        /// Stop a turn after this many tool calls.
        #[arg(long, env = "AGUI_MAX_TOOL_CALLS_PER_TURN")]
        pub max_tool_calls_per_turn: Option<u32>,
        /// Per-thread workspaces go under this directory (keep it short).
        #[arg(long, env = "AGUI_WORKSPACE_ROOT")]
        pub workspace_root: Option<PathBuf>,
        /// Conversation storage (needed to resume conversations; keep it stable).
        #[arg(long, env = "AGUI_SAVE_DIR")]
        pub save_dir: Option<PathBuf>,
        /// The `localharness` binary (installed if missing).
        #[arg(long, env = "ANTIGRAVITY_HARNESS_PATH")]
        pub harness_path: Option<PathBuf>,
        /// Conversations per harness process.
        #[arg(long, env = "AGUI_POOL_SIZE")]
        pub pool_size: Option<usize>,
        /// Seconds an empty harness process is kept.
        #[arg(long, env = "AGUI_HARNESS_IDLE_GRACE_SECS")]
        pub harness_idle_grace_secs: Option<u64>,
        /// Start a harness with the server, and a spare before the live ones are full (each
        /// warmed by a throwaway turn the model proxy answers itself).
        #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_PRESTART_HARNESS")]
        pub prestart_harness: Option<bool>,
        /// Spares kept ready for new owners (or, per thread, new threads) at most: one, plus one
        /// for each new owner (thread) within the last minute, up to this (each an idle harness
        /// process).
        #[arg(long, env = "AGUI_MAX_SPARE_HARNESSES")]
        pub max_spare_harnesses: Option<usize>,
        /// Seconds of inactivity before a session is forgotten.
        #[arg(long, env = "AGUI_SESSION_TIMEOUT_SECS")]
        pub session_timeout_secs: Option<u64>,
        /// Seconds a session parked on a user is kept.
        #[arg(long, env = "AGUI_PARKED_TIMEOUT_SECS")]
        pub parked_timeout_secs: Option<u64>,
        /// Seconds of inactivity before an idle conversation is closed (resumed on the next run).
        #[arg(long, env = "AGUI_HIBERNATE_AFTER_SECS")]
        pub hibernate_after_secs: Option<u64>,
        /// Live conversations at most.
        #[arg(long, env = "AGUI_MAX_SESSIONS")]
        pub max_sessions: Option<usize>,
        /// Seconds a second run on a busy thread waits (0: refuse at once).
        #[arg(long, env = "AGUI_BUSY_THREAD_WAIT_SECS")]
        pub busy_thread_wait_secs: Option<u64>,
        /// Model API retries on 429/503.
        #[arg(long, env = "AGUI_API_RETRIES")]
        pub api_retries: Option<u32>,
        /// Largest inline attachment forwarded to the model, in bytes.
        #[arg(long, env = "AGUI_MAX_ATTACHMENT_BYTES")]
        pub max_attachment_bytes: Option<usize>,
        /// What a run's client leaving does to the turn: `detach` (it goes on) or `cancel`
        /// (the last client leaving stops it).
        #[arg(long, env = "AGUI_ON_DISCONNECT")]
        pub on_disconnect: Option<OnDisconnect>,
        /// Seconds a turn may go without a word from the harness before it is halted.
        #[arg(long, env = "AGUI_TURN_STALL_TIMEOUT_SECS")]
        pub turn_stall_timeout_secs: Option<u64>,
        /// Events a run's client may fall behind by before it is detached.
        #[arg(long, env = "AGUI_CLIENT_BUFFER_EVENTS")]
        pub client_buffer_events: Option<usize>,
        /// Confine harness processes per owner (`owner`), per thread (`thread`, also `strict`),
        /// or run them unconfined (`off`).
        #[arg(long, env = "AGUI_SANDBOX")]
        pub sandbox: Option<SandboxMode>,
        /// Hosts the agent's tools may reach through the egress proxy (`example.com`,
        /// `*.example.com`, `*`, each with an optional `:port`); none by default.
        #[arg(long, env = "AGUI_EGRESS_ALLOW", value_delimiter = ',')]
        pub egress_allow: Option<Vec<String>>,
        /// Extra paths confined harnesses may read (besides the system allow-list).
        #[arg(long, env = "AGUI_SANDBOX_RO_PATHS", value_delimiter = ',')]
        pub sandbox_ro_paths: Option<Vec<PathBuf>>,
        /// Processes and threads a confined harness process and its commands may have.
        #[arg(long, env = "AGUI_SANDBOX_MAX_PIDS")]
        pub sandbox_max_pids: Option<u64>,
        /// Memory a confined harness process and its commands may use, in MiB.
        #[arg(long, env = "AGUI_SANDBOX_MEMORY_MB")]
        pub sandbox_memory_mb: Option<u64>,
        /// The size of a confined process's `/tmp`, in MiB.
        #[arg(long, env = "AGUI_SANDBOX_TMP_MB")]
        pub sandbox_tmp_mb: Option<u64>,
        /// The largest file a command may write, in MiB.
        #[arg(long, env = "AGUI_SANDBOX_FILE_MB")]
        pub sandbox_file_mb: Option<u64>,
        /// The disk an owner's (or a thread's) workspaces and state may take, in MiB.
        #[arg(long, env = "AGUI_WORKSPACE_MAX_MB")]
        pub workspace_max_mb: Option<u64>,
        /// A directory copied into every new thread's workspace (its files and directories;
        /// links and special files are skipped).
        #[arg(long, env = "AGUI_WORKSPACE_TEMPLATE")]
        pub workspace_template: Option<PathBuf>,
        /// The largest model request the model proxy forwards, in MiB.
        #[arg(long, env = "AGUI_MODEL_MAX_REQUEST_MB")]
        pub model_max_request_mb: Option<u64>,
        /// Model calls one harness process may have in flight at once.
        #[arg(long, env = "AGUI_MODEL_MAX_CONCURRENT_CALLS")]
        pub model_max_concurrent_calls: Option<usize>,
        /// Model calls one harness process may start per minute.
        #[arg(long, env = "AGUI_MODEL_CALLS_PER_MINUTE")]
        pub model_calls_per_minute: Option<u32>,
        /// Threads one identity may create.
        #[arg(long, env = "AGUI_MAX_THREADS_PER_OWNER")]
        pub max_threads_per_owner: Option<usize>,
        /// Runs one identity may have in flight at once.
        #[arg(long, env = "AGUI_MAX_RUNS_PER_OWNER")]
        pub max_runs_per_owner: Option<usize>,
        /// Days a thread is remembered after its last activity; then it is removed with its
        /// workspace and directories.
        #[arg(long, env = "AGUI_THREAD_RETENTION_DAYS")]
        pub thread_retention_days: Option<u64>,
    }
}

/// `name=value` (split at the first `=`; blanks around the name and the value are dropped).
pub(crate) fn parse_name_value(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| "an entry is not name=value".to_owned())?;
    if name.trim().is_empty() {
        return Err(format!("`{name}=…` has an empty name"));
    }
    Ok((name.trim().to_owned(), value.trim().to_owned()))
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

fn headers<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<(String, String)>>, D::Error> {
    let map: Option<BTreeMap<String, String>> = Option::deserialize(d)?;
    Ok(map.map(|m| m.into_iter().collect()))
}

impl AgentSettings {
    /// Whether these settings name a real model endpoint (otherwise the demo model serves).
    pub fn has_endpoint(&self) -> bool {
        self.api_key.as_deref().is_some_and(|k| !k.is_empty())
            || self.api_key_file.is_some()
            || self.gemini_base_url.is_some()
            || self.vertex_project.is_some()
            || self.openai_base_url.is_some()
    }
}

/// Declares the server-wide keys once — [`ServerKeys`] (read from the environment and the flags,
/// and overlaid in the merge) and the same keys in [`FileConfig`] — so that no key can be
/// forgotten by the file, the command line or the merge. `auth_tokens` is apart: the file and
/// the command line write it in different forms.
macro_rules! server_keys {
    (
        $( $(#[doc = $doc:literal])* #[arg($($arg:tt)*)] pub $field:ident: Option<$ty:ty>, )*
    ) => {
        /// The server-wide keys (all but the agents' settings and `auth_tokens`), one list for
        /// the file, the environment and the flags; unset keys let lower layers show through.
        #[derive(Debug, Clone, Default, PartialEq, clap::Args)]
        pub struct ServerKeys {
            $( $(#[doc = $doc])* #[arg($($arg)*)] pub $field: Option<$ty>, )*
        }

        impl ServerKeys {
            /// These keys with every key `top` sets taking precedence.
            pub fn overlaid(mut self, top: &ServerKeys) -> Self {
                $( if top.$field.is_some() { self.$field = top.$field.clone(); } )*
                self
            }
        }

        /// The server-wide keys of the file.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct FileConfig {
            $( $(#[doc = $doc])* pub $field: Option<$ty>, )*
            /// Bearer tokens that name their callers.
            pub auth_tokens: Option<AuthTokens>,
            /// Defaults for every agent.
            #[serde(default)]
            pub agent: AgentSettings,
            /// The agents, each at its own `path`.
            #[serde(default)]
            pub agents: Vec<AgentSettings>,
        }

        impl FileConfig {
            /// The file's server-wide keys, as a layer to overlay.
            pub fn server_keys(&self) -> ServerKeys {
                ServerKeys { $( $field: self.$field.clone(), )* }
            }
        }
    };
}

server_keys! {
    /// Listen address.
    #[arg(long, env = "AGUI_BIND")]
    pub bind: Option<SocketAddr>,
    /// Serve the embedded scripted model (offline demo), whatever else is configured.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_DEMO")]
    pub demo: Option<bool>,
    /// Require `Authorization: Bearer <token>`.
    #[arg(long, env = "AGUI_AUTH_TOKEN", hide_env_values = true)]
    pub auth_token: Option<String>,
    /// The header in which an authenticating proxy names the user (e.g. `X-Forwarded-User`):
    /// a thread belongs to the user that created it; requests without it are refused.
    #[arg(long, env = "AGUI_USER_HEADER")]
    pub user_header: Option<String>,
    /// Serve on a non-loopback address without a token: only if something in front
    /// authenticates every request.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_INSECURE_NO_AUTH")]
    pub insecure_no_auth: Option<bool>,
    /// The token an authenticating proxy presents (`Authorization: Bearer`) when it names the
    /// user in `--user-header` beside `--auth-tokens`: the header is trusted from it alone.
    #[arg(long, env = "AGUI_PROXY_TOKEN", hide_env_values = true)]
    pub proxy_token: Option<String>,
    /// A token for `/metrics` alone (`Authorization: Bearer`), for a scraper; needed for
    /// `/metrics` on a server with `--user-header` and no other token.
    #[arg(long, env = "AGUI_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Allow `sandbox = "off"` together with identities or a non-loopback bind (the agents'
    /// commands then run unconfined for several users).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_INSECURE_UNCONFINED")]
    pub insecure_unconfined: Option<bool>,
    /// Answer `GET /readyz` with 200 even while a confined agent's sandbox is unavailable (its
    /// command and write tools withheld), instead of 503.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "AGUI_READY_WITHOUT_SANDBOX")]
    pub ready_without_sandbox: Option<bool>,
    /// Allowed CORS origins (comma-separated; `*` for any).
    #[arg(long, env = "AGUI_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Option<Vec<String>>,
    /// Host names answered besides loopback names and the bind address (comma-separated,
    /// `name` or `name:port`; `*` for any).
    #[arg(long, env = "AGUI_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Option<Vec<String>>,
    /// Largest request body in bytes.
    #[arg(long, env = "AGUI_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Seconds between SSE keep-alive comments.
    #[arg(long, env = "AGUI_KEEP_ALIVE_SECS")]
    pub keep_alive_secs: Option<u64>,
    /// Log format; the level comes from `RUST_LOG` (default `info`).
    #[arg(long, env = "AGUI_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Loopback port of the model proxy, the harnesses' model endpoint (0: any free port).
    #[arg(long, env = "AGUI_MODEL_PROXY_PORT")]
    pub model_proxy_port: Option<u16>,
    /// This replica's id, unique among the replicas sharing the save dir; setting it turns on
    /// thread leases (see "Running several replicas" in the README).
    #[arg(long, env = "AGUI_REPLICA_ID")]
    pub replica_id: Option<String>,
    /// Seconds a thread lease lasts unless renewed (renewed every third of it).
    #[arg(long, env = "AGUI_LEASE_TTL_SECS")]
    pub lease_ttl_secs: Option<u64>,
    /// The host user and group id confined harness processes run as when the server runs as
    /// root (default 65534); `0` runs them as root.
    #[arg(long, env = "AGUI_SANDBOX_UID")]
    pub sandbox_uid: Option<u32>,
}

/// `auth_tokens` in the file: names and their tokens (`{ alice = "…" }`), or a list of tokens,
/// each named `token-` and the start of its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "a table of name = \"token\" entries, or a list of tokens"
)]
pub enum AuthTokens {
    /// Name → token.
    Named(BTreeMap<String, String>),
    /// Tokens without names.
    Unnamed(Vec<String>),
}

impl AuthTokens {
    /// Identity → token.
    pub(crate) fn by_identity(&self) -> BTreeMap<String, String> {
        match self {
            Self::Named(named) => named.clone(),
            Self::Unnamed(tokens) => tokens
                .iter()
                .map(|t| (unnamed_token_identity(t), t.clone()))
                .collect(),
        }
    }
}

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Self, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ServerError::config(
                ConfigProblem::File,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        toml::from_str(&text).map_err(|e| {
            ServerError::config(ConfigProblem::File, format!("{}: {e}", path.display()))
        })
    }
}

/// Everything the server needs, merged and validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Listen address.
    pub bind: SocketAddr,
    /// Bearer token required on every route but `/healthz` and the playground's page.
    pub auth_token: Option<String>,
    /// Bearer tokens by the identity they give (instead of `auth_token`): threads then belong
    /// to identities.
    pub auth_tokens: BTreeMap<String, String>,
    /// The header in which an authenticating proxy names the user (threads then belong to
    /// users).
    pub user_header: Option<String>,
    /// Serve a non-loopback bind with no token (something in front authenticates).
    pub insecure_no_auth: bool,
    /// The token an authenticating proxy presents to be trusted with `user_header` (needed
    /// with `auth_tokens`).
    pub proxy_token: Option<String>,
    /// A token that opens `/metrics` alone (beside the server's tokens).
    pub metrics_token: Option<String>,
    /// Allow unconfined agents (`sandbox = "off"`) with identities or a non-loopback bind.
    pub insecure_unconfined: bool,
    /// `GET /readyz` answers 200 even while a confined agent's sandbox is unavailable.
    pub ready_without_sandbox: bool,
    /// CORS origins (`*` = any); empty disables CORS headers.
    pub cors_origins: Vec<String>,
    /// Host names answered besides loopback names and the bind address (`*`: any).
    pub allowed_hosts: Vec<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// SSE keep-alive interval.
    pub keep_alive: Duration,
    /// Serve the scripted demo model.
    pub demo: bool,
    /// Log format.
    pub log_format: LogFormat,
    /// Loopback port of the model proxy, the harnesses' model endpoint (0: any free port).
    pub model_proxy_port: u16,
    /// This replica's id among replicas sharing the save dir: with one, each thread is driven
    /// under a lease (`<save_dir>/leases/`).
    pub replica_id: Option<String>,
    /// How long a thread lease lasts unless renewed.
    pub lease_ttl: Duration,
    /// The host id confined harness processes run as when the server runs as root, as set
    /// (`None`: the default, 65534 as the README's configuration table says).
    pub sandbox_uid: Option<u32>,
    /// The agents, with paths normalised (`/` or `/a/b`), in mount order.
    pub agents: Vec<AgentSettings>,
    /// The configuration file it was read from (hidden from sandboxed agents).
    pub config_file: Option<PathBuf>,
}

impl ServerConfig {
    /// Refuses unconfined agents (`sandbox = "off"`) where they would serve several users or
    /// the network — identities, or a non-loopback bind — unless the operator says so
    /// (`insecure_unconfined`).
    pub(crate) fn check_unconfined(&self) -> Result<(), ServerError> {
        if self.insecure_unconfined {
            return Ok(());
        }
        let exposed = if !self.auth_tokens.is_empty() || self.user_header.is_some() {
            Some("callers have identities (auth_tokens or user_header)")
        } else if !self.bind.ip().is_loopback() {
            Some("the server listens beyond loopback")
        } else {
            None
        };
        let Some(why) = exposed else { return Ok(()) };
        for agent in &self.agents {
            if agent.sandbox == Some(SandboxMode::Off) {
                return Err(ServerError::config(
                    ConfigProblem::Confinement,
                    format!(
                        "the agent at `{}` runs unconfined (sandbox = \"off\") while {why}: one \
                     user's agent could read every other user's files and the server's secrets. \
                     Use sandbox = \"owner\", or set insecure_unconfined = true if every caller \
                     is trusted",
                        agent.path.as_deref().unwrap_or("/")
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A `replica_id`, checked: it names leases in logs and files other replicas read.
pub(crate) fn replica_id(id: Option<String>) -> Result<Option<String>, ServerError> {
    let Some(id) = id
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty())
    else {
        return Ok(None);
    };
    crate::ids::valid_thread_id(&id).map_err(|why| {
        ServerError::config(ConfigProblem::Server, format!("replica_id `{id}`: {why}"))
    })?;
    Ok(Some(id))
}

/// The API key in `path`: its text without surrounding blanks (a trailing newline), which must
/// not be empty.
pub(crate) fn read_key_file(path: &Path) -> Result<String, ServerError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ServerError::config(
            ConfigProblem::Secret,
            format!("cannot read api_key_file `{}`: {e}", path.display()),
        )
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(ServerError::config(
            ConfigProblem::Secret,
            format!("api_key_file `{}` is empty", path.display()),
        ));
    }
    Ok(key.to_owned())
}

/// The identity of an unnamed token in an `auth_tokens` list: `token-` and the start of its
/// SHA-256, so it stays the same when the list is reordered and does not reveal the token.
pub(crate) fn unnamed_token_identity(token: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(token.as_bytes());
    format!("token-{}", hex::encode(&digest[..6]))
}

/// What [`ServerConfig::redacted`] shows instead of a secret.
const REDACTED: &str = "<redacted>";

impl ServerConfig {
    /// This configuration with its secrets masked (the bearer token, API keys and model header
    /// values, which may carry a gateway's credentials), for printing: `check-config` output
    /// ends up in terminals and CI logs.
    pub fn redacted(&self) -> Self {
        let mask = |secret: &Option<String>| secret.as_ref().map(|_| REDACTED.to_owned());
        let mut config = self.clone();
        config.auth_token = mask(&config.auth_token);
        config.proxy_token = mask(&config.proxy_token);
        config.metrics_token = mask(&config.metrics_token);
        for token in config.auth_tokens.values_mut() {
            *token = REDACTED.to_owned();
        }
        for agent in &mut config.agents {
            agent.api_key = mask(&agent.api_key);
            for (_, value) in agent.model_headers.iter_mut().flatten() {
                *value = REDACTED.to_owned();
            }
        }
        config
    }
}

/// A short name for a mount path, used in per-agent directories.
pub(crate) fn slug(path: &str) -> String {
    let s = path.trim_matches('/').replace('/', "-");
    if s.is_empty() { "default".into() } else { s }
}

/// `"/"`, or `/a/b` without a trailing slash; only URL-safe characters.
pub fn normalise_path(path: &str) -> Result<String, ServerError> {
    let trimmed = path.trim().trim_matches('/');
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    let ok = trimmed.split('/').all(|segment| {
        !segment.is_empty()
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
    });
    if !ok || trimmed.split('/').any(|s| s == "." || s == "..") {
        return Err(ServerError::config(
            ConfigProblem::Server,
            format!("`{path}` is not a usable mount path"),
        ));
    }
    Ok(format!("/{trimmed}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// Merges `toml` with the flags `args`; returns each agent's `(path, save_dir,
    /// workspace_root)` or the error text.
    fn merged(toml: &str, args: &[&str]) -> Result<Vec<(String, String, String)>, String> {
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            serve: crate::cli::ServeArgs,
        }
        let file: FileConfig = toml::from_str(toml).map_err(|e| e.to_string())?;
        let flags = Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let config = ServerConfig::merge(file, &flags.serve).map_err(|e| e.to_string())?;
        let shown =
            |p: &Option<PathBuf>| p.as_ref().map_or("-".into(), |p| p.display().to_string());
        Ok(config
            .agents
            .iter()
            .map(|a| {
                (
                    a.path.clone().unwrap_or_default(),
                    shown(&a.save_dir),
                    shown(&a.workspace_root),
                )
            })
            .collect())
    }

    fn check(toml: &str, args: &[&str], expected: &[(&str, &str, &str)]) {
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(
            merged(toml, args),
            Ok(expected),
            "toml: {toml}\nargs: {args:?}"
        );
    }

    #[test]
    fn one_agent_uses_the_directories_as_given() {
        check("", &[], &[("/", "-", "-")]);
        check(
            "",
            &["--save-dir", "/s", "--workspace-root", "/w"],
            &[("/", "/s", "/w")],
        );
        check("[agent]\nsave_dir = \"/s\"", &[], &[("/", "/s", "-")]);
    }

    #[test]
    fn agents_sharing_a_default_directory_get_one_subfolder_each() {
        let toml = r#"
            [agent]
            workspace_root = "/w"
            [[agents]]
            path = "/alpha"
            [[agents]]
            path = "team/beta/"
            save_dir = "/own"
        "#;
        check(
            toml,
            &["--save-dir", "/s"],
            &[
                ("/alpha", "/s/alpha", "/w/alpha"),
                ("/team/beta", "/own", "/w/team-beta"),
            ],
        );
        // A single `[[agents]]` entry is treated the same, so adding a second agent later
        // does not move the first one's conversations.
        check(
            "[[agents]]\npath = \"/a\"",
            &["--save-dir", "/s"],
            &[("/a", "/s/a", "-")],
        );
    }

    #[test]
    fn the_redacted_configuration_shows_no_secret() {
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            serve: crate::cli::ServeArgs,
        }
        let flags = Flags::try_parse_from([
            "x",
            "--auth-token",
            "token-secret-0123",
            "--metrics-token",
            "metrics-secret-0123",
            "--api-key",
            "key-secret",
            "--model-header",
            "authorization=Bearer header-secret",
            "--model",
            "m",
        ])
        .expect("valid flags");
        let config = ServerConfig::merge(FileConfig::default(), &flags.serve).expect("valid");
        let shown = format!("{:#?}", config.redacted());
        assert!(!shown.contains("secret"), "{shown}");
        let agent = &config.redacted().agents[0];
        assert_eq!(agent.api_key.as_deref(), Some(REDACTED));
        assert_eq!(config.redacted().metrics_token.as_deref(), Some(REDACTED));
        assert_eq!(agent.model.as_deref(), Some("m"), "the rest is kept");
        assert_eq!(
            agent.model_headers,
            Some(vec![("authorization".into(), REDACTED.into())])
        );
        let named = Flags::try_parse_from(["x", "--auth-tokens", "alice=alice-secret-0123"])
            .expect("valid flags");
        let named = ServerConfig::merge(FileConfig::default(), &named.serve).expect("valid");
        let shown = format!("{:#?}", named.redacted());
        assert!(
            !shown.contains("secret") && shown.contains("alice"),
            "{shown}"
        );
        // Nothing set, nothing shown.
        let plain = ServerConfig::merge(FileConfig::default(), &crate::cli::ServeArgs::default())
            .expect("valid");
        assert_eq!(plain.redacted(), plain);
    }

    #[test]
    fn a_layer_that_names_a_key_replaces_the_key_below_either_way() {
        let key = |k: &str| AgentSettings {
            api_key: Some(k.into()),
            ..Default::default()
        };
        let file = |f: &str| AgentSettings {
            api_key_file: Some(f.into()),
            ..Default::default()
        };
        let over = key("below").overlaid(&file("/above"));
        assert_eq!(
            (over.api_key, over.api_key_file),
            (None, Some("/above".into()))
        );
        let over = file("/below").overlaid(&key("above"));
        assert_eq!(
            (over.api_key, over.api_key_file),
            (Some("above".into()), None)
        );
        let over = file("/below").overlaid(&AgentSettings::default());
        assert_eq!(
            over.api_key_file,
            Some("/below".into()),
            "a silent layer keeps it"
        );
    }

    #[test]
    fn bad_layouts_are_refused() {
        let twice = "[[agents]]\npath = \"/a\"\n[[agents]]\npath = \"a/\"";
        assert_eq!(
            merged(twice, &[]),
            Err("configuration error: two agents are mounted at `/a`".into())
        );
        assert!(merged("[agent]\nunknown = 1", &[]).is_err());
    }
}
