//! Everything an agent can be configured with. Defaults come from [`crate::defaults`].

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use harness_client::{BuiltinTool, ConversationConfig, ModelEndpoint, SystemInstructions};
use serde_json::Value;

use crate::choices::{
    Behavior, ConcurrentRuns, InterruptReasons, OnDisconnect, StructuredOutputMode, SubagentEvents,
};
use crate::defaults;
use crate::error::SessionError;

/// Extra harness settings the agent's options do not cover (MCP servers, subagents, skills,
/// budgets through [`ConversationConfig::base`], or a policy), applied with harness-client's
/// builder before the agent's own settings, which therefore win where both set something.
/// A policy set here (or in its base config) replaces the allow-all policy an agent without
/// `tool_approval` otherwise gets.
#[derive(Clone)]
pub struct HarnessSettings(Arc<dyn Fn(ConversationConfig) -> ConversationConfig + Send + Sync>);

impl HarnessSettings {
    /// Settings applied by `configure` to every conversation's builder.
    pub fn new(
        configure: impl Fn(ConversationConfig) -> ConversationConfig + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(configure))
    }

    pub(crate) fn apply(&self, config: ConversationConfig) -> ConversationConfig {
        (self.0)(config)
    }
}

impl std::fmt::Debug for HarnessSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HarnessSettings(..)")
    }
}

/// The configuration of one agent (what one AG-UI endpoint serves).
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// A name for logs and capabilities.
    pub name: String,
    /// Text model name.
    pub model: String,
    /// Where the model lives.
    pub endpoint: ModelEndpoint,
    /// A model endpoint that answers any request at once without a real model (the server's
    /// model proxy has one). With it, a harness process started ahead of need (prestarted or
    /// spare) runs one throwaway turn against it before it serves ([`crate::warm_up`]), so the
    /// first conversation on it does not pay the harness's first-use costs; `None`: no warm-up.
    pub warm_up_endpoint: Option<ModelEndpoint>,
    /// Image model name (same endpoint); `None` uses the harness default.
    pub image_model: Option<String>,
    /// Extra instructions for the agent.
    pub system_instructions: Option<SystemInstructions>,
    /// Built-in harness tools the agent may use.
    pub builtin_tools: BTreeSet<BuiltinTool>,
    /// Autonomous, interactive (lets the model ask questions) or minimal.
    pub behavior: Behavior,
    /// Ask the user before every tool call the agent makes (interrupt `tool_approval`).
    pub tool_approval: bool,
    /// Tool names that never need approval.
    pub auto_approve_tools: BTreeSet<String>,
    /// Turn `RunAgentInput.tools` into tools the model can call (run by the client).
    pub frontend_tools: bool,
    /// Turn the harness's `ask_question` into interrupts (needs the `AskQuestion` built-in).
    pub ask_question_interrupts: bool,
    /// The `reason` names of question and approval interrupts.
    pub interrupt_reasons: InterruptReasons,
    /// Run each frontend tool at most once per turn (repeats get the first result).
    pub deduplicate_tool_calls: bool,
    /// An edit or a regenerate rewinds the files the file tools changed after the fork point,
    /// when the run does not say (`forwardedProps.rewindFiles`).
    pub rewind_files: bool,
    /// Add the silent `get_app_context` tool (returns the run's context).
    pub app_context_tool: bool,
    /// Add the silent `get_shared_state` tool (returns the shared state).
    pub app_state_tool: bool,
    /// JSON Schema for structured output, and how to deliver it.
    pub response_schema: Option<(Value, StructuredOutputMode)>,
    /// Show the harness's built-in tool calls as tool-call events.
    pub emit_builtin_tool_calls: bool,
    /// How subagents are shown.
    pub subagent_events: SubagentEvents,
    /// Report file changes and commands as activities next to their tool calls.
    pub activities: bool,
    /// Stop a turn after this many tool calls.
    pub max_tool_calls_per_turn: Option<u32>,
    /// Per-thread workspaces are created under this directory (keep it short: long paths make
    /// models corrupt them).
    pub workspace_root: PathBuf,
    /// Conversation storage (harness `storage_directory`) and the thread store; must be stable
    /// for conversations to resume.
    pub save_dir: PathBuf,
    /// Let the harness refuse file-tool paths outside the workspace, the thread's app data dir
    /// and `/tmp` (with the allow-all policy an agent without `tool_approval` gets). The
    /// harness's own check: it resolves symlinks but is racy, so it is a filter for agents that
    /// cannot run commands, not a boundary (confining the harness process is).
    pub workspace_containment: bool,
    /// Model API retries for 429/503 and unreachable endpoints: `(max_retries,
    /// initial_sleep_ms)`, the sleep doubling each time. `None` leaves the harness's own
    /// schedule, which has no practical limit (still retrying after minutes, the run showing
    /// only keep-alives), hence a bounded default.
    pub api_retry: Option<(u32, u32)>,
    /// Extra harness settings (MCP servers, subagents, skills, budgets, a policy…) applied
    /// under the agent's own.
    pub harness_settings: Option<HarnessSettings>,
    /// Idle time after which a session is forgotten (its record stays in the thread store).
    pub session_timeout: Duration,
    /// Idle time after which a session parked on a human is given up.
    pub parked_timeout: Duration,
    /// Idle time after which an idle session's harness conversation is closed (resumed
    /// transparently on the next run).
    pub hibernate_after: Duration,
    /// Keep a conversation opened ahead in each owner's tree (its process), which the owner's
    /// next new thread whose first run brings no client tools takes instead of waiting for the
    /// harness to open one; another is opened behind it. An unclaimed one is closed after
    /// [`Self::hibernate_after`]. Off by default; the server turns it on with
    /// `prestart_harness`. Not with a process per thread.
    pub spare_conversations: bool,
    /// Live conversations at most (idle ones are hibernated to make room).
    pub max_sessions: usize,
    /// Concurrent runs on one thread.
    pub concurrent_runs: ConcurrentRuns,
    /// Threads remembered in the thread store at most: a new thread is refused
    /// (`RUN_ERROR THREAD_LIMIT`) beyond it, and none is dropped to make room.
    pub max_remembered_threads: usize,
    /// How long a thread is remembered after its last activity; then its record, workspace and
    /// directories are removed.
    pub remember_threads_for: Duration,
    /// Largest inline attachment forwarded to the model.
    pub max_attachment_bytes: usize,
    /// What a run's client leaving does to the turn.
    pub on_disconnect: OnDisconnect,
    /// A turn with no word from the harness for this long is halted and its runs fail.
    pub turn_stall_timeout: Duration,
    /// Events a run's client may fall behind by before it is detached (its stream ends; the
    /// turn goes on).
    pub client_buffer_events: usize,
    /// How long a shutdown waits for threads to close.
    pub shutdown_deadline: Duration,
    /// The disk a tree (an owner's, or a thread's) may take, workspaces and state together: a
    /// turn that grows it past this is stopped (`RUN_ERROR WORKSPACE_FULL`). `None`: no cap.
    pub workspace_max_bytes: Option<u64>,
    /// A directory copied into every new thread's workspace when the thread is first placed
    /// (its regular files and directories; links, special files and files with several hard
    /// links are skipped). The operator's: read as it is, never through a thread's tree.
    pub workspace_template: Option<PathBuf>,
    /// Threads may belong to several owners (callers have identities): keep a process ready
    /// for the next new owner. Without, every thread is the local owner's.
    pub several_owners: bool,
    /// The most spares kept ready for new owners (with [`Self::several_owners`]) or, per thread,
    /// new threads: one, plus one for each new owner (thread) placed within
    /// [`Self::spare_arrival_window`], up to this (each an idle harness process, about 110 MB
    /// resident). At least 1.
    pub max_spare_harnesses: usize,
    /// How long a new owner (thread) counts towards [`Self::max_spare_harnesses`]' stock;
    /// spares beyond what the arrivals within it call for stop once they age out.
    pub spare_arrival_window: Duration,
    /// This server's id among replicas sharing the save dir (`None`: alone); names the spare
    /// directory trees it makes, so a restart removes only its own.
    pub replica_id: Option<String>,
}

impl AgentOptions {
    /// Defaults ([`crate::defaults`]) for `model` at `endpoint`, with workspaces and storage
    /// under `data_dir`.
    pub fn new(
        model: impl Into<String>,
        endpoint: ModelEndpoint,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        let data_dir = data_dir.into();
        Self {
            name: "antigravity".into(),
            model: model.into(),
            endpoint,
            warm_up_endpoint: None,
            image_model: None,
            system_instructions: None,
            builtin_tools: defaults::BUILTIN_TOOLS.iter().copied().collect(),
            behavior: defaults::BEHAVIOR,
            tool_approval: defaults::TOOL_APPROVAL,
            auto_approve_tools: BTreeSet::new(),
            frontend_tools: defaults::FRONTEND_TOOLS,
            ask_question_interrupts: defaults::ASK_QUESTION_INTERRUPTS,
            interrupt_reasons: defaults::INTERRUPT_REASONS,
            deduplicate_tool_calls: defaults::DEDUPLICATE_TOOL_CALLS,
            rewind_files: defaults::REWIND_FILES,
            app_context_tool: defaults::APP_CONTEXT_TOOL,
            app_state_tool: defaults::APP_STATE_TOOL,
            response_schema: None,
            emit_builtin_tool_calls: defaults::EMIT_BUILTIN_TOOL_CALLS,
            subagent_events: defaults::SUBAGENT_EVENTS,
            activities: defaults::ACTIVITIES,
            max_tool_calls_per_turn: None,
            workspace_root: data_dir.join("w"),
            save_dir: data_dir.join("save"),
            workspace_containment: defaults::WORKSPACE_CONTAINMENT,
            api_retry: Some((defaults::API_RETRIES, defaults::API_RETRY_FIRST_SLEEP_MS)),
            harness_settings: None,
            session_timeout: defaults::SESSION_TIMEOUT,
            parked_timeout: defaults::PARKED_TIMEOUT,
            hibernate_after: defaults::HIBERNATE_AFTER,
            spare_conversations: false,
            max_sessions: defaults::MAX_SESSIONS,
            concurrent_runs: ConcurrentRuns::Wait(defaults::BUSY_THREAD_WAIT),
            max_remembered_threads: defaults::MAX_REMEMBERED_THREADS,
            remember_threads_for: defaults::REMEMBER_THREADS_FOR,
            max_attachment_bytes: defaults::MAX_ATTACHMENT_BYTES,
            on_disconnect: defaults::ON_DISCONNECT,
            turn_stall_timeout: defaults::TURN_STALL_TIMEOUT,
            client_buffer_events: defaults::CLIENT_BUFFER_EVENTS,
            shutdown_deadline: defaults::SHUTDOWN_DEADLINE,
            workspace_max_bytes: None,
            workspace_template: None,
            several_owners: false,
            max_spare_harnesses: defaults::MAX_SPARE_HARNESSES,
            spare_arrival_window: defaults::SPARE_ARRIVAL_WINDOW,
            replica_id: None,
        }
    }

    /// Checks settings that cannot work together.
    pub fn validate(&self) -> Result<(), SessionError> {
        let bad = |m: String| Err(SessionError::Config(m));
        if self.model.trim().is_empty() {
            return bad("the model name is empty".into());
        }
        if self.max_sessions == 0 {
            return bad("max_sessions must be at least 1".into());
        }
        if self.client_buffer_events == 0 {
            return bad("client_buffer_events must be at least 1".into());
        }
        if self.turn_stall_timeout.is_zero() {
            return bad("turn_stall_timeout must be longer than zero".into());
        }
        if self.spare_arrival_window.is_zero() && self.max_spare_harnesses > 1 {
            return bad("spare_arrival_window must be longer than zero when more than one spare may be kept".into());
        }
        if self.max_spare_harnesses == 0 {
            return bad("max_spare_harnesses must be at least 1 (prestart_harness = false boots no spare at all)".into());
        }
        if self.max_tool_calls_per_turn == Some(0) {
            return bad("max_tool_calls_per_turn must be at least 1 (or unset)".into());
        }
        if self.parked_timeout < self.session_timeout {
            return bad("parked_timeout must not be shorter than session_timeout".into());
        }
        if self.ask_question_interrupts
            && self.builtin_tools.contains(&BuiltinTool::AskQuestion)
            && self.behavior == Behavior::Autonomous
        {
            tracing::warn!(agent = %self.name, "ask_question is enabled but the agent is autonomous; the model is told the user will not answer questions");
        }
        Ok(())
    }

    /// Whether the model can actually reach `ask_question` interrupts.
    pub fn questions_reachable(&self) -> bool {
        self.ask_question_interrupts && self.builtin_tools.contains(&BuiltinTool::AskQuestion)
    }
}
