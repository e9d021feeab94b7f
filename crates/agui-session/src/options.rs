//! Everything an agent can be configured with.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use harness_client::{BuiltinTool, ModelEndpoint, SystemInstructions};
use harness_proto::lh::{AgentBehavior, HarnessConfig, PolicyConfig};
use serde_json::Value;

use crate::error::SessionError;

/// How structured output (the `finish` tool's JSON, when a response schema is set) reaches the
/// client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredOutputMode {
    /// As a `STATE_SNAPSHOT`.
    #[default]
    State,
    /// As a `CUSTOM` event named `antigravity.structured_output`.
    Custom,
}

/// Default model API retries: 6 after the first attempt, 1 s doubling (about a minute in all).
pub const DEFAULT_API_RETRY: (u32, u32) = (6, 1000);

/// The `reason` of the interrupts the agent itself raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterruptReasons {
    /// `antigravity:ask_question` and `antigravity:tool_approval`: custom reasons namespaced
    /// `framework:name`, as the AG-UI interrupts guide asks.
    #[default]
    Namespaced,
    /// `ask_question` and `tool_approval`, as the Python reference integration sends them (for
    /// frontends written against it).
    Reference,
}

impl InterruptReasons {
    /// The reason of a question interrupt.
    pub fn question(self) -> &'static str {
        match self {
            Self::Namespaced => crate::REASON_QUESTION,
            Self::Reference => "ask_question",
        }
    }

    /// The reason of a tool-approval interrupt.
    pub fn approval(self) -> &'static str {
        match self {
            Self::Namespaced => crate::REASON_APPROVAL,
            Self::Reference => "tool_approval",
        }
    }
}

/// What a second run on a thread does while another run on it is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrentRuns {
    /// Wait for the running one to end (it ends at the turn's end or when it parks), at most
    /// this long, then fail with `THREAD_BUSY`.
    Wait(Duration),
    /// Fail at once with `THREAD_BUSY`.
    Refuse,
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
    /// Image model name (same endpoint); `None` uses the harness default.
    pub image_model: Option<String>,
    /// Extra instructions for the agent.
    pub system_instructions: Option<SystemInstructions>,
    /// Built-in harness tools the agent may use.
    pub builtin_tools: BTreeSet<BuiltinTool>,
    /// Policy rules; `None` allows every tool (unless `tool_approval` asks the user).
    pub policy: Option<PolicyConfig>,
    /// Autonomous (default) or interactive (lets the model ask questions).
    pub behavior: AgentBehavior,
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
    /// Add the silent `get_app_context` tool (returns the run's context).
    pub app_context_tool: bool,
    /// Add the silent `get_shared_state` tool (returns the shared state).
    pub app_state_tool: bool,
    /// JSON Schema for structured output, and how to deliver it.
    pub response_schema: Option<(Value, StructuredOutputMode)>,
    /// Show the harness's built-in tool calls as tool-call events.
    pub emit_builtin_tool_calls: bool,
    /// Stop a turn after this many tool calls.
    pub max_tool_calls_per_turn: Option<u32>,
    /// Per-thread workspaces are created under this directory (keep it short: long paths make
    /// models corrupt them).
    pub workspace_root: PathBuf,
    /// Conversation storage (harness `storage_directory`) and the thread store; must be stable
    /// for conversations to resume.
    pub save_dir: PathBuf,
    /// Model API retries for 429/503 and unreachable endpoints: `(max_retries,
    /// initial_sleep_ms)`, the sleep doubling each time. `None` leaves the harness's own
    /// schedule, which has no practical limit (still retrying after minutes, the run showing
    /// only keep-alives), hence a bounded default.
    pub api_retry: Option<(u32, u32)>,
    /// Extra harness settings (MCP servers, subagents, skills, budgets…) applied under ours.
    pub harness_base: Option<HarnessConfig>,
    /// Idle time after which a session is forgotten (its record stays in the thread store).
    pub session_timeout: Duration,
    /// Idle time after which a session parked on a human is given up.
    pub parked_timeout: Duration,
    /// Idle time after which an idle session's harness conversation is closed (resumed
    /// transparently on the next run).
    pub hibernate_after: Duration,
    /// Live conversations at most (idle ones are hibernated to make room).
    pub max_sessions: usize,
    /// Concurrent runs on one thread.
    pub concurrent_runs: ConcurrentRuns,
    /// Threads remembered in the thread store at most.
    pub max_remembered_threads: usize,
    /// How long a thread is remembered after its last activity.
    pub remember_threads_for: Duration,
    /// Largest inline attachment forwarded to the model.
    pub max_attachment_bytes: usize,
}

impl AgentOptions {
    /// Defaults for `model` at `endpoint`, with workspaces and storage under `data_dir`.
    pub fn new(
        model: impl Into<String>,
        endpoint: ModelEndpoint,
        data_dir: impl Into<PathBuf>,
    ) -> Self {
        let data_dir = data_dir.into();
        let remembered = crate::store::StoreLimits::default();
        Self {
            name: "antigravity".into(),
            model: model.into(),
            endpoint,
            image_model: None,
            system_instructions: None,
            builtin_tools: harness_client::default_builtin_tools(),
            policy: None,
            behavior: AgentBehavior::Autonomous,
            tool_approval: false,
            auto_approve_tools: BTreeSet::new(),
            frontend_tools: true,
            ask_question_interrupts: true,
            interrupt_reasons: InterruptReasons::Namespaced,
            deduplicate_tool_calls: true,
            app_context_tool: false,
            app_state_tool: false,
            response_schema: None,
            emit_builtin_tool_calls: true,
            max_tool_calls_per_turn: None,
            workspace_root: data_dir.join("w"),
            save_dir: data_dir.join("save"),
            api_retry: Some(DEFAULT_API_RETRY),
            harness_base: None,
            session_timeout: Duration::from_secs(30 * 60),
            parked_timeout: Duration::from_secs(2 * 60 * 60),
            hibernate_after: Duration::from_secs(60),
            max_sessions: 100,
            concurrent_runs: ConcurrentRuns::Wait(Duration::from_secs(30)),
            max_remembered_threads: remembered.max_threads,
            remember_threads_for: remembered.ttl,
            max_attachment_bytes: crate::prompt::DEFAULT_MAX_ATTACHMENT_BYTES,
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
        if self.max_tool_calls_per_turn == Some(0) {
            return bad("max_tool_calls_per_turn must be at least 1 (or unset)".into());
        }
        if self.parked_timeout < self.session_timeout {
            return bad("parked_timeout must not be shorter than session_timeout".into());
        }
        if self.ask_question_interrupts
            && self.builtin_tools.contains(&BuiltinTool::AskQuestion)
            && self.behavior == AgentBehavior::Autonomous
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
