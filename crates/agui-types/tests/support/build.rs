//! Small event builders for hand-written verifier cases.

use agui_types::{
    Event, ReasoningMessageChunk, Rule, StreamVerifier, SubagentError, SubagentFinished,
    SubagentStarted, TextMessageChunk, ToolCallChunk, Violation,
};

pub(crate) fn start() -> Event {
    Event::run_started("t", "r")
}

pub(crate) fn finish() -> Event {
    Event::run_finished("t", "r")
}

pub(crate) fn sub(event: Event, subagent: &str) -> Event {
    event.with_subagent_run_id(subagent)
}

pub(crate) fn subagent_started(id: &str, parent: Option<&str>) -> Event {
    SubagentStarted {
        subagent_run_id: id.into(),
        name: format!("agent-{id}"),
        parent_subagent_run_id: parent.map(Into::into),
        ..Default::default()
    }
    .into()
}

pub(crate) fn subagent_finished(id: &str) -> Event {
    SubagentFinished {
        subagent_run_id: id.into(),
        ..Default::default()
    }
    .into()
}

pub(crate) fn subagent_error(id: &str) -> Event {
    SubagentError {
        subagent_run_id: id.into(),
        message: "failed".into(),
        ..Default::default()
    }
    .into()
}

pub(crate) fn text_chunk(id: Option<&str>, delta: &str) -> Event {
    TextMessageChunk {
        message_id: id.map(Into::into),
        delta: Some(delta.into()),
        ..Default::default()
    }
    .into()
}

pub(crate) fn tool_chunk(id: Option<&str>, name: Option<&str>, delta: &str) -> Event {
    ToolCallChunk {
        tool_call_id: id.map(Into::into),
        tool_call_name: name.map(Into::into),
        delta: Some(delta.into()),
        ..Default::default()
    }
    .into()
}

pub(crate) fn reasoning_chunk(id: Option<&str>, delta: &str) -> Event {
    ReasoningMessageChunk {
        message_id: id.map(Into::into),
        delta: Some(delta.into()),
        ..Default::default()
    }
    .into()
}

pub(crate) fn text(id: &str) -> Vec<Event> {
    vec![
        Event::text_message_start(id),
        Event::text_message_content(id, "x"),
        Event::text_message_end(id),
    ]
}

/// Runs the whole stream (and `finish`) and returns the first violation.
pub(crate) fn verify(events: &[Event]) -> Result<(), Violation> {
    StreamVerifier::verify_all(events)
}

/// An expected violation: index of the offending event (`None` at end of stream), rule, and a
/// fragment of the message.
pub(crate) type Expected<'a> = (Option<usize>, Rule, &'a str);

/// `expected`: `Ok(())` or the violation.
pub(crate) fn check(name: &str, events: Vec<Event>, expected: Result<(), Expected<'_>>) -> String {
    let result = verify(&events);
    match (&result, expected) {
        (Ok(()), Ok(())) => format!("{name}: ok"),
        (Err(violation), Err((index, rule, fragment))) => {
            assert_eq!(
                (violation.index, violation.rule),
                (index, rule),
                "{name}: {violation}"
            );
            assert!(
                violation.message.contains(fragment),
                "{name}: {violation} lacks {fragment:?}"
            );
            format!("{name}: {violation}")
        }
        (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
    }
}
