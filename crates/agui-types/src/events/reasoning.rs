//! Reasoning events (`REASONING_*`).
//!
//! A span (`REASONING_START`/`REASONING_END`) may hold several reasoning messages
//! (`REASONING_MESSAGE_*`); spans and messages are tracked separately and may share an id.

use serde::{Deserialize, Serialize};

use super::{EventBase, attributable};

/// The role of a reasoning message: always `"reasoning"`, which the client requires on
/// `REASONING_MESSAGE_START`. Tolerated when missing on input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// `"reasoning"`.
    #[default]
    Reasoning,
}

/// `REASONING_START`: opens a reasoning span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningStart {
    /// Span id.
    pub message_id: String,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `REASONING_MESSAGE_START`: opens a reasoning message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageStart {
    /// Id of the new reasoning message.
    pub message_id: String,
    /// Always `"reasoning"`.
    #[serde(default)]
    pub role: ReasoningRole,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `REASONING_MESSAGE_CONTENT`: appends to an open reasoning message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageContent {
    /// The open reasoning message.
    pub message_id: String,
    /// Text fragment.
    pub delta: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `REASONING_MESSAGE_END`: closes a reasoning message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageEnd {
    /// The open reasoning message.
    pub message_id: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `REASONING_MESSAGE_CHUNK`: start/content/end shorthand; the first chunk needs `message_id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessageChunk {
    /// The reasoning message; opens a new one when it differs from the open one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Text fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// Subagent attribution (selects the chunk lane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `REASONING_END`: closes a reasoning span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEnd {
    /// The open span.
    pub message_id: String,
    /// Subagent attribution (must match the opener's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// What a `REASONING_ENCRYPTED_VALUE` attaches to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EncryptedValueSubtype {
    /// A tool call (`"tool-call"`).
    #[serde(rename = "tool-call")]
    ToolCall,
    /// A text or reasoning message (`"message"`).
    #[default]
    #[serde(rename = "message")]
    Message,
}

impl EncryptedValueSubtype {
    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ToolCall => "tool-call",
            Self::Message => "message",
        }
    }

    /// Parses a wire value.
    pub fn from_wire(value: &str) -> Option<Self> {
        match value {
            "tool-call" => Some(Self::ToolCall),
            "message" => Some(Self::Message),
            _ => None,
        }
    }
}

/// `REASONING_ENCRYPTED_VALUE`: an opaque provider artefact the client stores on the entity
/// and sends back as `encryptedValue`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningEncryptedValue {
    /// Kind of entity `entity_id` names.
    pub subtype: EncryptedValueSubtype,
    /// The message or tool call id.
    pub entity_id: String,
    /// The opaque value.
    pub encrypted_value: String,
    /// What the value holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

attributable!(
    ReasoningStart,
    ReasoningMessageStart,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageChunk,
    ReasoningEnd,
    ReasoningEncryptedValue,
);
