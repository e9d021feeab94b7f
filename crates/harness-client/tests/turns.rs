//! Conversations with the real harness against the scripted model: text, reasoning, tools,
//! hooks, questions, model errors, re-attach, resume and cancel.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use gemini_script::{Matcher, Reply, Script};
use harness_client::proto::lh::{
    AgentBehavior, LifecycleHook, harness_config::SessionContinuationMode,
};
use harness_client::{
    Answer, BuiltinTool, CallContext, Callbacks, CloseReason, ConversationEvent, DefaultCallbacks,
    HarnessError, HookRequest, HookResponse, InitRefusal, QuestionAnswer, QuestionRequest,
    StepSource, StepStatus, ToolCallRequest, ToolOutcome,
};
use serde_json::json;
use support::{Fixture, read_turn, turn};
use tokio::sync::oneshot;

#[tokio::test]
async fn a_text_turn_streams_deltas_and_ends_idle() {
    let fx = Fixture::new(Script::new().then(Reply::text(["Hello ", "from the ", "model."]))).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    let log = turn(&mut conversation, "Say hello").await;
    assert_eq!(log.answer(), "Hello from the model.");
    let end = log.end.as_ref().unwrap();
    assert!(
        end.error.is_none() && !end.cancelled && !end.halted,
        "{end:?}"
    );
    let first = &log.steps[0];
    assert_eq!(
        (first.source, first.status, first.text.as_str()),
        (StepSource::User, StepStatus::Done, "Say hello")
    );
    assert!(
        log.events
            .iter()
            .any(|e| matches!(e, ConversationEvent::Usage(_)))
    );
    assert_eq!(
        conversation.id(),
        log.steps[1].key.trajectory_id,
        "the root trajectory is the conversation"
    );
    process.shutdown().await;
}

#[tokio::test]
async fn a_thinking_turn_carries_reasoning_then_text() {
    let script =
        Script::new().then(Reply::text(["The answer ", "is 42."]).thought(["Let me ", "think."]));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    let log = turn(&mut conversation, "Think first").await;
    assert_eq!(log.thinking(), "Let me think.");
    assert_eq!(log.answer(), "The answer is 42.");
    process.shutdown().await;
}

/// A host tool whose answer the test releases later: the harness waits however long it takes.
struct ParkedTool {
    release: Mutex<Option<oneshot::Receiver<serde_json::Value>>>,
    seen: Mutex<Vec<ToolCallRequest>>,
}

#[async_trait]
impl Callbacks for ParkedTool {
    async fn tool_call(&self, _ctx: &CallContext, call: ToolCallRequest) -> ToolOutcome {
        self.seen.lock().unwrap().push(call);
        let release = self.release.lock().unwrap().take();
        match release {
            Some(rx) => ToolOutcome::json(rx.await.unwrap_or(json!("released without a value"))),
            None => ToolOutcome::error("called twice"),
        }
    }
}

#[tokio::test]
async fn a_custom_tool_parks_until_the_host_answers() {
    let script = Script::new()
        .then(Reply::call("get_weather", json!({"city": "Paris"})))
        .then(Reply::text(["It is sunny."]).when(Matcher::function_response_to("get_weather")));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let (tx, rx) = oneshot::channel();
    let tool = Arc::new(ParkedTool {
        release: Mutex::new(Some(rx)),
        seen: Mutex::new(Vec::new()),
    });
    let config = fx.config().tool(harness_client::CustomTool {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    });
    let mut conversation = fx.open(&process, config, tool.clone()).await;
    conversation.send_text("Weather in Paris?").await.unwrap();
    // Nothing more happens while the tool is parked.
    let parked = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            if let Some(ConversationEvent::TurnEnded(_)) = conversation.next_event().await {
                return;
            }
        }
    })
    .await;
    assert!(parked.is_err(), "the turn must wait for the tool");
    assert_eq!(
        tool.seen.lock().unwrap()[0].arguments,
        json!({"city": "Paris"}).as_object().unwrap().clone()
    );
    tx.send(json!({"temperature": 21, "sky": "clear"})).unwrap();
    let log = read_turn(&mut conversation).await;
    assert_eq!(log.answer(), "It is sunny.");
    let requests = fx.model.requests();
    let declared = requests[0].declared_functions();
    assert!(
        declared.contains(&"get_weather".to_string()),
        "{declared:?}"
    );
    let responses = requests.last().unwrap().function_responses();
    let output = responses[0].output.clone().unwrap_or_default();
    assert!(output.contains(r#""temperature":21"#), "{responses:?}");
    process.shutdown().await;
}

#[tokio::test]
async fn builtin_tools_report_their_results_under_an_allow_policy() {
    let script = Script::new()
        .then(Reply::call("list_dir", json!({"DirectoryPath": "{{workspace}}"})))
        .then(
            Reply::call("run_command", json!({"CommandLine": "echo hi-from-run", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000}))
                .when(Matcher::function_response_to("list_dir")),
        )
        .then(Reply::text(["All done."]).when(Matcher::function_response_to("run_command")));
    let fx = Fixture::new(script).await;
    std::fs::write(fx.dir.path().join("ws/hello.txt"), "hi\n").unwrap();
    let process = fx.spawn().await;
    let config = fx
        .config()
        .builtin_tools([BuiltinTool::ListDirectory, BuiltinTool::RunCommand]);
    let mut conversation = fx.open(&process, config, Arc::new(DefaultCallbacks)).await;
    let log = turn(&mut conversation, "Use the tools").await;
    let finals = log.final_steps();
    let list = finals
        .iter()
        .find_map(|s| s.tool().filter(|t| t.name == "list_directory"))
        .expect("list step");
    assert!(
        list.result["results"].to_string().contains("hello.txt"),
        "{list:?}"
    );
    let run = finals
        .iter()
        .find_map(|s| s.tool().filter(|t| t.name == "run_command"))
        .expect("run step");
    assert_eq!(run.arguments["commandLine"], "echo hi-from-run");
    assert!(
        run.result["combinedOutput"]
            .as_str()
            .unwrap()
            .contains("hi-from-run"),
        "{run:?}"
    );
    assert_eq!(log.answer(), "All done.");
    process.shutdown().await;
}

/// Denies `run_command` in the pre-tool hook, allows everything else.
struct DenyRunCommand;

#[async_trait]
impl Callbacks for DenyRunCommand {
    async fn hook(&self, _ctx: &CallContext, request: HookRequest) -> HookResponse {
        match request {
            HookRequest::PreTool(args) if args.tool_name() == "run_command" => {
                HookResponse::Deny("not on my watch".into())
            }
            HookRequest::PreTool(_) => HookResponse::Allow {
                modified_args: None,
            },
            _ => HookResponse::Empty,
        }
    }
}

#[tokio::test]
async fn a_decide_hook_that_denies_fails_the_step_and_tells_the_model() {
    let script = Script::new()
        .then(Reply::call(
            "run_command",
            json!({"CommandLine": "rm -rf /", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 100}),
        ))
        .then(Reply::text(["Understood."]).when(Matcher::function_response_to("run_command")));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let config = fx
        .config()
        .builtin_tools([BuiltinTool::RunCommand])
        .policy(Default::default())
        .hook(LifecycleHook::PreTool);
    let mut conversation = fx.open(&process, config, Arc::new(DenyRunCommand)).await;
    let log = turn(&mut conversation, "Clean up").await;
    let denied = log.errors();
    assert_eq!(denied.len(), 1, "{:?}", log.steps);
    assert!(
        denied[0]
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("not on my watch"),
        "{denied:?}"
    );
    assert_eq!(denied[0].error.as_ref().unwrap().http_code, 0);
    let told = fx.model.requests().last().unwrap().function_responses()[0]
        .output
        .clone()
        .unwrap_or_default();
    assert!(told.contains("not on my watch"), "{told}");
    assert_eq!(log.answer(), "Understood.");
    process.shutdown().await;
}

struct PickGreen(Mutex<Vec<QuestionRequest>>);

#[async_trait]
impl Callbacks for PickGreen {
    async fn question(&self, _ctx: &CallContext, request: QuestionRequest) -> QuestionAnswer {
        self.0.lock().unwrap().push(request);
        QuestionAnswer::Answers(vec![Answer::Choice {
            selected: vec![1],
            freeform: Some("greenish".into()),
        }])
    }
}

#[tokio::test]
async fn ask_question_is_answered_through_the_callback() {
    let question = json!({"questions": [
        {"question": "Which color?", "options": ["Red", "Green", "Blue"], "is_multi_select": false},
        {"question": "Which sizes?", "options": ["S", "M"], "is_multi_select": true}]});
    let script = Script::new()
        .then(Reply::call("ask_question", question))
        .then(Reply::text(["Green it is."]).when(Matcher::function_response_to("ask_question")));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let config = fx
        .config()
        .builtin_tools([BuiltinTool::AskQuestion])
        .behavior(AgentBehavior::Interactive);
    let callbacks = Arc::new(PickGreen(Mutex::new(Vec::new())));
    let mut conversation = fx.open(&process, config, callbacks.clone()).await;
    let log = turn(&mut conversation, "Ask me something").await;
    let asked = callbacks.0.lock().unwrap().clone();
    assert_eq!(
        asked.len(),
        1,
        "asked once although the waiting step repeats"
    );
    assert_eq!(asked[0].questions[0].choices, ["Red", "Green", "Blue"]);
    assert!(asked[0].questions[1].multi_select);
    let told = fx.model.requests().last().unwrap().function_responses()[0]
        .output
        .clone()
        .unwrap_or_default();
    assert!(
        told.contains("A1: Green, greenish") && told.contains("A2: User Skipped"),
        "{told}"
    );
    assert_eq!(log.answer(), "Green it is.");
    process.shutdown().await;
}

#[tokio::test]
async fn a_429_is_retried_and_the_turn_succeeds() {
    let script = Script::new()
        .then(Reply::error(429))
        .then(Reply::text(["Back again."]));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    let log = turn(&mut conversation, "Hello?").await;
    let retried = log.errors();
    assert!(
        !retried.is_empty(),
        "the failed attempt is reported as an error step"
    );
    assert_eq!(retried[0].error.as_ref().unwrap().http_code, 429);
    assert_eq!(retried[0].source, StepSource::System);
    assert!(log.end.as_ref().unwrap().error.is_none());
    assert_eq!(log.answer(), "Back again.");
    process.shutdown().await;
}

#[tokio::test]
async fn a_400_closes_the_socket_and_the_conversation_can_be_reattached() {
    let script = Script::new()
        .then(Reply::error(400).message("bad request"))
        .then(Reply::text(["Recovered."]));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    let log = turn(&mut conversation, "Break please").await;
    let error = log
        .end
        .as_ref()
        .unwrap()
        .error
        .clone()
        .expect("the turn failed");
    assert!(error.contains("400"), "{error}");
    assert_eq!(
        log.errors()
            .last()
            .unwrap()
            .error
            .as_ref()
            .unwrap()
            .http_code,
        400
    );
    let closed = tokio::time::timeout(support::PATIENCE, conversation.next_event())
        .await
        .unwrap();
    assert!(
        matches!(
            closed,
            Some(ConversationEvent::Closed(
                CloseReason::ClosedByHarness { .. }
            ))
        ),
        "{closed:?}"
    );
    assert!(
        conversation.send_text("too late").await.is_err(),
        "sending on a closed socket fails"
    );

    let history = conversation
        .reconnect()
        .await
        .expect("re-attach")
        .history
        .clone();
    assert!(
        history.iter().any(|s| s.text == "Break please"),
        "history survives: {history:?}"
    );
    let log = turn(&mut conversation, "Try again").await;
    assert_eq!(log.answer(), "Recovered.");
    process.shutdown().await;
}

#[tokio::test]
async fn two_turns_continue_the_step_indices() {
    let script = Script::new()
        .then(Reply::text(["One."]))
        .then(Reply::text(["Two."]));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    let first = turn(&mut conversation, "first").await;
    let second = turn(&mut conversation, "second").await;
    assert_eq!(
        (first.answer(), second.answer()),
        ("One.".to_string(), "Two.".to_string())
    );
    let last_first = first.steps.iter().map(|s| s.key.index).max().unwrap();
    assert!(
        second.steps.iter().all(|s| s.key.index > last_first),
        "indices keep counting"
    );
    assert!(
        fx.model.requests()[1].body.to_string().contains("first"),
        "the second request carries the first turn"
    );
    process.shutdown().await;
}

#[tokio::test]
async fn a_conversation_resumes_on_a_new_process_with_its_history() {
    let script = Script::new()
        .then(Reply::text(["Noted: blue."]))
        .then(Reply::text(["You said blue."]));
    let fx = Fixture::new(script).await;
    let id = "0123456789abcdef0123456789abcdef";
    let process = fx.spawn().await;
    let config = fx
        .config()
        .conversation_id(id, SessionContinuationMode::CreateOrResume);
    let mut conversation = fx.open(&process, config, Arc::new(DefaultCallbacks)).await;
    assert!(conversation.init_info().history.is_empty());
    turn(&mut conversation, "My colour is blue").await;
    drop(conversation);
    let exit = process.shutdown().await;
    assert_eq!(exit.code, Some(0), "{exit:?}");

    let process = fx.spawn().await;
    let config = fx
        .config()
        .conversation_id(id, SessionContinuationMode::Resume);
    let mut conversation = fx.open(&process, config, Arc::new(DefaultCallbacks)).await;
    let history = &conversation.init_info().history;
    assert!(
        history.iter().any(|s| s.text == "My colour is blue"),
        "{history:?}"
    );
    assert!(
        history.iter().any(|s| s.text == "Noted: blue."),
        "{history:?}"
    );
    let log = turn(&mut conversation, "What did I say?").await;
    assert_eq!(log.answer(), "You said blue.");
    assert!(
        log.steps.iter().all(|s| s.text != "My colour is blue"),
        "old steps are not replayed"
    );
    let request = fx.model.requests().last().unwrap().body.to_string();
    assert!(
        request.contains("My colour is blue"),
        "the harness rebuilt the context itself"
    );
    process.shutdown().await;
}

#[tokio::test]
async fn resuming_an_unknown_conversation_fails_with_the_harness_reason() {
    let fx = Fixture::new(Script::new().then(Reply::text(["Still here."]))).await;
    let process = fx.spawn().await;
    let config = fx.config().conversation_id(
        "ffffffffffffffffffffffffffffffff",
        SessionContinuationMode::Resume,
    );
    let err = harness_client::Conversation::open(
        &process,
        config.build().unwrap(),
        Arc::new(DefaultCallbacks),
    )
    .await
    .unwrap_err();
    let HarnessError::InitFailed { kind, reason } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*kind, InitRefusal::NotFound, "{reason}");
    assert!(
        reason.contains("not found"),
        "the harness's own words stay: {reason}"
    );
    // The process survives a failed init and serves others.
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    assert_eq!(turn(&mut conversation, "hi").await.answer(), "Still here.");
    process.shutdown().await;
}

#[tokio::test]
async fn cancel_stops_a_streaming_turn() {
    let script =
        Script::new().then(Reply::text(["a", "b", "c", "d", "e", "f", "g", "h"]).delay_ms(400));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    conversation.send_text("Talk slowly").await.unwrap();
    loop {
        let event = tokio::time::timeout(support::PATIENCE, conversation.next_event())
            .await
            .expect("the model starts streaming in time")
            .expect("the connection stays up");
        match event {
            ConversationEvent::Step(s)
                if s.source == StepSource::Model && !s.text_delta.is_empty() =>
            {
                break;
            }
            ConversationEvent::TurnEnded(end) => panic!("ended before the cancel: {end:?}"),
            _ => {}
        }
    }
    conversation.cancel().await.unwrap();
    let log = read_turn(&mut conversation).await;
    let end = log.end.unwrap();
    assert!(end.halted, "{end:?}");
    let streamed: String = log.steps.iter().map(|s| s.text_delta.as_str()).collect();
    assert!(streamed.len() < 7, "the stream stopped early: {streamed:?}");
    // The conversation stays usable.
    fx.model.push(Reply::text(["Fine."])).unwrap();
    assert_eq!(turn(&mut conversation, "ok").await.answer(), "Fine.");
    process.shutdown().await;
}

/// Decides dynamic policy rules: denies `run_command`.
struct PolicyDenies;

#[async_trait]
impl Callbacks for PolicyDenies {
    async fn policy(
        &self,
        _ctx: &CallContext,
        request: harness_client::PolicyRequest,
    ) -> harness_client::PolicyOutcome {
        assert_eq!(request.tool.tool_name(), "run_command");
        assert_eq!(
            request.rule_id, "rule_0",
            "the builder numbers dynamic rules"
        );
        harness_client::PolicyOutcome::Deny("blocked by the host policy".into())
    }
}

#[tokio::test]
async fn a_dynamic_policy_rule_asks_the_host() {
    let script = Script::new()
        .then(Reply::call(
            "run_command",
            json!({"CommandLine": "echo hi", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 100}),
        ))
        .then(Reply::text(["Blocked, fine."]).when(Matcher::function_response_to("run_command")));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let policy = harness_client::proto::lh::PolicyConfig {
        rules: vec![harness_client::policy::ask("run_command", "ask_shell")],
        ..Default::default()
    };
    let config = fx
        .config()
        .builtin_tools([BuiltinTool::RunCommand])
        .policy(policy);
    let mut conversation = fx.open(&process, config, Arc::new(PolicyDenies)).await;
    let log = turn(&mut conversation, "Run it").await;
    let denied = log.errors();
    assert_eq!(denied.len(), 1, "{:?}", log.steps);
    assert!(
        denied[0]
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("blocked by the host policy"),
        "{denied:?}"
    );
    assert_eq!(log.answer(), "Blocked, fine.");
    process.shutdown().await;
}

/// Rewrites `run_command`'s command line in the pre-tool hook.
struct RewriteCommand;

#[async_trait]
impl Callbacks for RewriteCommand {
    async fn hook(&self, _ctx: &CallContext, request: HookRequest) -> HookResponse {
        match request {
            HookRequest::PreTool(args) if args.tool_name() == "run_command" => {
                let mut arguments: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(args.arguments_json()).unwrap();
                arguments.insert("CommandLine".into(), json!("echo rewritten-by-host"));
                HookResponse::Allow {
                    modified_args: Some(arguments),
                }
            }
            _ => HookResponse::Allow {
                modified_args: None,
            },
        }
    }
}

#[tokio::test]
async fn a_pre_tool_hook_can_rewrite_arguments() {
    let script = Script::new()
        .then(Reply::call("run_command", json!({"CommandLine": "echo original", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000})))
        .then(Reply::text(["Done."]).when(Matcher::function_response_to("run_command")));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let config = fx
        .config()
        .builtin_tools([BuiltinTool::RunCommand])
        .hook(LifecycleHook::PreTool);
    let mut conversation = fx.open(&process, config, Arc::new(RewriteCommand)).await;
    let log = turn(&mut conversation, "Run it").await;
    let run = log
        .final_steps()
        .into_iter()
        .find_map(|s| s.tool().cloned())
        .expect("a tool step");
    let output = run.result["combinedOutput"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        output.contains("rewritten-by-host") && !output.contains("original"),
        "{run:?}"
    );
    process.shutdown().await;
}
