//! Applying a run's answers to what is parked: `resume[]` entries and
//! `forwardedProps.command` answer interrupts; tool messages answer frontend tool calls. Each
//! channel resolves only its own kind, so a bare command can never stand in for a tool result.

use agui_types::{Message, ResumeStatus, RunAgentInput};
use serde_json::Value;

use crate::interrupts::InterruptAnswer;
use crate::prompt::{ToolResultText, tool_result_text};
use crate::store::PendingTool;
use crate::thread::parking::{Parking, ResolveError, ToolAnswer};

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
    /// The calls of `restart_pending` answered now or before: one result each, whatever
    /// message carries it (a client that took a rebuilt history holds a second one).
    pub(crate) answered_calls: Vec<String>,
}

/// Applies every answer `input` carries to what is `parked`. `restart_pending` are frontend
/// tool calls that were parked when the server last stopped; `seen` tells tool messages
/// already handled; `deduplicate` shares a frontend tool's answer with its repeats.
pub(crate) fn apply(
    parked: &mut Parking,
    input: &RunAgentInput,
    restart_pending: &[PendingTool],
    seen: impl Fn(&str) -> bool,
    deduplicate: bool,
) -> Applied {
    let mut applied = Applied::default();
    let thread = input.thread_id.clone();
    for entry in &input.resume {
        let answer = match entry.status {
            ResumeStatus::Cancelled => InterruptAnswer::Cancelled,
            ResumeStatus::Resolved => {
                InterruptAnswer::Resolved(entry.payload.clone().unwrap_or(Value::Null))
            }
        };
        match parked.resolve_interrupt(&entry.interrupt_id, answer) {
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
        applied.resolved += apply_command(parked, &thread, command);
    }
    // A call answered by a message handled before has its result: no other message may
    // deliver one again.
    for message in &input.messages {
        if let Message::Tool(tool) = message
            && seen(&tool.id)
            && restart_pending
                .iter()
                .any(|p| p.tool_call_id == tool.tool_call_id)
            && !applied.answered_calls.contains(&tool.tool_call_id)
        {
            applied.answered_calls.push(tool.tool_call_id.clone());
        }
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
        match parked.resolve_tool(&tool.tool_call_id, answer.clone(), deduplicate) {
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
                    Some(pending)
                        if !seen(&tool.id)
                            && !applied.answered_calls.contains(&pending.tool_call_id) =>
                    {
                        applied
                            .late_results
                            .push(late_result_note(&pending.name, &answer));
                        applied.consumed.push(tool.id.clone());
                        applied.answered_calls.push(pending.tool_call_id.clone());
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
fn apply_command(parked: &mut Parking, thread: &str, command: &Value) -> usize {
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
            let open = parked.interrupts();
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
    match parked.resolve_interrupt(&target, answer) {
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
    use tokio::sync::oneshot;

    use super::*;
    use crate::thread::parking::InterruptKind;

    fn input(extra: Value) -> RunAgentInput {
        let mut base = json!({"threadId": "t", "runId": "r", "messages": []});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        RunAgentInput::from_json(base.to_string().as_bytes()).unwrap()
    }

    fn interrupt(parked: &mut Parking, id: &str) -> oneshot::Receiver<InterruptAnswer> {
        let (reply, answer) = oneshot::channel();
        parked.park_interrupt(
            agui_types::Interrupt {
                id: id.into(),
                reason: "r".into(),
                ..Default::default()
            },
            InterruptKind::Tool,
            "root".into(),
            reply,
        );
        answer
    }

    fn tool(parked: &mut Parking, id: &str) -> oneshot::Receiver<ToolAnswer> {
        let (reply, answer) = oneshot::channel();
        let arguments = serde_json::Map::new();
        let call = crate::thread::parking::CallRequest {
            harness_id: id,
            name: "pick",
            arguments: &arguments,
            trajectory: "root",
        };
        parked.frontend_callback(call, || id.to_owned(), false, reply);
        answer
    }

    #[tokio::test]
    async fn resume_entries_answer_interrupts_by_id() {
        let mut parked = Parking::default();
        let a = interrupt(&mut parked, "a");
        let b = interrupt(&mut parked, "b");
        let applied = apply(
            &mut parked,
            &input(json!({"resume": [
                {"interruptId": "a", "status": "resolved", "payload": {"x": 1}},
                {"interruptId": "b", "status": "cancelled", "payload": {"ignored": true}},
                {"interruptId": "zzz", "status": "resolved"}]})),
            &[],
            |_| false,
            true,
        );
        assert_eq!(applied.resolved, 2);
        assert_eq!(a.await.unwrap(), InterruptAnswer::Resolved(json!({"x": 1})));
        assert_eq!(b.await.unwrap(), InterruptAnswer::Cancelled);
    }

    #[tokio::test]
    async fn a_bare_command_answers_the_single_interrupt_but_never_a_tool() {
        let mut parked = Parking::default();
        let tool = tool(&mut parked, "call");
        let only = interrupt(&mut parked, "only");
        let applied = apply(
            &mut parked,
            &input(json!({"forwardedProps": {"command": {"approved": true}}})),
            &[],
            |_| false,
            true,
        );
        assert_eq!(applied.resolved, 1);
        assert_eq!(
            only.await.unwrap(),
            InterruptAnswer::Resolved(json!({"approved": true}))
        );
        assert_eq!(
            parked.pending_tool_calls().len(),
            1,
            "the frontend tool stays parked"
        );
        let applied = apply(
            &mut parked,
            &input(json!({"forwardedProps": {"command": "yes"}})),
            &[],
            |_| false,
            true,
        );
        assert_eq!(
            applied.resolved, 0,
            "no interrupt left; a tool is never answered by a command"
        );
        drop(tool);
    }

    #[tokio::test]
    async fn a_command_with_several_interrupts_needs_an_id() {
        let mut parked = Parking::default();
        let _a = interrupt(&mut parked, "a");
        let b = interrupt(&mut parked, "b");
        assert_eq!(
            apply(
                &mut parked,
                &input(json!({"forwardedProps": {"command": true}})),
                &[],
                |_| false,
                true,
            )
            .resolved,
            0
        );
        let applied = apply(
            &mut parked,
            &input(
                json!({"forwardedProps": {"command": {"interrupt_id": "b", "status": "cancelled"}}}),
            ),
            &[],
            |_| false,
            true,
        );
        assert_eq!(applied.resolved, 1);
        assert_eq!(b.await.unwrap(), InterruptAnswer::Cancelled);
    }

    #[tokio::test]
    async fn tool_messages_answer_frontend_tools_and_late_results_become_notes() {
        let mut parked = Parking::default();
        let tool = tool(&mut parked, "call-1");
        let run = input(json!({"messages": [
            {"id": "m1", "role": "tool", "toolCallId": "call-1", "content": "red"},
            {"id": "m2", "role": "tool", "toolCallId": "old-call", "content": "", "error": "boom"}]}));
        let restart = [PendingTool {
            tool_call_id: "old-call".into(),
            name: "legacy".into(),
        }];
        let applied = apply(&mut parked, &run, &restart, |_| false, true);
        assert_eq!(applied.resolved, 1);
        assert_eq!(tool.await.unwrap(), ToolAnswer::Result("red".into()));
        assert_eq!(applied.consumed, ["m2"]);
        assert!(
            applied.late_results[0].contains("`legacy`")
                && applied.late_results[0].contains("it failed: boom")
        );
        assert!(
            apply(&mut parked, &run, &restart, |id| id == "m2", true)
                .late_results
                .is_empty(),
            "delivered once"
        );
    }

    #[test]
    fn a_late_result_is_delivered_once_per_call_whatever_message_carries_it() {
        let restart = [PendingTool {
            tool_call_id: "old-call".into(),
            name: "set_color".into(),
        }];
        // The client's own answer, already delivered, and the result a rebuilt history showed
        // for the same call (which a client that took the snapshot sends back).
        let run = input(json!({"messages": [
            {"id": "answer", "role": "tool", "toolCallId": "old-call", "content": "Color set"},
            {"id": "rebuilt", "role": "tool", "toolCallId": "old-call", "content": "set_color completed without returning any output."}]}));
        let applied = apply(
            &mut Parking::default(),
            &run,
            &restart,
            |id| id == "answer",
            true,
        );
        assert!(applied.late_results.is_empty(), "{applied:?}");
        assert_eq!(applied.answered_calls, ["old-call"]);

        // Two messages for the call, neither delivered yet: one note, from the newest.
        let applied = apply(&mut Parking::default(), &run, &restart, |_| false, true);
        assert_eq!(applied.late_results.len(), 1, "{applied:?}");
        assert!(applied.late_results[0].contains("without returning any output"));
        assert_eq!(applied.consumed, ["rebuilt"]);
    }
}
