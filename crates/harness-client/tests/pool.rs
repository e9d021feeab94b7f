//! The process pool with the real harness.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gemini_script::{Matcher, Reply, Script};
use harness_client::proto::lh::harness_config::SessionContinuationMode;
use harness_client::{DefaultCallbacks, HarnessError, HarnessPool, PoolOptions, PoolStats, WarmUp};
use support::{Fixture, assert_group_gone, turn};

fn pool(capacity: usize, idle_grace: Duration, prestart_spare: bool) -> HarnessPool {
    HarnessPool::new(PoolOptions {
        max_conversations_per_process: capacity,
        idle_grace,
        prestart_spare,
        ..Default::default()
    })
    .unwrap()
}

/// A conversation on `pool` with `fx`'s process options and config, whose callbacks answer
/// nothing.
async fn open(pool: &HarnessPool, fx: &Fixture) -> harness_client::Conversation {
    pool.open(
        &fx.process_options(),
        fx.config().build().unwrap(),
        Arc::new(DefaultCallbacks),
    )
    .await
    .unwrap()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + support::PATIENCE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Answers "alpha", "beta" or "gamma" by keyword, any number of times.
fn echo_script() -> Script {
    ["alpha", "beta", "gamma"]
        .into_iter()
        .fold(Script::new(), |script, word| {
            script.then(
                Reply::text([format!("reply to {word}")])
                    .when(Matcher::user_text().keywords([word]))
                    .forever(),
            )
        })
}

#[tokio::test]
async fn conversations_share_processes_and_spill_at_capacity() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(2, Duration::from_secs(30), false);
    let options = fx.process_options();
    let callbacks = Arc::new(DefaultCallbacks);
    let mut a = pool
        .open(&options, fx.config().build().unwrap(), callbacks.clone())
        .await
        .unwrap();
    let mut b = pool
        .open(&options, fx.config().build().unwrap(), callbacks.clone())
        .await
        .unwrap();
    let mut c = pool
        .open(&options, fx.config().build().unwrap(), callbacks.clone())
        .await
        .unwrap();
    assert_eq!(
        a.process().pid(),
        b.process().pid(),
        "two fit in one process"
    );
    assert_ne!(
        a.process().pid(),
        c.process().pid(),
        "the third spills into a new one"
    );
    assert_eq!(
        pool.stats(),
        PoolStats {
            processes: 2,
            conversations: 3,
            partitions: 1
        }
    );
    // Concurrent turns on one process stay isolated.
    let (la, lb, lc) = tokio::join!(
        turn(&mut a, "alpha"),
        turn(&mut b, "beta"),
        turn(&mut c, "gamma")
    );
    assert_eq!(
        (la.answer(), lb.answer(), lc.answer()),
        (
            "reply to alpha".into(),
            "reply to beta".into(),
            "reply to gamma".into()
        )
    );
    // A released slot is reused.
    let shared = a.process().pid();
    drop(a);
    eventually("the slot is released", || pool.stats().conversations == 2).await;
    let d = pool
        .open(&options, fx.config().build().unwrap(), callbacks)
        .await
        .unwrap();
    assert_eq!(d.process().pid(), shared);
    pool.shutdown().await;
}

/// A conversation opened again soon after it closed goes back to the process it left, even a
/// full one over a free one: the harness lets go of a closed conversation a little later, and
/// two processes must never hold one conversation.
#[tokio::test]
async fn a_conversation_opened_again_soon_goes_back_to_the_process_it_left() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(1, Duration::from_secs(30), false);
    let options = fx.process_options();
    let callbacks = Arc::new(DefaultCallbacks);
    let mut first = open(&pool, &fx).await;
    assert_eq!(turn(&mut first, "alpha").await.answer(), "reply to alpha");
    let (id, left) = (first.id().to_owned(), first.process().pid());
    first.close().await;
    // Its slot is taken by a new conversation meanwhile: the process is full.
    let other = open(&pool, &fx).await;
    assert_eq!(other.process().pid(), left, "the free slot was reused");
    let again = pool
        .open(
            &options,
            fx.config()
                .conversation_id(&id, SessionContinuationMode::Resume)
                .build()
                .unwrap(),
            callbacks.clone(),
        )
        .await
        .unwrap();
    assert_eq!(again.process().pid(), left, "back on the process it left");
    assert!(!again.init_info().history.is_empty(), "resumed");
    assert_eq!(
        pool.stats(),
        PoolStats {
            processes: 1,
            conversations: 2,
            partitions: 1
        },
        "one over capacity rather than a second holder"
    );
    // A new conversation still finds a process with room.
    let new = open(&pool, &fx).await;
    assert_ne!(new.process().pid(), left);
    pool.shutdown().await;
}

#[tokio::test]
async fn a_failed_init_spares_the_shared_process() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(4, Duration::from_secs(30), false);
    let options = fx.process_options();
    let mut sibling = open(&pool, &fx).await;
    let bad = fx.config().conversation_id(
        "00000000000000000000000000000000",
        SessionContinuationMode::Resume,
    );
    let err = pool
        .open(&options, bad.build().unwrap(), Arc::new(DefaultCallbacks))
        .await
        .unwrap_err();
    assert!(matches!(err, HarnessError::InitFailed { .. }), "{err}");
    assert!(sibling.process().is_usable(), "the shared process survives");
    assert_eq!(turn(&mut sibling, "alpha").await.answer(), "reply to alpha");
    assert_eq!(
        pool.stats().conversations,
        1,
        "the failed open released its slot"
    );
    pool.shutdown().await;
}

#[tokio::test]
async fn an_idle_process_is_stopped_after_the_grace_period() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(4, Duration::from_millis(300), false);
    let conversation = pool
        .open(
            &fx.process_options(),
            fx.config().build().unwrap(),
            Arc::new(DefaultCallbacks),
        )
        .await
        .unwrap();
    let pid = conversation.process().pid();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        pool.stats().processes,
        1,
        "a process with a conversation is never reaped"
    );
    drop(conversation);
    eventually("the idle process is stopped", || {
        pool.stats().processes == 0
    })
    .await;
    assert_group_gone(pid).await;
}

#[tokio::test]
async fn a_dead_process_is_replaced_for_new_conversations() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(4, Duration::from_secs(30), false);
    let first = open(&pool, &fx).await;
    let dead = first.process().pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(dead as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    eventually("the death is noticed", || {
        first.process().exit_info().is_some()
    })
    .await;
    let mut second = open(&pool, &fx).await;
    assert_ne!(second.process().pid(), dead);
    assert_eq!(turn(&mut second, "beta").await.answer(), "reply to beta");
    pool.shutdown().await;
}

#[tokio::test]
async fn a_spare_process_is_started_ahead_of_need() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(1, Duration::from_secs(30), true);
    let first = open(&pool, &fx).await;
    eventually("a spare boots", || pool.stats().processes == 2).await;
    let mut second = open(&pool, &fx).await;
    assert_ne!(first.process().pid(), second.process().pid());
    assert_eq!(turn(&mut second, "gamma").await.answer(), "reply to gamma");
    pool.shutdown().await;
}

/// A host starting up boots its first process before any conversation asks for one; the first
/// conversation takes it, and with prestarting off nothing boots.
#[tokio::test]
async fn a_prestarted_process_takes_the_first_conversation() {
    let fx = Fixture::new(echo_script()).await;
    let options = fx.process_options();
    let off = pool(8, Duration::from_secs(30), false);
    off.prestart(&options, None).await.unwrap();
    let pool = pool(8, Duration::from_secs(30), true);
    pool.prestart(&options, None).await.unwrap();
    pool.prestart(&options, None).await.unwrap();
    eventually("the prestarted process boots", || {
        pool.stats().processes == 1
    })
    .await;
    let mut first = open(&pool, &fx).await;
    assert_eq!(turn(&mut first, "alpha").await.answer(), "reply to alpha");
    assert_eq!(
        pool.stats(),
        PoolStats {
            processes: 1,
            conversations: 1,
            partitions: 1
        },
        "the conversation is on the prestarted process, and a second prestart added none"
    );
    assert_eq!(
        off.stats().processes,
        0,
        "prestart_spare off: nothing boots"
    );
    pool.shutdown().await;
}

/// A process started ahead of need runs the warm-up's one turn before it serves, then leaves
/// nothing behind (no scratch directory, no conversation database); the first real
/// conversation lands on it. A spare booted later for the partition is warmed the same way.
#[tokio::test]
async fn prestarted_and_spare_processes_run_the_warm_up_turn_and_leave_nothing() {
    let script = echo_script().then(
        Reply::text(["warm"])
            .when(Matcher::user_text().keywords(["warm-up"]))
            .forever(),
    );
    let fx = Fixture::new(script).await;
    let options = fx.process_options();
    let config = fx.config();
    let warm_up = WarmUp::new("warm-up", move |scratch| {
        config
            .clone()
            .workspace(scratch.join("ws"))
            .app_data_dir(scratch.join("app"))
            .build()
    });
    let warm_turns = || {
        fx.model
            .requests()
            .iter()
            .filter(|r| r.last_user_text().as_deref() == Some("warm-up"))
            .count()
    };
    let pool = pool(2, Duration::from_secs(30), true);
    pool.prestart(&options, Some(warm_up)).await.unwrap();
    eventually("the prestarted process boots and warms up", || {
        pool.stats().processes == 1 && warm_turns() == 1 && pool.stats().conversations == 0
    })
    .await;
    let mut first = open(&pool, &fx).await;
    assert_eq!(turn(&mut first, "alpha").await.answer(), "reply to alpha");
    assert_eq!(
        pool.stats().processes,
        1,
        "the first conversation took the warmed process"
    );
    // One slot left of two: a spare boots, and is warmed too.
    // The warm-up holds a slot until it is done.
    eventually("a warmed spare", || {
        pool.stats().processes == 2 && warm_turns() == 2 && pool.stats().conversations == 1
    })
    .await;
    let mut second = open(&pool, &fx).await;
    assert_ne!(
        first.process().pid(),
        second.process().pid(),
        "the next conversation goes to the warmed spare, the least loaded"
    );
    assert_eq!(turn(&mut second, "beta").await.answer(), "reply to beta");
    let save = options.storage_dir.clone();
    let mut left: Vec<String> = std::fs::read_dir(&save)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // The processes' `HOME`, there before any warm-up.
        .filter(|name| name != ".home")
        .collect();
    left.sort();
    let mut ours = [first.id(), second.id()]
        .map(|id| format!("{id}.db"))
        .to_vec();
    ours.sort();
    assert!(
        left.iter()
            .all(|name| ours.iter().any(|db| name.starts_with(db.as_str()))),
        "only the real conversations' databases are left in {}: {left:?}",
        save.display()
    );
    pool.shutdown().await;
}

/// A conversation that is already waiting when the prestarted process boots gets it at once:
/// no warm-up turn runs before (or beside) it.
#[tokio::test]
async fn a_process_that_an_open_waits_for_serves_it_without_a_warm_up() {
    let fx = Fixture::new(echo_script()).await;
    let options = fx.process_options();
    let config = fx.config();
    let warm_up = WarmUp::new("warm-up", move |scratch| {
        config.clone().app_data_dir(scratch.join("app")).build()
    });
    let pool = pool(8, Duration::from_secs(30), true);
    pool.prestart(&options, Some(warm_up)).await.unwrap();
    let mut first = open(&pool, &fx).await;
    assert_eq!(turn(&mut first, "alpha").await.answer(), "reply to alpha");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let texts: Vec<Option<String>> = fx
        .model
        .requests()
        .iter()
        .map(|r| r.last_user_text())
        .collect();
    assert_eq!(
        texts,
        [Some("alpha".to_owned())],
        "only the conversation's own turn"
    );
    assert_eq!(pool.stats().processes, 1);
    pool.shutdown().await;
}

/// A spare boots once fewer than two slots are free (half a process, at least two): with two
/// slots per process, the first conversation already leaves only one.
/// A reservation keeps its process up without taking a conversation slot: a burst of opens
/// arriving while a claimant still holds it fills the process rather than booting another.
#[tokio::test]
async fn a_reservation_takes_no_conversation_slot_from_a_burst() {
    let fx = Fixture::new(echo_script()).await;
    // No spare of the pool's own, so every process counted is the reservation's or a boot.
    let pool = pool(2, Duration::from_secs(30), false);
    let options = fx.process_options();
    let reservation = pool.reserve(&options, None).await.unwrap();
    assert_eq!(pool.stats().processes, 1);
    let (a, b) = tokio::join!(open(&pool, &fx), open(&pool, &fx));
    assert_eq!(
        (a.process().pid(), pool.stats().processes),
        (b.process().pid(), 1),
        "both conversations on the reserved process, and no second one booted"
    );
    drop(reservation);
    drop((a, b));
}

/// The spare a burst of opens calls for is booted a moment after it, not beside it: the burst's
/// first answers do not share the CPU with a boot and its warm-up turn, and the spare still comes.
#[tokio::test]
async fn the_spare_a_burst_calls_for_boots_after_the_burst_not_during_it() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(4, Duration::from_secs(30), true);
    let (a, b, c) = tokio::join!(open(&pool, &fx), open(&pool, &fx), open(&pool, &fx));
    assert_eq!(pool.stats().processes, 1, "one process holds the burst");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        pool.stats().processes,
        1,
        "no spare booted during the burst's turns"
    );
    eventually("the spare boots after the burst", || {
        pool.stats().processes == 2
    })
    .await;
    drop((a, b, c));
}

#[tokio::test]
async fn a_spare_is_started_while_one_slot_is_still_free() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(2, Duration::from_secs(30), true);
    let first = open(&pool, &fx).await;
    eventually("a spare boots", || pool.stats().processes == 2).await;
    drop(first);
    pool.shutdown().await;
}

#[tokio::test]
async fn a_shut_down_pool_refuses_new_conversations_and_leaves_nothing() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(4, Duration::from_secs(30), false);
    let options = fx.process_options();
    let conversation = open(&pool, &fx).await;
    let pid = conversation.process().pid();
    pool.shutdown().await;
    let err = pool
        .open(
            &options,
            fx.config().build().unwrap(),
            Arc::new(DefaultCallbacks),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, HarnessError::PoolClosed), "{err}");
    assert_group_gone(pid).await;
    assert!(
        HarnessPool::new(PoolOptions {
            max_conversations_per_process: 0,
            ..Default::default()
        })
        .is_err()
    );
}

#[tokio::test]
async fn a_burst_of_opens_boots_just_enough_processes_together() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(2, Duration::from_secs(30), false);
    let options = fx.process_options();
    let callbacks = Arc::new(DefaultCallbacks);
    let opens =
        (0..6).map(|_| pool.open(&options, fx.config().build().unwrap(), callbacks.clone()));
    let mut conversations: Vec<_> = futures_util::future::join_all(opens)
        .await
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        pool.stats(),
        PoolStats {
            processes: 3,
            conversations: 6,
            partitions: 1
        },
        "six conversations, two per process: three processes, not one per open"
    );
    let mut pids: Vec<u32> = conversations.iter().map(|c| c.process().pid()).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 3);
    for conversation in &mut conversations {
        assert_eq!(turn(conversation, "alpha").await.answer(), "reply to alpha");
    }
    pool.shutdown().await;
}

#[tokio::test]
async fn a_burst_of_opens_fails_together_when_the_harness_cannot_start() {
    let fx = Fixture::new(echo_script()).await;
    let pool = pool(2, Duration::from_secs(30), false);
    let mut options = fx.process_options();
    // An existing file that is no harness: every boot fails at the handshake.
    let fake = fx.dir.path().join("not-a-harness");
    std::fs::write(&fake, "#!/bin/sh\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    options.binary = Some(fake);
    let callbacks = Arc::new(DefaultCallbacks);
    let opens =
        (0..5).map(|_| pool.open(&options, fx.config().build().unwrap(), callbacks.clone()));
    let results = tokio::time::timeout(support::PATIENCE, futures_util::future::join_all(opens))
        .await
        .expect("no open waits forever on a failed boot");
    assert!(results.iter().all(Result::is_err), "every open fails");
    assert_eq!(pool.stats().processes, 0);
    pool.shutdown().await;
}
