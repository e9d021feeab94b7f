//! Session rules over the fake harness: prompt identity, parking, answers, abandonment,
//! server tools, contract changes, failures and limits.

mod support;

use std::time::Duration;

use agui_session::{FnTool, InterruptRequest, ToolRegistry};
use agui_types::{Event, RunOutcome};
use harness_client::{HookRequest, HookResponse, ToolOutcome};
use serde_json::{Value, json};
use support::{FakeAgent, ask_colour, finish, finish_after, last, text, types, until, user};

#[tokio::test]
async fn a_prompt_streams_a_turn_and_finishes() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "hello")]}));
    let c = fx.harness.conversation(0).await;
    assert_eq!(c.next_input().await, "hello");
    c.running();
    c.echo(0, "hello");
    c.say(1, "Hi there.");
    c.idle(None);
    let events = finish(run).await;
    assert_eq!(
        types(&events),
        "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
    );
    assert_eq!(text(&events), "Hi there.");
    let Event::RunFinished(done) = last(&events) else {
        panic!()
    };
    assert!(done.outcome.is_none(), "a plain success has no outcome");
}

#[tokio::test]
async fn each_user_message_reaches_the_harness_once() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "first")]}));
    let c = fx.harness.conversation(0).await;
    assert_eq!(c.next_input().await, "first");
    c.idle(None);
    finish(run).await;
    // The client resends the whole history; only the new message goes out, and only the newest.
    let history = json!([user("m1", "first"), {"id": "a1", "role": "assistant", "content": "ok"}, user("m2", "skipped"), user("m3", "third")]);
    let run = fx.start(json!({"messages": history}));
    assert_eq!(c.next_input().await, "third");
    c.idle(None);
    finish(run).await;
    // Nothing new: nothing is sent, the run just finishes.
    let events = finish(fx.start(json!({"messages": history}))).await;
    assert_eq!(types(&events), "RUN_STARTED RUN_FINISHED");
    assert_eq!(c.input_within(Duration::from_millis(200)).await, None);
    assert_eq!(fx.harness.opened(), 1, "one conversation per thread");
}

#[tokio::test]
async fn a_frontend_tool_parks_and_a_tool_message_resolves_it_once() {
    let fx = FakeAgent::new();
    let tools =
        json!([{"name": "pick_colour", "description": "Pick", "parameters": {"type": "object"}}]);
    let run = fx.start(json!({"messages": [user("m1", "pick one")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let declared = c.declared_tools();
    assert_eq!(declared, ["pick_colour"]);
    let call = c.call_tool("h-1", "pick_colour", json!({"hint": "warm"}));
    let events = finish(run).await;
    assert_eq!(
        types(&events),
        "RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED"
    );
    let Event::RunFinished(done) = last(&events) else {
        panic!()
    };
    assert_eq!(
        done.outcome,
        Some(RunOutcome::Success {
            pending_tool_call_ids: vec!["h-1".into()]
        })
    );
    // The model repeats the call while it waits: it is not dispatched again.
    let repeat = c.call_tool("h-2", "pick_colour", json!({"hint": "warm"}));
    let answer = json!([user("m1", "pick one"), {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "{\"colour\":\"red\"}"}]);
    let run = fx.start(json!({"messages": answer, "tools": tools}));
    assert_eq!(
        call.await.unwrap(),
        ToolOutcome::json(json!({"colour": "red"}))
    );
    assert_eq!(
        repeat.await.unwrap(),
        ToolOutcome::json(json!({"colour": "red"})),
        "the repeat reuses the answer"
    );
    c.say(3, "Red it is.");
    c.idle(None);
    let events = finish(run).await;
    assert_eq!(text(&events), "Red it is.");
    assert!(
        !types(&events).contains("TOOL_CALL_START"),
        "no second dispatch: {}",
        types(&events)
    );
}

#[tokio::test]
async fn a_question_becomes_an_interrupt_and_resume_answers_it() {
    let fx = FakeAgent::asking();
    let run = fx.start(json!({"messages": [user("m1", "ask me")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let asked = ask_colour(&c);
    let events = finish(run).await;
    let Event::RunFinished(done) = last(&events) else {
        panic!("{}", types(&events))
    };
    let Some(RunOutcome::Interrupt { interrupts }) = &done.outcome else {
        panic!("{done:?}")
    };
    assert_eq!(interrupts[0].reason, "antigravity:ask_question");
    let id = interrupts[0].id.clone();
    // A bare run (no answer, no message) says again what is waiting.
    let events = finish(fx.start(json!({"messages": [user("m1", "ask me")]}))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(f) if matches!(&f.outcome, Some(RunOutcome::Interrupt { .. })))
    );
    let run = fx.start(json!({"messages": [user("m1", "ask me")],
        "resume": [{"interruptId": id, "status": "resolved", "payload": {"responses": [{"selected_option_ids": ["1"]}]}}]}));
    let answer = asked.await.unwrap();
    assert_eq!(
        answer,
        harness_client::QuestionAnswer::Answers(vec![harness_client::Answer::Choice {
            selected: vec![1],
            freeform: None
        }])
    );
    c.say(3, "Green.");
    c.idle(None);
    assert_eq!(text(&finish(run).await), "Green.");
}

#[tokio::test]
async fn reference_reason_names_are_available_for_older_frontends() {
    let fx = FakeAgent::with(
        |o| {
            o.tool_approval = true;
            o.interrupt_reasons = agui_session::InterruptReasons::Reference;
        },
        ToolRegistry::new(),
    );
    let run = fx.start(json!({"messages": [user("m1", "list it")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let _decision = c.hook(HookRequest::PreTool(
        harness_client::proto::lh::PreToolArgs {
            tool_name: Some("run_command".into()),
            arguments_json: Some(r#"{"CommandLine":"ls"}"#.into()),
            ..Default::default()
        },
    ));
    let events = finish(run).await;
    let Event::RunFinished(done) = last(&events) else {
        panic!("{}", types(&events))
    };
    let Some(RunOutcome::Interrupt { interrupts }) = &done.outcome else {
        panic!("{done:?}")
    };
    assert_eq!(interrupts[0].reason, "tool_approval");
}

#[tokio::test]
async fn approval_denied_tells_the_model() {
    let fx = FakeAgent::with(|o| o.tool_approval = true, ToolRegistry::new());
    let run = fx.start(json!({"messages": [user("m1", "clean up")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let pre_tool = harness_client::proto::lh::PreToolArgs {
        tool_name: Some("run_command".into()),
        arguments_json: Some(r#"{"CommandLine":"rm -rf /tmp/x"}"#.into()),
        ..Default::default()
    };
    let decision = c.hook(HookRequest::PreTool(pre_tool));
    let events = finish(run).await;
    let Event::RunFinished(done) = last(&events) else {
        panic!()
    };
    let Some(RunOutcome::Interrupt { interrupts }) = &done.outcome else {
        panic!("{done:?}")
    };
    assert_eq!(interrupts[0].reason, "antigravity:tool_approval");
    assert_eq!(
        interrupts[0].metadata.as_ref().unwrap()["args"]["CommandLine"],
        "rm -rf /tmp/x"
    );
    // Answered through forwardedProps.command (CopilotKit Channels), without an id.
    let run = fx.start(json!({"messages": [user("m1", "clean up")],
        "forwardedProps": {"command": {"approved": false, "message": "Not that directory."}}}));
    assert_eq!(
        decision.await.unwrap(),
        HookResponse::Deny("Not that directory.".into())
    );
    c.idle(None);
    finish(run).await;
}

/// Two frontend tools and a run asking for both; the conversation's callbacks follow their
/// steps, as `localharness`'s do.
async fn parallel_calls_run(
    fx: &FakeAgent,
) -> (
    agui_session::RunStream,
    agui_session::testing::FakeConversation,
) {
    let tools = json!([{"name": "weather", "description": "Weather"}, {"name": "clock", "description": "Clock"}]);
    let run = fx.start(json!({"messages": [user("m1", "both")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.set_steps_precede_callbacks(true);
    c.next_input().await;
    c.running();
    (run, c)
}

fn pending(events: &[Event]) -> Vec<String> {
    match last(events) {
        Event::RunFinished(done) => match &done.outcome {
            Some(RunOutcome::Success {
                pending_tool_call_ids,
            }) => pending_tool_call_ids.clone(),
            other => panic!("{other:?}"),
        },
        _ => panic!("{}", types(events)),
    }
}

#[tokio::test]
async fn a_callback_ahead_of_its_replys_steps_waits_for_them_so_every_call_of_the_reply_is_pending()
{
    // Under load, the harness was seen calling back for a reply's first call before it sent the
    // reply's steps; a run that ended on that callback showed one call of two.
    let fx = FakeAgent::new();
    let (mut run, c) = parallel_calls_run(&fx).await;
    let _weather = c.call_tool("h-1", "weather", json!({"city": "Rome"}));
    let mut seen = until(&mut run, "TOOL_CALL_END").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), run.next_event())
            .await
            .is_err(),
        "the run waits for the reply's steps"
    );
    c.say(1, "On it.");
    c.call_step(2, "h-1", "weather");
    c.call_step(3, "h-2", "clock");
    c.reply_done();
    seen = finish_after(seen, run).await;
    assert_eq!(text(&seen), "On it.");
    assert_eq!(pending(&seen), ["h-1", "h-2"], "{}", types(&seen));
}

#[tokio::test]
async fn a_callback_whose_step_never_comes_ends_its_run_after_the_wait() {
    let fx = FakeAgent::new();
    let (mut run, c) = parallel_calls_run(&fx).await;
    let _weather = c.call_tool("h-1", "weather", json!({"city": "Rome"}));
    let seen = until(&mut run, "TOOL_CALL_END").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(1000), run.next_event())
            .await
            .is_err(),
        "the run waits for the step a while"
    );
    let seen = finish_after(seen, run).await;
    assert_eq!(pending(&seen), ["h-1"]);
}

#[tokio::test]
async fn a_new_message_abandons_what_is_parked() {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let call = c.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    let run = fx.start(
        json!({"messages": [user("m1", "pick"), user("m2", "never mind, say hi")], "tools": tools}),
    );
    let outcome = call.await.unwrap();
    let ToolOutcome::Ok { response, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        response["result"]
            .as_str()
            .unwrap()
            .contains("sent a new message"),
        "{response:?}"
    );
    // The turn that was parked ends first; then the new message goes out.
    c.idle(None);
    assert_eq!(c.next_input().await, "never mind, say hi");
    c.say(5, "Hi.");
    c.idle(None);
    assert_eq!(text(&finish(run).await), "Hi.");
}

#[tokio::test]
async fn a_server_tool_streams_its_call_state_and_result() {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "research",
        "Researches a task",
        json!({"type": "object", "properties": {"task": {"type": "string"}}}),
        |ctx, args| async move {
            let mut state = ctx.state();
            state["delegations"] = json!([args["task"]]);
            ctx.set_state(state)
                .map_err(agui_session::ToolError::from_error)?;
            Ok(json!("done"))
        },
    ));
    let fx = FakeAgent::with(|_| {}, tools);
    let run = fx.start(json!({"messages": [user("m1", "research")], "state": {"mode": "x"}}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    assert_eq!(
        c.call_tool("h-1", "research", json!({"task": "rust"}))
            .await
            .unwrap(),
        ToolOutcome::json(json!("done"))
    );
    c.say(2, "Done.");
    c.idle(None);
    let events = finish(run).await;
    let sequence = types(&events);
    assert!(
        sequence.contains(
            "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STATE_SNAPSHOT TOOL_CALL_RESULT"
        ),
        "{sequence}"
    );
    let snapshot = events.iter().find_map(|e| match e {
        Event::StateSnapshot(s) => Some(s.snapshot.clone()),
        _ => None,
    });
    assert_eq!(
        snapshot,
        Some(json!({"mode": "x", "delegations": ["rust"]}))
    );
}

#[tokio::test]
async fn a_server_tool_can_interrupt_and_carry_on_with_the_answer() {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new("schedule_meeting", "Books a meeting", json!({"type": "object"}), |ctx, _| async move {
        let answer = ctx
            .interrupt(InterruptRequest { reason: "demo:schedule".into(), message: Some("Pick a time".into()), ..Default::default() })
            .await;
        Ok(json!({"status": answer.status(), "payload": answer.payload().cloned().unwrap_or(Value::Null)}))
    }));
    let fx = FakeAgent::with(|_| {}, tools);
    let run = fx.start(json!({"messages": [user("m1", "book it")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let call = c.call_tool("h-1", "schedule_meeting", json!({}));
    let events = finish(run).await;
    let Event::RunFinished(done) = last(&events) else {
        panic!()
    };
    let Some(RunOutcome::Interrupt { interrupts }) = &done.outcome else {
        panic!("{done:?}")
    };
    assert_eq!(
        (
            interrupts[0].reason.as_str(),
            interrupts[0].tool_call_id.as_deref()
        ),
        ("demo:schedule", Some("h-1"))
    );
    let run = fx.start(json!({"messages": [user("m1", "book it")],
        "resume": [{"interruptId": interrupts[0].id, "status": "resolved", "payload": {"time": "10:00"}}]}));
    assert_eq!(
        call.await.unwrap(),
        ToolOutcome::json(json!({"status": "resolved", "payload": {"time": "10:00"}}))
    );
    c.idle(None);
    let events = finish(run).await;
    assert!(
        types(&events).contains("TOOL_CALL_RESULT"),
        "the result arrives on the resuming run: {}",
        types(&events)
    );
}

#[tokio::test]
async fn a_changed_tool_contract_rebuilds_the_conversation_with_the_same_id() {
    let fx = FakeAgent::new();
    let run = fx.start(
        json!({"messages": [user("m1", "one")], "tools": [{"name": "a", "description": "A"}]}),
    );
    let first = fx.harness.conversation(0).await;
    first.next_input().await;
    first.idle(None);
    finish(run).await;
    let run = fx.start(json!({"messages": [user("m1", "one"), user("m2", "two")], "tools": [{"name": "b", "description": "B"}]}));
    let second = fx.harness.conversation(1).await;
    assert_eq!(
        second.id(),
        first.id(),
        "cold resume keeps the conversation"
    );
    assert_eq!(second.declared_tools()[0], "b");
    assert_eq!(second.next_input().await, "two");
    second.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn a_turn_error_is_a_run_error_with_the_http_code() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "one")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let mut failed = c.step(
        1,
        harness_client::StepSource::System,
        harness_client::StepTarget::User,
    );
    failed.status = harness_client::StepStatus::Error;
    failed.error = Some(harness_client::StepError {
        message: "bad request".into(),
        http_code: 400,
    });
    c.emit(harness_client::ConversationEvent::Step(failed));
    c.idle(Some("Error 400, Message: bad request"));
    let events = finish(run).await;
    let Event::RunError(error) = last(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(error.code.as_deref(), Some("AGENT_ERROR"));
    assert!(error.message.contains("(HTTP 400)"), "{}", error.message);
}

#[tokio::test]
async fn the_budget_stops_a_runaway_turn() {
    let fx = FakeAgent::with(|o| o.max_tool_calls_per_turn = Some(1), ToolRegistry::new());
    let run = fx.start(json!({"messages": [user("m1", "loop")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let pre = || {
        HookRequest::PreTool(harness_client::proto::lh::PreToolArgs {
            tool_name: Some("view_file".into()),
            ..Default::default()
        })
    };
    assert_eq!(
        c.hook(pre()).await.unwrap(),
        HookResponse::Allow {
            modified_args: None
        }
    );
    let HookResponse::Deny(reason) = c.hook(pre()).await.unwrap() else {
        panic!()
    };
    assert!(reason.contains("Tool call limit reached (1 per turn)"));
    assert_eq!(c.cancels(), 1);
    c.idle(None);
    let events = finish(run).await;
    let Event::RunError(error) = last(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(error.code.as_deref(), Some("MAX_TOOL_CALLS_EXCEEDED"));
}

#[tokio::test]
async fn a_session_tool_call_sits_inside_the_open_reply() {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let mut step = c.step(
        1,
        harness_client::StepSource::Model,
        harness_client::StepTarget::User,
    );
    step.text = "Let me ask.".into();
    step.text_delta = "Let me ask.".into();
    c.emit(harness_client::ConversationEvent::Step(step));
    // The run delivers the text before the call arrives, as with the harness.
    let mut run = run;
    let seen = support::until(&mut run, "TEXT_MESSAGE_CONTENT").await;
    let _call = c.call_tool("h-1", "pick", json!({}));
    c.reply_done();
    let events = support::finish_after(seen, run).await;
    let message = events.iter().find_map(|e| match e {
        Event::TextMessageStart(s) => Some(s.message_id.clone()),
        _ => None,
    });
    let parent = events.iter().find_map(|e| match e {
        Event::ToolCallStart(s) => Some(s.parent_message_id.clone()),
        _ => None,
    });
    assert_eq!(parent, Some(message), "{}", types(&events));
}

#[tokio::test]
async fn attachments_reach_the_harness_in_order() {
    let fx = FakeAgent::new();
    let png = "iVBORw0KGgo=";
    let message = json!({"id": "m1", "role": "user", "content": [
        {"type": "text", "text": "Look at"},
        {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}},
        {"type": "text", "text": "and this"},
        {"type": "image", "source": {"type": "url", "value": "https://example.com/x.png"}}]});
    let run = fx.start(json!({"messages": [message]}));
    let c = fx.harness.conversation(0).await;
    let sent = c.next_input().await;
    assert!(
        sent.starts_with("Look at[media image/png]and this"),
        "{sent}"
    );
    assert!(
        sent.contains("was not forwarded"),
        "a remote image becomes a note: {sent}"
    );
    c.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn silent_tools_read_context_and_state_without_events() {
    let fx = FakeAgent::with(
        |o| {
            o.app_context_tool = true;
            o.app_state_tool = true;
        },
        ToolRegistry::new(),
    );
    let run = fx.start(
        json!({"messages": [user("m1", "who am I?")], "state": {"theme": "dark"},
        "context": [{"description": "user", "value": "Ada"}]}),
    );
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let declared = c.declared_tools();
    assert_eq!(declared, ["get_app_context", "get_shared_state"]);
    let context = c
        .call_tool("h-1", "get_app_context", json!({}))
        .await
        .unwrap();
    assert_eq!(
        context,
        ToolOutcome::json(json!({"context": [{"description": "user", "value": "Ada"}]}))
    );
    let state = c
        .call_tool("h-2", "get_shared_state", json!({}))
        .await
        .unwrap();
    assert_eq!(
        state,
        ToolOutcome::json(json!({"state": {"theme": "dark"}}))
    );
    c.idle(None);
    let events = finish(run).await;
    assert_eq!(
        types(&events),
        "RUN_STARTED RUN_FINISHED",
        "silent tools emit nothing"
    );
}

#[tokio::test]
async fn a_turn_the_harness_starts_on_its_own_reaches_the_next_run() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "start a background job")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    // Later, with no run attached, the harness works on its own (a backgrounded tool finished).
    c.running();
    c.say(5, "The background job finished.");
    c.idle(None);
    let run =
        fx.start(json!({"messages": [user("m1", "start a background job"), user("m2", "thanks")]}));
    assert_eq!(
        c.next_input().await,
        "thanks",
        "sent once the harness's own turn is over"
    );
    c.say(7, "You're welcome.");
    c.idle(None);
    let events = finish(run).await;
    assert_eq!(text(&events), "The background job finished.You're welcome.");
}

#[tokio::test]
async fn a_failing_server_tool_reports_its_error_to_the_client_and_the_model() {
    let mut tools = ToolRegistry::new();
    tools.register(FnTool::new(
        "flaky",
        "Calls a service",
        json!({"type": "object"}),
        |_, _| async { Err(agui_session::ToolError::new("the service is down")) },
    ));
    let fx = FakeAgent::with(|_| {}, tools);
    let run = fx.start(json!({"messages": [user("m1", "try it")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    assert_eq!(
        c.call_tool("h-1", "flaky", json!({})).await.unwrap(),
        ToolOutcome::error("the service is down"),
        "the model gets an error result"
    );
    c.idle(None);
    let events = finish(run).await;
    let result = events.iter().find_map(|e| match e {
        Event::ToolCallResult(r) => Some(r.content.clone()),
        _ => None,
    });
    assert_eq!(
        result,
        Some(agui_types::Content::Text(
            "There was an error executing flaky: the service is down".into()
        )),
        "{}",
        types(&events)
    );
}

#[tokio::test]
async fn a_frontend_tool_repeated_with_other_arguments_is_told_what_already_ran() {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let first = c.call_tool("h-1", "pick", json!({"shade": "warm"}));
    finish(run).await;
    let other = c.call_tool("h-2", "pick", json!({"shade": "cold"}));
    let answer = json!([user("m1", "pick"), {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "red"}]);
    let run = fx.start(json!({"messages": answer, "tools": tools}));
    assert_eq!(first.await.unwrap(), ToolOutcome::json(json!("red")));
    let ToolOutcome::Ok { response, .. } = other.await.unwrap() else {
        panic!("the repeat is not an error")
    };
    let told = response["result"].as_str().unwrap_or_default();
    assert!(
        told.contains(
            r#"pick already ran in this turn with arguments {"shade":"warm"} and returned red"#
        ) && told.contains("It was not run again."),
        "{told}"
    );
    c.idle(None);
    let events = finish(run).await;
    assert!(
        !types(&events).contains("TOOL_CALL_START"),
        "the repeat is not dispatched: {}",
        types(&events)
    );
}

#[tokio::test]
async fn without_dedup_a_repeated_frontend_tool_is_dispatched_again() {
    let fx = FakeAgent::with(|o| o.deduplicate_tool_calls = false, ToolRegistry::new());
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let first = c.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    let again = c.call_tool("h-2", "pick", json!({}));
    // The client reports a failure: the model gets it as an error.
    let answer = json!([user("m1", "pick"),
        {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "", "error": "the user closed the dialog"}]);
    let events = finish(fx.start(json!({"messages": answer, "tools": tools}))).await;
    assert_eq!(
        first.await.unwrap(),
        ToolOutcome::error("the user closed the dialog")
    );
    // The run resumes the turn, so it restates the thread first (results of calls started in
    // an earlier run need their calls in this run's stream).
    assert_eq!(
        types(&events),
        "RUN_STARTED MESSAGES_SNAPSHOT TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED"
    );
    let Event::RunFinished(done) = last(&events) else {
        panic!()
    };
    assert_eq!(
        done.outcome,
        Some(RunOutcome::Success {
            pending_tool_call_ids: vec!["h-2".into()]
        }),
        "the repeat waits for its own answer"
    );
    drop(again);
}

/// A run that resumes a parked frontend tool carries no result of a call an earlier run
/// started (the client's tool message is the result): it needs no restatement of the thread,
/// whose size would otherwise grow with the thread on every resume.
#[tokio::test]
async fn resuming_a_frontend_tool_on_a_long_thread_sends_no_snapshot() {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    // What the client holds, kept as the official client keeps it.
    let mut client = agui_types::MessageLog::new();
    let send = |client: &mut agui_types::MessageLog, id: &str, text: &str| {
        client.push(serde_json::from_value(user(id, text)).unwrap());
        fx.start(json!({"messages": client.messages(), "tools": tools}))
    };
    let run = send(&mut client, "m0", "hello 0");
    let c = fx.harness.conversation(0).await;
    let mut index = 0;
    // 200 messages: 100 user messages and their replies.
    let mut run = Some(run);
    for n in 0..100u32 {
        let current = match run.take() {
            Some(run) => run,
            None => send(&mut client, &format!("m{n}"), &format!("hello {n}")),
        };
        c.next_input().await;
        c.echo(index, &format!("hello {n}"));
        c.say(index + 1, &format!("Reply {n}."));
        index += 2;
        c.idle(None);
        for event in finish(current).await {
            client.apply(&event);
        }
    }
    assert_eq!(client.len(), 200);
    let run = send(&mut client, "m100", "pick one");
    c.next_input().await;
    let call = c.call_tool("h-1", "pick", json!({}));
    let parked = finish(run).await;
    assert!(
        matches!(last(&parked), Event::RunFinished(_)),
        "{}",
        types(&parked)
    );
    for event in &parked {
        client.apply(event);
    }
    client.push(
        serde_json::from_value(
            json!({"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "red"}),
        )
        .unwrap(),
    );
    let run = fx.start(json!({"messages": client.messages(), "tools": tools}));
    call.await.unwrap();
    c.say(index + 2, "Red.");
    c.idle(None);
    let events = finish(run).await;
    let bytes: usize = events
        .iter()
        .map(|e| agui_types::Encoding::Sse.encode(e).len())
        .sum();
    eprintln!("a resumed run on a thread of 200 messages: {bytes} bytes of SSE");
    assert_eq!(
        types(&events),
        "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED"
    );
    assert!(bytes < 2_000, "{bytes} bytes");
}
