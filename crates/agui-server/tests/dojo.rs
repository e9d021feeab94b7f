//! The examples end to end: the dojo server (`examples/dojo`) and the minimal embedding
//! (`examples/minimal.rs`) run in-process against the real harness and their scripted models,
//! driven over HTTP. Every stream must pass the AG-UI stream verifier.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

#[path = "../examples/dojo/main.rs"]
#[allow(dead_code, unreachable_pub)]
mod dojo;
#[path = "../examples/minimal.rs"]
#[allow(dead_code, unreachable_pub)]
mod minimal;

use std::path::PathBuf;
use std::time::Duration;

use agui_server::cli::ServeArgs;
use agui_server::{RunningServer, Server, ServerConfig};
use agui_types::{Encoding, Event, StreamVerifier};
use serde_json::{Value, json};

/// The real harness, found like the server finds it but never installed by a test.
fn harness() -> PathBuf {
    harness_client::find_binary(None).unwrap_or_else(|e| {
        panic!("these tests run the real harness and did not find it: {e}\nRun `cargo xtask fetch-harness` first.")
    })
}

/// The binary's options for a scratch server: offline, any free port, temporary directories.
fn args(dir: &tempfile::TempDir, extra: &[&str]) -> Vec<String> {
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut args: Vec<String> = [
        "dojo",
        "--demo",
        "--bind",
        "127.0.0.1:0",
        "--prestart-harness",
        "false",
    ]
    .map(String::from)
    .into();
    args.extend([
        "--harness-path".into(),
        harness().display().to_string(),
        "--save-dir".into(),
        path("s"),
        "--workspace-root".into(),
        path("w"),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A started server and a client for it.
struct Live {
    server: RunningServer,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Live {
    async fn start(make: impl FnOnce(Vec<String>) -> Server) -> Self {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let server = make(args(&dir, &[]))
            // The binary is the sandbox launcher (this test program is not).
            .with_sandbox_launcher(agui_server::sandbox::launcher_at(env!(
                "CARGO_BIN_EXE_agui-antigravity"
            )))
            .start()
            .await
            .expect("the server starts");
        Self {
            server,
            // A safety net so a hung run fails instead of blocking CI; no run comes near it.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .expect("an HTTP client"),
            _dir: dir,
        }
    }

    async fn dojo() -> Self {
        Self::start(|args| {
            let args = ServeArgs::from_args(args).expect("valid options");
            dojo::server(args, "/").expect("a dojo configuration")
        })
        .await
    }

    /// Runs `input` on the agent at `path`; the events, checked by the stream verifier, as JSON.
    async fn run(&self, path: &str, input: Value) -> Vec<Value> {
        let url = format!("http://{}{path}", self.server.addr());
        let response = self
            .http
            .post(&url)
            .header("accept", "text/event-stream")
            .json(&input)
            .send()
            .await
            .expect("the request is answered");
        assert_eq!(response.status(), 200, "POST {path}");
        let body = response.bytes().await.expect("the stream ends");
        let events: Vec<Event> = Encoding::Sse
            .decode_all(&body)
            .unwrap_or_else(|e| panic!("POST {path}: undecodable stream: {e}"));
        StreamVerifier::verify_all(&events)
            .unwrap_or_else(|v| panic!("POST {path}: invalid AG-UI stream: {v}\n{events:#?}"));
        events
            .iter()
            .map(|e| serde_json::to_value(e).expect("events serialise"))
            .collect()
    }

    async fn stop(self) {
        self.server.shutdown().await;
    }
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": text})
}

fn input(thread: &str, messages: Value) -> Value {
    json!({"threadId": thread, "runId": run_id(), "messages": messages})
}

fn run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("run-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn position(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", types(events)))
}

/// The assistant's streamed text.
fn text(events: &[Value]) -> String {
    of_type(events, "TEXT_MESSAGE_CONTENT")
        .iter()
        .filter_map(|e| e["delta"].as_str())
        .collect()
}

fn finished(events: &[Value]) -> &Value {
    let last = events.last().expect("a stream has events");
    assert_eq!(last["type"], "RUN_FINISHED", "{:?}", types(events));
    last
}

/// The one tool call of a run: its id and parsed arguments, after checking its name.
fn tool_call(events: &[Value], name: &str) -> (String, Value) {
    let starts = of_type(events, "TOOL_CALL_START");
    assert_eq!(starts.len(), 1, "one call: {:?}", types(events));
    assert_eq!(starts[0]["toolCallName"], name);
    let id = starts[0]["toolCallId"].as_str().expect("an id").to_owned();
    let args: String = of_type(events, "TOOL_CALL_ARGS")
        .iter()
        .filter(|e| e["toolCallId"] == id.as_str())
        .filter_map(|e| e["delta"].as_str())
        .collect();
    let args = serde_json::from_str(&args).expect("the arguments are one JSON document");
    (id, args)
}

/// The `TOOL_CALL_RESULT` content of `id` as text.
fn result_of(events: &[Value], id: &str) -> String {
    let result = of_type(events, "TOOL_CALL_RESULT")
        .into_iter()
        .find(|e| e["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no result for {id}: {:?}", types(events)));
    match &result["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agentic_chat_streams_answers_and_reasoning() {
    let live = Live::dojo().await;
    let hello = live
        .run("/agentic_chat", input("chat-1", json!([user("m1", "Hi!")])))
        .await;
    assert!(
        text(&hello).contains("offline demo model"),
        "{}",
        text(&hello)
    );
    assert!(of_type(&hello, "TOOL_CALL_START").is_empty());
    assert!(
        finished(&hello).get("outcome").is_none(),
        "a plain answer has no outcome"
    );
    let history = json!([user("m1", "Hi!"), {"id": "a1", "role": "assistant", "content": text(&hello)},
        user("m2", "Explain how this works")]);
    let explained = live.run("/agentic_chat", input("chat-1", history)).await;
    assert!(!of_type(&explained, "REASONING_MESSAGE_CONTENT").is_empty());
    assert!(text(&explained).contains("AG-UI"), "{}", text(&explained));
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn human_in_the_loop_parks_on_the_page_tool_and_a_tool_message_resumes_it() {
    let live = Live::dojo().await;
    let tools = json!([{
        "name": "generate_task_steps",
        "description": "Generates a list of steps for the user to review",
        "parameters": {"type": "object", "properties": {"steps": {"type": "array", "items": {
            "type": "object",
            "properties": {"description": {"type": "string"}, "status": {"type": "string", "enum": ["enabled", "disabled"]}}
        }}}, "required": ["steps"]}
    }]);
    let ask = user("m1", "Plan a trip to Mars");
    let first = live
        .run(
            "/human_in_the_loop",
            json!({"threadId": "hitl-1", "runId": run_id(), "messages": [ask], "tools": tools}),
        )
        .await;
    let (id, args) = tool_call(&first, "generate_task_steps");
    let steps = args["steps"].as_array().expect("steps");
    assert!(
        steps.len() > 2 && steps.iter().all(|s| s["status"] == "enabled"),
        "{args}"
    );
    assert!(
        of_type(&first, "TOOL_CALL_RESULT").is_empty(),
        "the page runs it"
    );
    assert_eq!(
        finished(&first)["outcome"],
        json!({"type": "success", "pendingToolCallIds": [id]})
    );
    let chosen = json!({"accepted": true, "steps": [steps[0], steps[2]]}).to_string();
    let messages = json!([ask,
        {"id": "a1", "role": "assistant", "toolCalls": [{"id": id, "type": "function",
            "function": {"name": "generate_task_steps", "arguments": args.to_string()}}]},
        {"id": "t1", "role": "tool", "toolCallId": id, "content": chosen}]);
    let second = live
        .run(
            "/human_in_the_loop",
            json!({"threadId": "hitl-1", "runId": run_id(), "messages": messages, "tools": tools}),
        )
        .await;
    assert!(
        of_type(&second, "TOOL_CALL_START").is_empty(),
        "not dispatched again"
    );
    let answer = text(&second);
    assert!(
        answer.contains("Thanks for reviewing") && answer.contains("accepted"),
        "the model saw the user's choice: {answer}"
    );
    assert!(finished(&second).get("outcome").is_none());
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn backend_tool_rendering_streams_the_weather_call_and_its_result() {
    let live = Live::dojo().await;
    let events = live
        .run(
            "/backend_tool_rendering",
            input(
                "weather-1",
                json!([user("m1", "What's the weather in Tokyo?")]),
            ),
        )
        .await;
    let (id, args) = tool_call(&events, "get_weather");
    assert_eq!(args, json!({"location": "Tokyo"}));
    let result: Value = serde_json::from_str(&result_of(&events, &id)).expect("a JSON result");
    assert_eq!(result["location"], "Tokyo");
    for field in [
        "temperature",
        "feelsLike",
        "conditions",
        "humidity",
        "windSpeed",
    ] {
        assert!(result.get(field).is_some(), "{field} in {result}");
    }
    assert!(position(&events, "TOOL_CALL_RESULT") < position(&events, "TEXT_MESSAGE_START"));
    assert!(text(&events).contains("Tokyo"), "{}", text(&events));
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_state_appends_the_delegation_before_the_tool_result() {
    let live = Live::dojo().await;
    let earlier = json!({"id": "earlier", "task": "Earlier work", "status": "done"});
    let task = "Research the history of Rust";
    let events = live
        .run(
            "/shared_state",
            json!({"threadId": "state-1", "runId": run_id(), "messages": [user("m1", task)],
                "state": {"delegations": [earlier], "theme": "dark"}}),
        )
        .await;
    let (id, args) = tool_call(&events, "research_agent");
    assert_eq!(args, json!({"task": task}));
    let result_at = position(&events, "TOOL_CALL_RESULT");
    let snapshots: Vec<(usize, &Value)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "STATE_SNAPSHOT")
        .collect();
    assert!(
        !snapshots.is_empty() && snapshots.iter().all(|(at, _)| *at < result_at),
        "state before the result: {:?}",
        types(&events)
    );
    let state = &snapshots.last().expect("a snapshot").1["snapshot"];
    assert_eq!(state["theme"], "dark", "the rest of the state is kept");
    let delegations = state["delegations"].as_array().expect("delegations");
    assert_eq!(delegations.len(), 2, "{state}");
    assert_eq!(delegations[0], earlier);
    assert_eq!(delegations[1]["id"], id.as_str());
    assert_eq!(delegations[1]["task"], task);
    assert_eq!(delegations[1]["status"], "done");
    assert_eq!(
        delegations[1]["findings"].as_str(),
        Some(result_of(&events, &id).as_str())
    );
    assert!(text(&events).contains("delegations"), "{}", text(&events));
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupt_pauses_schedule_meeting_until_resume_picks_a_time() {
    let live = Live::dojo().await;
    let ask = user("m1", "Schedule a meeting with the sales team");
    let mut bookings = Vec::new();
    for (thread, payload) in [
        (
            "meeting-1",
            json!({"chosen_time": "tuesday-14:30", "chosen_label": "Tuesday, 14:30"}),
        ),
        ("meeting-2", json!({"cancelled": true})),
    ] {
        let first = live.run("/interrupt", input(thread, json!([ask]))).await;
        let (id, args) = tool_call(&first, "schedule_meeting");
        assert_eq!(
            args,
            json!({"topic": "Intro call", "attendee": "the sales team"})
        );
        let outcome = &finished(&first)["outcome"];
        assert_eq!(outcome["type"], "interrupt", "{outcome}");
        let interrupt = &outcome["interrupts"][0];
        assert_eq!(interrupt["reason"], "schedule_meeting");
        assert_eq!(interrupt["toolCallId"], id.as_str());
        assert_eq!(interrupt["metadata"]["topic"], "Intro call");
        assert_eq!(interrupt["metadata"]["attendee"], "the sales team");
        assert_eq!(
            interrupt["metadata"]["reason"],
            json!({"topic": "Intro call", "attendee": "the sales team"})
        );
        assert_eq!(
            interrupt["metadata"]["slots"].as_array().map(Vec::len),
            Some(3)
        );
        assert!(interrupt["responseSchema"]["properties"]["chosen_label"].is_object());
        assert!(of_type(&first, "TOOL_CALL_RESULT").is_empty());
        let resume = json!({"threadId": thread, "runId": run_id(), "messages": [ask],
            "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]});
        let second = live.run("/interrupt", resume).await;
        let booking = result_of(&second, &id);
        assert!(
            text(&second).contains(&booking),
            "the model reports the booking: {}",
            text(&second)
        );
        assert!(finished(&second).get("outcome").is_none());
        bookings.push(booking);
    }
    assert_eq!(
        bookings,
        [
            "Meeting scheduled for Tuesday, 14:30: Intro call with the sales team.",
            "The user cancelled. Meeting NOT scheduled: Intro call with the sales team."
        ]
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_minimal_example_serves_the_weather_tool() {
    let live =
        Live::start(|args| minimal::server(ServerConfig::from_args(args).expect("valid options")))
            .await;
    let events = live
        .run(
            "/",
            input("minimal-1", json!([user("m1", "Weather in Tokyo?")])),
        )
        .await;
    let (id, args) = tool_call(&events, "get_weather");
    assert_eq!(args["location"], "Tokyo");
    let result: Value = serde_json::from_str(&result_of(&events, &id)).expect("a JSON result");
    assert_eq!(result, agui_server::demo::weather("Tokyo"));
    live.stop().await;
}

#[test]
fn the_dojo_mounts_one_agent_per_feature_with_its_own_settings() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let file = dir.path().join("dojo.toml");
    std::fs::write(
        &file,
        "[agent]\nmodel = \"gemini-test\"\n\n\
         [[agents]]\npath = \"dojo/interrupt\"\nsystem_instructions = \"Book it.\"\nsave_dir = \"/srv/meetings\"\n\n\
         [[agents]]\npath = \"/elsewhere\"\n",
    )
    .expect("a config file");
    let mut options = args(&dir, &["--config", &file.display().to_string()]);
    options.retain(|a| a != "--demo");
    let server = dojo::server(
        ServeArgs::from_args(options).expect("valid options"),
        "/dojo/",
    )
    .expect("a dojo configuration");
    let agents = &server.config().agents;
    let paths: Vec<&str> = agents.iter().filter_map(|a| a.path.as_deref()).collect();
    assert_eq!(
        paths,
        [
            "/dojo/agentic_chat",
            "/dojo/human_in_the_loop",
            "/dojo/backend_tool_rendering",
            "/dojo/shared_state",
            "/dojo/interrupt"
        ]
    );
    for (agent, feature) in agents.iter().zip(dojo::FEATURES) {
        assert_eq!(agent.name.as_deref(), Some(feature.id));
        assert_eq!(
            agent.model.as_deref(),
            Some("gemini-test"),
            "the [agent] table applies"
        );
        assert_eq!(
            agent.builtin_tools,
            Some(vec![agui_server::BuiltinToolChoice::Nothing])
        );
        assert_eq!(agent.ask_question, Some(false));
    }
    let interrupt = &agents[4];
    assert_eq!(interrupt.system_instructions.as_deref(), Some("Book it."));
    assert_eq!(
        interrupt.save_dir.as_deref(),
        Some(std::path::Path::new("/srv/meetings"))
    );
    let chat = &agents[0];
    assert_eq!(
        chat.system_instructions.as_deref(),
        Some(dojo::FEATURES[0].instructions)
    );
    assert_eq!(
        chat.save_dir.as_deref(),
        Some(dir.path().join("s").join("dojo-agentic_chat").as_path()),
        "shared directories get a subdirectory per agent"
    );
}
