//! Thread lifecycle over the fake harness: dead and restarted harnesses, server restarts,
//! hibernation, session limits, busy threads, sweeping and shutdown.

mod support;

use std::time::Duration;

use agui_session::ToolRegistry;
use agui_session::testing::FakeConversation;
use agui_types::Event;
use harness_client::{CloseReason, ExitInfo};
use serde_json::json;
use support::{FakeAgent, eventually, finish, last, text, types, user};

/// How the connection of a conversation whose harness process was SIGKILLed ends.
fn killed() -> CloseReason {
    CloseReason::ProcessExited(ExitInfo {
        pid: 1,
        status: "killed by SIGKILL".into(),
        code: None,
        stderr_tail: String::new(),
    })
}

#[tokio::test]
async fn a_dead_harness_fails_the_run_and_the_next_run_starts_over() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "one")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    c.close(killed());
    let events = finish(run).await;
    let Event::RunError(error) = last(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(error.code.as_deref(), Some("HARNESS_LOST"));
    let run = fx.start(json!({"messages": [user("m1", "one"), user("m2", "again")]}));
    let fresh = fx.harness.conversation(1).await;
    assert_eq!(
        fresh.id(),
        c.id(),
        "the same conversation id is resumed where possible"
    );
    assert_eq!(fresh.next_input().await, "again");
    fresh.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn a_restarted_server_neither_forgets_nor_resends() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "remember me")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    // A new agent on the same save dir (a restarted server).
    let (agent, harness) = fx.restart().await;
    let run = agent.run(support::input_of(
        json!({"messages": [user("m1", "remember me"), user("m2", "still there?")]}),
    ));
    let again = harness.conversation(0).await;
    assert_eq!(again.id(), c.id(), "the thread continues its conversation");
    assert_eq!(
        again.next_input().await,
        "still there?",
        "the old message is not re-sent"
    );
    again.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn an_idle_session_hibernates_and_resumes_transparently() {
    let fx = FakeAgent::with(
        |o| o.hibernate_after = Duration::from_millis(150),
        ToolRegistry::new(),
    );
    let run = fx.start(json!({"messages": [user("m1", "one")]}));
    let first = fx.harness.conversation(0).await;
    first.next_input().await;
    first.idle(None);
    finish(run).await;
    eventually(
        Duration::from_secs(5),
        "the idle conversation is closed",
        || fx.agent.stats().live_conversations == 0,
    )
    .await;
    assert_eq!(fx.agent.stats().sessions, 1, "the session itself stays");
    let run = fx.start(json!({"messages": [user("m1", "one"), user("m2", "two")]}));
    let resumed = fx.harness.conversation(1).await;
    assert_eq!(resumed.id(), first.id());
    assert_eq!(
        resumed.next_input().await,
        "two",
        "no duplicate prompt after hibernation"
    );
    resumed.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn the_session_limit_hibernates_idle_sessions_and_refuses_busy_ones() {
    let fx = FakeAgent::with(|o| o.max_sessions = 1, ToolRegistry::new());
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    // Thread A finishes: its conversation can be hibernated to make room.
    let run = fx.agent.run(support::input_of(
        json!({"threadId": "a", "messages": [user("a1", "hi")]}),
    ));
    let a = fx.harness.conversation(0).await;
    a.next_input().await;
    a.idle(None);
    finish(run).await;
    // Thread B takes the only slot and parks on a frontend tool.
    let run = fx.agent.run(support::input_of(
        json!({"threadId": "b", "messages": [user("b1", "pick")], "tools": tools}),
    ));
    let b = fx.harness.conversation(1).await;
    b.next_input().await;
    let _parked = b.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    // Thread C cannot take a slot from a session that waits for its user.
    let events = finish(fx.agent.run(support::input_of(
        json!({"threadId": "c", "messages": [user("c1", "hello")]}),
    )))
    .await;
    let Event::RunError(error) = last(&events) else {
        panic!("{}", types(&events))
    };
    assert_eq!(
        error.code.as_deref(),
        Some("SESSION_LIMIT"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_second_run_on_a_busy_thread_is_refused_when_configured() {
    let fx = FakeAgent::with(
        |o| o.concurrent_runs = agui_session::ConcurrentRuns::Refuse,
        ToolRegistry::new(),
    );
    let first = fx.start(json!({"messages": [user("m1", "long")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let second =
        finish(fx.start(json!({"messages": [user("m1", "long"), user("m2", "again")]}))).await;
    let Event::RunError(error) = last(&second) else {
        panic!("{}", types(&second))
    };
    assert_eq!(error.code.as_deref(), Some("THREAD_BUSY"));
    c.idle(None);
    finish(first).await;
}

#[tokio::test]
async fn a_swept_thread_comes_back_to_its_conversation() {
    let fx = FakeAgent::with(
        |o| {
            o.session_timeout = Duration::from_millis(150);
            o.parked_timeout = Duration::from_millis(150);
        },
        ToolRegistry::new(),
    );
    let run = fx.start(json!({"messages": [user("m1", "one")]}));
    let first = fx.harness.conversation(0).await;
    first.next_input().await;
    first.idle(None);
    finish(run).await;
    eventually(Duration::from_secs(5), "the idle session is swept", || {
        fx.agent.stats().sessions == 0
    })
    .await;
    let run = fx.start(json!({"messages": [user("m1", "one"), user("m2", "two")]}));
    let back = fx.harness.conversation(1).await;
    assert_eq!(back.id(), first.id(), "cold resume from the thread store");
    assert_eq!(back.next_input().await, "two");
    back.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn shutting_down_ends_a_run_in_flight_and_refuses_new_ones() {
    let fx = FakeAgent::new();
    let run = fx.start(json!({"messages": [user("m1", "long")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    fx.agent.shutdown().await;
    let events = finish(run).await;
    assert_eq!(
        support::run_error(&events).code.as_deref(),
        Some("CANCELLED")
    );
    let after =
        finish(fx.start(json!({"messages": [user("m1", "long"), user("m2", "more")]}))).await;
    assert_eq!(
        support::run_error(&after).code.as_deref(),
        Some("CANCELLED")
    );
    assert_eq!(fx.agent.stats().live_conversations, 0);
}

#[tokio::test]
async fn an_answer_to_a_turn_lost_with_its_harness_fails_clearly_and_the_thread_goes_on() {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let _call = c.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    // The harness dies while the thread waits for its user.
    c.close(killed());
    let answered = json!([user("m1", "pick"), {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "red"}]);
    let events = finish(fx.start(json!({"messages": answered, "tools": tools}))).await;
    assert_eq!(
        support::run_error(&events).code.as_deref(),
        Some("HARNESS_LOST"),
        "the run does not wait for a turn that cannot end"
    );
    let mut messages = answered.as_array().unwrap().clone();
    messages.push(user("m2", "again"));
    let run = fx.start(json!({"messages": messages, "tools": tools}));
    let fresh = fx.harness.conversation(1).await;
    assert_eq!(fresh.id(), c.id(), "the conversation is kept");
    assert_eq!(fresh.next_input().await, "again");
    fresh.say(1, "Hello again.");
    fresh.idle(None);
    assert_eq!(text(&finish(run).await), "Hello again.");
    assert_eq!(fx.agent.stats().live_conversations, 1);
}

#[tokio::test]
async fn a_tool_result_that_arrives_after_a_restart_reaches_the_model_once_whatever_message_carries_it()
 {
    let fx = FakeAgent::new();
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.start(json!({"messages": [user("m1", "pick")], "tools": tools}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    let _call = c.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    // A restarted server: the harness call is gone, the client's answer is not.
    let (agent, harness) = fx.restart().await;
    let answered = json!({"messages": [user("m1", "pick"),
        {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "red"}], "tools": tools});
    let run = agent.run(support::input_of(answered.clone()));
    let again = harness.conversation(0).await;
    let note = again.next_input().await;
    assert!(
        note.contains("`pick`") && note.contains("it returned: red"),
        "{note}"
    );
    again.idle(None);
    finish(run).await;
    let events = finish(agent.run(support::input_of(answered.clone()))).await;
    assert_eq!(types(&events), "RUN_STARTED RUN_FINISHED");
    assert_eq!(
        again.input_within(Duration::from_millis(200)).await,
        None,
        "delivered once"
    );
    // A client that took a rebuilt history holds a second result for the same call, under an id
    // the server made; its next message must reach the model alone.
    let rebuilt = json!({"id": "h-1-result", "role": "tool", "toolCallId": "h-1",
        "content": "pick completed without returning any output."});
    let mut later = answered;
    later["messages"]
        .as_array_mut()
        .unwrap()
        .extend([rebuilt, user("m2", "next")]);
    let run = agent.run(support::input_of(later));
    assert_eq!(again.next_input().await, "next");
    again.idle(None);
    finish(run).await;
}

/// A client told its turn finished finds it so whichever server reads the thread next, even
/// one that reads it the moment the run ended (a replica frozen or killed right then, its
/// thread taken over): its message under its own id, the reply not marked interrupted, the
/// next run not refused. The run's end waits for the thread's record to reach the volume (the
/// replica soak saw a thread lose its message's id that way). Several rounds: without the wait
/// the record is still being written when the run ends.
#[tokio::test]
async fn a_run_that_finished_is_known_to_a_server_that_reads_the_thread_at_once() {
    for round in 0..4 {
        let fx = FakeAgent::new();
        let c = fx.answered("remember me", "I will.").await;
        // The server stops here, without a shutdown: only what is on the volume is known.
        let (second, restarted) = fx.another_server();
        let events = finish(second.connect(support::input_of(json!({}))).await.unwrap()).await;
        let messages = support::snapshot(&events);
        let prefix: String = c.id().chars().take(8).collect();
        let ids: Vec<&str> = messages.iter().map(agui_types::Message::id).collect();
        assert_eq!(ids, ["m1", &format!("{prefix}-r-1-t")], "round {round}");
        assert!(
            messages
                .iter()
                .all(|m| serde_json::to_value(m).unwrap()["metadata"]["interrupted"].is_null()),
            "round {round}: a finished turn was marked interrupted: {messages:?}"
        );
        let run = second.run(support::input_of(json!({"messages": [
            user("m1", "remember me"), user("m2", "and then")
        ]})));
        let resumed = restarted.conversation(0).await;
        assert_eq!(resumed.next_input().await, "and then", "round {round}");
        resumed.idle(None);
        let events = finish(run).await;
        assert!(
            matches!(last(&events), Event::RunFinished(_)),
            "round {round}: {}",
            types(&events)
        );
        second.shutdown().await;
        fx.agent.shutdown().await;
    }
}

/// An agent that opens a conversation ahead of the next new thread, unclaimed ones closing
/// after `hibernate_after`.
fn with_spare_conversations(hibernate_after: Duration) -> FakeAgent {
    FakeAgent::with(
        |o| {
            o.spare_conversations = true;
            o.hibernate_after = hibernate_after;
        },
        ToolRegistry::new(),
    )
}

/// Runs one plain turn on thread `thread` whose conversation is `conversation` (the fake's
/// n-th opened).
async fn plain_turn(fx: &FakeAgent, thread: &str, conversation: usize) -> FakeConversation {
    let run = fx.agent.run(support::input_of(
        json!({"threadId": thread, "messages": [user(&format!("{thread}1"), "hello")]}),
    ));
    let c = fx.harness.conversation(conversation).await;
    assert_eq!(c.next_input().await, "hello");
    c.idle(None);
    finish(run).await;
    c
}

#[tokio::test]
async fn a_new_thread_takes_the_conversation_opened_ahead_and_another_opens_behind_it() {
    let fx = with_spare_conversations(Duration::from_secs(600));
    let a = plain_turn(&fx, "a", 0).await;
    // Opened ahead once a's conversation was open, in a slot of its own of the same tree.
    let spare = fx.harness.conversation(1).await;
    assert_eq!(spare.process(), a.process());
    assert_ne!(spare.workspace(), a.workspace());
    let b = plain_turn(&fx, "b", 1).await;
    assert_eq!(
        b.id(),
        spare.id(),
        "b's message went to the conversation opened ahead"
    );
    let behind = fx.harness.conversation(2).await;
    assert_ne!(behind.id(), b.id());
    // A first run with client tools opens its own conversation; the spare stays.
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = fx.agent.run(support::input_of(
        json!({"threadId": "c", "messages": [user("c1", "pick")], "tools": tools}),
    ));
    let c = fx.harness.conversation(3).await;
    assert_eq!(c.next_input().await, "pick");
    assert_eq!(c.declared_tools(), ["pick"]);
    c.idle(None);
    finish(run).await;
    assert!(behind.is_open());
    assert_eq!(behind.input_within(Duration::from_millis(100)).await, None);
    // b's record names the conversation it took: a restarted server resumes it.
    let (agent, harness) = fx.restart().await;
    let run = agent.run(support::input_of(
        json!({"threadId": "b", "messages": [user("b1", "hello"), user("b2", "again")]}),
    ));
    let resumed = harness.conversation(0).await;
    assert_eq!(resumed.id(), spare.id());
    assert_eq!(resumed.workspace(), spare.workspace());
    assert_eq!(resumed.next_input().await, "again");
    resumed.idle(None);
    finish(run).await;
}

#[tokio::test]
async fn a_conversation_opened_ahead_whose_process_died_is_let_go_and_the_thread_opens_its_own() {
    let fx = with_spare_conversations(Duration::from_secs(600));
    plain_turn(&fx, "a", 0).await;
    let spare = fx.harness.conversation(1).await;
    spare.close(killed());
    let b = plain_turn(&fx, "b", 2).await;
    assert_ne!(b.id(), spare.id());
    eventually(
        Duration::from_secs(10),
        "the dead spare's slot is removed",
        || !spare.workspace().exists(),
    )
    .await;
}

#[tokio::test]
async fn a_conversation_opened_ahead_that_no_thread_takes_is_closed_and_its_files_removed() {
    let fx = with_spare_conversations(Duration::from_millis(300));
    plain_turn(&fx, "a", 0).await;
    let spare = fx.harness.conversation(1).await;
    assert!(spare.workspace().is_dir());
    eventually(Duration::from_secs(10), "the spare closes", || {
        !spare.is_open()
    })
    .await;
    eventually(Duration::from_secs(10), "its slot is removed", || {
        !spare.workspace().exists()
    })
    .await;
    // At shutdown too.
    let fx = with_spare_conversations(Duration::from_secs(600));
    plain_turn(&fx, "a", 0).await;
    let spare = fx.harness.conversation(1).await;
    fx.agent.shutdown().await;
    assert!(!spare.is_open());
    assert!(!spare.workspace().exists());
}
