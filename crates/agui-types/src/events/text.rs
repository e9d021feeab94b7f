//! Text message (`TEXT_MESSAGE_*`) and tool call (`TOOL_CALL_*`) events.

use serde::{Deserialize, Serialize};

use super::{EventBase, attributable};
use crate::input::{Content, Role};

/// Roles a streamed text message may take (never `tool`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextMessageRole {
    /// Instructions from the application developer.
    Developer,
    /// System instructions.
    System,
    /// The agent (what an absent role means).
    #[default]
    Assistant,
    /// The user.
    User,
}

impl TextMessageRole {
    /// Every text message role.
    pub const ALL: [TextMessageRole; 4] =
        [Self::Developer, Self::System, Self::Assistant, Self::User];

    /// The message [`Role`] it is.
    pub const fn role(self) -> Role {
        match self {
            Self::Developer => Role::Developer,
            Self::System => Role::System,
            Self::Assistant => Role::Assistant,
            Self::User => Role::User,
        }
    }

    /// The wire value (its [`Role`]'s).
    pub const fn as_str(self) -> &'static str {
        self.role().as_str()
    }

    /// Parses a wire value.
    pub fn from_wire(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == value)
    }
}

/// `TEXT_MESSAGE_START`: opens a streamed text message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageStart {
    /// Id of the new message; mint a fresh one per message.
    pub message_id: String,
    /// The message's role; absent means assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<TextMessageRole>,
    /// Name of the author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TEXT_MESSAGE_CONTENT`: appends a fragment (may be empty) to an open text message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageContent {
    /// The open message.
    pub message_id: String,
    /// The text fragment.
    pub delta: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TEXT_MESSAGE_END`: closes a text message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageEnd {
    /// The open message.
    pub message_id: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TEXT_MESSAGE_CHUNK`: start/content/end shorthand; the first chunk of a message must carry
/// `message_id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMessageChunk {
    /// The message; opens a new one when it differs from the open chunked message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Role of a new message (default assistant); a continuation may only repeat it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<TextMessageRole>,
    /// Text fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// Author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Subagent attribution (selects the chunk lane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TOOL_CALL_START`: opens a tool call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallStart {
    /// Id of the new call; mint a fresh one per call.
    pub tool_call_id: String,
    /// Name of the tool.
    pub tool_call_name: String,
    /// The assistant message that holds the call (keeps parallel calls in one message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TOOL_CALL_ARGS`: a fragment of the call's JSON argument text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallArgs {
    /// The open call.
    pub tool_call_id: String,
    /// Argument text fragment (may be empty).
    pub delta: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TOOL_CALL_END`: the call's arguments are complete.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEnd {
    /// The open call.
    pub tool_call_id: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `TOOL_CALL_CHUNK`: start/args/end shorthand; the first chunk of a call needs both
/// `tool_call_id` and `tool_call_name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallChunk {
    /// The call; opens a new one when it differs from the open chunked call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool name (required on the first chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_name: Option<String>,
    /// The assistant message that holds the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_message_id: Option<String>,
    /// Argument text fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// Subagent attribution (selects the chunk lane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// The only role a `TOOL_CALL_RESULT` may declare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// `"tool"`.
    #[default]
    Tool,
}

/// `TOOL_CALL_RESULT`: a tool's output; mints a `tool` message with id `message_id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallResult {
    /// Id of the new tool message.
    pub message_id: String,
    /// The call this answers (may come from an earlier, interrupted run).
    pub tool_call_id: String,
    /// The output: text (structured output as JSON text) or content parts.
    pub content: Content,
    /// `"tool"` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<ToolRole>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

attributable!(
    TextMessageStart,
    TextMessageContent,
    TextMessageEnd,
    TextMessageChunk,
    ToolCallStart,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallChunk,
    ToolCallResult,
);
