//! A thread answers stop, connect and shutdown while it waits: for a harness's boot (the fake
//! harness's opens held at a gate the test opens), for a live slot (the only one taken by a
//! busy thread) and for its lease (held by another replica until the test gives it). No timer
//! decides anything: each case waits for the thread to be at the wait, acts, and checks the
//! answer came while the wait still held.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_session::testing::{FakeConversation, FakeHarness, Gate};
use agui_session::{Agent, LeaseDenied, ThreadLeases, ToolRegistry};
use agui_types::{Event, RunOutcome};
use serde_json::json;
use support::{finish, input_of, run_error, types, user};

/// What the thread `t` waits for when the test acts.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Its harness boots (the fake's open is held at a gate).
    Boot,
    /// A live slot: the only one is held by an idle thread asked to hibernate, whose
    /// conversation's close is held at a gate.
    Slot,
    /// Its lease, held by another replica.
    Lease,
}

/// Leases another replica holds until the test grants them (then this replica takes them).
#[derive(Default)]
struct HeldElsewhere {
    held: Mutex<HashSet<String>>,
}

impl HeldElsewhere {
    fn grant(&self, thread: &str) {
        self.held.lock().unwrap().remove(thread);
    }
}

impl ThreadLeases for HeldElsewhere {
    fn acquire(&self, thread_id: &str) -> Result<Duration, LeaseDenied> {
        if self.held.lock().unwrap().contains(thread_id) {
            return Err(LeaseDenied::Held {
                holder: "replica-b".into(),
                retry_after: Duration::from_millis(100),
            });
        }
        Ok(Duration::from_secs(60))
    }

    fn release(&self, _thread_id: &str) {}

    fn renew_every(&self) -> Duration {
        Duration::from_secs(20)
    }

    fn want(&self, _thread_id: &str) {}

    fn wanted(&self, _thread_id: &str) -> bool {
        false
    }
}

/// A thread `t` whose run (message `m1`, "hi") waits as `wait` says.
struct Scene {
    agent: Agent,
    harness: FakeHarness,
    run: Option<agui_session::RunStream>,
    gate: Option<Gate>,
    leases: Option<Arc<HeldElsewhere>>,
    /// Whether an idle thread held the only live slot (for [`Wait::Slot`]).
    idle_thread: bool,
    _dir: tempfile::TempDir,
}

fn on(thread: &str, extra: serde_json::Value) -> agui_types::RunAgentInput {
    let mut input = json!({"threadId": thread});
    input
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    input_of(input)
}

async fn waiting_on(wait: Wait) -> Scene {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::new();
    let mut options = support::options(dir.path());
    let leases = matches!(wait, Wait::Lease).then(|| {
        let leases = Arc::new(HeldElsewhere::default());
        leases.held.lock().unwrap().insert("t".into());
        leases
    });
    if matches!(wait, Wait::Slot) {
        options.max_sessions = 1;
    }
    let agent = match &leases {
        Some(leases) => Agent::with_leases(
            options,
            harness.backend(),
            ToolRegistry::new(),
            leases.clone(),
        ),
        None => Agent::new(options, harness.backend(), ToolRegistry::new()),
    }
    .unwrap();
    let idle_thread = matches!(wait, Wait::Slot);
    if idle_thread {
        let run = agent.run(on("idle", json!({"messages": [user("i1", "idle")]})));
        let c = harness.conversation(0).await;
        c.next_input().await;
        c.idle(None);
        finish(run).await;
    }
    let gate = match wait {
        Wait::Boot => Some(harness.hold_boots()),
        Wait::Slot => Some(harness.hold_closes()),
        Wait::Lease => None,
    };
    let run = agent.run(on("t", json!({"messages": [user("m1", "hi")]})));
    // The run's command is in the thread's mailbox once the thread is known; whatever the test
    // sends next is taken after it, so the thread is at its wait by then.
    while !agent.knows("t").await {
        tokio::task::yield_now().await;
    }
    if let Some(gate) = &gate {
        // The boot is held; or the idle thread, asked to hibernate for the slot, is closing.
        gate.waiting(1).await;
    }
    Scene {
        agent,
        harness,
        run: Some(run),
        gate,
        leases,
        idle_thread,
        _dir: dir,
    }
}

fn outcome(events: &[Event]) -> Option<RunOutcome> {
    match events.last() {
        Some(Event::RunFinished(done)) => done.outcome.clone(),
        _ => None,
    }
}

/// Lets the wait go (the gate opens, the lease is granted).
fn release(scene: &Scene) {
    if let Some(gate) = &scene.gate {
        gate.open();
    }
    if let Some(leases) = &scene.leases {
        leases.grant("t");
    }
}

/// The conversation of thread `t`: the first the fake opened for it.
async fn conversation_of_t(scene: &Scene) -> FakeConversation {
    let n = usize::from(scene.idle_thread);
    scene.harness.conversation(n).await
}

#[tokio::test]
async fn a_stop_while_the_thread_waits_ends_its_run_cancelled_and_its_message_is_never_sent() {
    for wait in [Wait::Boot, Wait::Slot, Wait::Lease] {
        let mut scene = waiting_on(wait).await;
        assert!(
            scene.agent.stop("t").await.unwrap(),
            "{wait:?}: the stop finds the waiting run"
        );
        let events = finish(scene.run.take().unwrap()).await;
        assert_eq!(
            outcome(&events),
            Some(RunOutcome::Cancelled),
            "{wait:?}: {}",
            types(&events)
        );
        match wait {
            Wait::Boot => {
                // The boot goes on in the background; what it opens is closed at once.
                scene.gate.as_ref().unwrap().open();
                let c = conversation_of_t(&scene).await;
                support::eventually(
                    Duration::from_secs(5),
                    "the abandoned conversation closes",
                    || !c.is_open(),
                )
                .await;
                assert_eq!(
                    c.input_within(Duration::ZERO).await,
                    None,
                    "nothing was sent"
                );
            }
            Wait::Slot | Wait::Lease => {
                let opened_before = usize::from(scene.idle_thread);
                assert_eq!(
                    scene.harness.opened(),
                    opened_before,
                    "{wait:?}: no conversation was opened for the stopped run"
                );
            }
        }
        release(&scene);
        scene.agent.shutdown().await;
    }
}

#[tokio::test]
async fn a_connect_while_the_thread_waits_for_a_boot_or_a_slot_restates_the_known_history_at_once()
{
    for wait in [Wait::Boot, Wait::Slot] {
        let mut scene = waiting_on(wait).await;
        let connect = scene
            .agent
            .connect(on("t", json!({"messages": []})))
            .await
            .unwrap();
        // Answered while the wait still holds (the gate is closed, the busy turn runs).
        let events = finish(connect).await;
        assert_eq!(
            types(&events),
            "RUN_STARTED MESSAGES_SNAPSHOT STATE_SNAPSHOT RUN_FINISHED",
            "{wait:?}"
        );
        let Some(Event::MessagesSnapshot(snapshot)) = events.get(1) else {
            unreachable!()
        };
        let ids: Vec<&str> = snapshot.messages.iter().map(|m| m.id()).collect();
        assert_eq!(ids, ["m1"], "{wait:?}: the history known so far");
        // The run then goes on as if nothing happened.
        release(&scene);
        let c = conversation_of_t(&scene).await;
        assert_eq!(c.next_input().await, "hi", "{wait:?}");
        c.idle(None);
        let events = finish(scene.run.take().unwrap()).await;
        assert_eq!(outcome(&events), None, "{wait:?}: {}", types(&events));
        scene.agent.shutdown().await;
    }
}

#[tokio::test]
async fn a_connect_while_the_thread_waits_for_its_lease_is_served_when_the_lease_comes() {
    let mut scene = waiting_on(Wait::Lease).await;
    let mut connect = scene
        .agent
        .connect(on("t", json!({"messages": []})))
        .await
        .unwrap();
    // The record is not ours to read while another replica holds the lease: the connect waits
    // with the run, and the mailbox stays open (a stop is answered meanwhile: nothing to stop
    // but the run, which it ends).
    assert!(scene.agent.stop("t").await.unwrap());
    let stopped = finish(scene.run.take().unwrap()).await;
    assert_eq!(outcome(&stopped), Some(RunOutcome::Cancelled));
    assert!(
        futures_util::FutureExt::now_or_never(connect.next_event()).is_none(),
        "the connect has no answer before the lease"
    );
    release(&scene);
    let events = finish(connect).await;
    assert_eq!(
        types(&events),
        "RUN_STARTED MESSAGES_SNAPSHOT STATE_SNAPSHOT RUN_FINISHED"
    );
    scene.agent.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_while_the_thread_waits_ends_its_run_without_waiting_for_the_wait() {
    for wait in [Wait::Boot, Wait::Slot, Wait::Lease] {
        let mut scene = waiting_on(wait).await;
        let agent = scene.agent.clone();
        let shutdown = tokio::spawn(async move { agent.shutdown().await });
        // Nothing is released yet (the gate stays closed, the lease stays held): the run ends
        // all the same.
        let events = finish(scene.run.take().unwrap()).await;
        assert_eq!(
            run_error(&events).code.as_deref(),
            Some("CANCELLED"),
            "{wait:?}"
        );
        release(&scene);
        shutdown.await.unwrap();
    }
}

#[tokio::test]
async fn a_thread_whose_close_is_held_answers_connect_and_stop_and_reopens_only_once_closed() {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::new();
    let mut options = support::options(dir.path());
    options.hibernate_after = Duration::from_millis(50);
    let agent = Agent::new(options, harness.backend(), ToolRegistry::new()).unwrap();
    let run = agent.run(on("t", json!({"messages": [user("m1", "hi")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    let gate = harness.hold_closes();
    c.idle(None);
    finish(run).await;
    // Unwatched and idle, the thread hibernates: its close is held at the gate.
    gate.waiting(1).await;
    let within = Duration::from_secs(5);
    let connect = tokio::time::timeout(
        within,
        agent.connect(on("t", json!({"messages": [user("m1", "hi")]}))),
    )
    .await
    .expect("the connect is taken while the close is held")
    .unwrap();
    let events = tokio::time::timeout(within, finish(connect))
        .await
        .expect("the connect is answered while the close is held");
    assert_eq!(
        types(&events),
        "RUN_STARTED MESSAGES_SNAPSHOT STATE_SNAPSHOT RUN_FINISHED"
    );
    let stopped = tokio::time::timeout(within, agent.stop("t"))
        .await
        .expect("the stop is answered while the close is held")
        .unwrap();
    assert!(!stopped, "nothing runs to stop");
    // A run now waits for the close before opening the conversation again.
    let run = agent.run(on(
        "t",
        json!({"messages": [user("m1", "hi"), user("m2", "again")]}),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(harness.opened(), 1, "not reopened while the close is held");
    assert!(c.is_open(), "the close is still held");
    gate.open();
    let again = harness.conversation(1).await;
    assert!(!c.is_open(), "closed before it was opened again");
    assert_eq!(again.id(), c.id(), "the same conversation, resumed");
    assert_eq!(again.next_input().await, "again");
    again.idle(None);
    let events = finish(run).await;
    assert_eq!(outcome(&events), None, "{}", types(&events));
    agent.shutdown().await;
}

#[tokio::test]
async fn a_thread_whose_re_attach_is_held_answers_connect_and_stop_then_sends_on_the_same_conversation()
 {
    support::init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::new();
    let agent = Agent::new(
        support::options(dir.path()),
        harness.backend(),
        ToolRegistry::new(),
    )
    .unwrap();
    let run = agent.run(on("t", json!({"messages": [user("m1", "hi")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    // A turn error: the harness closes the connection, re-attached on the next run.
    c.idle(Some("the model failed"));
    finish(run).await;
    let gate = harness.hold_reconnects();
    let history = json!({"messages": [user("m1", "hi"), user("m2", "again")]});
    let run = agent.run(on("t", history.clone()));
    gate.waiting(1).await;
    let within = Duration::from_secs(5);
    let connect = tokio::time::timeout(within, agent.connect(on("t", history.clone())))
        .await
        .expect("the connect is taken while the re-attach is held")
        .unwrap();
    let events = tokio::time::timeout(within, finish(connect))
        .await
        .expect("the connect is answered while the re-attach is held");
    assert!(
        types(&events).starts_with("RUN_STARTED MESSAGES_SNAPSHOT"),
        "{}",
        types(&events)
    );
    gate.open();
    assert_eq!(
        c.next_input().await,
        "again",
        "sent on the re-attached conversation"
    );
    assert_eq!(harness.opened(), 1, "no new conversation was opened");
    c.idle(None);
    let events = finish(run).await;
    assert_eq!(outcome(&events), None, "{}", types(&events));
    // A stop while the re-attach is held ends the run; its message is never sent.
    let run = agent.run(on(
        "t",
        json!({"messages": [user("m1", "hi"), user("m2", "again"), user("m3", "third")]}),
    ));
    assert_eq!(c.next_input().await, "third");
    c.idle(Some("the model failed again"));
    finish(run).await;
    let gate = harness.hold_reconnects();
    let run = agent.run(on(
        "t",
        json!({"messages": [user("m1", "hi"), user("m2", "again"), user("m3", "third"), user("m4", "fourth")]}),
    ));
    gate.waiting(1).await;
    let stopped = tokio::time::timeout(within, agent.stop("t"))
        .await
        .expect("the stop is answered while the re-attach is held")
        .unwrap();
    assert!(stopped);
    let events = finish(run).await;
    assert_eq!(
        outcome(&events),
        Some(RunOutcome::Cancelled),
        "{}",
        types(&events)
    );
    gate.open();
    assert_eq!(c.input_within(Duration::from_millis(200)).await, None);
    agent.shutdown().await;
}
