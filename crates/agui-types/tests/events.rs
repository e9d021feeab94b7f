//! Event JSON shapes: constructors, omitted optionals, strict and lenient fields, legacy
//! `THINKING_*` input.

use agui_types::{
    EncryptedValueSubtype, Error, Event, EventType, Interrupt, PatchOperation, RunOutcome,
    SubagentStarted, TokenUsage, ToolCallResult, sse,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Serializes `event` and compares it with `expected`, then parses it back.
fn check(event: Event, expected: Value) {
    let json = serde_json::to_value(&event).expect("serializes");
    assert_eq!(json, expected);
    assert_eq!(Event::from_value(json).expect("parses back"), event);
}

fn contains_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(contains_null),
        Value::Object(map) => map.values().any(contains_null),
        _ => false,
    }
}

#[test]
fn constructors_produce_minimal_wire_events() {
    let cases = [
        (
            Event::run_started("t", "r"),
            json!({ "type": "RUN_STARTED", "threadId": "t", "runId": "r", "protocolVersion": "1.1" }),
        ),
        (
            Event::run_finished("t", "r"),
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r" }),
        ),
        (
            Event::run_finished_with("t", "r", RunOutcome::success_pending(vec!["c1".into()])),
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": { "type": "success", "pendingToolCallIds": ["c1"] } }),
        ),
        (
            Event::run_finished_with("t", "r", RunOutcome::success()),
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": { "type": "success" } }),
        ),
        (
            Event::run_finished_with("t", "r", RunOutcome::Cancelled),
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": { "type": "cancelled" } }),
        ),
        (
            Event::run_interrupted(
                "t",
                "r",
                vec![Interrupt {
                    tool_call_id: Some("c1".into()),
                    ..Interrupt::new("i1", Interrupt::REASON_TOOL_CALL)
                }],
            ),
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                    "outcome": { "type": "interrupt", "interrupts": [{ "id": "i1", "reason": "tool_call", "toolCallId": "c1" }] } }),
        ),
        (
            Event::run_error("boom", None),
            json!({ "type": "RUN_ERROR", "message": "boom" }),
        ),
        (
            Event::run_error("boom", Some("E1".into())),
            json!({ "type": "RUN_ERROR", "message": "boom", "code": "E1" }),
        ),
        (
            Event::step_started("plan"),
            json!({ "type": "STEP_STARTED", "stepName": "plan" }),
        ),
        (
            Event::step_finished("plan"),
            json!({ "type": "STEP_FINISHED", "stepName": "plan" }),
        ),
        (
            Event::text_message_start("m"),
            json!({ "type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant" }),
        ),
        (
            Event::text_message_content("m", ""),
            json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "" }),
        ),
        (
            Event::text_message_end("m"),
            json!({ "type": "TEXT_MESSAGE_END", "messageId": "m" }),
        ),
        (
            Event::tool_call_start("c", "get_weather", Some("m".into())),
            json!({ "type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "get_weather", "parentMessageId": "m" }),
        ),
        (
            Event::tool_call_start("c", "f", None),
            json!({ "type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f" }),
        ),
        (
            Event::tool_call_args("c", "{}"),
            json!({ "type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}" }),
        ),
        (
            Event::tool_call_end("c"),
            json!({ "type": "TOOL_CALL_END", "toolCallId": "c" }),
        ),
        (
            Event::tool_call_result("tm", "c", "42"),
            json!({ "type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "c", "content": "42", "role": "tool" }),
        ),
        (
            Event::reasoning_start("r1"),
            json!({ "type": "REASONING_START", "messageId": "r1" }),
        ),
        (
            Event::reasoning_message_start("r1"),
            json!({ "type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning" }),
        ),
        (
            Event::reasoning_message_content("r1", "hm"),
            json!({ "type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "hm" }),
        ),
        (
            Event::reasoning_message_end("r1"),
            json!({ "type": "REASONING_MESSAGE_END", "messageId": "r1" }),
        ),
        (
            Event::reasoning_end("r1"),
            json!({ "type": "REASONING_END", "messageId": "r1" }),
        ),
        (
            Event::reasoning_encrypted_value(EncryptedValueSubtype::ToolCall, "c", "opaque"),
            json!({ "type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "c", "encryptedValue": "opaque" }),
        ),
        (
            Event::state_snapshot(Value::Null),
            json!({ "type": "STATE_SNAPSHOT", "snapshot": null }),
        ),
        (
            Event::state_delta(vec![
                PatchOperation::Add {
                    path: "/a".into(),
                    value: Value::Null,
                },
                PatchOperation::Move {
                    from: "/a".into(),
                    path: "/b".into(),
                },
            ]),
            json!({ "type": "STATE_DELTA", "delta": [{ "op": "add", "path": "/a", "value": null }, { "op": "move", "from": "/a", "path": "/b" }] }),
        ),
        (
            Event::messages_snapshot(vec![]),
            json!({ "type": "MESSAGES_SNAPSHOT", "messages": [] }),
        ),
        (
            Event::custom("acme:ping", Value::Null),
            json!({ "type": "CUSTOM", "name": "acme:ping", "value": null }),
        ),
        (
            Event::raw(json!({ "n": 1 }), Some("gemini".into())),
            json!({ "type": "RAW", "event": { "n": 1 }, "source": "gemini" }),
        ),
        (
            Event::text_message_end("m")
                .with_timestamp(1_767_225_600_000)
                .with_raw_event(json!({ "k": 1 })),
            json!({ "type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 1_767_225_600_000_i64, "rawEvent": { "k": 1 } }),
        ),
    ];
    for (event, expected) in cases {
        check(event, expected);
    }
}

#[test]
fn absent_or_null_optionals_are_never_serialized() {
    let events = [
        Event::run_finished("t", "r").with_raw_event(Value::Null),
        agui_types::RunFinished {
            result: Some(Value::Null),
            ..agui_types::RunFinished::new("t", "r")
        }
        .into(),
        SubagentStarted {
            subagent_run_id: "s".into(),
            name: "n".into(),
            ..Default::default()
        }
        .into(),
        ToolCallResult {
            message_id: "m".into(),
            tool_call_id: "c".into(),
            ..Default::default()
        }
        .into(),
        agui_types::RunError {
            usage: vec![TokenUsage::default()],
            ..Default::default()
        }
        .into(),
    ];
    for event in events {
        let json = serde_json::to_value(&event).expect("serializes");
        assert!(!contains_null(&json), "{json}");
    }
}

#[test]
fn accessors_report_type_attribution_and_terminality() {
    let tagged: Event = agui_types::TextMessageContent {
        message_id: "m".into(),
        delta: "x".into(),
        subagent_run_id: Some("s1".into()),
        ..Default::default()
    }
    .into();
    assert_eq!(tagged.subagent_run_id(), Some("s1"));
    assert_eq!(tagged.event_type(), EventType::TextMessageContent);
    assert_eq!(
        EventType::TextMessageContent.as_str(),
        "TEXT_MESSAGE_CONTENT"
    );
    assert_eq!(
        EventType::from_wire_name("TEXT_MESSAGE_CONTENT"),
        Some(EventType::TextMessageContent)
    );
    assert_eq!(EventType::from_wire_name("THINKING_START"), None);
    assert_eq!(Event::run_started("t", "r").subagent_run_id(), None);
    assert!(Event::run_error("x", None).is_terminal());
    assert!(!Event::step_started("s").is_terminal());
}

/// Parses `input` as an event: `Ok(expected JSON after re-serialization)` or `Err(fragment)`.
fn check_input(input: Value, expected: Result<Value, &str>) {
    let result = Event::from_value(input.clone());
    match (result, expected) {
        (Ok(event), Ok(want)) => assert_eq!(serde_json::to_value(&event).expect("json"), want),
        (Err(error), Err(fragment)) => {
            assert!(
                error.to_string().contains(fragment),
                "{input}: {error} lacks {fragment:?}"
            )
        }
        (got, want) => panic!("{input}\n got {got:?}\nwant {want:?}"),
    }
}

#[test]
fn lenient_where_the_client_is_and_strict_where_it_is_not() {
    let cases: Vec<(Value, Result<Value, &str>)> = vec![
        // Unknown fields are dropped; null optionals read as absent.
        (
            json!({ "type": "TEXT_MESSAGE_END", "messageId": "m", "extra": 1, "rawEvent": null }),
            Ok(json!({ "type": "TEXT_MESSAGE_END", "messageId": "m" })),
        ),
        // The role of a reasoning message is filled in when missing.
        (
            json!({ "type": "REASONING_MESSAGE_START", "messageId": "r" }),
            Ok(json!({ "type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning" })),
        ),
        (
            json!({ "type": "REASONING_MESSAGE_START", "messageId": "r", "role": "assistant" }),
            Err("unknown variant `assistant`"),
        ),
        (
            json!({ "type": "TEXT_MESSAGE_START", "messageId": "m", "role": "tool" }),
            Err("unknown variant `tool`"),
        ),
        (
            json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": "m" }),
            Err("at `delta`: required field is missing"),
        ),
        (
            json!({ "type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 1.5 }),
            Err("at `timestamp`: invalid type: floating point"),
        ),
        (
            json!({ "type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": [1] }),
            Err("at `metadata`: invalid type: sequence, expected a map"),
        ),
        (
            json!({ "type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": { "a": 1 } }),
            Err("at `content`: invalid type: an object, expected a string or an array"),
        ),
        (
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": { "type": "interrupt", "interrupts": [] } }),
            Err("at `outcome`: must contain at least one entry"),
        ),
        (
            json!({ "type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": { "type": "paused" } }),
            Err("unknown variant `paused`"),
        ),
        (
            json!({ "type": "STATE_SNAPSHOT" }),
            Err("at `snapshot`: required field is missing"),
        ),
        (
            json!({ "type": "STATE_DELTA", "delta": [{ "op": "add", "path": "/a" }] }),
            Err("value"),
        ),
        (
            json!({ "type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool_call", "entityId": "e", "encryptedValue": "v" }),
            Err("unknown variant `tool_call`"),
        ),
        (
            json!({ "type": "NOT_AN_EVENT" }),
            Err("unknown event type `NOT_AN_EVENT`"),
        ),
        (
            json!({ "messageId": "m" }),
            Err("at `type`: expected a non-empty string"),
        ),
        (
            json!({ "type": "MESSAGES_SNAPSHOT", "messages": [{ "id": "u", "role": "user", "content": [
                { "type": "image", "source": { "type": "data", "value": "x" } } ] }] }),
            Err("at `messages[0].content[0].source.mimeType`: required field is missing"),
        ),
        (json!([]), Err("expected a JSON object")),
    ];
    for (input, expected) in cases {
        check_input(input, expected);
    }
    assert!(
        matches!(Event::from_json(r#"{"type":"NOPE"}"#), Err(Error::UnknownEventType(t)) if t == "NOPE")
    );
}

#[test]
fn retired_thinking_events_are_read_as_reasoning_but_never_written() {
    let cases = [
        (
            json!({ "type": "THINKING_START", "title": "plan" }),
            json!({ "type": "REASONING_START", "messageId": "thinking" }),
        ),
        (
            json!({ "type": "THINKING_TEXT_MESSAGE_START" }),
            json!({ "type": "REASONING_MESSAGE_START", "messageId": "thinking", "role": "reasoning" }),
        ),
        (
            json!({ "type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "hm" }),
            json!({ "type": "REASONING_MESSAGE_CONTENT", "messageId": "thinking", "delta": "hm" }),
        ),
        (
            json!({ "type": "THINKING_TEXT_MESSAGE_END" }),
            json!({ "type": "REASONING_MESSAGE_END", "messageId": "thinking" }),
        ),
        (
            json!({ "type": "THINKING_END", "messageId": "given" }),
            json!({ "type": "REASONING_END", "messageId": "given" }),
        ),
    ];
    for (input, expected) in cases {
        check_input(input.clone(), Ok(expected));
        let typed: Event = serde_json::from_value(input).expect("serde accepts legacy names");
        assert!(!typed.to_json().contains("THINKING"));
    }

    // In a stream each legacy span gets its own id, reused by its continuations.
    let body = [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"THINKING_START"}"#,
        r#"{"type":"THINKING_TEXT_MESSAGE_START"}"#,
        r#"{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"a"}"#,
        r#"{"type":"THINKING_TEXT_MESSAGE_END"}"#,
        r#"{"type":"THINKING_END"}"#,
        r#"{"type":"THINKING_START"}"#,
        r#"{"type":"THINKING_END"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
    ]
    .iter()
    .map(|json| format!("data: {json}\n\n"))
    .collect::<String>();
    let events = sse::decode_all(body.as_bytes()).expect("decodes");
    let ids: Vec<String> = events[1..8]
        .iter()
        .map(|e| {
            serde_json::to_value(e).expect("json")["messageId"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        ids,
        [
            "thinking-1",
            "thinking-2",
            "thinking-2",
            "thinking-2",
            "thinking-1",
            "thinking-3",
            "thinking-3"
        ]
    );
    agui_types::StreamVerifier::verify_all(&events).expect("translated stream is well ordered");
}
