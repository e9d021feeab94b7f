//! The default of every agent setting, in one place: [`AgentOptions::new`] starts from these,
//! and the server's configuration, its `--help` and its README's table show them (a test there
//! compares the README with them), so a default changes here or nowhere.
//!
//! [`AgentOptions::new`]: crate::AgentOptions::new

use std::time::Duration;

use harness_client::BuiltinTool;

use crate::choices::{
    Behavior, InterruptReasons, OnDisconnect, StructuredOutputMode, SubagentEvents,
};

/// Built-in tools: files and shell, without the web, image and scheduling tools (`search_web`
/// without Google credentials makes models loop; the others need services a local agent may
/// not have).
pub const BUILTIN_TOOLS: &[BuiltinTool] = &[
    BuiltinTool::ListDirectory,
    BuiltinTool::ViewFile,
    BuiltinTool::FindFile,
    BuiltinTool::SearchDirectory,
    BuiltinTool::CreateFile,
    BuiltinTool::EditFile,
    BuiltinTool::RunCommand,
];
/// Agent behaviour.
pub const BEHAVIOR: Behavior = Behavior::Autonomous;
/// Ask the user before every tool call.
pub const TOOL_APPROVAL: bool = false;
/// Let the model call the client's tools.
pub const FRONTEND_TOOLS: bool = true;
/// Turn `ask_question` into interrupts.
pub const ASK_QUESTION_INTERRUPTS: bool = true;
/// Interrupt reason names.
pub const INTERRUPT_REASONS: InterruptReasons = InterruptReasons::Namespaced;
/// Run each frontend tool at most once per turn.
pub const DEDUPLICATE_TOOL_CALLS: bool = true;
/// Whether an edit or a regenerate rewinds the files the file tools changed after the fork
/// point, when the run does not say (`forwardedProps.rewindFiles`).
pub const REWIND_FILES: bool = false;
/// The silent `get_app_context` tool.
pub const APP_CONTEXT_TOOL: bool = false;
/// The silent `get_shared_state` tool.
pub const APP_STATE_TOOL: bool = false;
/// How structured output is delivered when a response schema is set.
pub const STRUCTURED_OUTPUT: StructuredOutputMode = StructuredOutputMode::State;
/// Show built-in tool calls as tool-call events.
pub const EMIT_BUILTIN_TOOL_CALLS: bool = true;
/// Subagents as AG-UI subagent events.
pub const SUBAGENT_EVENTS: SubagentEvents = SubagentEvents::Subagent;
/// File changes and commands as activities.
pub const ACTIVITIES: bool = true;
/// The harness's own workspace containment of file tools (off: the sandbox confines them, or
/// the operator chose to run unconfined).
pub const WORKSPACE_CONTAINMENT: bool = false;
/// Model API retries after the first attempt: with the doubling sleep below, about a minute
/// before the run fails (the harness's own schedule keeps retrying for many minutes).
pub const API_RETRIES: u32 = 6;
/// The first sleep between model API retries, in milliseconds; it doubles each time.
pub const API_RETRY_FIRST_SLEEP_MS: u32 = 1000;
/// Idle time after which a session is forgotten (its record stays in the thread store).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Idle time after which a session parked on a human is given up.
pub const PARKED_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);
/// Idle time after which a conversation is closed (resumed on the next run).
pub const HIBERNATE_AFTER: Duration = Duration::from_secs(60);
/// Live conversations at most.
pub const MAX_SESSIONS: usize = 100;
/// How long a second run on a busy thread waits for the first.
pub const BUSY_THREAD_WAIT: Duration = Duration::from_secs(30);
/// Largest inline attachment forwarded to the model: Gemini's inline data limit.
pub const MAX_ATTACHMENT_BYTES: usize = 20 * 1024 * 1024;
/// What a run's client leaving does to the turn.
pub const ON_DISCONNECT: OnDisconnect = OnDisconnect::Detach;
/// A turn with no word from the harness for this long is halted (a tool or model call counts
/// as progress only while the harness reports it).
pub const TURN_STALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Events a run's client may fall behind by before it is detached.
pub const CLIENT_BUFFER_EVENTS: usize = 4096;
/// How long a shutdown waits for threads to close.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);
/// Threads an agent remembers at most: new threads are refused beyond it (none is dropped to
/// make room).
pub const MAX_REMEMBERED_THREADS: usize = 100_000;
/// How long a thread is remembered after its last activity.
pub const REMEMBER_THREADS_FOR: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Spares kept ready for new owners or threads at most ([`crate::AgentOptions::max_spare_harnesses`]):
/// one, as before arrivals were counted; a deployment where new owners come in runs raises it.
pub const MAX_SPARE_HARNESSES: usize = 1;

/// How long a new owner or thread counts towards the stock of spares ([`crate::AgentOptions::spare_arrival_window`]).
pub const SPARE_ARRIVAL_WINDOW: Duration = Duration::from_secs(60);
