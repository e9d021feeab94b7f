//! The messages a stream of events builds, built the way the official client builds them.
//!
//! A producer that restates a thread (`MESSAGES_SNAPSHOT` on connect, or at the start of a run
//! that resumes an older turn) must hand the client the complete set of messages it owns,
//! under the ids and in the order a client that saw every event holds them — a message the
//! snapshot leaves out is deleted on the client. [`MessageLog`] applies events with the rules
//! of `@ag-ui/client` 1.0 (`apply/default`): text and reasoning messages are appended when they
//! start; a tool call joins the assistant message named by `parentMessageId` (or a new one
//! whose id is that parent, or the call id); a tool result is placed right after the assistant
//! message holding its call, after the results already there; activity messages are created by
//! their first snapshot and patched by deltas; a messages snapshot replaces by id, drops what
//! it omits (except client-only activity and reasoning material) and appends what is new.

use serde_json::Value;

use crate::events::{Event, MessagesSnapshot, TextMessageRole};
use crate::input::{
    ActivityMessage, AssistantMessage, Content, InstructionMessage, Message, ReasoningMessage,
    ToolCall, ToolMessage, UserMessage,
};

/// An ordered list of messages, maintained by applying events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageLog {
    messages: Vec<Message>,
}

impl MessageLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log holding `messages` (e.g. what a client sent, or a rebuilt history).
    pub fn from_messages(messages: Vec<Message>) -> Self {
        Self { messages }
    }

    /// The messages, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Whether the log holds a message with this id.
    pub fn contains(&self, id: &str) -> bool {
        self.position(id).is_some()
    }

    /// Drops the message `id` and every message after it (a thread that forks before it);
    /// false when the log has no such message.
    pub fn truncate_from(&mut self, id: &str) -> bool {
        match self.position(id) {
            Some(at) => {
                self.messages.truncate(at);
                true
            }
            None => false,
        }
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Appends `message` unless a message with its id is already there.
    pub fn push(&mut self, message: Message) {
        if !self.contains(message.id()) {
            self.messages.push(message);
        }
    }

    /// Adds the messages of `messages` (a client's list) that the log lacks, keeping the log's
    /// own messages and order: a producer's record of a thread merged with what its client
    /// added. A tool result goes after the assistant message holding its call (as a client
    /// places it); a message the client put between two known ones goes after the first of
    /// them; what the client added after everything it knew (a new user message) goes at the
    /// end, after anything the client missed. Activity messages are skipped: clients strip
    /// them, and the log's own are the record.
    pub fn merge(&mut self, messages: &[Message]) {
        let last_known = messages.iter().rposition(|m| self.contains(m.id()));
        let mut after: Option<usize> = None;
        for (k, message) in messages.iter().enumerate() {
            if matches!(message, Message::Activity(_)) {
                continue;
            }
            if let Some(i) = self.position(message.id()) {
                after = Some(i);
                continue;
            }
            if let Message::Tool(tool) = message
                && self.holds_call(&tool.tool_call_id)
            {
                self.insert_result(&tool.tool_call_id, message.clone());
                after = self.position(message.id());
                continue;
            }
            let at = if last_known.is_none_or(|last| k > last) {
                self.messages.len()
            } else {
                after.map_or(0, |i| i + 1)
            };
            self.messages.insert(at, message.clone());
            after = Some(at);
        }
    }

    fn holds_call(&self, tool_call_id: &str) -> bool {
        self.messages.iter().any(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter().any(|c| c.id == tool_call_id),
            _ => false,
        })
    }

    /// The ids of the tool calls no tool message answers yet, oldest first.
    pub fn unanswered_tool_calls(&self) -> Vec<&str> {
        let answered: std::collections::HashSet<&str> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(t) => Some(t.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        self.messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a.tool_calls.iter().map(|c| c.id.as_str())),
                _ => None,
            })
            .flatten()
            .filter(|id| !answered.contains(id))
            .collect()
    }

    /// A `MESSAGES_SNAPSHOT` of the whole log.
    pub fn snapshot(&self) -> Event {
        Event::MessagesSnapshot(MessagesSnapshot {
            messages: self.messages.clone(),
            ..MessagesSnapshot::default()
        })
    }

    /// Applies one event. Events that build no message (run, step, state, subagent lifecycle,
    /// raw, custom, end events) change nothing; chunk events are not expanded (a producer
    /// that emits them keeps its own log of what they expand to).
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::TextMessageStart(start) => {
                let role = start.role.unwrap_or_default();
                self.start_message(&start.message_id, || {
                    text_message(
                        &start.message_id,
                        role,
                        start.name.clone(),
                        start.subagent_run_id.clone(),
                    )
                });
            }
            Event::TextMessageContent(content) => {
                if let Some(text) = self.text_of(&content.message_id) {
                    text.push_str(&content.delta);
                }
            }
            Event::ReasoningMessageStart(start) => {
                self.start_message(&start.message_id, || {
                    Message::Reasoning(ReasoningMessage {
                        id: start.message_id.clone(),
                        subagent_run_id: start.subagent_run_id.clone(),
                        ..ReasoningMessage::default()
                    })
                });
            }
            Event::ReasoningMessageContent(content) => {
                if let Some(text) = self.text_of(&content.message_id) {
                    text.push_str(&content.delta);
                }
            }
            Event::ToolCallStart(start) => self.tool_call_start(
                &start.tool_call_id,
                &start.tool_call_name,
                start.parent_message_id.as_deref(),
                start.subagent_run_id.as_deref(),
            ),
            Event::ToolCallArgs(args) => {
                if let Some(call) = self.tool_call_mut(&args.tool_call_id) {
                    call.function.arguments.push_str(&args.delta);
                }
            }
            Event::ToolCallResult(result) => {
                let message = Message::Tool(ToolMessage {
                    id: result.message_id.clone(),
                    content: result.content.clone(),
                    tool_call_id: result.tool_call_id.clone(),
                    subagent_run_id: result.subagent_run_id.clone(),
                    ..ToolMessage::default()
                });
                self.insert_result(&result.tool_call_id, message);
            }
            Event::ActivitySnapshot(snapshot) => {
                let message = Message::Activity(ActivityMessage {
                    id: snapshot.message_id.clone(),
                    activity_type: snapshot.activity_type.clone(),
                    content: snapshot.content.clone(),
                    subagent_run_id: snapshot.subagent_run_id.clone(),
                    ..ActivityMessage::default()
                });
                match self.position(&snapshot.message_id) {
                    None => self.messages.push(message),
                    Some(_) if snapshot.replace == Some(false) => {}
                    Some(i) => {
                        let metadata = match &self.messages[i] {
                            Message::Activity(old) => old.metadata.clone(),
                            _ => None,
                        };
                        self.messages[i] = message;
                        if let Message::Activity(new) = &mut self.messages[i] {
                            new.metadata = metadata;
                        }
                    }
                }
            }
            Event::ActivityDelta(delta) => {
                let Some(Message::Activity(activity)) = self
                    .position(&delta.message_id)
                    .map(|i| &mut self.messages[i])
                else {
                    return;
                };
                let mut content = Value::Object(activity.content.clone());
                let patch = serde_json::to_value(&delta.patch)
                    .and_then(serde_json::from_value::<json_patch::Patch>);
                // A patch that fails leaves the activity as it was, as the client does.
                if let Ok(patch) = patch
                    && json_patch::patch(&mut content, &patch).is_ok()
                    && let Value::Object(patched) = content
                {
                    activity.content = patched;
                    activity.activity_type = delta.activity_type.clone();
                }
            }
            Event::MessagesSnapshot(snapshot) => self.reconcile(&snapshot.messages),
            _ => {}
        }
    }

    /// Replaces the log with a snapshot's messages the way a client reconciles: messages are
    /// replaced by id in place, missing ones dropped — except activity messages when the
    /// snapshot carries none, and reasoning messages when it carries none — and new ones
    /// appended in snapshot order.
    pub fn reconcile(&mut self, snapshot: &[Message]) {
        let has = |role: crate::Role| snapshot.iter().any(|m| m.role() == role);
        let keep_activity = !has(crate::Role::Activity);
        let keep_reasoning = !has(crate::Role::Reasoning);
        let by_id: std::collections::HashMap<&str, &Message> =
            snapshot.iter().map(|m| (m.id(), m)).collect();
        let mut kept: Vec<Message> = std::mem::take(&mut self.messages)
            .into_iter()
            .filter_map(|m| match by_id.get(m.id()) {
                Some(new) => Some((*new).clone()),
                None if keep_activity && matches!(m, Message::Activity(_)) => Some(m),
                None if keep_reasoning && matches!(m, Message::Reasoning(_)) => Some(m),
                None => None,
            })
            .collect();
        for message in snapshot {
            if !kept.iter().any(|m| m.id() == message.id()) {
                kept.push(message.clone());
            }
        }
        self.messages = kept;
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.messages.iter().position(|m| m.id() == id)
    }

    /// Appends the message `make` builds unless one with `id` exists (an activity message under
    /// the id is left alone: ids are unique across kinds).
    fn start_message(&mut self, id: &str, make: impl FnOnce() -> Message) {
        if self.position(id).is_none() {
            self.messages.push(make());
        }
    }

    /// The streamable text of a text or reasoning message.
    fn text_of(&mut self, id: &str) -> Option<&mut String> {
        let i = self.position(id)?;
        match &mut self.messages[i] {
            Message::Assistant(m) => Some(m.content.get_or_insert_with(String::new)),
            Message::Developer(m) | Message::System(m) => Some(&mut m.content),
            Message::Reasoning(m) => Some(&mut m.content),
            Message::User(m) => {
                if !matches!(m.content, Content::Text(_)) {
                    m.content = Content::Text(String::new());
                }
                match &mut m.content {
                    Content::Text(text) => Some(text),
                    _ => None,
                }
            }
            Message::Tool(_) | Message::Activity(_) => None,
        }
    }

    fn tool_call_mut(&mut self, id: &str) -> Option<&mut ToolCall> {
        self.messages.iter_mut().find_map(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter_mut().find(|c| c.id == id),
            _ => None,
        })
    }

    fn tool_call_start(
        &mut self,
        id: &str,
        name: &str,
        parent: Option<&str>,
        subagent_run_id: Option<&str>,
    ) {
        // Idempotent: a start for a call already held renames it at most.
        if let Some(call) = self.tool_call_mut(id) {
            call.function.name = name.to_owned();
            return;
        }
        let owner = match parent.and_then(|p| self.position(p).map(|i| (p, i))) {
            Some((_, i)) if matches!(self.messages[i], Message::Assistant(_)) => i,
            found => {
                // A parent that is another kind of message falls back to the call id.
                let new_id = match (parent, found) {
                    (Some(p), None) => p,
                    _ => id,
                };
                self.messages.push(Message::Assistant(AssistantMessage {
                    id: new_id.to_owned(),
                    subagent_run_id: subagent_run_id.map(str::to_owned),
                    ..AssistantMessage::default()
                }));
                self.messages.len() - 1
            }
        };
        if let Message::Assistant(message) = &mut self.messages[owner] {
            message.tool_calls.push(ToolCall::new(id, name, ""));
        }
    }

    fn insert_result(&mut self, tool_call_id: &str, message: Message) {
        let owner = self.messages.iter().position(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter().any(|c| c.id == tool_call_id),
            _ => false,
        });
        match owner {
            None => self.messages.push(message),
            Some(owner) => {
                let mut at = owner + 1;
                while matches!(self.messages.get(at), Some(Message::Tool(_))) {
                    at += 1;
                }
                self.messages.insert(at, message);
            }
        }
    }
}

fn text_message(
    id: &str,
    role: TextMessageRole,
    name: Option<String>,
    subagent_run_id: Option<String>,
) -> Message {
    match role {
        TextMessageRole::Assistant => Message::Assistant(AssistantMessage {
            id: id.to_owned(),
            content: Some(String::new()),
            name,
            subagent_run_id,
            ..AssistantMessage::default()
        }),
        TextMessageRole::User => Message::User(UserMessage {
            id: id.to_owned(),
            content: Content::Text(String::new()),
            name,
            subagent_run_id,
            ..UserMessage::default()
        }),
        TextMessageRole::Developer | TextMessageRole::System => {
            let message = InstructionMessage {
                id: id.to_owned(),
                name,
                subagent_run_id,
                ..InstructionMessage::default()
            };
            if role == TextMessageRole::System {
                Message::System(message)
            } else {
                Message::Developer(message)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(log: &MessageLog) -> Vec<&str> {
        log.messages().iter().map(Message::id).collect()
    }

    #[test]
    fn merging_a_client_list_keeps_our_order_and_places_its_new_messages() {
        let mut log = MessageLog::from_messages(vec![
            Message::user("u1", "hi"),
            Message::assistant("a1", "calling"),
            Message::assistant("a2", "missed by the client"),
        ]);
        log.apply(&Event::tool_call_start("c1", "look", Some("a1".into())));
        log.merge(&[
            Message::user("u0", "first, unknown to us"),
            Message::user("u1", "hi"),
            Message::user("u1b", "between known ones"),
            Message::assistant("a1", "calling"),
            Message::Tool(ToolMessage {
                id: "t1".into(),
                tool_call_id: "c1".into(),
                ..ToolMessage::default()
            }),
            Message::user("u2", "next"),
        ]);
        assert_eq!(ids(&log), ["u0", "u1", "u1b", "a1", "t1", "a2", "u2"]);
        let before = log.clone();
        log.merge(&[Message::user("u1", "hi")]);
        assert_eq!(log, before, "merging what the log holds changes nothing");
    }

    #[test]
    fn a_tool_call_is_unanswered_until_a_tool_message_names_it() {
        let log = MessageLog::from_messages(
            serde_json::from_value(serde_json::json!([
                {"id": "a", "role": "assistant", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
                ]},
                {"id": "t", "role": "tool", "toolCallId": "c1", "content": "done"}
            ]))
            .unwrap(),
        );
        assert_eq!(log.unanswered_tool_calls(), ["c2"]);
    }
}
