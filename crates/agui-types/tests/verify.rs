//! The stream verifier accepts well-ordered streams, checked incrementally; the rule-by-rule
//! rejections are in `verify_rules.rs`.

mod support;

use agui_types::{
    AssistantMessage, EncryptedValueSubtype, Event, Message, StreamVerifier, ToolCall,
};
use serde_json::json;
use support::build::*;

#[test]
fn well_ordered_streams_pass() {
    let cases: Vec<(&str, Vec<Event>)> = vec![
        (
            "text run",
            [vec![start()], text("m1"), vec![finish()]].concat(),
        ),
        (
            "interleaved messages",
            vec![
                start(),
                Event::text_message_start("a"),
                Event::text_message_start("b"),
                Event::text_message_content("b", "1"),
                Event::text_message_content("a", "2"),
                Event::text_message_end("a"),
                Event::text_message_end("b"),
                finish(),
            ],
        ),
        ("error first", vec![Event::run_error("no model", None)]),
        (
            "error with open blocks",
            vec![
                start(),
                Event::text_message_start("m"),
                Event::step_started("s"),
                Event::run_error("x", None),
            ],
        ),
        (
            "sequential runs",
            vec![
                start(),
                finish(),
                Event::run_started("t", "r2"),
                Event::run_error("x", None),
                Event::run_started("t", "r3"),
                Event::run_finished("t", "r3"),
            ],
        ),
        (
            "reopening a closed id",
            [vec![start()], text("m"), text("m"), vec![finish()]].concat(),
        ),
        (
            "span and message share an id",
            vec![
                start(),
                Event::reasoning_start("r"),
                Event::reasoning_message_start("r"),
                Event::reasoning_message_content("r", "hm"),
                Event::reasoning_message_end("r"),
                Event::reasoning_encrypted_value(EncryptedValueSubtype::Message, "r", "e"),
                Event::reasoning_end("r"),
                finish(),
            ],
        ),
        (
            "same step name in parent and subagent",
            vec![
                start(),
                Event::step_started("tools"),
                subagent_started("s1", None),
                sub(Event::step_started("tools"), "s1"),
                sub(Event::step_finished("tools"), "s1"),
                subagent_finished("s1"),
                Event::step_finished("tools"),
                finish(),
            ],
        ),
        (
            "chunks closed by other events",
            vec![
                start(),
                text_chunk(Some("m1"), "a"),
                text_chunk(None, "b"),
                text_chunk(Some("m2"), "c"),
                Event::step_started("s"),
                tool_chunk(Some("c1"), Some("f"), "{"),
                tool_chunk(None, None, "}"),
                Event::step_finished("s"),
                reasoning_chunk(Some("r1"), "hm"),
                Event::raw(json!(1), None),
                reasoning_chunk(None, "m"),
                finish(),
            ],
        ),
        (
            "chunks in a subagent lane",
            vec![
                start(),
                subagent_started("s1", None),
                sub(text_chunk(Some("m1"), "a"), "s1"),
                text_chunk(Some("m2"), "parent"),
                sub(text_chunk(None, "b"), "s1"),
                subagent_finished("s1"),
                text_chunk(None, "more parent"),
                finish(),
            ],
        ),
        (
            "tool result for a call of an earlier run",
            vec![
                start(),
                Event::tool_call_result("tm", "c-from-run-1", "ok"),
                finish(),
            ],
        ),
        (
            "attribution without lifecycle events",
            vec![
                start(),
                sub(Event::text_message_start("m"), "s9"),
                sub(Event::text_message_content("m", "x"), "s9"),
                Event::text_message_end("m"),
                finish(),
            ],
        ),
        (
            "snapshot seeds owners",
            vec![
                start(),
                Event::messages_snapshot(vec![Message::Assistant(AssistantMessage {
                    id: "a1".into(),
                    tool_calls: vec![ToolCall::new("c0", "f", "{}")],
                    subagent_run_id: Some("s1".into()),
                    ..Default::default()
                })]),
                sub(Event::tool_call_start("c1", "f", Some("a1".into())), "s1"),
                Event::tool_call_end("c1"),
                sub(
                    Event::reasoning_encrypted_value(EncryptedValueSubtype::ToolCall, "c0", "e"),
                    "s1",
                ),
                finish(),
            ],
        ),
        (
            "nested subagents",
            vec![
                start(),
                subagent_started("s1", None),
                subagent_started("s2", Some("s1")),
                subagent_error("s2"),
                subagent_finished("s1"),
                finish(),
            ],
        ),
    ];
    for (name, events) in cases {
        check(name, events, Ok(()));
    }
}

#[test]
fn verification_is_incremental() {
    let mut verifier = StreamVerifier::new();
    assert!(!verifier.run_active());
    verifier.check(&start()).expect("first");
    assert!(verifier.run_active());
    let error = verifier
        .check(&Event::text_message_end("m"))
        .expect_err("not open");
    assert_eq!(
        error.to_string(),
        "event #1 (TEXT_MESSAGE_END): no open text message 'm' (TEXT_MESSAGE_START must come first, and nothing may follow TEXT_MESSAGE_END)"
    );
    // A rejected event is not applied; the stream can still end cleanly.
    verifier.check(&finish()).expect("nothing open");
    assert_eq!(verifier.events_seen(), 3);
    verifier.finish().expect("terminated");
}
