//! Threads that outlive requests, over the fake harness: connect (idle, live, parked, after a
//! restart, unknown), stop, clients that leave or fall behind, `on_disconnect = cancel`, a
//! conversation the harness lost, a turn that stalls, and a run that waits for a busy thread.

mod support;

use std::time::Duration;

use agui_session::{OnDisconnect, ThreadError, ToolRegistry};
use agui_types::{Event, Message, MessageLog, RunOutcome};
use harness_client::{CloseReason, ConversationEvent, ExitInfo, TurnEnd};
use serde_json::json;
use support::{
    FakeAgent, ask_colour, eventually, finish, finish_after, input_of, last, run_error, snapshot,
    text, types, until, user,
};

/// What a client holds after applying `events` to `messages`.
fn held(messages: &[Message], events: &[Event]) -> Vec<Message> {
    let mut log = MessageLog::from_messages(messages.to_vec());
    for event in events {
        log.apply(event);
    }
    log.messages().to_vec()
}

/// A connect request for `thread-1` from a client that holds nothing.
fn connect_input() -> agui_types::RunAgentInput {
    input_of(json!({}))
}

/// The turn ends because it was cancelled, as the harness reports a stop.
fn cancelled(c: &agui_session::testing::FakeConversation) {
    c.emit(ConversationEvent::TurnEnded(TurnEnd {
        cancelled: true,
        halted: true,
        error: None,
        error_code: None,
        stop_reason: None,
        background_tasks: false,
    }));
}

fn outcome(events: &[Event]) -> Option<RunOutcome> {
    match last(events) {
        Event::RunFinished(done) => done.outcome.clone(),
        _ => panic!("the run did not finish: {}", types(events)),
    }
}

#[tokio::test]
async fn connect_to_an_idle_thread_restates_its_messages_and_ends() {
    let fx = FakeAgent::new();
    let (run, c) = fx.begin("hello").await;
    c.echo(0, "hello");
    c.say(1, "Hi there.");
    c.idle(None);
    let first = finish(run).await;
    let stayer = held(
        &[serde_json::from_value(user("m1", "hello")).unwrap()],
        &first,
    );

    let events = finish(fx.agent.connect(connect_input()).await.unwrap()).await;
    assert_eq!(
        types(&events),
        "RUN_STARTED MESSAGES_SNAPSHOT STATE_SNAPSHOT RUN_FINISHED",
        "nothing live: the history and state, then the end"
    );
    assert_eq!(held(&[], &events), stayer, "the same messages, same ids");
    assert_eq!(outcome(&events), None);
    assert_eq!(
        c.input_within(Duration::from_millis(100)).await,
        None,
        "nothing is sent"
    );
}

#[tokio::test]
async fn connect_to_an_unknown_thread_is_refused() {
    let fx = FakeAgent::new();
    match fx.agent.connect(connect_input()).await {
        Err(ThreadError::UnknownThread(id)) => assert_eq!(id, "thread-1"),
        Err(other) => panic!("not an unknown thread: {other}"),
        Ok(_) => panic!("an unknown thread has nothing to connect to"),
    }
    assert!(matches!(
        fx.agent.stop("thread-1").await,
        Err(ThreadError::UnknownThread(_))
    ));
    assert_eq!(fx.harness.opened(), 0, "nothing was opened for it");
}

#[tokio::test]
async fn connect_mid_turn_gets_the_reply_so_far_then_the_rest_like_the_client_that_stayed() {
    let fx = FakeAgent::new();
    let (mut run, c) = fx.begin("tell me").await;
    c.echo(0, "tell me");
    c.say_part(1, "Once upon", "Once upon");
    let mut seen = until(&mut run, "TEXT_MESSAGE_CONTENT").await;
    let mut joined = fx.agent.connect(connect_input()).await.unwrap();
    let mut joined_seen = until(&mut joined, "MESSAGES_SNAPSHOT").await;
    let so_far = snapshot(&joined_seen);
    assert_eq!(
        so_far[0].id(),
        "m1",
        "the user message keeps the client's id"
    );
    assert_eq!(text_of(&so_far[1]), "Once upon", "the reply so far");
    c.say_part(1, "Once upon a time.", " a time.");
    c.step_done(1, "Once upon a time.");
    c.idle(None);
    seen = finish_after(seen, run).await;
    joined_seen = finish_after(joined_seen, joined).await;
    let stayer = held(
        &[serde_json::from_value(user("m1", "tell me")).unwrap()],
        &seen,
    );
    assert_eq!(
        held(&[], &joined_seen),
        stayer,
        "both clients hold the same"
    );
    assert_eq!(text(&seen), "Once upon a time.");
    assert_eq!(outcome(&joined_seen), None);
}

#[tokio::test]
async fn connect_to_a_parked_thread_re_announces_its_interrupt() {
    let fx = FakeAgent::asking();
    let run = fx.start(json!({"messages": [user("m1", "ask me")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let _asked = ask_colour(&c);
    let parked = finish(run).await;
    let Some(RunOutcome::Interrupt { interrupts }) = outcome(&parked) else {
        panic!("{}", types(&parked))
    };
    let events = finish(fx.agent.connect(connect_input()).await.unwrap()).await;
    let Some(RunOutcome::Interrupt { interrupts: again }) = outcome(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(
        again.iter().map(|i| &i.id).collect::<Vec<_>>(),
        interrupts.iter().map(|i| &i.id).collect::<Vec<_>>()
    );
    assert_eq!(snapshot(&events)[0].id(), "m1");
}

#[tokio::test]
async fn connect_after_a_restart_restates_the_saved_history() {
    let fx = FakeAgent::new();
    let c = fx.answered("remember me", "I will.").await;
    let (agent, harness) = fx.restart().await;
    let events = finish(agent.connect(connect_input()).await.unwrap()).await;
    let messages = held(&[], &events);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(
        messages[0].id(),
        "m1",
        "the client's id survives the restart"
    );
    assert_eq!(text_of(&messages[1]), "I will.");
    let again = harness.conversation(0).await;
    assert_eq!(
        again.id(),
        c.id(),
        "the saved conversation was resumed to read it"
    );
    assert_eq!(again.input_within(Duration::from_millis(100)).await, None);
}

fn text_of(message: &Message) -> String {
    serde_json::to_value(message).unwrap()["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn stop_halts_the_turn_and_every_watching_run_ends_cancelled() {
    let fx = FakeAgent::new();
    let (mut run, c) = fx.begin("work hard").await;
    c.say(1, "Working");
    let seen = until(&mut run, "TEXT_MESSAGE_CONTENT").await;
    let joined = fx.agent.connect(connect_input()).await.unwrap();
    assert!(
        fx.agent.stop("thread-1").await.unwrap(),
        "a turn was in flight"
    );
    assert_eq!(c.cancels(), 1, "the harness was asked to stop");
    cancelled(&c);
    let events = finish_after(seen, run).await;
    assert_eq!(outcome(&events), Some(RunOutcome::Cancelled));
    assert_eq!(outcome(&finish(joined).await), Some(RunOutcome::Cancelled));
    assert!(
        !fx.agent.stop("thread-1").await.unwrap(),
        "nothing left to stop"
    );
    // The thread goes on.
    let run = fx.start(json!({"messages": [user("m1", "work hard"), user("m2", "again")]}));
    assert_eq!(c.next_input().await, "again");
    c.say(3, "Done.");
    c.idle(None);
    assert_eq!(text(&finish(run).await), "Done.");
}

#[tokio::test]
async fn a_stop_the_harness_ignores_kills_its_process_and_the_run_closes_what_it_opened() {
    let fx = FakeAgent::new();
    let (mut run, c) = fx.begin("hang").await;
    // A tool call is open when the stop comes (a command that does not end).
    c.call_step(1, "h-1", "slow_tool");
    let seen = until(&mut run, "TOOL_CALL_START").await;
    assert!(fx.agent.stop("thread-1").await.unwrap());
    // The harness does not react; after the grace period its process is killed.
    eventually(Duration::from_secs(10), "the process was killed", || {
        c.kills() > 0
    })
    .await;
    assert_eq!(c.kills(), 1, "the process was killed");
    c.close(CloseReason::ProcessExited(ExitInfo {
        pid: 1,
        status: "signal: 9 (SIGKILL)".into(),
        code: None,
        stderr_tail: String::new(),
    }));
    let events = support::finish_after(seen, run).await;
    assert_eq!(outcome(&events), Some(RunOutcome::Cancelled));
    assert!(
        types(&events).contains("TOOL_CALL_END RUN_FINISHED"),
        "the open call is closed before the run ends: {}",
        types(&events)
    );
}

#[tokio::test]
async fn a_client_that_leaves_does_not_stop_the_turn_and_the_next_run_gets_what_it_missed() {
    let fx = FakeAgent::new();
    let (mut run, c) = fx.begin("long job").await;
    c.echo(0, "long job");
    c.say_part(1, "Part one.", "Part one.");
    until(&mut run, "TEXT_MESSAGE_CONTENT").await;
    drop(run);
    c.say_part(1, "Part one. Part two.", " Part two.");
    c.step_done(1, "Part one. Part two.");
    c.idle(None);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(c.cancels(), 0, "on_disconnect = detach: the turn went on");
    let events = finish(fx.start(json!({"messages": [user("m1", "long job")]}))).await;
    let messages = held(
        &[serde_json::from_value(user("m1", "long job")).unwrap()],
        &events,
    );
    assert_eq!(messages.len(), 2, "{}", types(&events));
    assert_eq!(text_of(&messages[1]), "Part one. Part two.", "nothing lost");
}

#[tokio::test]
async fn with_on_disconnect_cancel_the_last_client_leaving_stops_the_turn() {
    let fx = FakeAgent::with(
        |o| o.on_disconnect = OnDisconnect::Cancel,
        ToolRegistry::new(),
    );
    let (mut run, c) = fx.begin("long job").await;
    c.say_part(1, "Part one.", "Part one.");
    until(&mut run, "TEXT_MESSAGE_CONTENT").await;
    drop(run);
    // The departure is noticed on the next event sent to it.
    c.say_part(1, "Part one. Part two.", " Part two.");
    eventually(Duration::from_secs(5), "the turn was stopped", || {
        c.cancels() > 0
    })
    .await;
    assert_eq!(c.cancels(), 1, "the turn was stopped");
}

#[tokio::test]
async fn a_client_that_falls_behind_is_detached_without_holding_up_the_thread() {
    let fx = FakeAgent::with(|o| o.client_buffer_events = 8, ToolRegistry::new());
    let (run, c) = fx.begin("talk a lot").await;
    c.echo(0, "talk a lot");
    let mut reply = String::new();
    for i in 0..50 {
        let word = format!("word{i} ");
        reply.push_str(&word);
        c.say_part(1, &reply, &word);
    }
    c.step_done(1, &reply);
    c.idle(None);
    // The unread stream was cut off: it ends without a terminal event.
    let events = tokio::time::timeout(Duration::from_secs(10), run.collect())
        .await
        .expect("the stream ends");
    assert!(events.len() <= 8 + 1, "{} events", events.len());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RunFinished(_) | Event::RunError(_))),
        "a detached stream gets no terminal"
    );
    // The thread went on: the next run has the whole reply.
    let events = finish(fx.start(json!({"messages": [user("m1", "talk a lot")]}))).await;
    let messages = held(
        &[serde_json::from_value(user("m1", "talk a lot")).unwrap()],
        &events,
    );
    assert_eq!(text_of(&messages[1]), reply);
}

#[tokio::test]
async fn a_conversation_the_harness_lost_is_reported_and_the_thread_starts_over() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "remember me")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    fx.agent.shutdown().await;
    fx.harness.lose(c.id());
    let (agent, harness) = fx.another_server();
    let input = json!({"messages": [user("m1", "remember me"), user("m2", "still there?")]});
    let events = finish(agent.run(input_of(input.clone()))).await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("CONVERSATION_LOST"));
    assert!(error.message.contains("lost"), "{}", error.message);
    // The next run starts a new conversation with the new message.
    let run = agent.run(input_of(input));
    let fresh = harness.conversation(0).await;
    assert_ne!(fresh.id(), c.id(), "a new conversation");
    assert_eq!(fresh.next_input().await, "still there?");
    fresh.idle(None);
    assert_eq!(
        types(&finish(run).await).split(' ').next_back(),
        Some("RUN_FINISHED")
    );
}

#[tokio::test]
async fn a_turn_without_progress_is_halted_and_reported_stalled() {
    let fx = FakeAgent::with(
        |o| o.turn_stall_timeout = Duration::from_millis(300),
        ToolRegistry::new(),
    );
    let (run, c) = fx.begin("freeze").await;
    eventually(
        Duration::from_secs(5),
        "the stalled turn was halted",
        || c.cancels() > 0,
    )
    .await;
    assert_eq!(c.cancels(), 1, "the stalled turn was halted");
    cancelled(&c);
    let events = finish(run).await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("TURN_STALLED"));
    assert!(
        error.message.contains("turn_stall_timeout_secs"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_turn_waiting_only_for_the_client_never_stalls() {
    let fx = FakeAgent::with(
        |o| o.turn_stall_timeout = Duration::from_millis(200),
        ToolRegistry::new(),
    );
    let tools =
        json!([{"name": "pick_colour", "description": "Pick", "parameters": {"type": "object"}}]);
    let run = fx.start(json!({"messages": [user("m1", "pick one")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let _call = c.call_tool("h-1", "pick_colour", json!({}));
    finish(run).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(c.cancels(), 0, "parked on the client is not a stall");
}

#[tokio::test]
async fn a_run_waiting_for_a_busy_thread_is_started_at_once_and_served_after_the_turn() {
    let fx = FakeAgent::new();
    let (first, c) = fx.begin("first job").await;
    let mut second = fx.start(json!({
        "runId": "r-second",
        "messages": [user("m1", "first job"), user("m2", "second job")]
    }));
    let started = tokio::time::timeout(Duration::from_secs(5), second.next_event())
        .await
        .expect("the waiting run is started without waiting for the turn")
        .expect("an event");
    assert!(
        matches!(&started, Event::RunStarted(s) if s.run_id == "r-second"),
        "the first event is the run's own RUN_STARTED: {started:?}"
    );
    assert_eq!(
        c.input_within(Duration::from_millis(200)).await,
        None,
        "its message waits for the turn in flight"
    );
    c.echo(0, "first job");
    c.say_part(1, "Done.", "Done.");
    c.step_done(1, "Done.");
    c.idle(None);
    let first = finish(first).await;
    assert_eq!(text(&first), "Done.");
    assert_eq!(c.next_input().await, "second job");
    c.running();
    c.echo(2, "second job");
    c.say_part(3, "Also done.", "Also done.");
    c.step_done(3, "Also done.");
    c.idle(None);
    let second = finish_after(vec![started], second).await;
    assert_eq!(text(&second), "Also done.", "{}", types(&second));
}
