//! Subagent lifecycle events (`SUBAGENT_*`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{EventBase, Payload};
use crate::json::is_none_or_null;

/// `SUBAGENT_STARTED`: a subagent invocation begins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStarted {
    /// Identity of this invocation (unique per run).
    pub subagent_run_id: String,
    /// The subagent's name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The invocation that delegated to this one (started earlier in the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_subagent_run_id: Option<String>,
    /// The tool call that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// The message that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `SUBAGENT_FINISHED`: an invocation's segment of the run ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentFinished {
    /// The active invocation.
    pub subagent_run_id: String,
    /// Its result.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub result: Option<Value>,
    /// Why it ended; absent means success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SubagentOutcome>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// How a subagent's segment ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum SubagentOutcome {
    /// The work completed.
    Success,
    /// Paused on run-level interrupts.
    Suspended {
        /// The interrupts it waits for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupt_ids: Vec<String>,
    },
}

/// `SUBAGENT_ERROR`: an invocation failed; the parent may handle it and the run goes on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentError {
    /// The active invocation.
    pub subagent_run_id: String,
    /// Human-readable error.
    pub message: String,
    /// Machine-readable code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

impl Payload for SubagentStarted {
    fn subagent_run_id(&self) -> Option<&str> {
        Some(&self.subagent_run_id)
    }
}

impl Payload for SubagentFinished {
    fn subagent_run_id(&self) -> Option<&str> {
        Some(&self.subagent_run_id)
    }
}

impl Payload for SubagentError {
    fn subagent_run_id(&self) -> Option<&str> {
        Some(&self.subagent_run_id)
    }
}
