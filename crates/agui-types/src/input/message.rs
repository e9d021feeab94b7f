//! Conversation messages, discriminated by `role`.

use serde::de::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content::Content;
use crate::json::{deserialize_tagged, from_value_located};

/// A message of the conversation (all 7 AG-UI 1.0 roles).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the application developer.
    Developer(InstructionMessage),
    /// System instructions.
    System(InstructionMessage),
    /// A turn of the agent: text and/or tool calls.
    Assistant(AssistantMessage),
    /// A turn of the user: text or multimodal parts.
    User(UserMessage),
    /// A tool's answer to a tool call.
    Tool(ToolMessage),
    /// Client-side structured progress (the client never sends these to the agent).
    Activity(ActivityMessage),
    /// Streamed reasoning, sent back by the client on later turns.
    Reasoning(ReasoningMessage),
}

/// The `role` of a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `developer`.
    Developer,
    /// `system`.
    System,
    /// `assistant`.
    Assistant,
    /// `user`.
    User,
    /// `tool`.
    Tool,
    /// `activity`.
    Activity,
    /// `reasoning`.
    Reasoning,
}

impl Role {
    /// Every role, in wire-documentation order.
    pub const ALL: [Role; 7] = [
        Role::Developer,
        Role::System,
        Role::Assistant,
        Role::User,
        Role::Tool,
        Role::Activity,
        Role::Reasoning,
    ];

    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Developer => "developer",
            Self::System => "system",
            Self::Assistant => "assistant",
            Self::User => "user",
            Self::Tool => "tool",
            Self::Activity => "activity",
            Self::Reasoning => "reasoning",
        }
    }

    /// Parses a wire value.
    pub fn from_wire(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == value)
    }
}

impl Message {
    /// The message id.
    pub fn id(&self) -> &str {
        match self {
            Self::Developer(m) | Self::System(m) => &m.id,
            Self::Assistant(m) => &m.id,
            Self::User(m) => &m.id,
            Self::Tool(m) => &m.id,
            Self::Activity(m) => &m.id,
            Self::Reasoning(m) => &m.id,
        }
    }

    /// The message role.
    pub fn role(&self) -> Role {
        match self {
            Self::Developer(_) => Role::Developer,
            Self::System(_) => Role::System,
            Self::Assistant(_) => Role::Assistant,
            Self::User(_) => Role::User,
            Self::Tool(_) => Role::Tool,
            Self::Activity(_) => Role::Activity,
            Self::Reasoning(_) => Role::Reasoning,
        }
    }

    /// The subagent the message is attributed to.
    pub fn subagent_run_id(&self) -> Option<&str> {
        match self {
            Self::Developer(m) | Self::System(m) => m.subagent_run_id.as_deref(),
            Self::Assistant(m) => m.subagent_run_id.as_deref(),
            Self::User(m) => m.subagent_run_id.as_deref(),
            Self::Tool(m) => m.subagent_run_id.as_deref(),
            Self::Activity(m) => m.subagent_run_id.as_deref(),
            Self::Reasoning(m) => m.subagent_run_id.as_deref(),
        }
    }

    /// A plain-text user message.
    pub fn user(id: impl Into<String>, content: impl Into<Content>) -> Self {
        Self::User(UserMessage {
            id: id.into(),
            content: content.into(),
            ..UserMessage::default()
        })
    }

    /// A plain-text assistant message.
    pub fn assistant(id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Assistant(AssistantMessage {
            id: id.into(),
            content: Some(content.into()),
            ..AssistantMessage::default()
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const ROLES: &[&str] = &[
            "developer",
            "system",
            "assistant",
            "user",
            "tool",
            "activity",
            "reasoning",
        ];
        deserialize_tagged(deserializer, "role", ROLES, |role, value| match role {
            "developer" => from_value_located(value).map(Self::Developer),
            "system" => from_value_located(value).map(Self::System),
            "assistant" => from_value_located(value).map(Self::Assistant),
            "user" => from_value_located(value).map(Self::User),
            "tool" => from_value_located(value).map(Self::Tool),
            "activity" => from_value_located(value).map(Self::Activity),
            _ => from_value_located(value).map(Self::Reasoning),
        })
    }
}

/// A `developer` or `system` message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstructionMessage {
    /// Message id.
    pub id: String,
    /// The instructions.
    pub content: String,
    /// Author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// An `assistant` message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Message id.
    pub id: String,
    /// The text, if any (a turn may be tool calls only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Tool calls made in this turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A `user` message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// Message id.
    pub id: String,
    /// Text or content parts.
    pub content: Content,
    /// Author name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A `tool` message: the answer to one tool call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMessage {
    /// Message id.
    pub id: String,
    /// The tool output: text or content parts.
    pub content: Content,
    /// The call this answers.
    pub tool_call_id: String,
    /// An error the tool reported (alongside `content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// An `activity` message (structured progress).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityMessage {
    /// Message id.
    pub id: String,
    /// Open kind string.
    pub activity_type: String,
    /// The activity's content.
    pub content: Map<String, Value>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// A `reasoning` message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningMessage {
    /// Message id.
    pub id: String,
    /// The reasoning text.
    pub content: String,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
}

/// The `type` of a [`ToolCall`]: always `"function"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallType {
    /// `"function"`.
    #[default]
    Function,
}

/// A tool call recorded in an assistant message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Call id.
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: ToolCallType,
    /// What was called.
    pub function: FunctionCall,
    /// Opaque provider artefact to return on later turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
    /// What `encrypted_value` holds (AG-UI 1.1; a stream declared as 1.0 omits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value_type: Option<String>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl ToolCall {
    /// A function call with its JSON argument text.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: ToolCallType::Function,
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
            encrypted_value: None,
            encrypted_value_type: None,
            metadata: None,
        }
    }
}

/// The function a [`ToolCall`] invokes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// The arguments as JSON text (not parsed by the protocol).
    pub arguments: String,
}
