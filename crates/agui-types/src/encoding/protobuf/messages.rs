//! Protobuf mapping of the types events embed: messages, run input, interrupts, token usage
//! and JSON Patch operations.

use serde_json::{Map, Value};

use super::bad;
use super::content::{content_from_pb, content_to_pb};
use super::value::{
    from_pb_struct, object_from_pb, object_to_pb, opt_from_pb, opt_to_pb, req_from_pb, to_pb,
    to_pb_struct,
};
use crate::error::Result;
use crate::events::{Interrupt, PatchOperation, TokenUsage};
use crate::input::{
    ActivityMessage, AssistantMessage, Context, FunctionCall, InstructionMessage, Message,
    ReasoningMessage, ResumeEntry, ResumeStatus, Role, RunAgentInput, Tool, ToolCall, ToolCallType,
    ToolMessage, UserMessage,
};
use crate::proto as pb;

fn struct_opt(map: &Option<Map<String, Value>>) -> Option<prost_types::Struct> {
    map.as_ref().map(to_pb_struct)
}

fn map_opt(value: Option<prost_types::Struct>) -> Option<Map<String, Value>> {
    value.map(from_pb_struct)
}

// ----------------------------------------------------------------------------- messages

fn tool_call_to_pb(call: &ToolCall) -> pb::ToolCall {
    pb::ToolCall {
        id: call.id.clone(),
        r#type: "function".to_owned(),
        function: Some(pb::tool_call::Function {
            name: call.function.name.clone(),
            arguments: call.function.arguments.clone(),
        }),
        metadata: struct_opt(&call.metadata),
        encrypted_value: call.encrypted_value.clone(),
    }
}

fn tool_call_from_pb(call: pb::ToolCall) -> Result<ToolCall> {
    if call.r#type != "function" {
        return Err(bad(format!(
            "tool call type {:?} is not \"function\"",
            call.r#type
        )));
    }
    let function = call.function.unwrap_or_default();
    Ok(ToolCall {
        id: call.id,
        kind: ToolCallType::Function,
        function: FunctionCall {
            name: function.name,
            arguments: function.arguments,
        },
        encrypted_value: call.encrypted_value,
        // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
        encrypted_value_type: None,
        metadata: map_opt(call.metadata),
    })
}

pub(super) fn message_to_pb(message: &Message) -> pb::Message {
    let mut out = pb::Message {
        id: message.id().to_owned(),
        role: message.role().as_str().to_owned(),
        subagent_run_id: message.subagent_run_id().map(str::to_owned),
        ..pb::Message::default()
    };
    match message {
        Message::Developer(m) | Message::System(m) => {
            out.content = Some(m.content.clone());
            out.name = m.name.clone();
            out.encrypted_value = m.encrypted_value.clone();
            out.metadata = struct_opt(&m.metadata);
        }
        Message::Assistant(m) => {
            out.content = m.content.clone();
            out.tool_calls = m.tool_calls.iter().map(tool_call_to_pb).collect();
            out.name = m.name.clone();
            out.encrypted_value = m.encrypted_value.clone();
            out.metadata = struct_opt(&m.metadata);
        }
        Message::User(m) => {
            (out.content, out.content_parts) = content_to_pb(&m.content);
            out.name = m.name.clone();
            out.encrypted_value = m.encrypted_value.clone();
            out.metadata = struct_opt(&m.metadata);
        }
        Message::Tool(m) => {
            (out.content, out.content_parts) = content_to_pb(&m.content);
            out.tool_call_id = Some(m.tool_call_id.clone());
            out.error = m.error.clone();
            out.encrypted_value = m.encrypted_value.clone();
            out.metadata = struct_opt(&m.metadata);
        }
        Message::Activity(m) => {
            out.activity_type = Some(m.activity_type.clone());
            out.activity_content = Some(to_pb_struct(&m.content));
            out.metadata = struct_opt(&m.metadata);
        }
        Message::Reasoning(m) => {
            out.content = Some(m.content.clone());
            out.encrypted_value = m.encrypted_value.clone();
            out.metadata = struct_opt(&m.metadata);
        }
    }
    out
}

pub(super) fn message_from_pb(m: pb::Message) -> Result<Message> {
    let role = Role::from_wire(&m.role)
        .ok_or_else(|| bad(format!("unknown message role {:?}", m.role)))?;
    let uses_parts = matches!(role, Role::User | Role::Tool);
    if !uses_parts && !m.content_parts.is_empty() {
        return Err(bad(format!("a {} message carries content parts", m.role)));
    }
    if role != Role::Activity && m.activity_content.is_some() {
        return Err(bad(format!(
            "a {} message carries activity content",
            m.role
        )));
    }
    let required = |content: Option<String>| {
        content.ok_or_else(|| bad(format!("{} message {:?} has no content", m.role, m.id)))
    };
    let metadata = map_opt(m.metadata);
    Ok(match role {
        Role::Developer | Role::System => {
            let inner = InstructionMessage {
                content: required(m.content)?,
                id: m.id,
                name: m.name,
                encrypted_value: m.encrypted_value,
                // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
                encrypted_value_type: None,
                metadata,
                subagent_run_id: m.subagent_run_id,
            };
            if role == Role::Developer {
                Message::Developer(inner)
            } else {
                Message::System(inner)
            }
        }
        Role::Assistant => Message::Assistant(AssistantMessage {
            id: m.id,
            content: m.content,
            tool_calls: m
                .tool_calls
                .into_iter()
                .map(tool_call_from_pb)
                .collect::<Result<_>>()?,
            name: m.name,
            encrypted_value: m.encrypted_value,
            // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
            encrypted_value_type: None,
            metadata,
            subagent_run_id: m.subagent_run_id,
        }),
        Role::User => Message::User(UserMessage {
            content: content_from_pb(m.content, m.content_parts)?,
            id: m.id,
            name: m.name,
            encrypted_value: m.encrypted_value,
            // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
            encrypted_value_type: None,
            metadata,
            subagent_run_id: m.subagent_run_id,
        }),
        Role::Tool => Message::Tool(ToolMessage {
            content: content_from_pb(m.content, m.content_parts)?,
            tool_call_id: m.tool_call_id.unwrap_or_default(),
            id: m.id,
            error: m.error,
            encrypted_value: m.encrypted_value,
            // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
            encrypted_value_type: None,
            metadata,
            subagent_run_id: m.subagent_run_id,
        }),
        Role::Activity => {
            if m.content.is_some() {
                return Err(bad("activity content cannot ride with string content"));
            }
            Message::Activity(ActivityMessage {
                id: m.id,
                activity_type: m.activity_type.unwrap_or_default(),
                content: m.activity_content.map(from_pb_struct).unwrap_or_default(),
                metadata,
                subagent_run_id: m.subagent_run_id,
            })
        }
        Role::Reasoning => Message::Reasoning(ReasoningMessage {
            content: required(m.content)?,
            id: m.id,
            encrypted_value: m.encrypted_value,
            // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
            encrypted_value_type: None,
            metadata,
            subagent_run_id: m.subagent_run_id,
        }),
    })
}

pub(super) fn messages_from_pb(messages: Vec<pb::Message>) -> Result<Vec<Message>> {
    messages.into_iter().map(message_from_pb).collect()
}

// ---------------------------------------------------------------------------- run input

pub(super) fn input_to_pb(input: &RunAgentInput) -> pb::RunAgentInput {
    pb::RunAgentInput {
        thread_id: input.thread_id.clone(),
        run_id: input.run_id.clone(),
        parent_run_id: input.parent_run_id.clone(),
        state: opt_to_pb(&input.state),
        messages: input.messages.iter().map(message_to_pb).collect(),
        tools: input
            .tools
            .iter()
            .map(|tool| pb::Tool {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: opt_to_pb(&tool.parameters),
                metadata: struct_opt(&tool.metadata),
            })
            .collect(),
        context: input
            .context
            .iter()
            .map(|c| pb::Context {
                description: c.description.clone(),
                value: c.value.clone(),
            })
            .collect(),
        forwarded_props: opt_to_pb(&input.forwarded_props),
        resume: input
            .resume
            .iter()
            .map(|entry| pb::ResumeEntry {
                interrupt_id: entry.interrupt_id.clone(),
                status: entry.status.as_str().to_owned(),
                payload: opt_to_pb(&entry.payload),
                metadata: struct_opt(&entry.metadata),
            })
            .collect(),
        protocol_version: input.protocol_version.clone(),
    }
}

pub(super) fn input_from_pb(input: pb::RunAgentInput) -> Result<RunAgentInput> {
    let resume = input
        .resume
        .into_iter()
        .map(|entry| {
            let status = match entry.status.as_str() {
                "resolved" => ResumeStatus::Resolved,
                "cancelled" => ResumeStatus::Cancelled,
                other => return Err(bad(format!("unknown resume status {other:?}"))),
            };
            Ok(ResumeEntry {
                interrupt_id: entry.interrupt_id,
                status,
                payload: opt_from_pb(entry.payload),
                metadata: map_opt(entry.metadata),
            })
        })
        .collect::<Result<_>>()?;
    Ok(RunAgentInput {
        thread_id: input.thread_id,
        run_id: input.run_id,
        parent_run_id: input.parent_run_id,
        protocol_version: input.protocol_version,
        state: opt_from_pb(input.state),
        messages: messages_from_pb(input.messages)?,
        tools: input
            .tools
            .into_iter()
            .map(|tool| Tool {
                name: tool.name,
                description: tool.description,
                parameters: opt_from_pb(tool.parameters),
                metadata: map_opt(tool.metadata),
            })
            .collect(),
        context: input
            .context
            .into_iter()
            .map(|c| Context {
                description: c.description,
                value: c.value,
            })
            .collect(),
        forwarded_props: opt_from_pb(input.forwarded_props),
        resume,
    })
}

// -------------------------------------------------------------- interrupts, usage, patch

pub(super) fn interrupt_to_pb(interrupt: &Interrupt) -> pb::Interrupt {
    pb::Interrupt {
        id: interrupt.id.clone(),
        reason: interrupt.reason.clone(),
        message: interrupt.message.clone(),
        tool_call_id: interrupt.tool_call_id.clone(),
        response_schema: object_to_pb(&interrupt.response_schema),
        expires_at: interrupt.expires_at.clone(),
        metadata: object_to_pb(&interrupt.metadata),
        subagent_run_id: interrupt.subagent_run_id.clone(),
    }
}

pub(super) fn interrupt_from_pb(interrupt: pb::Interrupt) -> Result<Interrupt> {
    Ok(Interrupt {
        id: interrupt.id,
        reason: interrupt.reason,
        message: interrupt.message,
        tool_call_id: interrupt.tool_call_id,
        response_schema: object_from_pb(interrupt.response_schema, "interrupt responseSchema")?,
        expires_at: interrupt.expires_at,
        metadata: object_from_pb(interrupt.metadata, "interrupt metadata")?,
        subagent_run_id: interrupt.subagent_run_id,
    })
}

pub(super) fn usage_to_pb(usage: &[TokenUsage]) -> Vec<pb::Usage> {
    // Counts above i64::MAX cannot occur in practice; saturate rather than wrap.
    let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    usage
        .iter()
        .map(|u| pb::Usage {
            provider: u.provider.clone(),
            model: u.model.clone(),
            input_tokens: count(u.input_tokens),
            output_tokens: count(u.output_tokens),
            total_tokens: count(u.total_tokens),
            reasoning_tokens: count(u.reasoning_tokens),
            cached_input_tokens: count(u.cached_input_tokens),
            cache_write_input_tokens: count(u.cache_write_input_tokens),
        })
        .collect()
}

pub(super) fn usage_from_pb(usage: Vec<pb::Usage>) -> Result<Vec<TokenUsage>> {
    let count = |n: Option<i64>| -> Result<Option<u64>> {
        n.map(|n| u64::try_from(n).map_err(|_| bad(format!("negative token count {n}"))))
            .transpose()
    };
    usage
        .into_iter()
        .map(|u| {
            Ok(TokenUsage {
                provider: u.provider,
                model: u.model,
                input_tokens: count(u.input_tokens)?,
                output_tokens: count(u.output_tokens)?,
                total_tokens: count(u.total_tokens)?,
                reasoning_tokens: count(u.reasoning_tokens)?,
                cached_input_tokens: count(u.cached_input_tokens)?,
                cache_write_input_tokens: count(u.cache_write_input_tokens)?,
            })
        })
        .collect()
}

pub(super) fn patch_to_pb(patch: &[PatchOperation]) -> Vec<pb::JsonPatchOperation> {
    use pb::JsonPatchOperationType as Op;
    patch
        .iter()
        .map(|operation| {
            let (op, path, from, value) = match operation {
                PatchOperation::Add { path, value } => (Op::Add, path, None, Some(value)),
                PatchOperation::Remove { path } => (Op::Remove, path, None, None),
                PatchOperation::Replace { path, value } => (Op::Replace, path, None, Some(value)),
                PatchOperation::Move { from, path } => (Op::Move, path, Some(from), None),
                PatchOperation::Copy { from, path } => (Op::Copy, path, Some(from), None),
                PatchOperation::Test { path, value } => (Op::Test, path, None, Some(value)),
            };
            pb::JsonPatchOperation {
                op: op as i32,
                path: path.clone(),
                from: from.cloned(),
                value: value.map(to_pb),
            }
        })
        .collect()
}

pub(super) fn patch_from_pb(patch: Vec<pb::JsonPatchOperation>) -> Result<Vec<PatchOperation>> {
    use pb::JsonPatchOperationType as Op;
    patch
        .into_iter()
        .map(
            |pb::JsonPatchOperation {
                 op,
                 path,
                 from,
                 value,
             }| {
                let op = Op::try_from(op)
                    .map_err(|_| bad(format!("unknown JSON Patch operation {op}")))?;
                let from = from.ok_or_else(|| bad(format!("JSON Patch {op:?} without `from`")));
                let value = req_from_pb(value);
                Ok(match op {
                    Op::Add => PatchOperation::Add { path, value },
                    Op::Remove => PatchOperation::Remove { path },
                    Op::Replace => PatchOperation::Replace { path, value },
                    Op::Move => PatchOperation::Move { from: from?, path },
                    Op::Copy => PatchOperation::Copy { from: from?, path },
                    Op::Test => PatchOperation::Test { path, value },
                })
            },
        )
        .collect()
}
