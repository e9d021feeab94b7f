//! What a run has opened and not yet closed, for a consumer that joins it mid-way.
//!
//! A consumer that joins a live run (connect) gets the thread's messages as a
//! `MESSAGES_SNAPSHOT` — partial text and open tool calls included — and then the rest of the
//! run. For the continuation events to be valid on its stream, every block still open must be
//! opened there too: [`OpenBlocks::reopen`] gives the start events to send after the snapshot.
//! They repeat the original starts (same ids, names, parents and attribution) and carry no
//! content, so nothing the snapshot holds is sent twice; the spec lets a producer reopen a
//! message or tool call the consumer already holds, and continuation deltas append to it.

use crate::events::{
    Event, ReasoningMessageStart, ReasoningStart, StepStarted, SubagentStarted, TextMessageStart,
    ToolCallStart,
};

/// The open blocks of one run, in opening order per kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenBlocks {
    subagents: Vec<SubagentStarted>,
    steps: Vec<StepStarted>,
    reasoning: Vec<ReasoningStart>,
    reasoning_messages: Vec<ReasoningMessageStart>,
    text: Vec<TextMessageStart>,
    tool_calls: Vec<ToolCallStart>,
}

impl OpenBlocks {
    /// Nothing open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is open.
    pub fn is_empty(&self) -> bool {
        self.subagents.is_empty()
            && self.steps.is_empty()
            && self.reasoning.is_empty()
            && self.reasoning_messages.is_empty()
            && self.text.is_empty()
            && self.tool_calls.is_empty()
    }

    /// Follows one event of the run.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::SubagentStarted(e) => self.subagents.push(e.clone()),
            Event::SubagentFinished(e) => self
                .subagents
                .retain(|s| s.subagent_run_id != e.subagent_run_id),
            Event::SubagentError(e) => self
                .subagents
                .retain(|s| s.subagent_run_id != e.subagent_run_id),
            Event::StepStarted(e) => self.steps.push(e.clone()),
            Event::StepFinished(e) => {
                if let Some(i) = self.steps.iter().position(|s| {
                    s.step_name == e.step_name && s.subagent_run_id == e.subagent_run_id
                }) {
                    self.steps.remove(i);
                }
            }
            Event::ReasoningStart(e) => self.reasoning.push(e.clone()),
            Event::ReasoningEnd(e) => self.reasoning.retain(|r| r.message_id != e.message_id),
            Event::ReasoningMessageStart(e) => self.reasoning_messages.push(e.clone()),
            Event::ReasoningMessageEnd(e) => self
                .reasoning_messages
                .retain(|r| r.message_id != e.message_id),
            Event::TextMessageStart(e) => self.text.push(e.clone()),
            Event::TextMessageEnd(e) => self.text.retain(|t| t.message_id != e.message_id),
            Event::ToolCallStart(e) => self.tool_calls.push(e.clone()),
            Event::ToolCallEnd(e) => self.tool_calls.retain(|t| t.tool_call_id != e.tool_call_id),
            Event::RunFinished(_) | Event::RunError(_) => *self = Self::default(),
            _ => {}
        }
    }

    /// The start events that reopen every open block, owners first: subagent invocations (in
    /// the order they started, so a parent precedes its children), steps, reasoning spans and
    /// their messages, text messages, tool calls.
    pub fn reopen(&self) -> Vec<Event> {
        let mut events = Vec::new();
        events.extend(self.subagents.iter().cloned().map(Event::SubagentStarted));
        events.extend(self.steps.iter().cloned().map(Event::StepStarted));
        events.extend(self.reasoning.iter().cloned().map(Event::ReasoningStart));
        events.extend(
            self.reasoning_messages
                .iter()
                .cloned()
                .map(Event::ReasoningMessageStart),
        );
        events.extend(self.text.iter().cloned().map(Event::TextMessageStart));
        events.extend(self.tool_calls.iter().cloned().map(Event::ToolCallStart));
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, MessageLog, StreamVerifier};

    #[test]
    fn a_consumer_joining_mid_run_gets_a_valid_stream_and_the_same_messages() {
        let live = vec![
            Event::run_started("t", "r1"),
            Event::text_message_start("m1"),
            Event::text_message_content("m1", "Hel"),
            Event::tool_call_start("c1", "look", Some("m1".into())),
            Event::tool_call_args("c1", "{}"),
        ];
        let rest = vec![
            Event::text_message_content("m1", "lo"),
            Event::text_message_end("m1"),
            Event::tool_call_end("c1"),
            Event::run_finished("t", "r1"),
        ];
        let mut open = OpenBlocks::new();
        let mut log = MessageLog::from_messages(vec![Message::user("u1", "hi")]);
        for event in &live {
            open.apply(event);
            log.apply(event);
        }
        // The joiner's stream: a run of its own, the snapshot, the reopened blocks, the rest.
        let mut joined = vec![Event::run_started("t", "r1"), log.snapshot()];
        joined.extend(open.reopen());
        joined.extend(rest.iter().cloned());
        let mut verifier = StreamVerifier::new();
        for event in &joined {
            verifier
                .check(event)
                .unwrap_or_else(|v| panic!("{v}: {event:?}"));
        }
        verifier.finish().unwrap();
        let mut theirs = MessageLog::new();
        let mut ours = log.clone();
        for event in &joined {
            theirs.apply(event);
        }
        for event in &rest {
            ours.apply(event);
        }
        assert_eq!(
            theirs, ours,
            "the joiner holds what a client that never left holds"
        );
        assert!(OpenBlocks::new().is_empty());
        open.apply(&Event::run_finished("t", "r1"));
        assert!(open.is_empty(), "a terminal event closes everything");
    }
}
