//! Constructors for the events a server emits most, so callers need not spell out every
//! optional field.

use serde_json::Value;

use super::*;
use crate::input::{Content, Message};

impl Event {
    /// `RUN_STARTED` declaring protocol version 1.0.
    pub fn run_started(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        RunStarted::new(thread_id, run_id).into()
    }

    /// `RUN_FINISHED` with no outcome (success).
    pub fn run_finished(thread_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        RunFinished::new(thread_id, run_id).into()
    }

    /// `RUN_FINISHED` with an explicit outcome.
    pub fn run_finished_with(
        thread_id: impl Into<String>,
        run_id: impl Into<String>,
        outcome: RunOutcome,
    ) -> Self {
        RunFinished::new(thread_id, run_id)
            .with_outcome(outcome)
            .into()
    }

    /// `RUN_FINISHED` pausing the run on `interrupts` (the protocol requires at least one).
    pub fn run_interrupted(
        thread_id: impl Into<String>,
        run_id: impl Into<String>,
        interrupts: Vec<Interrupt>,
    ) -> Self {
        Self::run_finished_with(thread_id, run_id, RunOutcome::Interrupt { interrupts })
    }

    /// `RUN_ERROR` with an optional machine-readable code.
    pub fn run_error(message: impl Into<String>, code: Option<String>) -> Self {
        RunError {
            message: message.into(),
            code,
            ..RunError::default()
        }
        .into()
    }

    /// `STEP_STARTED`.
    pub fn step_started(step_name: impl Into<String>) -> Self {
        StepStarted {
            step_name: step_name.into(),
            ..StepStarted::default()
        }
        .into()
    }

    /// `STEP_FINISHED`.
    pub fn step_finished(step_name: impl Into<String>) -> Self {
        StepFinished {
            step_name: step_name.into(),
            ..StepFinished::default()
        }
        .into()
    }

    /// `TEXT_MESSAGE_START` of an assistant message (role stated explicitly).
    pub fn text_message_start(message_id: impl Into<String>) -> Self {
        TextMessageStart {
            message_id: message_id.into(),
            role: Some(TextMessageRole::Assistant),
            ..TextMessageStart::default()
        }
        .into()
    }

    /// `TEXT_MESSAGE_CONTENT`.
    pub fn text_message_content(message_id: impl Into<String>, delta: impl Into<String>) -> Self {
        TextMessageContent {
            message_id: message_id.into(),
            delta: delta.into(),
            ..TextMessageContent::default()
        }
        .into()
    }

    /// `TEXT_MESSAGE_END`.
    pub fn text_message_end(message_id: impl Into<String>) -> Self {
        TextMessageEnd {
            message_id: message_id.into(),
            ..TextMessageEnd::default()
        }
        .into()
    }

    /// `TOOL_CALL_START`, attached to the assistant message `parent_message_id` if given.
    pub fn tool_call_start(
        tool_call_id: impl Into<String>,
        tool_call_name: impl Into<String>,
        parent_message_id: Option<String>,
    ) -> Self {
        ToolCallStart {
            tool_call_id: tool_call_id.into(),
            tool_call_name: tool_call_name.into(),
            parent_message_id,
            ..ToolCallStart::default()
        }
        .into()
    }

    /// `TOOL_CALL_ARGS`.
    pub fn tool_call_args(tool_call_id: impl Into<String>, delta: impl Into<String>) -> Self {
        ToolCallArgs {
            tool_call_id: tool_call_id.into(),
            delta: delta.into(),
            ..ToolCallArgs::default()
        }
        .into()
    }

    /// `TOOL_CALL_END`.
    pub fn tool_call_end(tool_call_id: impl Into<String>) -> Self {
        ToolCallEnd {
            tool_call_id: tool_call_id.into(),
            ..ToolCallEnd::default()
        }
        .into()
    }

    /// `TOOL_CALL_RESULT` with `role: "tool"`, minting the tool message `message_id`.
    pub fn tool_call_result(
        message_id: impl Into<String>,
        tool_call_id: impl Into<String>,
        content: impl Into<Content>,
    ) -> Self {
        ToolCallResult {
            message_id: message_id.into(),
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            role: Some(ToolRole::Tool),
            ..ToolCallResult::default()
        }
        .into()
    }

    /// `REASONING_START` (opens a span).
    pub fn reasoning_start(message_id: impl Into<String>) -> Self {
        ReasoningStart {
            message_id: message_id.into(),
            ..ReasoningStart::default()
        }
        .into()
    }

    /// `REASONING_MESSAGE_START` (`role: "reasoning"`).
    pub fn reasoning_message_start(message_id: impl Into<String>) -> Self {
        ReasoningMessageStart {
            message_id: message_id.into(),
            ..ReasoningMessageStart::default()
        }
        .into()
    }

    /// `REASONING_MESSAGE_CONTENT`.
    pub fn reasoning_message_content(
        message_id: impl Into<String>,
        delta: impl Into<String>,
    ) -> Self {
        ReasoningMessageContent {
            message_id: message_id.into(),
            delta: delta.into(),
            ..ReasoningMessageContent::default()
        }
        .into()
    }

    /// `REASONING_MESSAGE_END`.
    pub fn reasoning_message_end(message_id: impl Into<String>) -> Self {
        ReasoningMessageEnd {
            message_id: message_id.into(),
            ..ReasoningMessageEnd::default()
        }
        .into()
    }

    /// `REASONING_END` (closes a span).
    pub fn reasoning_end(message_id: impl Into<String>) -> Self {
        ReasoningEnd {
            message_id: message_id.into(),
            ..ReasoningEnd::default()
        }
        .into()
    }

    /// `REASONING_ENCRYPTED_VALUE`.
    pub fn reasoning_encrypted_value(
        subtype: EncryptedValueSubtype,
        entity_id: impl Into<String>,
        encrypted_value: impl Into<String>,
    ) -> Self {
        ReasoningEncryptedValue {
            subtype,
            entity_id: entity_id.into(),
            encrypted_value: encrypted_value.into(),
            ..ReasoningEncryptedValue::default()
        }
        .into()
    }

    /// `STATE_SNAPSHOT`.
    pub fn state_snapshot(snapshot: Value) -> Self {
        StateSnapshot {
            snapshot,
            ..StateSnapshot::default()
        }
        .into()
    }

    /// `STATE_DELTA`.
    pub fn state_delta(delta: Vec<PatchOperation>) -> Self {
        StateDelta {
            delta,
            ..StateDelta::default()
        }
        .into()
    }

    /// `MESSAGES_SNAPSHOT`.
    pub fn messages_snapshot(messages: Vec<Message>) -> Self {
        MessagesSnapshot {
            messages,
            ..MessagesSnapshot::default()
        }
        .into()
    }

    /// `CUSTOM`.
    pub fn custom(name: impl Into<String>, value: Value) -> Self {
        Custom {
            name: name.into(),
            value,
            ..Custom::default()
        }
        .into()
    }

    /// `RAW`.
    pub fn raw(event: Value, source: Option<String>) -> Self {
        Raw {
            event,
            source,
            ..Raw::default()
        }
        .into()
    }
}
