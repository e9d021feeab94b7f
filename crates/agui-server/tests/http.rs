//! The HTTP surface against the real harness: request checks, streaming, transports,
//! capabilities, metrics, client disconnects and shutdown.

mod support;

use std::time::Duration;

use agui_types::{Encoding, Event, StreamVerifier};
use gemini_script::{Reply, Script, ScriptedModel};
use serde_json::{Value, json};
use support::{Fixture, harnesses_in, input, text, user};

#[tokio::test]
async fn the_demo_agent_serves_a_valid_stream_with_a_server_tool() {
    let fx = Fixture::start(&["--demo"]).await;
    let events = fx
        .run(
            "/",
            input("t1", json!([user("m1", "What is the weather in Paris?")])),
        )
        .await;
    let types: Vec<&str> = events.iter().map(|e| e.event_type().as_str()).collect();
    assert!(
        types.contains(&"REASONING_START") && types.contains(&"TOOL_CALL_RESULT"),
        "{types:?}"
    );
    assert!(text(&events).contains("Paris"), "{}", text(&events));
    assert!(matches!(events.last(), Some(Event::RunFinished(_))));
    // The run is counted by the time its body has been read; the agent at `/` is "default".
    let metrics = fx
        .client
        .get(fx.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "agui_runs_total{agent=\"default\"} 1",
        "agui_run_duration_seconds_count{agent=\"default\"} 1",
        "agui_time_to_first_event_seconds_count{agent=\"default\"} 1",
        "agui_sessions{agent=\"default\"} 1",
    ] {
        assert!(metrics.contains(line), "missing `{line}` in:\n{metrics}");
    }
    assert!(
        !metrics.contains("agui_run_errors_total{"),
        "no run failed: {metrics}"
    );
    let caps = fx.get_json("/capabilities").await;
    assert_eq!(caps["custom"]["demo"], true, "the demo says so: {caps}");
    assert_eq!(caps["tools"]["items"][0]["name"], "get_weather");
    assert_eq!(
        caps["humanInTheLoop"]["interrupts"], false,
        "no question or approval channel is configured"
    );
    // What the agent cannot do is said, not left out (an omitted field means undeclared).
    assert_eq!(caps["humanInTheLoop"]["interventions"], false);
    assert_eq!(
        caps["transport"]["resumable"], false,
        "connect is not resumption"
    );
    assert_eq!(
        caps["multiAgent"]["supported"], false,
        "no invoke_subagent by default"
    );
    let tools = caps["custom"]["builtinTools"].as_array().unwrap();
    let expected: Vec<&str> = [("write_to_file", "file_change"), ("run_command", "command")]
        .into_iter()
        .filter(|(tool, _)| tools.iter().any(|t| t == tool))
        .map(|(_, activity)| activity)
        .collect();
    assert_eq!(caps["custom"]["activityTypes"], json!(expected), "{caps}");
    fx.server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_refused_before_a_run_starts() {
    let fx = Fixture::start(&[
        "--demo",
        "--max-body-bytes",
        "2000",
        "--auth-token",
        "s3cret-token-0123",
        "--cors-origins",
        "http://app.example",
    ])
    .await;
    let post = |body: reqwest::Body, content_type: &'static str, token: Option<&'static str>| {
        let mut request = fx
            .client
            .post(fx.url("/"))
            .header("content-type", content_type)
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let valid = serde_json::to_vec(&input("t1", json!([]))).unwrap();
    let check = |status: reqwest::StatusCode, expected: u16, what: &str| {
        assert_eq!(status.as_u16(), expected, "{what}")
    };
    check(
        post(valid.clone().into(), "application/json", None)
            .await
            .unwrap()
            .status(),
        401,
        "no token",
    );
    check(
        post(valid.clone().into(), "application/json", Some("nope"))
            .await
            .unwrap()
            .status(),
        401,
        "wrong token",
    );
    check(
        post(
            valid.clone().into(),
            "text/plain",
            Some("s3cret-token-0123"),
        )
        .await
        .unwrap()
        .status(),
        415,
        "wrong type",
    );
    let too_big = serde_json::to_vec(&input("t1", json!([user("m1", &"x".repeat(5000))]))).unwrap();
    check(
        post(
            too_big.into(),
            "application/json",
            Some("s3cret-token-0123"),
        )
        .await
        .unwrap()
        .status(),
        413,
        "too large",
    );
    let response = post(
        "{not json".into(),
        "application/json",
        Some("s3cret-token-0123"),
    )
    .await
    .unwrap();
    check(response.status(), 422, "not JSON");
    let body: Value = response.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("line 1"),
        "{body}"
    );
    let missing = serde_json::to_vec(&json!({"threadId": "t", "messages": []})).unwrap();
    let response = post(
        missing.into(),
        "application/json; charset=utf-8",
        Some("s3cret-token-0123"),
    )
    .await
    .unwrap();
    check(response.status(), 422, "missing runId");
    assert!(
        response.json::<Value>().await.unwrap()["detail"]
            .as_str()
            .unwrap()
            .contains("runId")
    );
    let bad_thread = serde_json::to_vec(&input("../../etc", json!([]))).unwrap();
    check(
        post(
            bad_thread.into(),
            "application/json",
            Some("s3cret-token-0123"),
        )
        .await
        .unwrap()
        .status(),
        422,
        "bad thread id",
    );
    check(
        post(valid.into(), "application/json", Some("s3cret-token-0123"))
            .await
            .unwrap()
            .status(),
        200,
        "good request",
    );
    check(
        fx.client
            .get(fx.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "healthz needs no token",
    );
    check(
        fx.client
            .get(fx.url("/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "metrics need the token",
    );
    // A browser's preflight carries no token: CORS answers it for the configured origins; other
    // sites' pages are refused.
    for (origin, allowed) in [
        ("http://app.example", true),
        ("http://other.example", false),
    ] {
        let preflight = fx
            .client
            .request(reqwest::Method::OPTIONS, fx.url("/"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,authorization",
            )
            .send()
            .await
            .unwrap();
        check(
            preflight.status(),
            if allowed { 200 } else { 403 },
            "preflight",
        );
        let allow_origin = preflight
            .headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(
            allow_origin.as_deref(),
            allowed.then_some(origin),
            "{origin}"
        );
    }
    let metrics = fx
        .client
        .get(fx.url("/metrics"))
        .bearer_auth("s3cret-token-0123")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("agui_http_rejections_total{status=\"422\"} 3"),
        "{metrics}"
    );
    fx.server.shutdown().await;
}

#[tokio::test]
async fn protobuf_is_served_only_when_asked_for() {
    let fx = Fixture::start(&["--demo"]).await;
    let body = input("t-proto", json!([user("m1", "hello")]));
    let response = fx
        .client
        .post(fx.url("/"))
        .header("accept", "application/vnd.ag-ui.event+proto")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.ag-ui.event+proto"
    );
    let events = Encoding::Protobuf
        .decode_all(&response.bytes().await.unwrap())
        .unwrap();
    StreamVerifier::verify_all(&events).unwrap();
    assert!(matches!(events.last(), Some(Event::RunFinished(_))));
    let response = fx
        .client
        .post(fx.url("/"))
        .header("accept", "*/*")
        .json(&input("t-any", json!([])))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "*/* gets SSE"
    );
    fx.server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_stop_the_turn() {
    let chunks: Vec<String> = (0..12).map(|i| format!("part{i} ")).collect();
    let model = ScriptedModel::start(Script::new().then(Reply::text(chunks).delay_ms(250)))
        .await
        .unwrap();
    let base = model.base_url();
    let fx = Fixture::start(&["--gemini-base-url", &base, "--api-key", "k", "--model", "m"]).await;
    let mut response = fx
        .post("/", input("t-drop", json!([user("m1", "talk")])))
        .await;
    // Read until the first text arrives, then hang up.
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("part0") {
        seen.extend_from_slice(&response.chunk().await.unwrap().expect("more body"));
    }
    drop(response);
    // A run with nothing new re-attaches to the turn in flight and streams the rest.
    let events = fx
        .run(
            "/",
            json!({"threadId": "t-drop", "runId": "r2", "messages": [user("m1", "talk")]}),
        )
        .await;
    let rest = text(&events);
    assert!(
        rest.ends_with("part11 "),
        "the turn ran on and its end is delivered: {rest:?}"
    );
    assert_eq!(model.request_count(), 1, "the prompt was not sent again");
    fx.server.shutdown().await;
}

#[tokio::test]
async fn shutdown_ends_parked_sessions_and_reaps_the_harness() {
    let fx = Fixture::start(&["--demo"]).await;
    let tools = json!([{"name": "change_background", "description": "Sets the page background", "parameters": {"type": "object", "properties": {"background": {"type": "string"}}}}]);
    let events = fx.run("/", json!({"threadId": "t-park", "runId": "r1", "messages": [user("m1", "make the background blue")], "tools": tools})).await;
    let Some(Event::RunFinished(done)) = events.last() else {
        panic!()
    };
    assert!(
        done.outcome.is_some(),
        "parked on the frontend tool: {done:?}"
    );
    let save = fx.dir.path().join("save");
    let harness = harnesses_in(&save);
    assert!(!harness.is_empty(), "a harness runs for the agent");
    fx.server.shutdown().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while harness
        .iter()
        .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "harness processes left after shutdown: {harness:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_unreachable_model_ends_the_run_with_an_error_once_retries_are_spent() {
    // Nothing listens on port 1; one retry keeps the test short (the default is about a minute).
    let fx = Fixture::start(&[
        "--api-key",
        "k",
        "--gemini-base-url",
        "http://127.0.0.1:1",
        "--api-retries",
        "1",
    ])
    .await;
    let events = fx
        .run("/", input("unreachable", json!([user("m1", "hello")])))
        .await;
    let Some(Event::RunError(error)) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        error.message.contains("unreachable"),
        "the message says why: {}",
        error.message
    );
    assert_eq!(error.code.as_deref(), Some("AGENT_ERROR"), "{error:?}");
}

#[tokio::test]
async fn capabilities_name_the_thread_routes_and_what_a_disconnect_does() {
    for (flags, expected) in [
        (&["--demo"][..], "detach"),
        (&["--demo", "--on-disconnect", "cancel"][..], "cancel"),
    ] {
        let fx = Fixture::start(flags).await;
        let caps = fx.get_json("/capabilities").await;
        assert_eq!(
            caps["custom"]["threads"],
            json!({"connect": true, "stop": true, "delete": true, "onDisconnect": expected}),
            "{caps}"
        );
        fx.server.shutdown().await;
    }
}

#[tokio::test]
async fn the_stream_declares_our_version_or_1_0_for_a_1_0_client() {
    let fx = Fixture::start(&["--demo"]).await;
    for (n, (declared, answered)) in [
        (Some("1.1"), "1.1"),
        (None, "1.1"),
        (Some("1.7"), "1.1"),
        (Some("1.0"), "1.0"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = input(&format!("v{n}"), json!([user("m1", "hello")]));
        if let Some(version) = declared {
            body["protocolVersion"] = json!(version);
        }
        let events = fx.run("/", body).await;
        let Some(Event::RunStarted(started)) = events.first() else {
            panic!("{events:?}")
        };
        assert_eq!(
            started.protocol_version.as_deref(),
            Some(answered),
            "a client declaring {declared:?}"
        );
        assert!(matches!(events.last(), Some(Event::RunFinished(_))));
    }
    fx.server.shutdown().await;
}
