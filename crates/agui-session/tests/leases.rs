//! Thread leases over the fake harness (several replicas sharing a save dir): a thread another
//! replica holds is refused without opening its conversation; a lease lost mid-turn stops the
//! turn; a lease is given up when the thread hibernates; a turn in flight when its server died
//! is reported on the next run, never driven again, and its reply is kept marked interrupted.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use agui_session::testing::FakeHarness;
use agui_session::{Agent, LeaseDenied, ThreadLeases, ToolRegistry};
use serde_json::json;
use support::{FakeAgent, ask_colour, finish, input_of, run_error, user};

/// Leases in memory: thread → holder, and thread → the replica that asked for it. `steal`
/// hands a thread to another replica; `ask` is another replica asking for one.
#[derive(Default)]
struct Leases {
    holders: Mutex<HashMap<String, String>>,
    asked: Mutex<HashMap<String, String>>,
    /// How long a lease lasts (300 ms unless set).
    valid_for: Mutex<Option<Duration>>,
    /// While true, a renewal (an acquire by the holder) waits at the store.
    gate_shut: Mutex<bool>,
    gate: Condvar,
    /// Renewals waiting at the shut gate.
    held_up: AtomicUsize,
    /// While true, every acquire fails as a full volume does.
    full: std::sync::atomic::AtomicBool,
}

impl Leases {
    fn steal(&self, thread: &str, by: &str) {
        self.holders
            .lock()
            .unwrap()
            .insert(thread.into(), by.into());
    }

    fn holder(&self, thread: &str) -> Option<String> {
        self.holders.lock().unwrap().get(thread).cloned()
    }

    fn ask(&self, thread: &str, by: &str) {
        self.asked.lock().unwrap().insert(thread.into(), by.into());
    }

    fn asked_by(&self, thread: &str) -> Option<String> {
        self.asked.lock().unwrap().get(thread).cloned()
    }

    /// Shuts (or opens) the gate renewals wait at.
    fn shut_gate(&self, shut: bool) {
        *self.gate_shut.lock().unwrap() = shut;
        self.gate.notify_all();
    }

    /// Waits (polling, at most 5 s) until `thread` has no holder.
    async fn until_released(&self, thread: &str, what: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.holder(thread).is_some() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl ThreadLeases for Leases {
    fn acquire(&self, thread_id: &str) -> Result<Duration, LeaseDenied> {
        if self.full.load(Ordering::SeqCst) {
            return Err(LeaseDenied::store_failed(&std::io::Error::from(
                std::io::ErrorKind::StorageFull,
            )));
        }
        let renewal = self.holder(thread_id).as_deref() == Some("me");
        let mut shut = self.gate_shut.lock().unwrap();
        if renewal && *shut {
            self.held_up.fetch_add(1, Ordering::SeqCst);
            // Bounded, so a failing test ends (its runtime waits for this thread).
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while *shut && std::time::Instant::now() < until {
                shut = self
                    .gate
                    .wait_timeout(shut, Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            self.held_up.fetch_sub(1, Ordering::SeqCst);
        }
        drop(shut);
        let valid_for = self
            .valid_for
            .lock()
            .unwrap()
            .unwrap_or(Duration::from_millis(300));
        let mut holders = self.holders.lock().unwrap();
        match holders.get(thread_id) {
            Some(holder) if holder != "me" => Err(LeaseDenied::Held {
                holder: holder.clone(),
                retry_after: Duration::from_secs(7),
            }),
            _ => {
                holders.insert(thread_id.into(), "me".into());
                Ok(valid_for)
            }
        }
    }

    fn release(&self, thread_id: &str) {
        let mut holders = self.holders.lock().unwrap();
        if holders.get(thread_id).is_some_and(|h| h == "me") {
            holders.remove(thread_id);
        }
    }

    fn renew_every(&self) -> Duration {
        Duration::from_millis(50)
    }

    fn want(&self, thread_id: &str) {
        self.ask(thread_id, "me");
    }

    fn wanted(&self, thread_id: &str) -> bool {
        self.asked_by(thread_id).is_some_and(|by| by != "me")
    }
}

/// An agent with `leases` that waits for a lease held elsewhere as long as for a busy thread
/// (5 s), or not at all with `refuse`.
fn agent_with(
    leases: &Arc<Leases>,
    dir: &std::path::Path,
    harness: &FakeHarness,
    refuse: bool,
) -> Agent {
    let mut options = support::options(dir);
    options.hibernate_after = Duration::from_millis(300);
    if refuse {
        options.concurrent_runs = agui_session::ConcurrentRuns::Refuse;
    }
    agent_of(leases, harness, options)
}

/// An agent with `options` and `leases` on `harness`.
fn agent_of(
    leases: &Arc<Leases>,
    harness: &FakeHarness,
    options: agui_session::AgentOptions,
) -> Agent {
    Agent::with_leases(
        options,
        harness.backend(),
        ToolRegistry::new(),
        leases.clone(),
    )
    .unwrap()
}

/// A run and a connect wait for a thread another replica holds and will not let go (its turn
/// left a command running in the background): they end `THREAD_ELSEWHERE` once the wait for a
/// busy thread is over. (The replica soak saw a connect wait forever with no event: the idle
/// thread's task hibernated every `hibernate_after`, handing the waiting connect to a new task
/// whose wait started over.)
#[tokio::test]
async fn a_run_and_a_connect_waiting_for_a_lease_never_let_go_end_thread_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let mut options = support::options(dir.path());
    options.hibernate_after = Duration::from_millis(300);
    options.concurrent_runs = agui_session::ConcurrentRuns::Wait(Duration::from_millis(1_500));
    let agent = agent_of(&leases, &harness, options);
    let run = agent.run(input_of(json!({"messages": [user("m1", "hi")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    leases
        .until_released("thread-1", "the idle thread hibernates")
        .await;
    leases.steal("thread-1", "replica-b");
    let messages = json!({"messages": [user("m1", "hi"), user("m2", "there")]});
    let run = finish(agent.run(input_of(messages)));
    let events = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the run waiting for the lease ends");
    assert_eq!(run_error(&events).code.as_deref(), Some("THREAD_ELSEWHERE"));
    let connect = async { finish(agent.connect(input_of(json!({}))).await.unwrap()).await };
    let events = tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .expect("the connect waiting for the lease ends");
    assert_eq!(run_error(&events).code.as_deref(), Some("THREAD_ELSEWHERE"));
    assert_eq!(
        c.input_within(Duration::from_millis(100)).await,
        None,
        "nothing sent"
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_thread_held_elsewhere_is_refused_and_a_lease_lost_mid_turn_stops_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let agent = agent_with(&leases, dir.path(), &harness, true);
    leases.steal("thread-1", "replica-b");
    let events = finish(agent.run(input_of(json!({"messages": [user("m1", "hi")]})))).await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("THREAD_ELSEWHERE"));
    assert!(error.message.contains("retry in 7 s"), "{}", error.message);
    assert_eq!(harness.opened(), 0, "the conversation is never opened");

    leases.holders.lock().unwrap().clear();
    let run = agent.run(input_of(json!({"messages": [user("m1", "hi")]})));
    let c = harness.conversation(0).await;
    assert_eq!(c.next_input().await, "hi");
    assert_eq!(leases.holder("thread-1").as_deref(), Some("me"));
    // Another replica takes the thread (this one stalled past its lease): the turn stops here.
    leases.steal("thread-1", "replica-b");
    let events = finish(run).await;
    assert_eq!(run_error(&events).code.as_deref(), Some("LEASE_LOST"));
    assert_eq!(
        leases.holder("thread-1").as_deref(),
        Some("replica-b"),
        "the lease it lost is not released on the new holder"
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_hibernating_thread_gives_its_lease_up_and_another_replica_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let a = agent_with(&leases, dir.path(), &harness, false);
    let run = a.run(input_of(json!({"messages": [user("m1", "one")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while leases.holder("thread-1").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease is given up on hibernation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        a.stats().sessions,
        0,
        "the thread's task ended with its lease"
    );
    // Replica b, same save dir: it reads what a wrote and does not send m1 again.
    let b_harness = harness.restarted();
    let b = agent_with(&leases, dir.path(), &b_harness, false);
    let run = b.run(input_of(
        json!({"messages": [user("m1", "one"), user("m2", "two")]}),
    ));
    let resumed = b_harness.conversation(0).await;
    assert_eq!(resumed.id(), c.id(), "the same conversation");
    assert_eq!(resumed.next_input().await, "two");
    resumed.idle(None);
    finish(run).await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_run_waits_for_a_lease_that_frees_up_within_the_busy_thread_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let agent = agent_with(&leases, dir.path(), &harness, false);
    leases.steal("thread-1", "replica-b");
    let run = agent.run(input_of(json!({"messages": [user("m1", "hi")]})));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        harness.opened(),
        0,
        "not opened while replica-b holds the thread"
    );
    assert_eq!(
        leases.asked_by("thread-1").as_deref(),
        Some("me"),
        "the waiting replica asked the holder for the thread"
    );
    // replica-b's lease expires (or is given up): the waiting run takes it and goes on.
    leases.holders.lock().unwrap().clear();
    let c = harness.conversation(0).await;
    assert_eq!(c.next_input().await, "hi");
    c.idle(None);
    let events = finish(run).await;
    assert!(matches!(
        events.last(),
        Some(agui_types::Event::RunFinished(_))
    ));
    agent.shutdown().await;
}

/// Another replica asks for a thread this one holds: an idle thread is handed over at the next
/// renewal, long before it would hibernate; a thread with a turn in flight goes when the turn
/// ends.
#[tokio::test]
async fn a_thread_another_replica_asks_for_is_handed_over_once_idle() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let mut options = support::options(dir.path());
    options.hibernate_after = Duration::from_secs(3600);
    let agent = Agent::with_leases(
        options,
        harness.backend(),
        ToolRegistry::new(),
        leases.clone(),
    )
    .unwrap();

    // Idle: handed over at the next renewal.
    let run = agent.run(input_of(json!({"messages": [user("m1", "one")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.idle(None);
    finish(run).await;
    assert_eq!(leases.holder("thread-1").as_deref(), Some("me"));
    leases.ask("thread-1", "replica-b");
    leases
        .until_released("thread-1", "an idle thread is handed over when asked for")
        .await;
    assert_eq!(agent.stats().sessions, 0, "its task ended with the lease");

    // A turn in flight: kept through renewals while it runs, handed over when it ends.
    leases.asked.lock().unwrap().clear();
    let run = agent.run(input_of(
        json!({"messages": [user("m1", "one"), user("m2", "two")]}),
    ));
    let c = harness.conversation(1).await;
    assert_eq!(c.next_input().await, "two");
    leases.ask("thread-1", "replica-b");
    // Ten renewal periods with the turn in flight.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        leases.holder("thread-1").as_deref(),
        Some("me"),
        "a turn in flight is not handed over"
    );
    c.idle(None);
    let events = finish(run).await;
    assert!(matches!(
        events.last(),
        Some(agui_types::Event::RunFinished(_))
    ));
    leases
        .until_released("thread-1", "the thread goes once its turn ends")
        .await;
    agent.shutdown().await;
}

/// The lease store stalls (a shared volume hanging) while the thread's lease is renewed: the
/// renewal waits in a child, so the thread still answers a stop and a connect at once; and
/// when the lease's lifetime runs out before the renewal comes back, the thread stops here, as
/// another replica may take it now. (Before, the renewal held the thread's loop: nothing was
/// answered until the store came back, and the thread kept driving an expired lease.)
#[tokio::test]
async fn a_renewal_held_up_at_the_store_holds_up_neither_stop_nor_connect_nor_outlives_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    *leases.valid_for.lock().unwrap() = Some(Duration::from_millis(2500));
    let agent = long_lived(&leases, dir.path(), &harness);
    let run = agent.run(input_of(json!({"messages": [user("m1", "one")]})));
    let c = harness.conversation(0).await;
    assert_eq!(c.next_input().await, "one");
    leases.shut_gate(true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while leases.held_up.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a renewal reaches the store"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let within = Duration::from_millis(700);
    let stopped = tokio::time::timeout(within, agent.stop("thread-1"))
        .await
        .expect("a stop is answered while the renewal waits at the store");
    assert!(stopped.unwrap(), "the turn in flight was stopped");
    c.idle(None);
    finish(run).await;
    let connected = tokio::time::timeout(within, async {
        finish(agent.connect(input_of(json!({}))).await.unwrap()).await
    })
    .await
    .expect("a connect is answered while the renewal waits at the store");
    assert!(
        matches!(connected.last(), Some(agui_types::Event::RunFinished(_))),
        "{connected:?}"
    );
    assert_eq!(agent.stats().sessions, 1, "the thread is still served here");
    // The lease runs out with the renewal still at the store: the thread stops.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while agent.stats().sessions > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the thread stops once its lease ran out unrenewed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    leases.shut_gate(false);
    agent.shutdown().await;
}

/// A tmpfs of `bytes` mounted at `dir` (unmounted when dropped): a volume that can fill up.
/// The save dir's volume fills up (the replica soak's finding: an answer given while it was
/// full was never saved by the harness, so a connect elsewhere did not show it): the thread's
/// lease renewal meets the full volume, and a run is then refused with `STORAGE_FULL` before
/// anything is sent; once there is room again, the next run goes through.
#[tokio::test]
async fn a_run_is_refused_while_the_save_dirs_volume_is_full_and_served_once_it_has_room() {
    let dir = tempfile::tempdir().unwrap();
    let _volume = support::SmallVolume::mount(dir.path(), 64 << 20);
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    // The lease outlives the test's wait: the thread is still served here while its renewals fail.
    *leases.valid_for.lock().unwrap() = Some(Duration::from_secs(5));
    let agent = long_lived(&leases, dir.path(), &harness);
    let run = agent.run(input_of(json!({"messages": [user("m1", "one")]})));
    let c = harness.conversation(0).await;
    assert_eq!(c.next_input().await, "one");
    c.idle(None);
    finish(run).await;

    let filler = _volume.fill();
    leases.full.store(true, Ordering::SeqCst);
    // A renewal (every 50 ms here) meets the full volume; then renewals pass again (a few bytes
    // freed elsewhere let a lease's small write through) while the volume is still full.
    tokio::time::sleep(Duration::from_millis(300)).await;
    leases.full.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let events = finish(agent.run(input_of(
        json!({"messages": [user("m1", "one"), user("m2", "two")]}),
    )))
    .await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("STORAGE_FULL"), "{error:?}");
    assert_eq!(
        c.input_within(Duration::from_millis(300)).await,
        None,
        "nothing was sent while the volume was full"
    );

    std::fs::remove_file(filler).unwrap();
    let run = agent.run(input_of(
        json!({"messages": [user("m1", "one"), user("m2", "two")]}),
    ));
    assert_eq!(c.next_input().await, "two", "sent once there is room again");
    c.idle(None);
    finish(run).await;
    agent.shutdown().await;
}

/// An agent with `leases` on `harness` that would not hibernate a thread during the test, and
/// asks the client the agent's questions.
fn long_lived(leases: &Arc<Leases>, dir: &std::path::Path, harness: &FakeHarness) -> Agent {
    let mut options = support::options(dir);
    options.hibernate_after = Duration::from_secs(3600);
    options
        .builtin_tools
        .insert(harness_client::BuiltinTool::AskQuestion);
    agent_of(leases, harness, options)
}

/// A thread parked on its client's answer (a frontend tool), with no client watching, and
/// another replica asks for it: the proxy now sends the client there, so the thread goes, and
/// the answer the client sends there reaches the model once. (It stayed parked for good
/// before: every run of the client got `THREAD_ELSEWHERE`.)
#[tokio::test]
async fn a_parked_thread_goes_to_the_replica_that_asks_and_the_answer_reaches_the_model_there() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let a = long_lived(&leases, dir.path(), &harness);
    let tools = json!([{"name": "pick", "description": "Pick"}]);
    let run = a.run(input_of(
        json!({"messages": [user("m1", "pick")], "tools": tools}),
    ));
    let c = harness.conversation(0).await;
    c.next_input().await;
    let _call = c.call_tool("h-1", "pick", json!({}));
    finish(run).await;
    assert_eq!(leases.holder("thread-1").as_deref(), Some("me"));
    leases.ask("thread-1", "replica-b");
    leases
        .until_released("thread-1", "a parked thread nobody watches is handed over")
        .await;
    assert_eq!(a.stats().sessions, 0, "its task ended with the lease");

    // Replica b, same save dir: the client's answer arrives there.
    leases.asked.lock().unwrap().clear();
    let b_harness = harness.restarted();
    let b = long_lived(&leases, dir.path(), &b_harness);
    let answered = json!({"messages": [user("m1", "pick"),
        {"id": "t1", "role": "tool", "toolCallId": "h-1", "content": "red"}], "tools": tools});
    let run = b.run(input_of(answered.clone()));
    let resumed = b_harness.conversation(0).await;
    assert_eq!(resumed.id(), c.id(), "the same conversation");
    let note = resumed.next_input().await;
    assert!(
        note.contains("`pick`") && note.contains("it returned: red"),
        "the answer reaches the model on the replica that took the thread: {note}"
    );
    resumed.idle(None);
    finish(run).await;
    let events = finish(b.run(input_of(answered))).await;
    assert!(
        matches!(events.last(), Some(agui_types::Event::RunFinished(_))),
        "{events:?}"
    );
    assert_eq!(
        resumed.input_within(Duration::from_millis(200)).await,
        None,
        "delivered once"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// A thread parked on a question goes to the replica that asks for it too; the question cannot
/// be answered there (its harness call is gone), so the client's next run hears that the turn
/// was interrupted, and the run after it continues the conversation.
#[tokio::test]
async fn a_thread_parked_on_a_question_goes_when_asked_for_and_the_turn_is_reported_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let a = long_lived(&leases, dir.path(), &harness);
    let run = a.run(input_of(json!({"messages": [user("m1", "ask me")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.running();
    c.echo(0, "ask me");
    c.reply_done();
    let _question = ask_colour(&c);
    let events = finish(run).await;
    assert!(
        matches!(events.last(), Some(agui_types::Event::RunFinished(_))),
        "the run ends on the question: {events:?}"
    );
    leases.ask("thread-1", "replica-b");
    leases
        .until_released("thread-1", "a thread parked on a question is handed over")
        .await;

    leases.asked.lock().unwrap().clear();
    let b_harness = harness.restarted();
    let b = long_lived(&leases, dir.path(), &b_harness);
    let messages = json!({"messages": [user("m1", "ask me"), user("m2", "Red")]});
    let events = finish(b.run(input_of(messages.clone()))).await;
    let error = run_error(&events);
    assert_eq!(
        error.code.as_deref(),
        Some("TURN_INTERRUPTED"),
        "{}",
        error.message
    );
    let run = b.run(input_of(messages));
    let resumed = b_harness.conversation(0).await;
    assert_eq!(resumed.next_input().await, "Red");
    resumed.idle(None);
    finish(run).await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_turn_in_flight_when_its_server_died_is_reported_and_not_driven_again() {
    let dir = tempfile::tempdir().unwrap();
    let harness = FakeHarness::new();
    let first = Agent::new(
        support::options(dir.path()),
        harness.backend(),
        ToolRegistry::new(),
    )
    .unwrap();
    let _lost = first.run(input_of(json!({"messages": [user("m1", "do it")]})));
    let c = harness.conversation(0).await;
    assert_eq!(c.next_input().await, "do it");
    // The server dies here (no shutdown): the record it wrote says a turn was in flight. The
    // write is behind the run path; give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let restarted = harness.restarted();
    let second = Agent::new(
        support::options(dir.path()),
        restarted.backend(),
        ToolRegistry::new(),
    )
    .unwrap();
    let messages = json!({"messages": [user("m1", "do it"), user("m2", "and then")]});
    let events = finish(second.run(input_of(messages.clone()))).await;
    let error = run_error(&events);
    assert_eq!(
        error.code.as_deref(),
        Some("TURN_INTERRUPTED"),
        "{}",
        error.message
    );
    assert_eq!(restarted.opened(), 0, "nothing was driven for that run");
    let run = second.run(input_of(messages));
    let resumed = restarted.conversation(0).await;
    assert_eq!(
        resumed.next_input().await,
        "and then",
        "m1 is not sent again"
    );
    resumed.idle(None);
    finish(run).await;
    second.shutdown().await;
}

#[tokio::test]
async fn a_turn_lost_after_its_echo_was_recorded_keeps_the_client_id_and_marks_its_reply() {
    let fx = FakeAgent::asking();
    let run = fx.start(json!({"messages": [user("m1", "ask me")]}));
    let c = fx.harness.conversation(0).await;
    c.next_input().await;
    c.running();
    c.echo(0, "ask me");
    c.say(1, "Let me ask.");
    c.reply_done();
    let _asked = ask_colour(&c);
    // Parked on the question: the record says which step echoed m1, with the turn in flight.
    finish(run).await;
    // The server dies here (no shutdown); the write is behind the run path.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let restarted = fx.harness.restarted();
    let second = Agent::new(
        support::options(fx.dir.path()),
        restarted.backend(),
        ToolRegistry::new(),
    )
    .unwrap();
    let messages = json!({"messages": [user("m1", "ask me"), user("m2", "and then")]});
    let events = finish(second.run(input_of(messages.clone()))).await;
    assert_eq!(run_error(&events).code.as_deref(), Some("TURN_INTERRUPTED"));
    let run = second.run(input_of(messages));
    let resumed = restarted.conversation(0).await;
    assert_eq!(resumed.next_input().await, "and then");
    resumed.running();
    resumed.echo(2, "and then");
    resumed.say(3, "Done.");
    resumed.idle(None);
    finish(run).await;

    let events = finish(second.connect(input_of(json!({}))).await.unwrap()).await;
    let messages = events
        .iter()
        .find_map(|e| match e {
            agui_types::Event::MessagesSnapshot(s) => Some(s.messages.clone()),
            _ => None,
        })
        .expect("a snapshot");
    let prefix: String = c.id().chars().take(8).collect();
    let ids: Vec<&str> = messages.iter().map(agui_types::Message::id).collect();
    assert_eq!(
        ids,
        [
            "m1",
            &format!("{prefix}-r-1-t"),
            "m2",
            &format!("{prefix}-r-3-t")
        ]
    );
    let marked: Vec<&str> = messages
        .iter()
        .filter(|m| serde_json::to_value(m).unwrap()["metadata"]["interrupted"] == json!(true))
        .map(agui_types::Message::id)
        .collect();
    assert_eq!(marked, [format!("{prefix}-r-1-t")]);
    second.shutdown().await;
}

/// A thread whose harness waits for tasks in the background keeps its conversation and lease
/// while its process runs a command, even when another replica asks for it, and lets them go
/// once no command runs, though the harness still says it waits: a restarted harness lists the
/// commands of the process that exited for good (the replica soak saw a replica keep a thread
/// five minutes, every run on the replica that asked ending `THREAD_ELSEWHERE`).
#[tokio::test]
async fn a_thread_waiting_for_background_tasks_keeps_its_lease_only_while_its_process_runs_a_command()
 {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let agent = agent_with(&leases, dir.path(), &harness, false);
    let run = agent.run(input_of(
        json!({"messages": [user("m1", "serve the site")]}),
    ));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.waits_for_tasks();
    finish(run).await;
    leases.ask("thread-1", "replica-b");
    // Past `hibernate_after` (300 ms) and many renewals: a command runs, the thread stays.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(leases.holder("thread-1").as_deref(), Some("me"));
    assert!(
        c.is_open(),
        "the conversation is kept while its command runs"
    );
    // The command ends; the harness's own turn about it ends waiting still (for a command of
    // a process that exited, as after a restart).
    c.set_runs_commands(false);
    c.running();
    c.waits_for_tasks();
    leases
        .until_released(
            "thread-1",
            "the thread goes to the replica that asked for it",
        )
        .await;
    assert!(!c.is_open(), "the conversation is let go");
    agent.shutdown().await;
}

/// After a restart, a turn that ends with the harness waiting for tasks its process does not
/// run (those of the process that exited) does not keep the thread from hibernating.
#[tokio::test]
async fn a_resumed_thread_whose_harness_waits_for_tasks_of_an_exited_process_hibernates() {
    let dir = tempfile::tempdir().unwrap();
    let (harness, leases) = (FakeHarness::new(), Arc::new(Leases::default()));
    let agent = agent_with(&leases, dir.path(), &harness, false);
    let run = agent.run(input_of(json!({"messages": [user("m1", "hello")]})));
    let c = harness.conversation(0).await;
    c.next_input().await;
    c.set_runs_commands(false);
    c.waits_for_tasks();
    finish(run).await;
    leases
        .until_released("thread-1", "the idle thread hibernates")
        .await;
    assert!(!c.is_open());
    agent.shutdown().await;
}
