//! The session flows end to end with the real harness and the scripted model.

mod support;

use std::time::Duration;

use agui_session::{Agent, AgentOptions, Backend, Behavior, FnTool, ToolRegistry};
use agui_types::{Event, RunOutcome};
use gemini_script::{Handle, Matcher, Reply, Script, ScriptedModel};
use harness_client::{BuiltinTool, HarnessPool, ModelEndpoint, PoolOptions, ProcessOptions};
use serde_json::{Value, json};
use support::{finish, harness_in, input_of, last, text, types, user};

struct Live {
    agent: Agent,
    model: Handle,
    dir: tempfile::TempDir,
}

fn options(dir: &std::path::Path, model: &Handle) -> AgentOptions {
    let mut options = AgentOptions::new(
        "gemini-3-flash-preview",
        ModelEndpoint::gemini(model.base_url(), "test-key"),
        dir,
    );
    options.builtin_tools = [BuiltinTool::ListDirectory, BuiltinTool::RunCommand].into();
    options.api_retry = Some((2, 100));
    options
}

fn agent(options: AgentOptions, tools: ToolRegistry) -> Agent {
    let pool = HarnessPool::new(PoolOptions::default()).unwrap();
    let backend = Backend::harness(pool, ProcessOptions::new(options.save_dir.clone()));
    Agent::new(options, backend, tools).unwrap()
}

impl Live {
    async fn new(
        script: Script,
        configure: impl FnOnce(&mut AgentOptions),
        tools: ToolRegistry,
    ) -> Self {
        let model = ScriptedModel::start(script).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut options = options(dir.path(), &model);
        configure(&mut options);
        Self {
            agent: agent(options, tools),
            model,
            dir,
        }
    }

    async fn run(&self, input: Value) -> Vec<Event> {
        finish(self.agent.run(input_of(input))).await
    }

    /// The workspace of the one thread: `w/<its owner's tree>/<its slot>`.
    fn workspace(&self) -> std::path::PathBuf {
        let only = |dir: std::path::PathBuf| {
            let entries: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert_eq!(entries.len(), 1, "one entry in {}", dir.display());
            entries.into_iter().next().unwrap()
        };
        only(only(self.dir.path().join("w")))
    }
}

fn interrupts(events: &[Event]) -> Vec<agui_types::Interrupt> {
    match last(events) {
        Event::RunFinished(f) => match &f.outcome {
            Some(RunOutcome::Interrupt { interrupts }) => interrupts.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

fn count(events: &[Event], kind: &str) -> usize {
    events
        .iter()
        .filter(|e| e.event_type().as_str() == kind)
        .count()
}

#[tokio::test]
async fn a_frontend_tool_parks_and_resumes_running_once() {
    let script = Script::new()
        .then(
            Reply::text(["Let me ask your browser."])
                .and_call("pick_colour", json!({"hint": "warm"})),
        )
        // The model repeats the call after the first result, as it sometimes does.
        .then(
            Reply::call("pick_colour", json!({"hint": "warm"}))
                .when(Matcher::function_response_to("pick_colour")),
        )
        .then(Reply::text(["You picked red."]).when(Matcher::function_response_to("pick_colour")));
    let live = Live::new(script, |_| {}, ToolRegistry::new()).await;
    let tools = json!([{"name": "pick_colour", "description": "Asks the user for a colour", "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}}}]);
    let first = live
        .run(json!({"messages": [user("m1", "Pick a colour")], "tools": tools}))
        .await;
    let Event::RunFinished(done) = last(&first) else {
        panic!("{}", types(&first))
    };
    let Some(RunOutcome::Success {
        pending_tool_call_ids,
    }) = &done.outcome
    else {
        panic!("{done:?}")
    };
    assert_eq!(count(&first, "TOOL_CALL_START"), 1);
    let call_id = pending_tool_call_ids[0].clone();
    let second = live
        .run(json!({"messages": [user("m1", "Pick a colour"), {"id": "a1", "role": "assistant", "toolCalls": [
            {"id": call_id, "type": "function", "function": {"name": "pick_colour", "arguments": "{}"}}]},
            {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "red"}], "tools": tools}))
        .await;
    assert_eq!(text(&second), "You picked red.");
    assert_eq!(
        count(&second, "TOOL_CALL_START"),
        0,
        "the repeated call is answered from the first result: {}",
        types(&second)
    );
    let functions: Vec<_> = live.model.requests().last().unwrap().function_responses();
    assert!(
        functions
            .iter()
            .all(|f| f.output.as_deref().unwrap_or("").contains("red")),
        "{functions:?}"
    );
}

/// The frontend tools of the parallel-call tests.
fn city_tools(names: &[&str]) -> Value {
    names
        .iter()
        .map(|name| json!({"name": name, "description": format!("{name} for a city"), "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}))
        .collect()
}

fn pending_ids(events: &[Event]) -> Vec<String> {
    match last(events) {
        Event::RunFinished(f) => match &f.outcome {
            Some(RunOutcome::Success {
                pending_tool_call_ids,
            }) => pending_tool_call_ids.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Runs a prompt whose reply calls `calls` (frontend tools, plus any built-in) in parallel,
/// then answers every pending call in one run; returns both runs' events.
async fn parallel_round_trip(
    calls: Vec<gemini_script::Call>,
    frontend: &[&str],
    last_tool: &str,
) -> (Vec<Event>, Vec<Event>) {
    let script = Script::new()
        .then(
            calls
                .into_iter()
                .fold(Reply::text(["On it."]), Reply::with_call)
                .when(Matcher::user_text()),
        )
        .then(Reply::text(["All answered."]).when(Matcher::function_response_to(last_tool)));
    let live = Live::new(script, |_| {}, ToolRegistry::new()).await;
    let tools = city_tools(frontend);
    let first = live
        .run(json!({"messages": [user("m1", "Go")], "tools": tools}))
        .await;
    let pending = pending_ids(&first);
    let calls: Vec<Value> = pending
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "x", "arguments": "{}"}}))
        .collect();
    let mut messages = vec![
        user("m1", "Go"),
        json!({"id": "a1", "role": "assistant", "toolCalls": calls}),
    ];
    for (i, id) in pending.iter().enumerate() {
        messages.push(json!({"id": format!("t{i}"), "role": "tool", "toolCallId": id, "content": format!("answer {i}")}));
    }
    let second = live
        .run(json!({"messages": messages, "tools": tools}))
        .await;
    (first, second)
}

#[tokio::test]
async fn parallel_frontend_calls_are_all_pending_when_the_first_run_ends() {
    for names in [vec!["weather", "clock"], vec!["weather", "clock", "news"]] {
        let calls = names
            .iter()
            .map(|n| gemini_script::Call::new(*n, json!({"city": "Rome"})))
            .collect();
        let (first, second) = parallel_round_trip(calls, &names, names.last().unwrap()).await;
        assert_eq!(
            pending_ids(&first).len(),
            names.len(),
            "every call of the reply is announced before the run ends: {}",
            types(&first)
        );
        assert_eq!(count(&first, "TOOL_CALL_START"), names.len());
        assert_eq!(text(&first), "On it.");
        assert_eq!(text(&second), "All answered.", "{}", types(&second));
        assert!(pending_ids(&second).is_empty());
        assert_eq!(
            count(&second, "TOOL_CALL_START"),
            0,
            "nothing is announced twice"
        );
    }
}

#[tokio::test]
async fn a_frontend_call_after_a_builtin_call_parks_and_the_builtin_result_arrives_once() {
    let calls = vec![
        gemini_script::Call::new("list_dir", json!({"DirectoryPath": "{{workspace}}"})),
        gemini_script::Call::new("weather", json!({"city": "Oslo"})),
    ];
    let (first, second) = parallel_round_trip(calls, &["weather"], "weather").await;
    assert_eq!(pending_ids(&first).len(), 1, "{}", types(&first));
    // The harness runs the calls of a parallel group in its own order: the built-in call may
    // finish before the frontend call is asked for (its result in the first run) or after (in
    // the second). Either way the client sees its result exactly once.
    assert_eq!(
        count(&first, "TOOL_CALL_RESULT") + count(&second, "TOOL_CALL_RESULT"),
        1,
        "the built-in call's result once across both runs: {} | {}",
        types(&first),
        types(&second)
    );
    assert_eq!(
        text(&second),
        "All answered.",
        "{} | {}",
        types(&first),
        types(&second)
    );
}

#[tokio::test]
async fn ask_question_interrupts_and_resume_answers() {
    let question = json!({"questions": [{"question": "Which colour?", "options": ["Red", "Green"], "is_multi_select": false}]});
    let script = Script::new()
        .then(Reply::call("ask_question", question))
        .then(Reply::text(["Green it is."]).when(Matcher::function_response_to("ask_question")));
    let live = Live::new(
        script,
        |o| {
            o.builtin_tools.insert(BuiltinTool::AskQuestion);
            o.behavior = Behavior::Interactive;
        },
        ToolRegistry::new(),
    )
    .await;
    let first = live.run(json!({"messages": [user("m1", "Ask me")]})).await;
    let open = interrupts(&first);
    assert_eq!(open.len(), 1, "{}", types(&first));
    assert_eq!(open[0].reason, "antigravity:ask_question");
    let second = live
        .run(json!({"messages": [user("m1", "Ask me")], "resume": [{"interruptId": open[0].id, "status": "resolved",
            "payload": {"responses": [{"selected_option_ids": ["1"]}]}}]}))
        .await;
    assert_eq!(text(&second), "Green it is.");
    let told = live.model.requests().last().unwrap().function_responses()[0]
        .output
        .clone()
        .unwrap_or_default();
    assert!(told.contains("A1: Green"), "{told}");
}

#[tokio::test]
async fn a_denied_approval_is_reported_to_the_model() {
    let script = Script::new()
        .then(Reply::call("run_command", json!({"CommandLine": "touch denied.txt", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 2000})))
        .then(Reply::text(["Understood, I will not."]).when(Matcher::function_response_to("run_command")));
    let live = Live::new(script, |o| o.tool_approval = true, ToolRegistry::new()).await;
    let first = live
        .run(json!({"messages": [user("m1", "Create a file")]}))
        .await;
    let open = interrupts(&first);
    assert_eq!(
        open[0].reason,
        "antigravity:tool_approval",
        "{}",
        types(&first)
    );
    let second = live
        .run(json!({"messages": [user("m1", "Create a file")], "resume": [{"interruptId": open[0].id, "status": "resolved",
            "payload": {"approved": false, "message": "Not today."}}]}))
        .await;
    assert_eq!(text(&second), "Understood, I will not.");
    let told = live.model.requests().last().unwrap().function_responses()[0]
        .output
        .clone()
        .unwrap_or_default();
    assert!(told.contains("Not today."), "{told}");
    let workspace = live.workspace();
    assert!(
        !workspace.join("denied.txt").exists(),
        "the command did not run"
    );
}

#[tokio::test]
async fn forwarded_props_command_approves() {
    let script = Script::new()
        .then(Reply::call("run_command", json!({"CommandLine": "echo approved-run", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000})))
        .then(Reply::text(["Ran it."]).when(Matcher::function_response_to("run_command")));
    let live = Live::new(script, |o| o.tool_approval = true, ToolRegistry::new()).await;
    let first = live.run(json!({"messages": [user("m1", "Run it")]})).await;
    assert_eq!(interrupts(&first).len(), 1);
    let second = live.run(json!({"messages": [user("m1", "Run it")], "forwardedProps": {"command": {"approved": true}}})).await;
    assert_eq!(text(&second), "Ran it.");
    let result = second.iter().find_map(|e| match e {
        Event::ToolCallResult(r) => Some(serde_json::to_string(&r.content).unwrap()),
        _ => None,
    });
    assert!(
        result.unwrap_or_default().contains("approved-run"),
        "{}",
        types(&second)
    );
}

#[tokio::test]
async fn a_new_message_abandons_a_parked_tool() {
    let script = Script::new()
        .then(Reply::call("pick_colour", json!({})).when(Matcher::user_text().keywords(["colour"])))
        .then(Reply::text(["Noted."]).when(Matcher::function_response_to("pick_colour")))
        .then(Reply::text(["Hello again."]).when(Matcher::user_text().keywords(["hello"])));
    let live = Live::new(script, |_| {}, ToolRegistry::new()).await;
    let tools = json!([{"name": "pick_colour", "description": "Pick"}]);
    live.run(json!({"messages": [user("m1", "Pick a colour")], "tools": tools}))
        .await;
    let second = live.run(json!({"messages": [user("m1", "Pick a colour"), user("m2", "hello instead")], "tools": tools})).await;
    assert!(text(&second).ends_with("Hello again."), "{}", text(&second));
    let abandoned = live
        .model
        .requests()
        .iter()
        .flat_map(|r| r.function_responses())
        .any(|f| {
            f.output
                .as_deref()
                .unwrap_or("")
                .contains("sent a new message instead")
        });
    assert!(abandoned, "the model was told the tool was abandoned");
}

#[tokio::test]
async fn a_server_tool_writes_shared_state() {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "research_agent",
        "Delegates a research task",
        json!({"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}),
        |ctx, args| async move {
            let mut state = ctx.state();
            let mut delegations = state["delegations"].as_array().cloned().unwrap_or_default();
            delegations.push(args["task"].clone());
            state["delegations"] = Value::Array(delegations);
            ctx.set_state(state)
                .map_err(agui_session::ToolError::from_error)?;
            Ok(json!("Research done."))
        },
    ));
    let script = Script::new()
        .then(Reply::call(
            "research_agent",
            json!({"task": "rust crates"}),
        ))
        .then(Reply::text(["Delegated."]).when(Matcher::function_response_to("research_agent")));
    let live = Live::new(script, |_| {}, tools).await;
    let events = live.run(json!({"messages": [user("m1", "Research rust crates")], "state": {"delegations": ["earlier"]}})).await;
    let sequence = types(&events);
    assert!(
        sequence.contains("TOOL_CALL_END STATE_SNAPSHOT TOOL_CALL_RESULT"),
        "{sequence}"
    );
    let snapshot = events.iter().find_map(|e| match e {
        Event::StateSnapshot(s) => Some(s.snapshot.clone()),
        _ => None,
    });
    assert_eq!(
        snapshot,
        Some(json!({"delegations": ["earlier", "rust crates"]}))
    );
    assert_eq!(text(&events), "Delegated.");
}

#[tokio::test]
async fn a_tool_contract_change_keeps_the_history() {
    let script = Script::new()
        .then(Reply::text(["First answer."]))
        .then(Reply::text(["Second answer."]));
    let live = Live::new(script, |_| {}, ToolRegistry::new()).await;
    live.run(json!({"messages": [user("m1", "My name is Ada")], "tools": [{"name": "tool_a", "description": "A"}]})).await;
    let second = live
        .run(json!({"messages": [user("m1", "My name is Ada"), user("m2", "What is my name?")], "tools": [{"name": "tool_b", "description": "B"}]}))
        .await;
    assert_eq!(text(&second), "Second answer.");
    let request = live.model.requests().last().unwrap().clone();
    assert!(
        request.body.to_string().contains("My name is Ada"),
        "the rebuilt conversation kept its history"
    );
    let declared = request.declared_functions();
    assert!(
        declared.contains(&"tool_b".to_string()) && !declared.contains(&"tool_a".to_string()),
        "{declared:?}"
    );
}

#[tokio::test]
async fn a_killed_harness_fails_the_run_and_the_next_run_works() {
    let script = Script::new()
        .then(Reply::call("wait_forever", json!({})).when(Matcher::user_text().keywords(["first"])))
        .then(
            Reply::text(["Back."])
                .when(Matcher::user_text().keywords(["second"]))
                .forever(),
        );
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "wait_forever",
        "Waits",
        json!({"type": "object"}),
        |_, _| async {
            std::future::pending::<()>().await;
            Ok(Value::Null)
        },
    ));
    let live = Live::new(script, |_| {}, tools).await;
    let save = live.dir.path().join("save");
    let run = live
        .agent
        .run(input_of(json!({"messages": [user("m1", "first")]})));
    let pid = loop {
        if let Some(pid) = harness_in(&save)
            && live.model.request_count() > 0
        {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let events = finish(run).await;
    let Event::RunError(error) = last(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(
        error.code.as_deref(),
        Some("HARNESS_LOST"),
        "{}",
        error.message
    );
    let next = live
        .run(json!({"messages": [user("m1", "first"), user("m2", "second")]}))
        .await;
    assert_eq!(text(&next), "Back.");
}

/// The harness process whose working directory is `save` (each agent's own).
#[tokio::test]
async fn a_restarted_server_continues_the_conversation() {
    let script = Script::new()
        .then(Reply::text(["Hello Ada."]).when(Matcher::user_text().keywords(["Ada"])))
        .then(Reply::text(["Your name is Ada."]).when(Matcher::user_text().keywords(["name?"])));
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = agent(options(dir.path(), &model), ToolRegistry::new());
    finish(first.run(input_of(json!({"messages": [user("m1", "I am Ada")]})))).await;
    first.shutdown().await;
    let second = agent(options(dir.path(), &model), ToolRegistry::new());
    let events = finish(second.run(input_of(
        json!({"messages": [user("m1", "I am Ada"), user("m2", "What is my name?")]}),
    )))
    .await;
    assert_eq!(text(&events), "Your name is Ada.");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "the first message was not sent again");
    assert!(
        requests[1].body.to_string().contains("I am Ada"),
        "the history survived the restart"
    );
    second.shutdown().await;
}

#[tokio::test]
async fn a_park_survives_with_no_client_attached() {
    let seconds: u64 = std::env::var("PARK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45);
    let script = Script::new().then(Reply::call("confirm", json!({}))).then(
        Reply::text(["Confirmed after the wait."]).when(Matcher::function_response_to("confirm")),
    );
    let live = Live::new(script, |_| {}, ToolRegistry::new()).await;
    let tools = json!([{"name": "confirm", "description": "Asks the user to confirm"}]);
    let first = live
        .run(json!({"messages": [user("m1", "Please confirm")], "tools": tools}))
        .await;
    let Event::RunFinished(done) = last(&first) else {
        panic!()
    };
    let Some(RunOutcome::Success {
        pending_tool_call_ids,
    }) = &done.outcome
    else {
        panic!("{done:?}")
    };
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let second = live
        .run(json!({"messages": [user("m1", "Please confirm"), {"id": "t1", "role": "tool", "toolCallId": pending_tool_call_ids[0], "content": "yes"}], "tools": tools}))
        .await;
    assert_eq!(text(&second), "Confirmed after the wait.");
}

/// A command the agent leaves running in the background does not hold the run open: the run
/// ends with the model's reply while the command still runs, and when the command ends, the
/// harness's own turn about it (the model's answer to the command's end) joins the thread's
/// history, which a connect shows.
#[tokio::test]
async fn a_command_left_running_ends_the_run_keeps_the_thread_connected_and_its_end_comes_as_a_turn_of_its_own()
 {
    let script = Script::new()
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "sleep 3 && touch finished.txt", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 200}),
            )
            .when(Matcher::user_text().keywords(["serve"])),
        )
        .then(Reply::text(["Started it."]).when(Matcher::function_response_to("run_command")))
        .then(Reply::text(["The command has finished."]).forever());
    // Idle threads hibernate after a second: not one whose harness still runs its command.
    let live = Live::new(
        script,
        |o| o.hibernate_after = Duration::from_secs(1),
        ToolRegistry::new(),
    )
    .await;
    let first = live
        .run(json!({"messages": [user("m1", "serve the site")]}))
        .await;
    assert_eq!(text(&first), "Started it.", "{}", types(&first));
    assert!(
        matches!(last(&first), Event::RunFinished(_)),
        "{}",
        types(&first)
    );
    let workspace = live.workspace();
    assert!(
        !workspace.join("finished.txt").exists(),
        "the run ended while the command still ran"
    );
    // Past the hibernation delay, the conversation stays connected while the command runs.
    // The waits are bounded only so a failure does not hang.
    for _ in 0..100 {
        if workspace.join("finished.txt").exists() {
            break;
        }
        assert_eq!(
            live.agent.stats().live_conversations,
            1,
            "the thread hibernated while its harness still ran its command"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The command ends; the harness tells the model, whose answer is a turn of the harness's
    // own.
    let mut history = String::new();
    for _ in 0..200 {
        let connected = live
            .agent
            .connect(input_of(
                json!({"messages": [user("m1", "serve the site")]}),
            ))
            .await
            .unwrap()
            .collect()
            .await;
        history = connected
            .iter()
            .filter_map(|e| match e {
                Event::MessagesSnapshot(s) => Some(serde_json::to_string(&s.messages).unwrap()),
                _ => None,
            })
            .collect();
        if history.contains("The command has finished.") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        workspace.join("finished.txt").exists(),
        "the command ran to its end"
    );
    assert!(
        history.contains("Started it.") && history.contains("The command has finished."),
        "{history}"
    );
    // The thread takes the next message as usual.
    let next = live
        .run(json!({"messages": [user("m1", "serve the site"), user("m2", "thanks")]}))
        .await;
    assert!(
        matches!(last(&next), Event::RunFinished(_)),
        "{}",
        types(&next)
    );
}

/// A thread whose turn is parked on a command's approval (`tool_approval`), with the stall
/// timeout `stall` when given; the script answers the command's result and a later "hello".
async fn parked_on_approval(stall: Option<Duration>) -> (Live, agui_types::Interrupt) {
    support::init_tracing();
    let script = Script::new()
        .then(Reply::call("run_command", json!({"CommandLine": "echo approved-late", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000})).when(Matcher::user_text().keywords(["create"])))
        .then(Reply::text(["Ran it."]).when(Matcher::function_response_to("run_command")))
        .then(Reply::text(["Hello again."]).when(Matcher::user_text().keywords(["hello"])));
    let configure = |o: &mut AgentOptions| {
        o.tool_approval = true;
        if let Some(stall) = stall {
            o.turn_stall_timeout = stall;
        }
    };
    let live = Live::new(script, configure, ToolRegistry::new()).await;
    let first = live
        .run(json!({"messages": [user("m1", "Create a file")]}))
        .await;
    let open = interrupts(&first);
    assert_eq!(open.len(), 1, "{}", types(&first));
    (live, open[0].clone())
}

/// Asserts that the run ended with the model's reply `expected`.
fn assert_answered(events: &[Event], expected: &str) {
    assert!(
        text(events).ends_with(expected) && matches!(last(events), Event::RunFinished(_)),
        "{}\n{:?}",
        types(events),
        last(events)
    );
}

#[tokio::test]
async fn a_new_message_after_an_approval_waited_past_the_stall_timeout_is_answered() {
    let (live, _) = parked_on_approval(Some(Duration::from_secs(2))).await;
    // The turn waits for the user longer than the stall timeout: it is not stalled, the user is.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = live
        .run(json!({"messages": [user("m1", "Create a file"), user("m2", "hello instead")]}))
        .await;
    assert_answered(&second, "Hello again.");
}

#[tokio::test]
async fn a_message_sent_right_after_a_stop_of_a_parked_turn_is_answered() {
    let (live, _) = parked_on_approval(None).await;
    assert!(live.agent.stop("thread-1").await.unwrap());
    let second = live
        .run(json!({"messages": [user("m1", "Create a file"), user("m2", "hello instead")]}))
        .await;
    assert_answered(&second, "Hello again.");
}

#[tokio::test]
async fn an_approval_answered_after_the_stall_timeout_runs_the_command() {
    let (live, open) = parked_on_approval(Some(Duration::from_secs(2))).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = live
        .run(json!({"messages": [user("m1", "Create a file")], "resume": [{"interruptId": open.id, "status": "resolved", "payload": {"approved": true}}]}))
        .await;
    assert_answered(&second, "Ran it.");
    let result = second.iter().find_map(|e| match e {
        Event::ToolCallResult(r) => Some(serde_json::to_string(&r.content).unwrap()),
        _ => None,
    });
    assert!(
        result.unwrap_or_default().contains("approved-late"),
        "{}",
        types(&second)
    );
}

#[tokio::test]
async fn a_turn_waiting_for_the_client_past_the_stall_timeout_uses_no_cpu() {
    let (_live, _) = parked_on_approval(Some(Duration::from_secs(1))).await;
    // This process's CPU time (the agent runs in it; the harness is another process), in
    // clock ticks (100 a second).
    let ticks = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = ticks();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A loop woken by a deadline already passed took 300 ticks here (a whole core); waiting
    // takes next to none.
    let used = ticks() - before;
    assert!(used < 60, "the waiting thread used {used} ticks in 3 s");
}

/// Every file under `dir` whose name ends with `suffix`, by stem.
fn files_ending(dir: &std::path::Path, suffix: &str) -> Vec<(String, std::path::PathBuf)> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                todo.push(path);
            } else if let Some(stem) = name.strip_suffix(suffix) {
                found.push((stem.to_owned(), path));
            }
        }
    }
    found
}

#[tokio::test]
async fn a_new_thread_answers_on_the_conversation_the_harness_opened_ahead() {
    let script = Script::new()
        .then(Reply::text(["One."]))
        .then(Reply::text(["Two."]));
    let live = Live::new(
        script,
        |o| o.spare_conversations = true,
        ToolRegistry::new(),
    )
    .await;
    let first = live
        .run(json!({"threadId": "t1", "messages": [user("m1", "Hi")]}))
        .await;
    assert_eq!(text(&first), "One.");
    // The harness keeps each conversation in a database named by its id: t1's, and the one
    // opened ahead once t1's was open.
    let databases = || -> Vec<String> {
        files_ending(live.dir.path(), ".db")
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    support::eventually(
        Duration::from_secs(30),
        "a conversation opened ahead",
        || databases().len() == 2,
    )
    .await;
    let before = databases();
    let second = live
        .run(json!({"threadId": "t2", "messages": [user("m2", "Hello")]}))
        .await;
    assert_eq!(text(&second), "Two.");
    // The records (two slot files a thread) name their conversations.
    let records: String = files_ending(&live.dir.path().join("save/threads"), ".json")
        .into_iter()
        .map(|(_, path)| std::fs::read_to_string(path).unwrap())
        .collect();
    let recorded: Vec<String> = databases()
        .into_iter()
        .filter(|id| records.contains(id.as_str()))
        .collect();
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        recorded.iter().all(|id| before.contains(id)),
        "t2 took a conversation that was open before its run: {recorded:?} in {before:?}"
    );
}
