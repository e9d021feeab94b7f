//! Threads as their owners list them, over the fake harness: each owner's list (titles from the
//! first message, state, messages), renaming and archiving (the owner's alone), a live stream
//! of changes, and a second agent on the same save dir (a replica) listing the same threads.

mod support;

use std::time::Duration;

use agui_session::testing::{FakeConversation, FakeHarness};
use agui_session::threads::{
    ArchivedFilter, ThreadChange, ThreadPatch, ThreadQuery, ThreadState, ThreadsError,
};
use agui_session::{Agent, Isolation, Owner, ToolRegistry};
use agui_types::{Event, RunAgentInput};
use futures_util::StreamExt as _;
use serde_json::json;
use support::{finish, options, types, user};

fn agent(dir: &std::path::Path) -> (Agent, FakeHarness) {
    support::init_tracing();
    let harness = FakeHarness::isolated(Isolation::Owner);
    let agent = Agent::new(options(dir), harness.backend(), ToolRegistry::new()).unwrap();
    (agent, harness)
}

fn input(thread: &str, text: &str) -> RunAgentInput {
    RunAgentInput::from_json(
        json!({"threadId": thread, "runId": support::uuid(), "messages": [user(&support::uuid(), text)]})
            .to_string()
            .as_bytes(),
    )
    .unwrap()
}

/// One turn of `owner` on `thread` saying `text` (its `n`th conversation).
async fn turn(
    agent: &Agent,
    harness: &FakeHarness,
    owner: &Owner,
    thread: &str,
    text: &str,
    n: usize,
) -> FakeConversation {
    let run = agent.run_as(owner, input(thread, text));
    let conversation = harness.conversation(n).await;
    conversation.next_input().await;
    conversation.echo(0, text);
    conversation.say(1, "Hi.");
    conversation.idle(None);
    let events = finish(run).await;
    assert!(
        matches!(events.last(), Some(Event::RunFinished(_))),
        "{}",
        types(&events)
    );
    conversation
}

async fn titles(agent: &Agent, owner: &Owner, archived: ArchivedFilter) -> Vec<String> {
    agent
        .list_threads_as(
            owner,
            &ThreadQuery {
                archived,
                ..ThreadQuery::default()
            },
        )
        .await
        .unwrap()
        .threads
        .into_iter()
        .map(|t| t.title)
        .collect()
}

#[tokio::test]
async fn each_owner_lists_their_own_threads_newest_first_titled_by_their_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, harness) = agent(dir.path());
    let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
    turn(
        &agent,
        &harness,
        &alice,
        "a1",
        "What is the weather in Paris?\nthanks",
        0,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    turn(&agent, &harness, &alice, "a2", "list the files", 1).await;
    turn(&agent, &harness, &bob, "b1", "bob's own", 2).await;
    assert_eq!(
        titles(&agent, &alice, ArchivedFilter::Exclude).await,
        ["list the files", "What is the weather in Paris?"]
    );
    assert_eq!(
        titles(&agent, &bob, ArchivedFilter::Exclude).await,
        ["bob's own"]
    );
    let a1 = agent.thread_as(&alice, "a1").await.unwrap();
    assert_eq!(a1.state, ThreadState::Idle);
    assert!(a1.message_count >= 2, "{a1:?}");
    assert!(a1.created_at <= a1.updated_at);
    assert!(
        agent.thread_as(&bob, "a1").await.is_none(),
        "someone else's"
    );
}

#[tokio::test]
async fn an_owner_renames_and_archives_a_thread_and_nobody_else_can() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, harness) = agent(dir.path());
    let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
    turn(&agent, &harness, &alice, "a1", "first", 0).await;
    let patch = |title: &str, archived| ThreadPatch {
        title: Some(title.into()),
        archived: Some(archived),
        ..ThreadPatch::default()
    };
    assert_eq!(
        agent
            .update_thread_as(&bob, "a1", patch("mine now", false))
            .await,
        Ok(None)
    );
    assert_eq!(
        agent
            .update_thread_as(&alice, "a1", ThreadPatch::default())
            .await,
        Err(ThreadsError::EmptyPatch)
    );
    let renamed = agent
        .update_thread_as(&alice, "a1", patch("  Renamed  ", true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.title, "Renamed");
    assert!(renamed.archived);
    assert!(
        titles(&agent, &alice, ArchivedFilter::Exclude)
            .await
            .is_empty()
    );
    assert_eq!(
        titles(&agent, &alice, ArchivedFilter::Only).await,
        ["Renamed"]
    );
    // A later message does not retitle it.
    turn(&agent, &harness, &alice, "a1", "second message", 0).await;
    assert_eq!(
        agent.thread_as(&alice, "a1").await.unwrap().title,
        "Renamed"
    );
}

#[tokio::test]
async fn a_watcher_sees_its_owners_threads_made_change_state_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, harness) = agent(dir.path());
    let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
    let mut changes = agent.watch_threads_as(&alice);
    turn(&agent, &harness, &bob, "b1", "not alice's", 0).await;
    turn(&agent, &harness, &alice, "a1", "hello", 1).await;
    let mut seen = Vec::new();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(10), changes.next())
            .await
            .expect("a change within 10 s")
            .expect("the stream goes on")
    };
    match next().await {
        ThreadChange::Created(t) => {
            assert_eq!(t.id, "a1", "only alice's threads");
            seen.push("created");
        }
        other => panic!("{other:?} before a1 was created"),
    }
    assert!(agent.delete_as(&alice, "a1").await.unwrap());
    loop {
        match next().await {
            ThreadChange::Deleted { id } => {
                assert_eq!(id, "a1");
                seen.push("deleted");
                break;
            }
            ThreadChange::Status(t) | ThreadChange::Updated(t) => assert_eq!(t.id, "a1"),
            ThreadChange::Created(t) => panic!("created {t:?} again"),
        }
    }
    assert_eq!(seen, ["created", "deleted"]);
}

/// A second agent on the same save dir stands for another replica: it lists what the first
/// wrote, and its watcher sees the first's changes.
#[tokio::test]
async fn another_agent_on_the_same_save_dir_lists_and_watches_the_same_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (agent, harness) = agent(dir.path());
    let (replica, _) = self::agent(dir.path());
    let alice = Owner::named("alice");
    let mut changes = replica.watch_threads_as(&alice);
    turn(&agent, &harness, &alice, "a1", "written by the first", 0).await;
    // The first agent writes its records behind the run: within moments.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while titles(&replica, &alice, ArchivedFilter::Exclude).await != ["written by the first"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            titles(&replica, &alice, ArchivedFilter::Exclude).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let change = tokio::time::timeout(Duration::from_secs(10), changes.next())
        .await
        .expect("the other agent's change within 10 s")
        .unwrap();
    assert!(matches!(change, ThreadChange::Created(t) if t.id == "a1"));
}
