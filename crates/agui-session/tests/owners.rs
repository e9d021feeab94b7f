//! Owners as the boundary, over the fake harness: the threads of one owner share a process and a
//! directory tree, different owners never do; per-thread isolation gives every thread its own;
//! a thread is refused to another owner; a thread of the local owner moves, with its files, to
//! the first identity that uses it; a deleted thread's files are gone.

mod support;

use std::collections::BTreeSet;

use agui_session::testing::{FakeConversation, FakeHarness};
use agui_session::{Agent, Isolation, Owner, ToolRegistry};
use agui_types::{Event, RunAgentInput};
use serde_json::json;
use support::{finish, options, run_error, types, user};

/// An agent on a fake harness that places threads as `isolation` says.
fn agent(isolation: Isolation) -> (Agent, FakeHarness, tempfile::TempDir) {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::isolated(isolation);
    let agent = Agent::new(options(dir.path()), harness.backend(), ToolRegistry::new()).unwrap();
    (agent, harness, dir)
}

fn input(thread: &str, message: &str) -> RunAgentInput {
    RunAgentInput::from_json(
        json!({"threadId": thread, "runId": support::uuid(), "messages": [user(message, "hello")]})
            .to_string()
            .as_bytes(),
    )
    .unwrap()
}

/// Runs one turn of `owner` on `thread` (its `n`th conversation): the conversation it ran on.
async fn turn(
    agent: &Agent,
    harness: &FakeHarness,
    owner: &Owner,
    thread: &str,
    n: usize,
) -> FakeConversation {
    let run = agent.run_as(owner, input(thread, &support::uuid()));
    let conversation = harness.conversation(n).await;
    conversation.next_input().await;
    conversation.echo(0, "hello");
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

#[tokio::test]
async fn an_owners_threads_share_a_process_and_a_tree_and_owners_never_do() {
    let (agent, harness, _dir) = agent(Isolation::Owner);
    let (alice, bob) = (Owner::named("alice"), Owner::named("bob"));
    let a1 = turn(&agent, &harness, &alice, "a1", 0).await;
    let a2 = turn(&agent, &harness, &alice, "a2", 1).await;
    let b1 = turn(&agent, &harness, &bob, "b1", 2).await;
    assert_eq!(
        a1.process(),
        a2.process(),
        "alice's threads share a process"
    );
    assert_ne!(a1.process(), b1.process(), "bob never shares alice's");
    assert_ne!(
        a1.workspace(),
        a2.workspace(),
        "each thread has its workspace"
    );
    assert_eq!(
        a1.workspace().parent(),
        a2.workspace().parent(),
        "in alice's tree"
    );
    assert_ne!(a1.workspace().parent(), b1.workspace().parent());
    assert_eq!(
        a1.process().len(),
        26,
        "a tree id of 128 random bits: {}",
        a1.process()
    );
}

#[tokio::test]
async fn per_thread_isolation_gives_every_thread_a_process_of_its_own() {
    let (agent, harness, _dir) = agent(Isolation::Thread);
    let alice = Owner::named("alice");
    let a1 = turn(&agent, &harness, &alice, "a1", 0).await;
    let a2 = turn(&agent, &harness, &alice, "a2", 1).await;
    assert_ne!(a1.process(), a2.process());
    assert_ne!(a1.workspace().parent(), a2.workspace().parent());
}

#[tokio::test]
async fn a_thread_is_refused_to_another_owner() {
    let (agent, harness, _dir) = agent(Isolation::Owner);
    turn(&agent, &harness, &Owner::named("alice"), "t", 0).await;
    let events = finish(agent.run_as(&Owner::named("mallory"), input("t", "m2"))).await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("INVALID_INPUT"), "{error:?}");
    assert!(
        !error.message.contains("alice"),
        "no owner is named to another: {error:?}"
    );
    assert_eq!(harness.opened(), 1, "nothing was opened for mallory");
}

#[tokio::test]
async fn a_local_owners_thread_moves_with_its_files_to_the_first_identity_that_uses_it() {
    let (agent, harness, dir) = agent(Isolation::Owner);
    let local = turn(&agent, &harness, &Owner::local(), "t", 0).await;
    std::fs::write(local.workspace().join("notes.md"), "kept").unwrap();
    // Hibernate, then alice (identities were turned on) uses the thread.
    agent.shutdown().await;
    let harness = harness.restarted();
    let agent = Agent::new(options(dir.path()), harness.backend(), ToolRegistry::new()).unwrap();
    let moved = turn(&agent, &harness, &Owner::named("alice"), "t", 0).await;
    assert_ne!(moved.process(), local.process(), "alice's own tree");
    assert_eq!(
        std::fs::read_to_string(moved.workspace().join("notes.md")).unwrap(),
        "kept",
        "the files came along"
    );
    assert!(
        !local.workspace().exists(),
        "nothing left in the local owner's tree"
    );
}

#[tokio::test]
async fn deleting_a_thread_removes_its_workspace_and_only_its_owner_may() {
    let (agent, harness, _dir) = agent(Isolation::Owner);
    let alice = Owner::named("alice");
    let c = turn(&agent, &harness, &alice, "t", 0).await;
    std::fs::write(c.workspace().join("notes.md"), "secret").unwrap();
    assert!(!agent.delete_as(&Owner::named("bob"), "t").await.unwrap());
    assert!(c.workspace().exists(), "bob deleted nothing");
    assert!(agent.delete_as(&alice, "t").await.unwrap());
    assert!(!c.workspace().exists(), "the workspace is gone");
    assert!(!agent.knows("t").await, "the thread is forgotten");
    let left: BTreeSet<_> = std::fs::read_dir(c.workspace().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The retention sweep removes an expired thread's files through the door: a link the owner's
/// sandbox planted as the tree's `app` is removed as a link, and the host directory it aims at
/// (named like the thread's slot) survives.
#[tokio::test]
async fn retention_removes_an_expired_threads_files_without_following_a_planted_link() {
    let (agent, harness, dir) = agent(Isolation::Owner);
    let alice = Owner::named("alice");
    let c = turn(&agent, &harness, &alice, "old", 0).await;
    let workspace = c.workspace();
    let slot = workspace.file_name().unwrap().to_owned();
    let state = options(dir.path())
        .save_dir
        .join("o")
        .join(workspace.parent().unwrap().file_name().unwrap());
    let host = dir.path().join("host");
    std::fs::create_dir_all(host.join(&slot)).unwrap();
    std::fs::write(host.join(&slot).join("precious"), "precious").unwrap();
    std::fs::rename(state.join("app"), state.join("app.bak")).unwrap();
    std::os::unix::fs::symlink(&host, state.join("app")).unwrap();
    agent.shutdown().await;
    // A server started later, with a retention the thread is past.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let harness = harness.restarted();
    let mut expiring = options(dir.path());
    expiring.remember_threads_for = std::time::Duration::from_secs(1);
    let agent = Agent::new(expiring, harness.backend(), ToolRegistry::new()).unwrap();
    support::eventually(
        std::time::Duration::from_secs(10),
        "the expired thread's workspace was removed",
        || !workspace.exists(),
    )
    .await;
    assert!(!agent.knows("old").await, "the thread is forgotten");
    assert_eq!(
        std::fs::read_to_string(host.join(&slot).join("precious")).unwrap(),
        "precious",
        "the host directory the planted link aimed at survived"
    );
}

/// New threads arriving one after another raise the stock of spares: one more for each new
/// thread within the arrival window, up to `max_spare_harnesses`; once none is that recent, the
/// stock goes back to one and the other spares' processes are let go.
#[tokio::test]
async fn spares_grow_with_arrivals_up_to_the_maximum_and_shrink_back_once_they_stop() {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::isolated(Isolation::Thread).with_spares();
    let mut options = options(dir.path());
    options.max_spare_harnesses = 3;
    options.spare_arrival_window = std::time::Duration::from_millis(1500);
    let agent = Agent::new(options, harness.backend(), ToolRegistry::new()).unwrap();
    let spares = |want: usize, why: &str| {
        let (agent, why) = (&agent, why.to_owned());
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while agent.stats().spares != want {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{why}: {} spares, not {want}",
                    agent.stats().spares
                );
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    };
    spares(1, "one spare at start").await;
    let alice = Owner::named("alice");
    turn(&agent, &harness, &alice, "t1", 0).await;
    spares(2, "one new thread: two spares").await;
    for (n, thread) in ["t2", "t3", "t4"].into_iter().enumerate() {
        turn(&agent, &harness, &alice, thread, n + 1).await;
    }
    spares(3, "four new threads: the maximum, three").await;
    spares(1, "the arrivals aged out: one spare again").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while harness.held_spares() != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} processes still held ahead of need",
            harness.held_spares()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    agent.shutdown().await;
}

/// Without a larger maximum the stock stays at one spare, however many new threads come.
#[tokio::test]
async fn by_default_one_spare_is_kept_however_many_threads_arrive() {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::isolated(Isolation::Thread).with_spares();
    let agent = Agent::new(options(dir.path()), harness.backend(), ToolRegistry::new()).unwrap();
    let alice = Owner::named("alice");
    for (n, thread) in ["t1", "t2", "t3"].into_iter().enumerate() {
        turn(&agent, &harness, &alice, thread, n).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(agent.stats().spares, 1);
    agent.shutdown().await;
}
