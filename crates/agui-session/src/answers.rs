//! Applying a run's answers to what is parked: `resume[]` entries and
//! `forwardedProps.command` answer interrupts; tool messages answer frontend tool calls. Each
//! channel resolves only its own kind, so a bare command can never stand in for a tool result.

use agui_types::{Message, ResumeStatus, RunAgentInput};
use serde_json::Value;

use crate::bridge::{Bridge, ResolveError, ToolAnswer};
use crate::interrupts::InterruptAnswer;
use crate::prompt::{ToolResultText, tool_result_text};
use crate::store::PendingTool;

/// What applying the answers did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Applied {
    /// Requests resolved (interrupts and frontend tools).
    pub(crate) resolved: usize,
    /// Results of frontend tools that were pending when the server stopped: the harness call is
    /// gone, so they reach the model as text in the next prompt.
    pub(crate) late_results: Vec<String>,
    /// Tool messages consumed this way (recorded so they are delivered once).
    pub(crate) consumed: Vec<String>,
}

/// Applies every answer `input` carries. `restart_pending` are frontend tool calls that were
/// parked when the server last stopped; `seen` tells tool messages already handled.
pub(crate) fn apply(
    bridge: &Bridge,
    input: &RunAgentInput,
    restart_pending: &[PendingTool],
    seen: impl Fn(&str) -> bool,
) -> Applied {
    let mut applied = Applied::default();
    let thread = bridge.thread_id().to_owned();
    for entry in &input.resume {
        let answer = match entry.status {
            ResumeStatus::Cancelled => InterruptAnswer::Cancelled,
            ResumeStatus::Resolved => {
                InterruptAnswer::Resolved(entry.payload.clone().unwrap_or(Value::Null))
            }
        };
        match bridge.resolve_interrupt(&entry.interrupt_id, answer) {
            Ok(()) => applied.resolved += 1,
            Err(ResolveError::Unknown) => {
                tracing::warn!(thread_id = %thread, interrupt_id = %entry.interrupt_id, "ignoring a resume for an unknown interrupt")
            }
            Err(ResolveError::WrongKind) => tracing::warn!(
                thread_id = %thread, interrupt_id = %entry.interrupt_id,
                "a resume entry names a frontend tool call; tool calls are answered with a tool message"
            ),
        }
    }
    if let Some(command) = input
        .forwarded_props
        .as_ref()
        .and_then(|p| p.get("command"))
    {
        applied.resolved += apply_command(bridge, command);
    }
    for message in input.messages.iter().rev() {
        let Message::Tool(tool) = message else {
            continue;
        };
        if tool.tool_call_id.is_empty() {
            continue;
        }
        let answer = match tool_result_text(tool) {
            ToolResultText::Ok(text) => ToolAnswer::Result(text),
            ToolResultText::Err(error) => ToolAnswer::Error(error),
        };
        match bridge.resolve_tool(&tool.tool_call_id, answer.clone()) {
            Ok(()) => applied.resolved += 1,
            Err(ResolveError::WrongKind) => tracing::warn!(
                thread_id = %thread, tool_call_id = %tool.tool_call_id,
                "a tool message names an interrupt; interrupts are answered with resume entries"
            ),
            Err(ResolveError::Unknown) => {
                let late = restart_pending
                    .iter()
                    .find(|p| p.tool_call_id == tool.tool_call_id);
                match late {
                    Some(pending) if !seen(&tool.id) => {
                        applied
                            .late_results
                            .push(late_result_note(&pending.name, &answer));
                        applied.consumed.push(tool.id.clone());
                    }
                    _ => {
                        tracing::debug!(thread_id = %thread, tool_call_id = %tool.tool_call_id, "no parked request for this tool message")
                    }
                }
            }
        }
    }
    applied
}

/// `forwardedProps.command` (CopilotKit Channels): an explicit interrupt id, else the single
/// parked interrupt; with several parked and no id nothing is resolved — answering the wrong
/// one cannot be undone.
fn apply_command(bridge: &Bridge, command: &Value) -> usize {
    let thread = bridge.thread_id().to_owned();
    let object = command.as_object();
    let explicit = object
        .and_then(|o| o.get("interruptId").or_else(|| o.get("interrupt_id")))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    let cancelled =
        object.and_then(|o| o.get("status")).and_then(Value::as_str) == Some("cancelled");
    let payload = object
        .and_then(|o| o.get("payload"))
        .cloned()
        .unwrap_or_else(|| command.clone());
    let answer = if cancelled {
        InterruptAnswer::Cancelled
    } else {
        InterruptAnswer::Resolved(payload)
    };
    let target = match explicit {
        Some(id) => id,
        None => {
            let open = bridge.interrupts();
            match open.as_slice() {
                [only] => only.id.clone(),
                [] => {
                    tracing::warn!(thread_id = %thread, "forwardedProps.command arrived with no interrupt parked; ignoring it");
                    return 0;
                }
                several => {
                    tracing::warn!(thread_id = %thread, parked = several.len(), "forwardedProps.command has no interrupt id and several interrupts are parked; ignoring it");
                    return 0;
                }
            }
        }
    };
    match bridge.resolve_interrupt(&target, answer) {
        Ok(()) => 1,
        Err(e) => {
            tracing::warn!(thread_id = %thread, interrupt_id = %target, error = ?e, "ignoring forwardedProps.command for an unknown interrupt");
            0
        }
    }
}

fn late_result_note(name: &str, answer: &ToolAnswer) -> String {
    let outcome = match answer {
        ToolAnswer::Result(text) => format!("it returned: {text}"),
        ToolAnswer::Error(error) => format!("it failed: {error}"),
        ToolAnswer::Abandoned | ToolAnswer::Closed => "it did not complete".to_owned(),
    };
    format!(
        "[The client-side tool `{name}` you called earlier finished after this agent restarted, so its result \
         could not be returned to that call; {outcome}]"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::bridge::InterruptKind;

    fn input(extra: Value) -> RunAgentInput {
        let mut base = json!({"threadId": "t", "runId": "r", "messages": []});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        RunAgentInput::from_json(base.to_string().as_bytes()).unwrap()
    }

    fn interrupt(bridge: &Bridge, id: &str) -> tokio::sync::oneshot::Receiver<InterruptAnswer> {
        bridge.park_interrupt(
            agui_types::Interrupt {
                id: id.into(),
                reason: "r".into(),
                ..Default::default()
            },
            InterruptKind::Tool,
            "root",
        )
    }

    #[tokio::test]
    async fn resume_entries_answer_interrupts_by_id() {
        let bridge = Bridge::new("t".into());
        let a = interrupt(&bridge, "a");
        let b = interrupt(&bridge, "b");
        let applied = apply(
            &bridge,
            &input(json!({"resume": [
                {"interruptId": "a", "status": "resolved", "payload": {"x": 1}},
                {"interruptId": "b", "status": "cancelled", "payload": {"ignored": true}},
                {"interruptId": "zzz", "status": "resolved"}]})),
            &[],
            |_| false,
        );
        assert_eq!(applied.resolved, 2);
        assert_eq!(a.await.unwrap(), InterruptAnswer::Resolved(json!({"x": 1})));
        assert_eq!(b.await.unwrap(), InterruptAnswer::Cancelled);
    }

    #[tokio::test]
    async fn a_bare_command_answers_the_single_interrupt_but_never_a_tool() {
        let bridge = Bridge::new("t".into());
        let tool = bridge.park_tool("call".into(), "pick".into(), "root");
        let only = interrupt(&bridge, "only");
        let applied = apply(
            &bridge,
            &input(json!({"forwardedProps": {"command": {"approved": true}}})),
            &[],
            |_| false,
        );
        assert_eq!(applied.resolved, 1);
        assert_eq!(
            only.await.unwrap(),
            InterruptAnswer::Resolved(json!({"approved": true}))
        );
        assert_eq!(
            bridge.pending_tool_calls().len(),
            1,
            "the frontend tool stays parked"
        );
        let applied = apply(
            &bridge,
            &input(json!({"forwardedProps": {"command": "yes"}})),
            &[],
            |_| false,
        );
        assert_eq!(
            applied.resolved, 0,
            "no interrupt left; a tool is never answered by a command"
        );
        drop(tool);
    }

    #[tokio::test]
    async fn a_command_with_several_interrupts_needs_an_id() {
        let bridge = Bridge::new("t".into());
        let _a = interrupt(&bridge, "a");
        let b = interrupt(&bridge, "b");
        assert_eq!(
            apply(
                &bridge,
                &input(json!({"forwardedProps": {"command": true}})),
                &[],
                |_| false
            )
            .resolved,
            0
        );
        let applied = apply(
            &bridge,
            &input(
                json!({"forwardedProps": {"command": {"interrupt_id": "b", "status": "cancelled"}}}),
            ),
            &[],
            |_| false,
        );
        assert_eq!(applied.resolved, 1);
        assert_eq!(b.await.unwrap(), InterruptAnswer::Cancelled);
    }

    #[tokio::test]
    async fn tool_messages_answer_frontend_tools_and_late_results_become_notes() {
        let bridge = Bridge::new("t".into());
        let tool = bridge.park_tool("call-1".into(), "pick".into(), "root");
        let run = input(json!({"messages": [
            {"id": "m1", "role": "tool", "toolCallId": "call-1", "content": "red"},
            {"id": "m2", "role": "tool", "toolCallId": "old-call", "content": "", "error": "boom"}]}));
        let restart = [PendingTool {
            tool_call_id: "old-call".into(),
            name: "legacy".into(),
        }];
        let applied = apply(&bridge, &run, &restart, |_| false);
        assert_eq!(applied.resolved, 1);
        assert_eq!(tool.await.unwrap(), ToolAnswer::Result("red".into()));
        assert_eq!(applied.consumed, ["m2"]);
        assert!(
            applied.late_results[0].contains("`legacy`")
                && applied.late_results[0].contains("it failed: boom")
        );
        assert!(
            apply(&bridge, &run, &restart, |id| id == "m2")
                .late_results
                .is_empty(),
            "delivered once"
        );
    }
}
