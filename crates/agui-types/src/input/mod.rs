//! The run request (`RunAgentInput`) and the conversation types it carries.

mod content;
mod message;
mod validate;

pub use content::{BinaryPart, Content, ContentPart, MediaPart, PartSource, TextPart};
pub use message::{
    ActivityMessage, AssistantMessage, FunctionCall, InstructionMessage, Message, ReasoningMessage,
    Role, ToolCall, ToolCallType, ToolMessage, UserMessage,
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::json::{describe, is_none_or_null, locate, strip_position};

/// The body of an AG-UI run request, as `@ag-ui/client` 1.0 `HttpAgent` posts it.
///
/// Unknown fields are ignored (the schema is open for forward compatibility). Use
/// [`RunAgentInput::from_json`] to parse and validate a request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// Conversation id; echo it in `RUN_STARTED`/`RUN_FINISHED`.
    pub thread_id: String,
    /// Run id chosen by the client; echo it.
    pub run_id: String,
    /// The run that spawned this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The consumer's protocol version (`"1.0"` from a 1.0 client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The client's shared state at run start; `null` reads as absent.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub state: Option<Value>,
    /// The whole conversation so far, in order.
    pub messages: Vec<Message>,
    /// Client-provided ("frontend") tools the agent may call (absent ≡ empty).
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Ambient information (absent ≡ empty).
    #[serde(default)]
    pub context: Vec<Context>,
    /// Application pass-through.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub forwarded_props: Option<Value>,
    /// Answers to the previous run's interrupts; must cover all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resume: Vec<ResumeEntry>,
}

/// A tool the client offers the agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Tool name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments (opaque to the protocol).
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub parameters: Option<Value>,
    /// Extra information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A named piece of ambient information for the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// What the value is.
    pub description: String,
    /// The value.
    pub value: String,
}

/// An answer to one interrupt of the previous run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// Resolved (with a payload) or cancelled.
    pub status: ResumeStatus,
    /// The answer, ideally matching the interrupt's `responseSchema`.
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub payload: Option<Value>,
    /// Envelope data (signatures, routing), not the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// [`ResumeEntry::status`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// Answered; see `payload`.
    #[default]
    Resolved,
    /// Abandoned.
    Cancelled,
}

impl ResumeStatus {
    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Resolved => "resolved",
            Self::Cancelled => "cancelled",
        }
    }
}

impl RunAgentInput {
    /// Parses and validates a request body.
    ///
    /// Errors are [`Error::Invalid`] with the JSON path of the offending value and the
    /// reason, e.g. `messages[1].content[0].source.mimeType: required field is missing` or
    /// `messages[3].id: duplicate message id "m1" (also messages[0])`.
    pub fn from_json(body: &[u8]) -> Result<Self> {
        // Serde would also read a struct from a JSON array; the protocol only has objects.
        if body
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b != b'{')
        {
            let value: Value =
                serde_json::from_slice(body).map_err(|e| Self::error(".".into(), &e))?;
            return Self::from_value(value);
        }
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        let input: Self = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|error| Self::error(error.path().to_string(), error.inner()))?;
        deserializer
            .end()
            .map_err(|error| Self::error(".".to_owned(), &error))?;
        input.validate()?;
        Ok(input)
    }

    /// Converts an already-parsed JSON value and validates it (see [`Self::from_json`]).
    pub fn from_value(value: Value) -> Result<Self> {
        if !value.is_object() {
            let reason = format!("expected a JSON object, found {}", describe(&value));
            return Err(Error::invalid("RunAgentInput", ".", reason));
        }
        let input: Self = serde_path_to_error::deserialize(value)
            .map_err(|error| Self::error(error.path().to_string(), error.inner()))?;
        input.validate()?;
        Ok(input)
    }

    fn error(path: String, error: &serde_json::Error) -> Error {
        if error.is_syntax() || error.is_eof() {
            return Error::invalid("RunAgentInput", ".", format!("malformed JSON: {error}"));
        }
        let (path, reason) = locate(&path, &strip_position(error));
        Error::invalid("RunAgentInput", path, reason)
    }

    /// Checks the rules the JSON shape cannot express: non-empty `threadId`/`runId`, unique
    /// non-empty message ids, tool names, tool call ids and resumed interrupt ids.
    pub fn validate(&self) -> Result<()> {
        validate::check(self)
            .map_err(|(path, reason)| Error::invalid("RunAgentInput", path, reason))
    }

    /// True when any user or tool message still carries a retired 0.x `binary` part.
    pub fn has_legacy_binary_parts(&self) -> bool {
        self.messages.iter().any(|message| {
            let content = match message {
                Message::User(m) => &m.content,
                Message::Tool(m) => &m.content,
                _ => return false,
            };
            matches!(content, Content::Parts(parts) if parts.iter().any(|p| matches!(p, ContentPart::Binary(_))))
        })
    }
}
