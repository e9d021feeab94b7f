//! Snapshots of the events for every fixture recorded from the real harness.

mod common;

use agui_translate::{StructuredOutput, SubagentEvents, TranslatorOptions};
use common::fixtures::{Input, fixture_names, load};
use common::{assert_snapshot, assert_valid, replay};

/// Every fixture in `fixtures/steps/`, split into runs at each root turn end.
#[test]
fn every_fixture_translates_to_a_valid_stream() {
    let names = fixture_names();
    assert!(names.len() >= 10, "fixtures missing: {names:?}");
    for name in names {
        let inputs: Vec<Input> = load(&name)
            .into_iter()
            .filter(|i| !matches!(i, Input::HostAnswer))
            .collect();
        let runs = replay(&inputs, &TranslatorOptions::default());
        assert_snapshot(&name, &runs);
    }
}

/// The question fixture as a session runs it: the run ends when the turn parks on the
/// question, and the answer starts a second run of the same turn.
#[test]
fn a_parked_question_spans_two_runs() {
    let runs = replay(&load("ask_question"), &TranslatorOptions::default());
    assert_eq!(runs.len(), 2);
    assert_snapshot("ask_question_parked", &runs);
}

/// Subagent fixtures in the old shape (`subagent_events = "steps"`): step brackets, no
/// attribution.
#[test]
fn subagents_as_steps() {
    let options = TranslatorOptions::default().with_subagent_events(SubagentEvents::Steps);
    for name in fixture_names()
        .into_iter()
        .filter(|n| n.contains("subagent"))
    {
        let runs = replay(&load(&name), &options);
        assert_snapshot(&format!("{name}_steps"), &runs);
    }
}

/// Every fixture stays valid with built-ins hidden, custom tools suppressed and structured
/// output as a custom event.
#[test]
fn every_fixture_is_valid_with_other_options() {
    let options = TranslatorOptions::default()
        .with_builtin_tool_calls(false)
        .suppress("get_weather")
        .suppress("get_time")
        .suppress("get_news")
        .suppress("lookup")
        .with_structured_output(StructuredOutput::Custom)
        .with_activities(false);
    for name in fixture_names() {
        let runs = replay(&load(&name), &options);
        assert_valid(&runs);
        let tool_events = runs
            .iter()
            .flat_map(|r| &r.events)
            .filter(|e| e.event_type().as_str().starts_with("TOOL_CALL"))
            .count();
        assert_eq!(tool_events, 0, "{name}: tool calls were not hidden");
    }
}

/// Feeding a whole fixture twice to one translator (the harness re-delivering every step)
/// produces nothing the second time.
#[test]
fn redelivering_a_whole_turn_adds_nothing() {
    for name in fixture_names() {
        let turn: Vec<Input> = load(&name)
            .into_iter()
            .take_while(|i| !matches!(i, Input::EndTurn))
            .filter(|i| matches!(i, Input::Step(_)))
            .collect();
        let mut twice = turn.clone();
        twice.push(Input::CloseRun);
        twice.extend(turn.iter().cloned());
        let runs = replay(&twice, &TranslatorOptions::default());
        assert_valid(&runs);
        assert!(
            runs.len() < 2 || runs[1].events.is_empty(),
            "{name}: re-delivery produced {:?}",
            runs[1].events
        );
    }
}
