//! Run lifecycle (`RUN_*`) and step (`STEP_*`) events.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EventBase, Payload, attributable};
use crate::input::RunAgentInput;
use crate::json::{is_none_or_null, non_empty};

/// `RUN_STARTED`: must be the first event of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    /// The conversation id, echoed from the input.
    pub thread_id: String,
    /// The run id, echoed from the input.
    pub run_id: String,
    /// The run that spawned this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The protocol version the stream speaks (the producer's own, see [`crate::negotiate`]), not
    /// an echo of the input's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The input this run works on; its messages are merged into the client's history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Box<RunAgentInput>>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

impl RunStarted {
    /// A `RUN_STARTED` declaring [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION).
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            protocol_version: Some(crate::PROTOCOL_VERSION.to_owned()),
            ..Self::default()
        }
    }
}

/// `RUN_FINISHED`: ends a run that did not fail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFinished {
    /// The conversation id.
    pub thread_id: String,
    /// The run id.
    pub run_id: String,
    /// The run's result (surfaced to the app only for success outcomes).
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub result: Option<Value>,
    /// How the run ended; absent means success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    /// Token usage, one entry per provider/model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<TokenUsage>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

impl RunFinished {
    /// A `RUN_FINISHED` without outcome (success).
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            ..Self::default()
        }
    }

    /// Sets the outcome.
    pub fn with_outcome(mut self, outcome: RunOutcome) -> Self {
        self.outcome = Some(outcome);
        self
    }

    /// Sets the result.
    pub fn with_result(mut self, result: Value) -> Self {
        self.result = Some(result);
        self
    }

    /// Sets the token usage.
    pub fn with_usage(mut self, usage: Vec<TokenUsage>) -> Self {
        self.usage = usage;
        self
    }
}

/// How a run ended (`RUN_FINISHED.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum RunOutcome {
    /// The run completed.
    Success {
        /// Tool calls this run started but did not answer (frontend tools the app must answer
        /// in the next input). Empty means "derive from the stream".
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    /// The run paused for outside input; the next run resumes with `resume` entries.
    Interrupt {
        /// The open interrupts (at least one).
        #[serde(deserialize_with = "non_empty")]
        interrupts: Vec<Interrupt>,
    },
    /// Stopped by whoever ran it; not a failure (the next run is an ordinary run).
    Cancelled,
}

impl RunOutcome {
    /// `{"type":"success"}`.
    pub fn success() -> Self {
        Self::Success {
            pending_tool_call_ids: Vec::new(),
        }
    }

    /// Success, naming the frontend tool calls the client must answer.
    pub fn success_pending(pending_tool_call_ids: Vec<String>) -> Self {
        Self::Success {
            pending_tool_call_ids,
        }
    }
}

/// A request for outside input that pauses a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// Id the resume entry refers to.
    pub id: String,
    /// Why: `tool_call`, `input_required`, `confirmation`, or a namespaced custom reason.
    pub reason: String,
    /// Text for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call awaiting approval (set for `tool_call` interrupts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// JSON Schema of the expected answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Map<String, Value>>,
    /// Expiry, ISO 8601 by convention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The subagent that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

impl Interrupt {
    /// Core reason: a tool call awaits approval (set `tool_call_id`).
    pub const REASON_TOOL_CALL: &'static str = "tool_call";
    /// Core reason: the agent needs information (set `response_schema`).
    pub const REASON_INPUT_REQUIRED: &'static str = "input_required";
    /// Core reason: the agent asks for a yes/no confirmation.
    pub const REASON_CONFIRMATION: &'static str = "confirmation";

    /// An interrupt with the given id and reason.
    pub fn new(id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            reason: reason.into(),
            ..Self::default()
        }
    }
}

/// Token usage of one provider/model (all counts optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Provider id, e.g. `google`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Total tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Reasoning tokens (part of output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Input tokens served from cache (part of input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to cache (part of input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
}

/// `RUN_ERROR`: ends a failed run; allowed at any point, needs nothing closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunError {
    /// Human-readable error.
    pub message: String,
    /// Machine-readable code (open vocabulary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Token usage up to the failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<TokenUsage>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `STEP_STARTED`: opens a named step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStarted {
    /// Step name, unique among the owner's open steps.
    pub step_name: String,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `STEP_FINISHED`: closes a named step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepFinished {
    /// Name of the open step.
    pub step_name: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

attributable!(StepStarted, StepFinished);

// Run-scoped events carry no attribution.
impl Payload for RunStarted {
    fn subagent_run_id(&self) -> Option<&str> {
        None
    }
}

impl Payload for RunFinished {
    fn subagent_run_id(&self) -> Option<&str> {
        None
    }
}

impl Payload for RunError {
    fn subagent_run_id(&self) -> Option<&str> {
        None
    }
}
