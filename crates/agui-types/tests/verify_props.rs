//! Property tests of the verifier: generated well-ordered streams pass, and any single
//! mutation that breaks an ordering rule is caught under the right rule.

mod support;

use agui_types::{Event, EventType, Rule, StreamVerifier, SubagentStarted};
use proptest::prelude::*;
use support::{render, run_spec};

fn verify(events: &[Event]) -> Result<(), agui_types::Violation> {
    StreamVerifier::verify_all(events)
}

/// Indices of the events whose type is one of `types`.
fn positions(events: &[Event], types: &[EventType]) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| types.contains(&e.event_type()))
        .map(|(i, _)| i)
        .collect()
}

const ENDS: &[EventType] = &[
    EventType::TextMessageEnd,
    EventType::ToolCallEnd,
    EventType::ReasoningMessageEnd,
    EventType::ReasoningEnd,
    EventType::StepFinished,
    EventType::SubagentFinished,
    EventType::SubagentError,
];

const STARTS: &[EventType] = &[
    EventType::TextMessageStart,
    EventType::ToolCallStart,
    EventType::ReasoningStart,
    EventType::ReasoningMessageStart,
    EventType::StepStarted,
    EventType::SubagentStarted,
];

/// The continuation event of an explicit opener, with the same id and attribution.
fn content_for(start: &Event) -> Event {
    let continuation = match start {
        Event::TextMessageStart(e) => Event::text_message_content(&e.message_id, "early"),
        Event::ToolCallStart(e) => Event::tool_call_args(&e.tool_call_id, "{}"),
        Event::ReasoningMessageStart(e) => Event::reasoning_message_content(&e.message_id, "early"),
        Event::ReasoningStart(e) => Event::reasoning_end(&e.message_id),
        other => unreachable!("not an opener with content: {other:?}"),
    };
    match start.subagent_run_id() {
        Some(tag) => continuation.with_subagent_run_id(tag),
        None => continuation,
    }
}

/// A fresh opener of kind `kind % 5` that nothing closes.
fn dangling_opener(kind: usize) -> Event {
    match kind % 5 {
        0 => Event::text_message_start("dangling"),
        1 => Event::tool_call_start("dangling", "f", None),
        2 => Event::reasoning_start("dangling"),
        3 => Event::step_started("dangling"),
        _ => SubagentStarted {
            subagent_run_id: "dangling".into(),
            name: "x".into(),
            ..Default::default()
        }
        .into(),
    }
}

/// An event after the terminal one: anything but RUN_STARTED.
fn trailing_event(kind: usize) -> Event {
    match kind % 4 {
        0 => Event::custom("late", serde_json::Value::Null),
        1 => Event::text_message_start("late"),
        2 => Event::run_finished("thread", "run-0"),
        _ => Event::run_error("late", None),
    }
}

fn assert_rule(events: &[Event], rule: Rule) -> Result<(), TestCaseError> {
    match verify(events) {
        Err(violation) => {
            prop_assert_eq!(violation.rule, rule, "{}", violation);
            Ok(())
        }
        Ok(()) => Err(TestCaseError::fail(format!(
            "mutation not caught: {events:#?}"
        ))),
    }
}

proptest! {
    // No regression files: a failure prints its minimal input, which belongs in a unit test.
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_streams_pass(runs in prop::collection::vec(run_spec(true), 1..4)) {
        let events = render(&runs);
        prop_assert_eq!(verify(&events), Ok(()), "{:#?}", events);
    }

    #[test]
    fn dropping_an_end_is_caught(run in run_spec(false), pick in any::<prop::sample::Index>()) {
        let mut events = render(&[run]);
        let ends = positions(&events, ENDS);
        events.remove(ends[pick.index(ends.len())]);
        assert_rule(&events, Rule::OpenAtRunFinished)?;
    }

    #[test]
    fn duplicating_a_start_is_caught(run in run_spec(false), pick in any::<prop::sample::Index>()) {
        let mut events = render(&[run]);
        let starts = positions(&events, STARTS);
        let at = starts[pick.index(starts.len())];
        events.insert(at + 1, events[at].clone());
        assert_rule(&events, Rule::AlreadyOpen)?;
    }

    #[test]
    fn content_before_start_is_caught(run in run_spec(false), pick in any::<prop::sample::Index>()) {
        let mut events = render(&[run]);
        let openers = positions(&events, &[
            EventType::TextMessageStart,
            EventType::ToolCallStart,
            EventType::ReasoningMessageStart,
            EventType::ReasoningStart,
        ]);
        let at = openers[pick.index(openers.len())];
        let early = content_for(&events[at]);
        events.insert(at, early);
        assert_rule(&events, Rule::NotOpen)?;
    }

    #[test]
    fn events_after_the_terminal_are_caught(
        runs in prop::collection::vec(run_spec(true), 1..3),
        kind in 0..4usize,
    ) {
        let mut events = render(&runs);
        events.push(trailing_event(kind));
        assert_rule(&events, Rule::AfterTerminal)?;
    }

    #[test]
    fn finishing_with_an_open_block_is_caught(run in run_spec(false), kind in 0..5usize) {
        let mut events = render(&[run]);
        let finish = events.len() - 1;
        events.insert(finish, dangling_opener(kind));
        assert_rule(&events, Rule::OpenAtRunFinished)?;
    }

    #[test]
    fn a_missing_run_started_is_caught(run in run_spec(false)) {
        let mut events = render(&[run]);
        events.remove(0);
        assert_rule(&events, Rule::FirstEvent)?;
    }

    #[test]
    fn a_stream_cut_inside_a_run_is_caught(run in run_spec(false)) {
        let mut events = render(&[run]);
        events.pop();
        let mut verifier = StreamVerifier::new();
        for event in &events {
            prop_assert!(verifier.check(event).is_ok());
        }
        let violation = verifier.finish().expect_err("no terminal event");
        prop_assert_eq!(violation.rule, Rule::MissingTerminal);
    }
}

/// The generator is only as good as what it produces: make sure it reaches every kind of
/// event the verifier tracks, nested subagents, and runs that end in each way.
#[test]
fn generated_streams_cover_the_protocol() {
    let streams = support::deterministic_streams(64);
    let seen: std::collections::BTreeSet<EventType> =
        streams.iter().flatten().map(Event::event_type).collect();
    let missing: Vec<&EventType> = EventType::ALL
        .iter()
        .filter(|t| !seen.contains(t))
        .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
    let nested = streams
        .iter()
        .flatten()
        .any(|e| matches!(e, Event::SubagentStarted(s) if s.parent_subagent_run_id.is_some()));
    assert!(nested, "no nested subagent generated");
    let longest = streams.iter().map(Vec::len).max().unwrap_or_default();
    assert!(longest > 40, "streams stay short ({longest} events)");
    for events in &streams {
        StreamVerifier::verify_all(events).expect("deterministic streams are valid");
    }
}
