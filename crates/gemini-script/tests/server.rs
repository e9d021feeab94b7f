//! The live server over HTTP: streaming shapes, matching, errors, the log and
//! the control routes.

use futures_util::StreamExt as _;
use gemini_script::{
    AnsweredBy, Call, Handle, LoggedRequest, Matcher, Reply, Script, ScriptedModel,
};
use serde_json::{Value, json};

const MODEL: &str = "gemini-3-flash-preview";

fn prompt(text: &str) -> Value {
    json!({
        "contents": [{"role": "user", "parts": [{"text": format!("<USER_REQUEST>\n{text}\n</USER_REQUEST>\n<ADDITIONAL_METADATA>\nt\n</ADDITIONAL_METADATA>")}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": {"type": "object"}}]}],
        "generationConfig": {"maxOutputTokens": 65535}
    })
}

fn tool_result(name: &str, output: &str) -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [{"text": "<USER_REQUEST>\nweather?\n</USER_REQUEST>"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": name, "args": {}}}]},
            {"role": "model", "parts": [{"functionResponse": {"id": "c1", "name": name, "response": {"output": output}}}]}
        ]
    })
}

fn stream_url(model: &Handle) -> String {
    format!(
        "{}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        model.base_url()
    )
}

/// Posts `body` to the streaming route; returns the status and the parsed SSE events.
async fn stream(model: &Handle, body: &Value) -> (u16, Vec<Value>) {
    let response = reqwest::Client::new()
        .post(stream_url(model))
        .header("x-goog-api-key", "fake-key")
        .json(body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    if status != 200 {
        return (
            status,
            vec![serde_json::from_str(&text).expect("error JSON")],
        );
    }
    let events = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not an SSE data event: {e:?}"));
            serde_json::from_str(data).expect("event JSON")
        })
        .collect();
    (status, events)
}

fn texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .flat_map(|e| {
            e.pointer("/candidates/0/content/parts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn answered(requests: &[LoggedRequest]) -> Vec<Option<usize>> {
    requests
        .iter()
        .map(|r| r.answered_by.entry_index())
        .collect()
}

#[tokio::test]
async fn streams_text_as_sse_events_and_logs_the_request() {
    let model =
        ScriptedModel::start(Script::new().then(Reply::text(["Hello ", "world"]).thought("hmm")))
            .await
            .expect("start");
    let response = reqwest::Client::new()
        .post(stream_url(&model))
        .json(&prompt("Say hello"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (status, events) = stream(&model, &prompt("again")).await;
    assert_eq!(status, 200);
    assert_eq!(
        texts(&events),
        vec!["(gemini-script: no scripted reply matched this request)"]
    );
    let body = response.text().await.expect("body");
    assert!(
        body.starts_with("data: {") && body.ends_with("}\n\n"),
        "{body}"
    );
    assert_eq!(body.matches("data: ").count(), 3);

    let log = model.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].seq, 1);
    assert_eq!(log[0].method, "POST");
    assert_eq!(
        log[0].path,
        format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
    );
    assert_eq!(log[0].model.as_deref(), Some(MODEL));
    assert_eq!(log[0].rpc.as_deref(), Some("streamGenerateContent"));
    assert_eq!(
        log[0].answered_by,
        AnsweredBy::Entry {
            index: 0,
            name: None
        }
    );
    assert_eq!(log[0].status, 200);
    assert_eq!(log[0].last_user_text().as_deref(), Some("Say hello"));
    assert_eq!(log[0].declared_functions(), vec!["get_weather"]);
    assert_eq!(
        log[0].body["generationConfig"],
        json!({"maxOutputTokens": 65535})
    );
    assert_eq!(log[1].answered_by, AnsweredBy::Default);
}

#[tokio::test]
async fn entries_match_in_order_and_are_used_up() {
    let script = Script::new()
        .then(
            Reply::text("weather result")
                .when(Matcher::function_response_to("get_weather"))
                .named("after tool"),
        )
        .then(Reply::text("twice").when(Matcher::user_text()).times(2))
        .then(
            Reply::text("sticky")
                .when(Matcher::any().keywords(["sticky"]))
                .forever(),
        )
        .default_reply(Reply::text("fallback"));
    let model = ScriptedModel::start(script).await.expect("start");
    let cases = [
        (prompt("one"), "twice"),
        (tool_result("get_weather", "sunny"), "weather result"),
        (tool_result("get_weather", "sunny"), "fallback"),
        (prompt("two"), "twice"),
        (prompt("three"), "fallback"),
        (prompt("STICKY"), "sticky"),
        (prompt("sticky again"), "sticky"),
    ];
    for (body, expected) in &cases {
        let (_, events) = stream(&model, body).await;
        assert_eq!(texts(&events), vec![*expected], "request {body}");
    }
    let log = model.requests();
    assert_eq!(
        answered(&log),
        vec![Some(1), Some(0), None, Some(1), None, Some(2), Some(2)]
    );
    assert_eq!(
        log[1].answered_by,
        AnsweredBy::Entry {
            index: 0,
            name: Some("after tool".into())
        }
    );
    assert_eq!(
        log[1].function_responses()[0].output.as_deref(),
        Some("sunny")
    );
    let remaining: Vec<usize> = model.remaining().iter().map(|e| e.index).collect();
    assert_eq!(remaining, vec![2]);
}

#[tokio::test]
async fn function_calls_stream_in_one_event() {
    let reply = Reply::calls([
        Call::new("get_weather", json!({"city": "Oslo"})).id("call-1"),
        Call::new("get_weather", json!({"city": "Rome"})),
    ])
    .signature("c2ln");
    let model = ScriptedModel::start(Script::new().then(reply))
        .await
        .expect("start");
    let (_, events) = stream(&model, &prompt("Oslo and Rome?")).await;
    assert_eq!(events.len(), 1);
    let candidate = &events[0]["candidates"][0];
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(
        candidate["content"]["parts"],
        json!([
            {"functionCall": {"id": "call-1", "name": "get_weather", "args": {"city": "Oslo", "toolSummary": "Weather lookup", "toolAction": "Fetching weather"}}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "get_weather", "args": {"city": "Rome", "toolSummary": "Weather lookup", "toolAction": "Fetching weather"}}}
        ])
    );
    assert!(events[0]["usageMetadata"]["totalTokenCount"].is_number());
}

#[tokio::test]
async fn errors_use_gemini_error_json() {
    let mut script = Script::new();
    for code in [400, 401, 403, 429, 500, 503] {
        script = script.then(Reply::error(code).header("Retry-After", "1"));
    }
    let model =
        ScriptedModel::start(script.then(Reply::error(503).in_stream().and_text("partial")))
            .await
            .expect("start");
    for (code, status) in [
        (400, "INVALID_ARGUMENT"),
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (429, "RESOURCE_EXHAUSTED"),
        (500, "INTERNAL"),
        (503, "UNAVAILABLE"),
    ] {
        let (got, body) = stream(&model, &prompt("x")).await;
        assert_eq!(got, code);
        assert_eq!(body[0]["error"]["code"], code);
        assert_eq!(body[0]["error"]["status"], status);
        assert!(body[0]["error"]["message"].is_string());
    }
    let (status, events) = stream(&model, &prompt("x")).await;
    assert_eq!(status, 200);
    assert_eq!(texts(&events), vec!["partial"]);
    assert_eq!(events[1]["error"]["code"], 503);
    let statuses: Vec<u16> = model.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![400, 401, 403, 429, 500, 503, 200]);
}

#[tokio::test]
async fn generate_content_count_tokens_and_bad_requests() {
    let model = ScriptedModel::start(Script::new().then(Reply::text(["a", "b"]).thought("t")))
        .await
        .expect("start");
    let client = reqwest::Client::new();
    let base = model.base_url();
    let merged: Value = client
        .post(format!("{base}/v1beta/models/{MODEL}:generateContent"))
        .json(&prompt("x"))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(
        merged["candidates"][0]["content"]["parts"],
        json!([{"text": "t", "thought": true}, {"text": "a"}, {"text": "b"}])
    );
    assert_eq!(merged["candidates"][0]["finishReason"], "STOP");

    let count = client
        .post(format!("{base}/v1beta/models/{MODEL}:countTokens"))
        .json(&prompt("x"))
        .send()
        .await
        .expect("request");
    assert_eq!(count.status(), 200);
    let count: Value = count.json().await.expect("json");
    assert!(
        count["totalTokens"].as_u64().is_some_and(|n| n > 0),
        "{count}"
    );

    let bad_json = client
        .post(format!(
            "{base}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
        ))
        .body("{not json")
        .send()
        .await
        .expect("request");
    assert_eq!(bad_json.status(), 400);
    let unknown = client
        .get(format!("{base}/v1beta/models"))
        .send()
        .await
        .expect("request");
    assert_eq!(unknown.status(), 404);
    let error: Value = unknown.json().await.expect("json");
    assert_eq!(error["error"]["status"], "NOT_FOUND");

    let log = model.requests();
    let summary: Vec<(Option<&str>, &AnsweredBy, u16)> = log
        .iter()
        .map(|r| (r.rpc.as_deref(), &r.answered_by, r.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                Some("generateContent"),
                &AnsweredBy::Entry {
                    index: 0,
                    name: None
                },
                200
            ),
            (Some("countTokens"), &AnsweredBy::Builtin, 200),
            (Some("streamGenerateContent"), &AnsweredBy::Rejected, 400),
            (None, &AnsweredBy::Rejected, 404),
        ]
    );
    assert_eq!(log[2].body, json!("{not json"));
}

#[tokio::test]
async fn hanging_streams_end_on_shutdown() {
    let model =
        ScriptedModel::start(Script::new().then(Reply::text("first").no_finish().hang_forever()))
            .await
            .expect("start");
    let response = reqwest::Client::new()
        .post(stream_url(&model))
        .json(&prompt("x"))
        .send()
        .await
        .expect("request");
    let mut body = response.bytes_stream();
    let first = body.next().await.expect("an event").expect("bytes");
    assert!(String::from_utf8_lossy(&first).contains("\"first\""));
    // The stream is still open: the server answers other requests meanwhile.
    let (_, events) = stream(&model, &prompt("y")).await;
    assert_eq!(events.len(), 1);
    model.shutdown().await;
    let rest: Vec<_> = body.collect().await;
    assert!(
        rest.iter()
            .all(|chunk| chunk.as_ref().is_ok_and(|b| b.is_empty())),
        "{rest:?}"
    );
}

#[tokio::test]
async fn delayed_chunked_and_timed_hang_streams_complete() {
    let reply = Reply::text("one two three four")
        .chunk_words(1)
        .delay_ms(5)
        .hang_ms(20);
    let model = ScriptedModel::start(Script::new().then(reply))
        .await
        .expect("start");
    let (_, events) = stream(&model, &prompt("x")).await;
    assert_eq!(texts(&events), vec!["one ", "two ", "three ", "four"]);
}

#[tokio::test]
async fn concurrent_requests_each_get_an_answer() {
    let script = Script::new().then(
        Reply::text("{{user_text}}")
            .delay_ms(10)
            .when(Matcher::user_text())
            .forever(),
    );
    let model = ScriptedModel::start(script).await.expect("start");
    let prompts: Vec<String> = (0..8).map(|i| format!("conversation {i}")).collect();
    let answers = futures_util::future::join_all(prompts.iter().map(|p| {
        let body = prompt(p);
        let model = &model;
        async move { stream(model, &body).await.1 }
    }))
    .await;
    for (p, events) in prompts.iter().zip(answers) {
        assert_eq!(texts(&events), vec![p.clone()]);
    }
    assert_eq!(model.request_count(), 8);
}

#[tokio::test]
async fn scripts_can_be_replaced_and_extended_in_process() {
    let model = ScriptedModel::start(Script::new().then(Reply::text("old")))
        .await
        .expect("start");
    model
        .set_script(Script::new().then(Reply::text("new")))
        .expect("set");
    model.push(Reply::text("pushed")).expect("push");
    assert!(model.push(Reply::error(200)).is_err());
    assert!(
        model
            .set_script(Script::new().then(Reply::text("x").chunk_chars(0)))
            .is_err()
    );
    let mut got = Vec::new();
    for _ in 0..2 {
        got.extend(texts(&stream(&model, &prompt("x")).await.1));
    }
    assert_eq!(got, vec!["new", "pushed"]);
    assert_eq!(answered(&model.requests()), vec![Some(0), Some(1)]);
    model.clear_requests();
    assert_eq!(model.request_count(), 0);
    model.reset();
    assert!(model.remaining().is_empty());
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server() {
    let model = ScriptedModel::start(Script::new()).await.expect("start");
    let addr = model.addr();
    drop(model);
    // Shutdown after drop is asynchronous; wait until the port refuses connections.
    let mut refused = false;
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        refused,
        "server still accepting on {addr} after the handle was dropped"
    );
}

#[tokio::test]
async fn binding_a_taken_port_is_a_clear_error() {
    let first = ScriptedModel::start(Script::new()).await.expect("start");
    let err = ScriptedModel::start_on(first.addr().port(), Script::new())
        .await
        .expect_err("port is taken");
    assert!(err.to_string().contains("cannot bind"), "{err}");
}

#[tokio::test]
async fn large_request_bodies_are_accepted() {
    let model = ScriptedModel::start(Script::new().then(Reply::text("ok")))
        .await
        .expect("start");
    // Harness requests carry the whole history; axum's default 2 MB cap must not apply.
    let big = "x".repeat(5 * 1024 * 1024);
    let (status, events) = stream(&model, &prompt(&big)).await;
    assert_eq!(status, 200);
    assert_eq!(texts(&events), vec!["ok"]);
    assert_eq!(
        model.requests()[0].last_user_text().map(|t| t.len()),
        Some(big.len())
    );
}
