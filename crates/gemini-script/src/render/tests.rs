use serde_json::json;

use super::*;

fn request() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "Active Workspaces:\n- /ws\n"}]},
        "contents": [{"role": "user", "parts": [{"text": "<USER_REQUEST>\nhi\n</USER_REQUEST>"}]}],
        "tools": [{"functionDeclarations": [
            {"name": "list_dir"},
            {"name": "get_weather"},
            {"name": "change_background", "parametersJsonSchema": {
                "type": "object",
                "properties": {"background": {"type": "string"}, "opacity": {"type": "number"},
                               "mode": {"type": "string", "enum": ["fade", "cut"]}, "toolSummary": {"type": "string"}},
                "required": ["background", "opacity", "mode", "toolSummary", "toolAction"]}}
        ]}]
    })
}

fn plan(reply: &Reply) -> Option<Plan> {
    let body = request();
    let ctx = RequestCtx {
        model: "m",
        raw: "",
        body: &body,
    };
    render(reply, &ctx, "r1")
}

/// The SSE events of a 200 plan, reduced to their parts and finish fields.
fn events(reply: &Reply) -> Vec<Value> {
    match plan(reply) {
        Some(Plan::Stream { events, .. }) => events,
        other => panic!("expected a stream for {reply:?}, got {other:?}"),
    }
}

fn check(reply: Reply, expected_parts: Value) {
    let parts: Vec<Value> = events(&reply)
        .iter()
        .map(|e| match e.pointer("/candidates/0/content/parts") {
            Some(p) => p.clone(),
            None => e.clone(),
        })
        .collect();
    assert_eq!(Value::Array(parts), expected_parts, "reply {reply:?}");
}

#[test]
fn chunking_and_part_order() {
    let cases = vec![
        (
            Reply::text(["Hello ", "world"]),
            json!([[{"text": "Hello "}], [{"text": "world"}]]),
        ),
        (
            Reply::text("answer").thought(["plan a", "plan b"]),
            json!([[{"text": "plan a", "thought": true}], [{"text": "plan b", "thought": true}], [{"text": "answer"}]]),
        ),
        (
            Reply::text("abcdé").chunk_chars(2),
            json!([[{"text": "ab"}], [{"text": "cd"}], [{"text": "é"}]]),
        ),
        (
            Reply::text("one two three").chunk_words(2),
            json!([[{"text": "one two "}], [{"text": "three"}]]),
        ),
        (
            Reply::text("x").thought("t").signature("c2ln"),
            json!([[{"text": "t", "thought": true}], [{"text": "x", "thoughtSignature": "c2ln"}]]),
        ),
        (Reply::default(), json!([[{"text": ""}]])),
        (
            Reply::text("in {{workspace}}"),
            json!([[{"text": "in /ws"}]]),
        ),
    ];
    for (reply, expected) in cases {
        check(reply, expected);
    }
}

#[test]
fn function_calls() {
    let cases = vec![
        (
            Reply::call("list_dir", json!({"DirectoryPath": "{{workspace}}"})),
            json!([[{"functionCall": {"name": "list_dir", "args": {
                "DirectoryPath": "/ws", "toolSummary": "Directory listing", "toolAction": "Listing directory"}}}]]),
        ),
        (
            Reply::text("Let me check.")
                .with_call(
                    Call::new(
                        "get_weather",
                        json!({"city": "Oslo", "toolSummary": "Mine"}),
                    )
                    .id("c1"),
                )
                .and_call("my_tool", json!({}))
                .signature("c2ln"),
            json!([[{"text": "Let me check."}], [
                {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Oslo", "toolSummary": "Mine", "toolAction": "Fetching weather"}}, "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "my_tool", "args": {"toolSummary": "My tool", "toolAction": "Calling my_tool"}}}
            ]]),
        ),
        (
            Reply::calls([Call::new("raw", json!({"a": 1})).exact_args()]),
            json!([[{"functionCall": {"name": "raw", "args": {"a": 1}}}]]),
        ),
        (
            Reply::calls([Call::first_declared_except(
                ["get_weather"],
                json!({"background": "red"}),
            )]),
            json!([[{"functionCall": {"name": "change_background", "args": {
                "background": "red", "opacity": 1, "mode": "fade",
                "toolSummary": "Change background", "toolAction": "Calling change_background"}}}]]),
        ),
    ];
    for (reply, expected) in cases {
        check(reply, expected);
    }
}

#[test]
fn unresolvable_calls_skip_the_reply() {
    let reply = Reply::calls([Call::first_declared_except(
        ["get_weather", "change_background"],
        json!({}),
    )]);
    assert_eq!(plan(&reply), None);
}

#[test]
fn finish_and_usage_go_on_the_last_event() {
    let evs = events(&Reply::text(["a", "b"]).thought("t"));
    assert_eq!(evs.len(), 3);
    assert!(evs[..2].iter().all(|e| e.get("usageMetadata").is_none()));
    assert_eq!(evs[2]["candidates"][0]["finishReason"], json!("STOP"));
    assert_eq!(
        evs[2]["usageMetadata"],
        json!({"promptTokenCount": 100, "candidatesTokenCount": 20, "thoughtsTokenCount": 5, "totalTokenCount": 125})
    );
    assert_eq!(evs[0]["modelVersion"], json!("m"));
    assert_eq!(evs[0]["responseId"], json!("r1"));

    let max = events(
        &Reply::text("a")
            .finish("MAX_TOKENS")
            .usage(json!({"totalTokenCount": 7})),
    );
    assert_eq!(max[0]["candidates"][0]["finishReason"], json!("MAX_TOKENS"));
    assert_eq!(max[0]["usageMetadata"], json!({"totalTokenCount": 7}));

    let open = events(&Reply::text("a").no_finish());
    assert!(open[0]["candidates"][0].get("finishReason").is_none());
    assert!(open[0].get("usageMetadata").is_none());
}

#[test]
fn errors() {
    let cases = vec![
        (
            Reply::error(429),
            429,
            json!({"error": {"code": 429, "message": "gemini-script: scripted 429 error", "status": "RESOURCE_EXHAUSTED"}}),
        ),
        (
            Reply::error(400).message("bad {{model}}"),
            400,
            json!({"error": {"code": 400, "message": "bad m", "status": "INVALID_ARGUMENT"}}),
        ),
        (
            Reply::error(401),
            401,
            json!({"error": {"code": 401, "message": "gemini-script: scripted 401 error", "status": "UNAUTHENTICATED"}}),
        ),
        (
            Reply::error(403).status("CUSTOM"),
            403,
            json!({"error": {"code": 403, "message": "gemini-script: scripted 403 error", "status": "CUSTOM"}}),
        ),
        (
            Reply::error(500),
            500,
            json!({"error": {"code": 500, "message": "gemini-script: scripted 500 error", "status": "INTERNAL"}}),
        ),
        (
            Reply::error(503),
            503,
            json!({"error": {"code": 503, "message": "gemini-script: scripted 503 error", "status": "UNAVAILABLE"}}),
        ),
    ];
    for (reply, status, body) in cases {
        assert_eq!(
            plan(&reply),
            Some(Plan::Error {
                status,
                body,
                headers: BTreeMap::new()
            }),
            "reply {reply:?}"
        );
    }
    let evs = events(
        &Reply::error(500)
            .in_stream()
            .message("boom")
            .and_text("partial"),
    );
    assert_eq!(evs.len(), 2);
    assert_eq!(
        evs[0]["candidates"][0]["content"]["parts"],
        json!([{"text": "partial"}])
    );
    assert!(evs[0]["candidates"][0].get("finishReason").is_none());
    assert_eq!(
        evs[1],
        json!({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
    );
}

#[test]
fn raw_chunks_are_verbatim() {
    let raw = json!({"candidates": [{"finishReason": "SAFETY", "index": 0}]});
    assert_eq!(events(&Reply::chunks([raw.clone()])), vec![raw]);
}
