//! Protobuf mapping of each event payload (the envelope and `base_event` are handled in
//! the parent module).

use super::bad;
use super::content::{content_from_pb, content_to_pb};
use super::messages::{
    input_from_pb, input_to_pb, interrupt_from_pb, interrupt_to_pb, message_to_pb,
    messages_from_pb, patch_from_pb, patch_to_pb, usage_from_pb, usage_to_pb,
};
use super::value::{from_pb_struct, opt_from_pb, opt_to_pb, req_from_pb, to_pb, to_pb_struct};
use crate::error::Result;
use crate::events::*;
use crate::input::{Message, RunAgentInput};
use crate::proto as pb;
use prost_types::{Struct, Value as PbValue};
use serde_json::{Map, Value};

/// An event payload with a protobuf counterpart.
pub(super) trait ProtoPayload: Sized {
    /// The generated message of this event type.
    type Proto;
    /// Builds the message around an already-built `base_event`.
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto;
    /// Reads the message; `base` was taken out of it and checked already.
    fn from_proto(proto: Self::Proto, base: EventBase) -> Result<Self>;
}

fn text_role(role: Option<String>) -> Result<Option<TextMessageRole>> {
    role.map(|r| {
        TextMessageRole::from_wire(&r)
            .ok_or_else(|| bad(format!("invalid text message role {r:?}")))
    })
    .transpose()
}

fn text_role_to_pb(role: &Option<TextMessageRole>) -> Option<String> {
    role.map(|r| r.as_str().to_owned())
}

/// A required JSON payload (absent on the wire reads as `null`).
fn value_to_pb(value: &Value) -> Option<PbValue> {
    Some(to_pb(value))
}

#[allow(clippy::unnecessary_wraps)] // the shape every `convert` reader has
fn value_from_pb(value: Option<PbValue>) -> Result<Value> {
    Ok(req_from_pb(value))
}

fn struct_to_pb(map: &Map<String, Value>) -> Option<Struct> {
    Some(to_pb_struct(map))
}

#[allow(clippy::unnecessary_wraps)] // the shape every `convert` reader has
fn struct_from_pb(map: Option<Struct>) -> Result<Map<String, Value>> {
    Ok(map.map(from_pb_struct).unwrap_or_default())
}

fn messages_to_pb(messages: &[Message]) -> Vec<pb::Message> {
    messages.iter().map(message_to_pb).collect()
}

fn run_input_to_pb(input: &Option<Box<RunAgentInput>>) -> Option<pb::RunAgentInput> {
    input.as_deref().map(input_to_pb)
}

fn run_input_from_pb(input: Option<pb::RunAgentInput>) -> Result<Option<Box<RunAgentInput>>> {
    Ok(input.map(input_from_pb).transpose()?.map(Box::new))
}

/// Payloads whose protobuf message has the same fields: ids and strings copied as they are,
/// and, after `convert`, fields mapped by a pair of functions (`to(&field) -> proto field`,
/// `from(proto field) -> Result<field>`).
macro_rules! plain {
    ($payload:ident => $proto:ident { $($field:ident),* $(,)? }
        $(convert { $($conv:ident: $to:path, $from:path);* $(;)? })?) => {
        impl ProtoPayload for $payload {
            type Proto = pb::$proto;
            fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
                pb::$proto {
                    base_event: Some(base),
                    $($field: self.$field.clone(),)*
                    $($($conv: $to(&self.$conv),)*)?
                }
            }
            fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
                Ok(Self { base, $($field: p.$field,)* $($($conv: $from(p.$conv)?,)*)? })
            }
        }
    };
}

plain!(TextMessageContent => TextMessageContentEvent { message_id, delta, subagent_run_id });
plain!(TextMessageEnd => TextMessageEndEvent { message_id, subagent_run_id });
plain!(ToolCallStart => ToolCallStartEvent {
    tool_call_id, tool_call_name, parent_message_id, subagent_run_id
});
plain!(ToolCallArgs => ToolCallArgsEvent { tool_call_id, delta, subagent_run_id });
plain!(ToolCallEnd => ToolCallEndEvent { tool_call_id, subagent_run_id });
plain!(ToolCallChunk => ToolCallChunkEvent {
    tool_call_id, tool_call_name, parent_message_id, delta, subagent_run_id
});
plain!(StepStarted => StepStartedEvent { step_name, subagent_run_id });
plain!(StepFinished => StepFinishedEvent { step_name, subagent_run_id });
plain!(ReasoningStart => ReasoningStartEvent { message_id, subagent_run_id });
plain!(ReasoningMessageContent => ReasoningMessageContentEvent {
    message_id, delta, subagent_run_id
});
plain!(ReasoningMessageEnd => ReasoningMessageEndEvent { message_id, subagent_run_id });
plain!(ReasoningMessageChunk => ReasoningMessageChunkEvent { message_id, delta, subagent_run_id });
plain!(ReasoningEnd => ReasoningEndEvent { message_id, subagent_run_id });
plain!(SubagentStarted => SubagentStartedEvent {
    subagent_run_id, name, description, parent_subagent_run_id, parent_tool_call_id,
    parent_message_id
});
plain!(SubagentError => SubagentErrorEvent { subagent_run_id, message, code });
plain!(TextMessageStart => TextMessageStartEvent { message_id, name, subagent_run_id }
    convert { role: text_role_to_pb, text_role });
plain!(TextMessageChunk => TextMessageChunkEvent { message_id, delta, name, subagent_run_id }
    convert { role: text_role_to_pb, text_role });
plain!(StateSnapshot => StateSnapshotEvent { subagent_run_id }
    convert { snapshot: value_to_pb, value_from_pb });
plain!(StateDelta => StateDeltaEvent { subagent_run_id }
    convert { delta: patch_to_pb, patch_from_pb });
plain!(MessagesSnapshot => MessagesSnapshotEvent {}
    convert { messages: messages_to_pb, messages_from_pb });
plain!(ActivitySnapshot => ActivitySnapshotEvent {
    message_id, activity_type, replace, subagent_run_id
}
    convert { content: struct_to_pb, struct_from_pb });
plain!(ActivityDelta => ActivityDeltaEvent { message_id, activity_type, subagent_run_id }
    convert { patch: patch_to_pb, patch_from_pb });
plain!(Raw => RawEvent { source, subagent_run_id }
    convert { event: value_to_pb, value_from_pb });
plain!(Custom => CustomEvent { name, subagent_run_id }
    convert { value: value_to_pb, value_from_pb });
plain!(RunStarted => RunStartedEvent { thread_id, run_id, parent_run_id, protocol_version }
    convert { input: run_input_to_pb, run_input_from_pb });
plain!(RunError => RunErrorEvent { code, message } convert { usage: usage_to_pb, usage_from_pb });

impl ProtoPayload for ToolCallResult {
    type Proto = pb::ToolCallResultEvent;
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
        let (content, content_parts) = content_to_pb(&self.content);
        pb::ToolCallResultEvent {
            base_event: Some(base),
            subagent_run_id: self.subagent_run_id.clone(),
            message_id: self.message_id.clone(),
            tool_call_id: self.tool_call_id.clone(),
            content,
            role: self.role.map(|_| "tool".to_owned()),
            content_parts,
        }
    }
    fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
        let role = match p.role.as_deref() {
            None => None,
            Some("tool") => Some(ToolRole::Tool),
            Some(other) => {
                return Err(bad(format!(
                    "TOOL_CALL_RESULT role {other:?} is not \"tool\""
                )));
            }
        };
        Ok(Self {
            message_id: p.message_id,
            tool_call_id: p.tool_call_id,
            content: content_from_pb(p.content, p.content_parts)?,
            role,
            subagent_run_id: p.subagent_run_id,
            base,
        })
    }
}

impl ProtoPayload for RunFinished {
    type Proto = pb::RunFinishedEvent;
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
        let mut proto = pb::RunFinishedEvent {
            base_event: Some(base),
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            result: opt_to_pb(&self.result),
            usage: usage_to_pb(&self.usage),
            ..pb::RunFinishedEvent::default()
        };
        match &self.outcome {
            None => {}
            Some(RunOutcome::Success {
                pending_tool_call_ids,
            }) => {
                proto.outcome = "success".to_owned();
                proto
                    .pending_tool_call_ids
                    .clone_from(pending_tool_call_ids);
            }
            Some(RunOutcome::Interrupt { interrupts }) => {
                proto.outcome = "interrupt".to_owned();
                proto.interrupts = interrupts.iter().map(interrupt_to_pb).collect();
            }
            Some(RunOutcome::Cancelled) => proto.outcome = "cancelled".to_owned(),
        }
        proto
    }
    fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
        let outcome = match p.outcome.as_str() {
            "" => None,
            "success" => Some(RunOutcome::Success {
                pending_tool_call_ids: p.pending_tool_call_ids,
            }),
            "interrupt" if p.interrupts.is_empty() => {
                return Err(bad("interrupt outcome without interrupts"));
            }
            "interrupt" => Some(RunOutcome::Interrupt {
                interrupts: p
                    .interrupts
                    .into_iter()
                    .map(interrupt_from_pb)
                    .collect::<Result<_>>()?,
            }),
            "cancelled" => Some(RunOutcome::Cancelled),
            other => return Err(bad(format!("unknown RUN_FINISHED outcome {other:?}"))),
        };
        Ok(Self {
            thread_id: p.thread_id,
            run_id: p.run_id,
            result: opt_from_pb(p.result),
            outcome,
            usage: usage_from_pb(p.usage)?,
            base,
        })
    }
}

impl ProtoPayload for SubagentFinished {
    type Proto = pb::SubagentFinishedEvent;
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
        let (outcome, interrupt_ids) = match &self.outcome {
            None => (String::new(), Vec::new()),
            Some(SubagentOutcome::Success) => ("success".to_owned(), Vec::new()),
            Some(SubagentOutcome::Suspended { interrupt_ids }) => {
                ("suspended".to_owned(), interrupt_ids.clone())
            }
        };
        pb::SubagentFinishedEvent {
            base_event: Some(base),
            subagent_run_id: self.subagent_run_id.clone(),
            result: opt_to_pb(&self.result),
            outcome,
            interrupt_ids,
        }
    }
    fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
        let outcome = match p.outcome.as_str() {
            "" => None,
            "success" => Some(SubagentOutcome::Success),
            "suspended" => Some(SubagentOutcome::Suspended {
                interrupt_ids: p.interrupt_ids,
            }),
            other => return Err(bad(format!("unknown SUBAGENT_FINISHED outcome {other:?}"))),
        };
        Ok(Self {
            subagent_run_id: p.subagent_run_id,
            result: opt_from_pb(p.result),
            outcome,
            base,
        })
    }
}

impl ProtoPayload for ReasoningMessageStart {
    type Proto = pb::ReasoningMessageStartEvent;
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
        pb::ReasoningMessageStartEvent {
            base_event: Some(base),
            subagent_run_id: self.subagent_run_id.clone(),
            message_id: self.message_id.clone(),
            role: "reasoning".to_owned(),
        }
    }
    fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
        // An empty role is proto3's "unset"; tolerate it like a missing JSON role.
        if !matches!(p.role.as_str(), "" | "reasoning") {
            return Err(bad(format!(
                "REASONING_MESSAGE_START role {:?} is not \"reasoning\"",
                p.role
            )));
        }
        Ok(Self {
            message_id: p.message_id,
            role: ReasoningRole::Reasoning,
            subagent_run_id: p.subagent_run_id,
            base,
        })
    }
}

impl ProtoPayload for ReasoningEncryptedValue {
    type Proto = pb::ReasoningEncryptedValueEvent;
    fn to_proto(&self, base: pb::BaseEvent) -> Self::Proto {
        pb::ReasoningEncryptedValueEvent {
            base_event: Some(base),
            subagent_run_id: self.subagent_run_id.clone(),
            subtype: self.subtype.as_str().to_owned(),
            entity_id: self.entity_id.clone(),
            encrypted_value: self.encrypted_value.clone(),
        }
    }
    fn from_proto(p: Self::Proto, base: EventBase) -> Result<Self> {
        let subtype = EncryptedValueSubtype::from_wire(&p.subtype)
            .ok_or_else(|| bad(format!("unknown encrypted value subtype {:?}", p.subtype)))?;
        Ok(Self {
            subtype,
            entity_id: p.entity_id,
            encrypted_value: p.encrypted_value,
            // The 1.0 wire schema has no field for it: protobuf loses it (as the spec says).
            encrypted_value_type: None,
            subagent_run_id: p.subagent_run_id,
            base,
        })
    }
}
