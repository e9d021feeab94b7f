//! What the harness asks the host, and the trait an embedder implements to answer.
//!
//! The harness imposes no timeout on any of these (a tool call was watched for 11 minutes), and
//! neither does this crate: a callback may wait for a human for hours. Each request runs in its
//! own task, so several can be in flight (e.g. two tool calls of parallel subagents).

use async_trait::async_trait;
use harness_proto::lh::{self, LifecycleHook};
use serde_json::{Map, Value};

/// Where a callback comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// The conversation (cascade) id.
    pub conversation_id: String,
    /// The trajectory that asked (the conversation id for the root agent).
    pub trajectory_id: String,
}

/// The model called a host ("custom") tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// Call id; the harness correlates the answer with it.
    pub id: String,
    /// Tool name as declared in the config.
    pub name: String,
    /// Arguments (the harness strips its own `toolSummary`/`toolAction`).
    pub arguments: Map<String, Value>,
}

/// Media returned alongside a tool result (forwarded to the model as inline data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// Optional description.
    pub description: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// The answer to a [`ToolCallRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// Success: a JSON object for the model, plus optional media.
    Ok {
        /// The result object (non-objects are wrapped as `{"result": value}` by [`ToolOutcome::json`]).
        response: Map<String, Value>,
        /// Supplemental media.
        media: Vec<Media>,
    },
    /// Failure: the model sees `Tool <name> failed with error message: <text>`.
    Err(String),
}

impl ToolOutcome {
    /// A success with `value`; anything but an object is wrapped as `{"result": value}`, which
    /// is what the harness expects (and what the Python SDK sends).
    pub fn json(value: Value) -> Self {
        let response = match value {
            Value::Object(map) => map,
            other => Map::from_iter([("result".to_owned(), other)]),
        };
        Self::Ok {
            response,
            media: Vec::new(),
        }
    }

    /// A failure with a message for the model.
    pub fn error(message: impl Into<String>) -> Self {
        Self::Err(message.into())
    }
}

/// A lifecycle hook request (only the hooks enabled in the config are ever sent).
#[derive(Debug, Clone, PartialEq)]
pub enum HookRequest {
    /// Before each turn; may deny it.
    PreTurn(lh::PreTurnArgs),
    /// Before every tool execution (built-in and custom); may allow, deny or modify arguments.
    /// Correlate with the tool's step by `call_id`, not by `step_index`.
    PreTool(lh::PreToolArgs),
    /// After a tool finished.
    PostTool(lh::PostToolArgs),
    /// After a tool failed; may replace the error text the model sees.
    OnToolError(lh::OnToolErrorArgs),
    /// When the root agent would stop; may make it continue.
    Stop(lh::StopArgs),
    /// After the turn.
    PostTurn(lh::PostTurnArgs),
    /// On context compaction.
    OnCompaction(lh::OnCompactionArgs),
    /// On the first user input of a connection.
    OnSessionStart,
    /// After a session end request.
    OnSessionEnd,
    /// A hook type this version does not know.
    Other(LifecycleHook),
}

/// The answer to a [`HookRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum HookResponse {
    /// Acknowledge (the answer for notification hooks).
    Empty,
    /// PreTurn / PreTool: go ahead; for PreTool optionally with a full replacement argument set.
    Allow {
        /// New arguments for the tool (PreTool only).
        modified_args: Option<Map<String, Value>>,
    },
    /// PreTurn / PreTool: refuse, with the reason the model (or turn state) shows.
    Deny(String),
    /// OnToolError: replace the error text the model sees.
    ToolError(String),
    /// Stop: let the agent stop.
    AllowStop,
    /// Stop: keep going; the reason is injected as a system message.
    Continue(String),
    /// The hook failed; reported to the harness as an error.
    Error(String),
}

/// A dynamic policy rule matched a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRequest {
    /// The rule (`rule_<index in the rule list>` unless the rule carries its own id; the config
    /// builder assigns these to dynamic rules).
    pub rule_id: String,
    /// The call being evaluated.
    pub tool: lh::PreToolArgs,
    /// Optional reason (auto-policy).
    pub reason: String,
}

/// The answer to a [`PolicyRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOutcome {
    /// Run the tool.
    Allow,
    /// Refuse; the text reaches the model.
    Deny(String),
    /// This rule does not apply; keep evaluating.
    NoMatch,
}

/// One `ask_question` question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question text.
    pub text: String,
    /// The choices offered.
    pub choices: Vec<String>,
    /// Whether several choices may be selected.
    pub multi_select: bool,
}

/// The agent asked the user questions (`ask_question`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionRequest {
    /// Trajectory of the waiting step.
    pub trajectory_id: String,
    /// Index of the waiting step.
    pub step_index: u32,
    /// The questions, in order.
    pub questions: Vec<Question>,
}

/// One answer, in question order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Skipped (the model sees "User Skipped").
    Unanswered,
    /// Chosen options (0-based indices into `choices`) and/or a free-form answer.
    Choice {
        /// Selected choice indices.
        selected: Vec<u32>,
        /// Free-form text.
        freeform: Option<String>,
    },
}

/// The answer to a [`QuestionRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionAnswer {
    /// One answer per question (missing ones are sent as unanswered).
    Answers(Vec<Answer>),
    /// The user cancelled: the step fails with "Questions cancelled." and the turn goes on.
    Cancelled,
}

/// Answers the harness's requests. Every method has a default, so an embedder implements only
/// what it uses; the defaults never leave the harness waiting.
#[async_trait]
pub trait Callbacks: Send + Sync + 'static {
    /// A host tool call. Default: an error saying no handler exists.
    async fn tool_call(&self, ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        let _ = ctx;
        ToolOutcome::error(format!(
            "this host has no implementation for the tool `{}`",
            call.name
        ))
    }

    /// A lifecycle hook. Default: allow / acknowledge.
    async fn hook(&self, ctx: &CallContext, request: HookRequest) -> HookResponse {
        let _ = ctx;
        match request {
            HookRequest::PreTurn(_) | HookRequest::PreTool(_) => HookResponse::Allow {
                modified_args: None,
            },
            HookRequest::Stop(_) => HookResponse::AllowStop,
            _ => HookResponse::Empty,
        }
    }

    /// A dynamic policy decision. Default: the rule does not apply.
    async fn policy(&self, ctx: &CallContext, request: PolicyRequest) -> PolicyOutcome {
        let _ = (ctx, request);
        PolicyOutcome::NoMatch
    }

    /// Questions for the user. Default: every question unanswered (what the Python SDK does).
    async fn question(&self, ctx: &CallContext, request: QuestionRequest) -> QuestionAnswer {
        let _ = ctx;
        QuestionAnswer::Answers(vec![Answer::Unanswered; request.questions.len()])
    }

    /// A tool confirmation request. Default: accept (the Python SDK auto-accepts; 0.1.22 was
    /// never seen sending one).
    async fn tool_confirmation(
        &self,
        ctx: &CallContext,
        trajectory_id: &str,
        step_index: u32,
    ) -> bool {
        let _ = (ctx, trajectory_id, step_index);
        true
    }
}

/// Callbacks that use every default.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultCallbacks;

impl Callbacks for DefaultCallbacks {}
