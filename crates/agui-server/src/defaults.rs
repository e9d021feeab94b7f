//! The default of every configuration key, in one table. The server's own defaults are the
//! constants here; an agent's come from [`agui_session::defaults`] and the pool's from
//! [`PoolOptions::default`]. [`documented`] shows them all as the README's configuration table
//! does: `--help` prints it and a test compares it with the README, so neither can drift.

use std::time::Duration;

use agui_session::defaults as session;
use harness_client::PoolOptions;

use crate::choices::{LogFormat, SandboxMode, SystemInstructionsMode, choice_name};

/// Listen address.
pub(crate) const BIND: &str = "127.0.0.1:8027";
/// Request body limit: large enough for inline attachments.
pub(crate) const MAX_BODY_BYTES: usize = 64 << 20;
/// Seconds between SSE keep-alive comments: well under the idle timeouts of common proxies.
pub(crate) const KEEP_ALIVE_SECS: u64 = 15;
/// Log format.
pub(crate) const LOG_FORMAT: LogFormat = LogFormat::Text;
/// Serve the scripted demo model even where a model endpoint is configured.
pub(crate) const DEMO: bool = false;
/// Serve a non-loopback bind with no token.
pub(crate) const INSECURE_NO_AUTH: bool = false;
/// Text model (also the name the demo model answers to).
pub(crate) const MODEL: &str = "gemini-3-flash-preview";
/// What `system_instructions` does to Antigravity's prompt.
pub(crate) const SYSTEM_INSTRUCTIONS_MODE: SystemInstructionsMode = SystemInstructionsMode::Append;
/// Loopback port of the model proxy: any free one, since only the server's own harnesses call it
/// (they are told its address).
pub(crate) const MODEL_PROXY_PORT: u16 = 0;
/// How long the model proxy waits to connect to the model.
pub(crate) const MODEL_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the model proxy waits for the next bytes of a model's answer: generous, since a
/// model may think for minutes before its first event, but a stream silent for this long is
/// dead.
pub(crate) const MODEL_READ_TIMEOUT: Duration = Duration::from_secs(600);
/// Largest model request the proxy forwards (streamed, never buffered). The harness sends the
/// whole conversation, attachments included (20 MiB each by default, a third more in base64),
/// in every request.
pub(crate) const MODEL_MAX_REQUEST_BYTES: u64 = 64 << 20;
/// Model calls one harness process may have in flight at once (8 conversations, each with
/// subagents working in parallel, stay well below it).
pub(crate) const MODEL_MAX_CONCURRENT_CALLS: usize = 32;
/// Model calls one harness process may start per minute.
pub(crate) const MODEL_CALLS_PER_MINUTE: u32 = 600;
/// Start a harness with the server, and a spare before the live ones are full, each warmed by a
/// throwaway turn the model proxy answers: the first run of a new thread (also the first after a
/// start) is then fast, which a server wants (a library user of the pool may not). A harness
/// nobody uses stops after `harness_idle_grace_secs`.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub const PRESTART_HARNESS: bool = true;

/// Conversations one harness process holds (`pool_size`). One owner's threads share its
/// processes (or, unconfined, everyone's), so this bounds how many conversations a crashed
/// process fails; fewer, larger processes boot less often, and a burst of new threads waits
/// for no boot: at 32 new threads at once on 2 cores, 32 rather than 8 took the first answer
/// from 1.32× the Python reference's time to 0.95–1.25× (0.82× with the pool's spare booted
/// after the burst) and the peak memory from 1.09× to 0.48× (README, "pool_size").
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub const POOL_SIZE: usize = 32;

/// How long a thread lease lasts unless renewed (with `replica_id`): a dead replica's threads
/// move after at most this long, and a live one renews every third of it.
pub(crate) const LEASE_TTL_SECS: u64 = 15;

/// Confine harness processes per owner.
pub(crate) const SANDBOX: SandboxMode = SandboxMode::Owner;
/// Run unconfined with identities or a non-loopback bind.
pub(crate) const INSECURE_UNCONFINED: bool = false;
/// Report ready (`GET /readyz`) while a confined agent's sandbox is unavailable.
pub(crate) const READY_WITHOUT_SANDBOX: bool = false;
/// Processes and threads one confined harness process and its commands may have at once.
pub(crate) const SANDBOX_MAX_PIDS: u64 = 1024;
/// Memory one confined harness process and its commands may use, in MiB (`/tmp` included).
pub(crate) const SANDBOX_MEMORY_MB: u64 = 4096;
/// The size of a confined process's private `/tmp`, in MiB.
pub(crate) const SANDBOX_TMP_MB: u64 = 512;
/// The largest file a command may write, in MiB.
pub(crate) const SANDBOX_FILE_MB: u64 = 2048;
/// The host user and group id confined harness processes run as when the server runs as root.
pub(crate) const SANDBOX_UID: u32 = harness_client::sandbox::SandboxIdentity::DEFAULT_ID;
/// The disk one owner's (or thread's) workspaces and state may take, in MiB.
pub(crate) const WORKSPACE_MAX_MB: u64 = 10240;
/// Threads one identity may create.
pub(crate) const MAX_THREADS_PER_OWNER: usize = 1000;
/// Runs one identity may have in flight at once.
pub(crate) const MAX_RUNS_PER_OWNER: usize = 16;
/// Days a thread is remembered after its last activity (then its record, workspace and
/// directories are removed).
pub(crate) const THREAD_RETENTION_DAYS: u64 = 30;

/// Every key's default as the README's configuration table writes it, in the table's order:
/// `(key, default)`. Keys with no default value say what happens instead (`none`, `discovered`,
/// …).
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub fn documented() -> Vec<(&'static str, String)> {
    let pool = PoolOptions::default();
    let text = |s: &str| s.to_owned();
    vec![
        ("bind", text(BIND)),
        ("demo", on_off(DEMO)),
        ("auth_token", text("none")),
        ("auth_tokens", text("none")),
        ("user_header", text("none")),
        ("insecure_no_auth", on_off(INSECURE_NO_AUTH)),
        ("cors_origins", text("none")),
        ("allowed_hosts", text("none")),
        ("max_body_bytes", bytes(MAX_BODY_BYTES)),
        ("path", text("/")),
        ("name", text("from the path")),
        ("keep_alive_secs", KEEP_ALIVE_SECS.to_string()),
        ("log_format", choice_name(&LOG_FORMAT)),
        ("model_proxy_port", MODEL_PROXY_PORT.to_string()),
        ("replica_id", text("none")),
        ("lease_ttl_secs", LEASE_TTL_SECS.to_string()),
        ("model", text(MODEL)),
        ("api_key", text("none")),
        ("api_key_file", text("none")),
        ("gemini_base_url", text("Google's")),
        ("model_headers", text("none")),
        ("thinking_level", text("model default")),
        ("vertex_project", text("none")),
        ("vertex_location", text("none")),
        ("openai_base_url", text("none")),
        ("image_model", text("harness default")),
        ("system_instructions", text("none")),
        (
            "system_instructions_mode",
            choice_name(&SYSTEM_INSTRUCTIONS_MODE),
        ),
        (
            "builtin_tools",
            session::BUILTIN_TOOLS
                .iter()
                .map(|t| t.model_name())
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("behavior", choice_name(&session::BEHAVIOR)),
        ("tool_approval", on_off(session::TOOL_APPROVAL)),
        ("auto_approve_tools", text("none")),
        ("frontend_tools", on_off(session::FRONTEND_TOOLS)),
        ("ask_question", on_off(session::ASK_QUESTION_INTERRUPTS)),
        (
            "interrupt_reasons",
            choice_name(&session::INTERRUPT_REASONS),
        ),
        (
            "deduplicate_tool_calls",
            on_off(session::DEDUPLICATE_TOOL_CALLS),
        ),
        ("rewind_files", on_off(session::REWIND_FILES)),
        ("app_context_tool", on_off(session::APP_CONTEXT_TOOL)),
        ("app_state_tool", on_off(session::APP_STATE_TOOL)),
        ("response_schema", text("none")),
        (
            "structured_output",
            choice_name(&session::STRUCTURED_OUTPUT),
        ),
        (
            "emit_builtin_tool_calls",
            on_off(session::EMIT_BUILTIN_TOOL_CALLS),
        ),
        ("subagent_events", choice_name(&session::SUBAGENT_EVENTS)),
        ("activities", on_off(session::ACTIVITIES)),
        ("max_tool_calls_per_turn", text("none")),
        ("workspace_root", text("<data>/w/<agent>")),
        ("save_dir", text("<data>/agents/<agent>")),
        ("harness_path", text("discovered")),
        ("pool_size", POOL_SIZE.to_string()),
        (
            "harness_idle_grace_secs",
            pool.idle_grace.as_secs().to_string(),
        ),
        ("prestart_harness", on_off(PRESTART_HARNESS)),
        (
            "max_spare_harnesses",
            session::MAX_SPARE_HARNESSES.to_string(),
        ),
        (
            "session_timeout_secs",
            session::SESSION_TIMEOUT.as_secs().to_string(),
        ),
        (
            "parked_timeout_secs",
            session::PARKED_TIMEOUT.as_secs().to_string(),
        ),
        (
            "hibernate_after_secs",
            session::HIBERNATE_AFTER.as_secs().to_string(),
        ),
        ("max_sessions", session::MAX_SESSIONS.to_string()),
        (
            "busy_thread_wait_secs",
            session::BUSY_THREAD_WAIT.as_secs().to_string(),
        ),
        ("api_retries", session::API_RETRIES.to_string()),
        ("max_attachment_bytes", bytes(session::MAX_ATTACHMENT_BYTES)),
        (
            "on_disconnect",
            text(match session::ON_DISCONNECT {
                agui_session::OnDisconnect::Detach => "detach",
                agui_session::OnDisconnect::Cancel => "cancel",
            }),
        ),
        (
            "turn_stall_timeout_secs",
            session::TURN_STALL_TIMEOUT.as_secs().to_string(),
        ),
        (
            "client_buffer_events",
            session::CLIENT_BUFFER_EVENTS.to_string(),
        ),
        ("sandbox", choice_name(&SANDBOX)),
        ("insecure_unconfined", on_off(INSECURE_UNCONFINED)),
        ("ready_without_sandbox", on_off(READY_WITHOUT_SANDBOX)),
        ("egress_allow", text("none")),
        ("sandbox_ro_paths", text("none")),
        ("sandbox_max_pids", SANDBOX_MAX_PIDS.to_string()),
        ("sandbox_memory_mb", SANDBOX_MEMORY_MB.to_string()),
        ("sandbox_tmp_mb", SANDBOX_TMP_MB.to_string()),
        ("sandbox_file_mb", SANDBOX_FILE_MB.to_string()),
        ("sandbox_uid", SANDBOX_UID.to_string()),
        ("workspace_max_mb", WORKSPACE_MAX_MB.to_string()),
        ("workspace_template", text("none")),
        (
            "model_max_request_mb",
            (MODEL_MAX_REQUEST_BYTES >> 20).to_string(),
        ),
        (
            "model_max_concurrent_calls",
            MODEL_MAX_CONCURRENT_CALLS.to_string(),
        ),
        ("model_calls_per_minute", MODEL_CALLS_PER_MINUTE.to_string()),
        ("max_threads_per_owner", MAX_THREADS_PER_OWNER.to_string()),
        ("max_runs_per_owner", MAX_RUNS_PER_OWNER.to_string()),
        ("thread_retention_days", THREAD_RETENTION_DAYS.to_string()),
        ("proxy_token", text("none")),
        ("metrics_token", text("none")),
    ]
}

fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.to_owned()
}

/// `64 MiB` for whole mebibytes, else the number of bytes.
fn bytes(n: usize) -> String {
    const MIB: usize = 1 << 20;
    if n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        n.to_string()
    }
}
