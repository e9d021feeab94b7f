//! `RunAgentInput` parsing: what the official client sends is accepted, and every rejection
//! names the JSON path of the bad value and why.

use agui_types::{
    Content, ContentPart, Error, Message, PartSource, ResumeStatus, Role, RunAgentInput,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Parses `input` and compares the outcome: `Ok(())` or `Err((path, reason fragment))`.
fn check(input: Value, expected: Result<(), (&str, &str)>) {
    let body = serde_json::to_vec(&input).expect("test input serializes");
    let result = RunAgentInput::from_json(&body);
    match (result, expected) {
        (Ok(_), Ok(())) => {}
        (
            Err(Error::Invalid {
                document,
                path,
                reason,
            }),
            Err((want_path, want_reason)),
        ) => {
            assert_eq!(document, "RunAgentInput");
            assert_eq!(path, want_path, "reason was: {reason}");
            assert!(
                reason.contains(want_reason),
                "reason {reason:?} lacks {want_reason:?}"
            );
        }
        (got, want) => panic!("input {input}\n got {got:?}\nwant {want:?}"),
    }
}

/// A minimal valid input with `messages` replaced.
fn with_messages(messages: Value) -> Value {
    json!({ "threadId": "t", "runId": "r", "messages": messages })
}

fn user_parts(parts: Value) -> Value {
    with_messages(json!([{ "id": "u1", "role": "user", "content": parts }]))
}

#[test]
fn accepts_what_clients_send() {
    let cases = [
        json!({ "threadId": "t", "runId": "r", "messages": [] }),
        // What HttpAgent 1.0 posts, plus an unknown top-level field from a newer client.
        json!({
            "threadId": "t", "runId": "0d9b1f0e-uuid", "protocolVersion": "1.0",
            "tools": [], "context": [], "forwardedProps": {}, "state": {},
            "messages": [{ "id": "m1", "role": "user", "content": "hi", "futureField": 1 }],
            "somethingNew": { "x": 1 }
        }),
        // Nulls the client reads as absent.
        json!({ "threadId": "t", "runId": "r", "messages": [], "state": null, "forwardedProps": null }),
        // Non-UUID ids and a tool without parameters.
        json!({ "threadId": "thread:42", "runId": "run #7", "messages": [],
                "tools": [{ "name": "ping", "description": "no args" }] }),
        // All seven roles, including the client-side ones.
        with_messages(json!([
            { "id": "d", "role": "developer", "content": "dev" },
            { "id": "s", "role": "system", "content": "sys", "name": "ops" },
            { "id": "u", "role": "user", "content": [{ "type": "text", "text": "hi" }] },
            { "id": "a", "role": "assistant", "toolCalls": [
                { "id": "c1", "type": "function", "function": { "name": "f", "arguments": "{}" } } ] },
            { "id": "t1", "role": "tool", "toolCallId": "c1", "content": "42", "error": "partial" },
            { "id": "act", "role": "activity", "activityType": "plan", "content": { "steps": [] } },
            { "id": "rz", "role": "reasoning", "content": "because", "encryptedValue": "e" }
        ])),
        // Every media source kind.
        user_parts(json!([
            { "type": "image", "source": { "type": "data", "value": "AAAA", "mimeType": "image/png" } },
            { "type": "audio", "source": { "type": "url", "value": "https://x/a.mp3" } },
            { "type": "video", "source": { "type": "file", "value": "files/abc", "provider": "google" } },
            { "type": "document", "id": "p1", "metadata": { "pages": 3 },
              "source": { "type": "url", "value": "https://x/a.pdf", "mimeType": "application/pdf" } }
        ])),
        // The retired 0.x binary part.
        user_parts(json!([{ "type": "binary", "mimeType": "image/png", "data": "AAAA" }])),
        json!({ "threadId": "t", "runId": "r", "messages": [],
                "resume": [{ "interruptId": "i1", "status": "resolved", "payload": { "approved": true } },
                           { "interruptId": "i2", "status": "cancelled" }] }),
    ];
    for case in cases {
        check(case, Ok(()));
    }
}

#[test]
fn rejections_name_the_path_and_the_reason() {
    let cases: Vec<(Value, (&str, &str))> = vec![
        (
            json!({ "runId": "r", "messages": [] }),
            ("threadId", "required field is missing"),
        ),
        (
            json!({ "threadId": 3, "runId": "r", "messages": [] }),
            ("threadId", "expected a string"),
        ),
        (
            json!({ "threadId": "", "runId": "r", "messages": [] }),
            ("threadId", "must not be empty"),
        ),
        (
            json!({ "threadId": "t", "runId": "", "messages": [] }),
            ("runId", "must not be empty"),
        ),
        (
            json!({ "threadId": "t", "runId": "r" }),
            ("messages", "required field is missing"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": {} }),
            ("messages", "expected a sequence"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [], "tools": null }),
            ("tools", "expected a sequence"),
        ),
        (
            with_messages(json!([{ "id": "m", "content": "x" }])),
            ("messages[0].role", "required field is missing"),
        ),
        (
            with_messages(
                json!([{ "id": "m", "role": "user", "content": "x" }, { "id": "n", "role": "wizard" }]),
            ),
            ("messages[1].role", "unknown variant `wizard`"),
        ),
        (
            with_messages(json!([{ "id": "m", "role": 7 }])),
            ("messages[0].role", "expected a string"),
        ),
        (
            with_messages(json!([{ "role": "user", "content": "x" }])),
            ("messages[0].id", "required field is missing"),
        ),
        (
            with_messages(json!([{ "id": "m", "role": "user", "content": 3 }])),
            (
                "messages[0].content",
                "expected a string or an array of content parts",
            ),
        ),
        (
            with_messages(json!([{ "id": "m", "role": "developer", "content": ["x"] }])),
            ("messages[0].content", "expected a string"),
        ),
        (
            user_parts(json!([{ "text": "no type" }])),
            ("messages[0].content[0].type", "required field is missing"),
        ),
        (
            user_parts(json!([{ "type": "sticker" }])),
            ("messages[0].content[0].type", "unknown variant `sticker`"),
        ),
        (
            user_parts(
                json!([{ "type": "text", "text": "a" }, { "type": "image", "source": { "type": "data", "value": "AAAA" } }]),
            ),
            (
                "messages[0].content[1].source.mimeType",
                "required field is missing",
            ),
        ),
        (
            user_parts(json!([{ "type": "image", "source": { "type": "ftp", "value": "x" } }])),
            (
                "messages[0].content[0].source.type",
                "unknown variant `ftp`",
            ),
        ),
        (
            user_parts(json!([{ "type": "image", "source": { "type": "url", "value": 5 } }])),
            ("messages[0].content[0].source.value", "expected a string"),
        ),
        (
            user_parts(json!([{ "type": "image" }])),
            ("messages[0].content[0].source", "required field is missing"),
        ),
        (
            with_messages(json!([{ "id": "t", "role": "tool", "content": "x" }])),
            ("messages[0].toolCallId", "required field is missing"),
        ),
        (
            with_messages(json!([{ "id": "t", "role": "tool", "content": "x", "toolCallId": "" }])),
            ("messages[0].toolCallId", "must not be empty"),
        ),
        (
            with_messages(json!([{ "id": "a", "role": "assistant", "toolCalls": [
                { "id": "c", "type": "function", "function": { "name": "f" } } ] }])),
            (
                "messages[0].toolCalls[0].function.arguments",
                "required field is missing",
            ),
        ),
        (
            with_messages(json!([{ "id": "a", "role": "assistant", "toolCalls": [
                { "id": "c", "type": "method", "function": { "name": "f", "arguments": "{}" } } ] }])),
            ("messages[0].toolCalls[0].type", "unknown variant `method`"),
        ),
        (
            with_messages(
                json!([{ "id": "a", "role": "activity", "activityType": "p", "content": [] }]),
            ),
            ("messages[0].content", "expected a map"),
        ),
        (
            with_messages(
                json!([{ "id": "m1", "role": "user", "content": "a" }, { "id": "m1", "role": "user", "content": "b" }]),
            ),
            (
                "messages[1].id",
                "duplicate message id \"m1\" (also at messages[0].id)",
            ),
        ),
        (
            with_messages(json!([{ "id": "", "role": "user", "content": "a" }])),
            ("messages[0].id", "must not be empty"),
        ),
        (
            with_messages(json!([
                { "id": "a1", "role": "assistant", "toolCalls": [{ "id": "c", "type": "function", "function": { "name": "f", "arguments": "" } }] },
                { "id": "a2", "role": "assistant", "toolCalls": [{ "id": "c", "type": "function", "function": { "name": "g", "arguments": "" } }] }
            ])),
            ("messages[1].toolCalls[0].id", "duplicate tool call id"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [],
                    "tools": [{ "name": "f", "description": "a" }, { "name": "f", "description": "b" }] }),
            ("tools[1].name", "duplicate tool name \"f\""),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [], "tools": [{ "name": "f" }] }),
            ("tools[0].description", "required field is missing"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [], "context": [{ "description": "d", "value": 1 }] }),
            ("context[0].value", "expected a string"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [], "resume": [{ "interruptId": "i", "status": "approved" }] }),
            ("resume[0].status", "unknown variant `approved`"),
        ),
        (
            json!({ "threadId": "t", "runId": "r", "messages": [], "resume": [{ "interruptId": "i", "status": "resolved" }, { "interruptId": "i", "status": "cancelled" }] }),
            ("resume[1].interruptId", "duplicate interrupt id \"i\""),
        ),
        (json!(["t", "r", []]), (".", "expected a JSON object")),
        (json!("t"), (".", "expected a JSON object")),
    ];
    for (input, expected) in cases {
        check(input, Err(expected));
    }
}

#[test]
fn malformed_json_is_reported_with_its_position() {
    let complete = br#"{"threadId":"t","runId":"r","messages":[]} trailing"#;
    for body in [&b"{\"threadId\": "[..], complete, b"\xff"] {
        match RunAgentInput::from_json(body) {
            Err(Error::Invalid { path, reason, .. }) => {
                assert_eq!(path, ".");
                assert!(
                    reason.starts_with("malformed JSON:") && reason.contains("line 1"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn parsed_fields_keep_their_meaning() {
    let body = json!({
        "threadId": "t", "runId": "r", "parentRunId": "r0", "protocolVersion": "1.0",
        "state": { "count": 1 }, "forwardedProps": { "tenant": "acme" },
        "messages": [
            { "id": "u1", "role": "user", "content": [
                { "type": "text", "text": "look" },
                { "type": "image", "source": { "type": "data", "value": "AAAA", "mimeType": "image/png" } } ] },
            { "id": "a1", "role": "assistant", "content": "ok", "toolCalls": [
                { "id": "c1", "type": "function", "function": { "name": "f", "arguments": "{\"x\":1}" } } ] }
        ],
        "tools": [{ "name": "f", "description": "d", "parameters": { "type": "object" } }],
        "context": [{ "description": "locale", "value": "en-GB" }],
        "resume": [{ "interruptId": "i1", "status": "cancelled" }]
    });
    let input = RunAgentInput::from_value(body.clone()).expect("valid");
    assert_eq!(input.parent_run_id.as_deref(), Some("r0"));
    assert_eq!(input.state, Some(json!({ "count": 1 })));
    assert_eq!(
        input.messages.iter().map(Message::role).collect::<Vec<_>>(),
        [Role::User, Role::Assistant]
    );
    let Message::User(user) = &input.messages[0] else {
        panic!("user first")
    };
    assert_eq!(user.content.text(), "look");
    assert!(user.content.has_media());
    let Content::Parts(parts) = &user.content else {
        panic!("parts")
    };
    let ContentPart::Image(image) = &parts[1] else {
        panic!("image")
    };
    assert_eq!(
        image.source,
        PartSource::Data {
            value: "AAAA".into(),
            mime_type: "image/png".into()
        }
    );
    assert_eq!(input.resume[0].status, ResumeStatus::Cancelled);
    // Serializing gives the same document back.
    assert_eq!(serde_json::to_value(&input).expect("serializes"), body);
}

#[test]
fn absent_lists_default_to_empty_and_nulls_are_omitted_on_output() {
    let input =
        RunAgentInput::from_json(br#"{"threadId":"t","runId":"r","messages":[],"state":null}"#)
            .expect("valid");
    assert!(input.tools.is_empty() && input.context.is_empty() && input.resume.is_empty());
    assert_eq!(input.state, None);
    let out = serde_json::to_value(&input).expect("serializes");
    assert_eq!(
        out,
        json!({ "threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [] })
    );
}

#[test]
fn legacy_binary_parts_are_kept_apart_and_convertible() {
    let body = user_parts(json!([
        { "type": "binary", "mimeType": "image/png", "data": "AAAA", "filename": "a.png" },
        { "type": "binary", "mimeType": "application/pdf", "url": "https://x/a.pdf" },
        { "type": "binary", "mimeType": "audio/wav", "id": "upload-1" }
    ]));
    let input = RunAgentInput::from_value(body).expect("binary parts are tolerated");
    assert!(input.has_legacy_binary_parts());
    let Message::User(user) = &input.messages[0] else {
        panic!("user")
    };
    let Content::Parts(parts) = &user.content else {
        panic!("parts")
    };
    let converted: Vec<Value> = parts
        .iter()
        .map(|part| match part {
            ContentPart::Binary(binary) => {
                serde_json::to_value(binary.to_media_part()).expect("json")
            }
            other => panic!("expected a binary part, got {other:?}"),
        })
        .collect();
    assert_eq!(
        converted,
        [
            json!({ "type": "image", "source": { "type": "data", "value": "AAAA", "mimeType": "image/png" },
                    "metadata": { "filename": "a.png" } }),
            json!({ "type": "document", "source": { "type": "url", "value": "https://x/a.pdf", "mimeType": "application/pdf" } }),
            Value::Null,
        ]
    );
}
