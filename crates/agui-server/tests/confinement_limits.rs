//! Owners as the boundary of processes and resources, against a real `agui-antigravity serve`
//! with two owners (see `support/served.rs`): owners never share a process and one owner's
//! threads share up to `pool_size` per process; a new owner's first turn runs on a process
//! booted before it asked (a spare); a fork bomb, a memory hog and a disk fill are bounded and
//! another owner still answers; deleting a thread removes its files.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agui_types::Event;
use support::served::{Served, Start, descendants, pid_namespace, secret, token, walk};

/// The pid namespace a thread's commands run in (one per harness process).
async fn namespace_of(served: &Served, owner: &str, thread: &str) -> String {
    let out = served
        .say(owner, thread, "readlink /proc/self/ns/pid")
        .await;
    out.lines()
        .map(str::trim)
        .find(|l| l.starts_with("pid:["))
        .unwrap_or_else(|| panic!("a namespace was printed: {out}"))
        .to_owned()
}

#[tokio::test]
async fn two_owners_never_share_a_process_and_one_owners_threads_share_up_to_pool_size() {
    let served = Served::start(Start {
        args: &["--pool-size", "2"],
        ..Start::default()
    })
    .await;
    let mut alice = Vec::new();
    for thread in ["a1", "a2", "a3"] {
        alice.push(namespace_of(&served, "alice", thread).await);
    }
    let bob = namespace_of(&served, "bob", "b1").await;
    let distinct: BTreeSet<&String> = alice.iter().collect();
    assert_eq!(
        distinct.len(),
        2,
        "three threads, two per process: {alice:?}"
    );
    assert!(
        !alice.contains(&bob),
        "bob shares a process with alice: {bob} in {alice:?}"
    );
    // And by pid: every harness serves one owner.
    let harnesses = descendants(served.pid(), "localharness");
    assert_eq!(
        harnesses.len(),
        3,
        "two for alice, one for bob: {harnesses:?}"
    );
}

/// A new owner's first turn runs on a harness that was booted (and warmed) before the run was
/// sent: the spare. Proved by the process, not by a timer.
#[tokio::test]
async fn a_new_owners_first_turn_runs_on_a_process_booted_before_it_asked() {
    let served = Served::start(Start {
        args: &["--prestart-harness", "true"],
        ..Start::default()
    })
    .await;
    let booted = wait_for_spare(&served).await;
    let alice = namespace_of(&served, "alice", "a1").await;
    assert!(
        booted.contains(&alice),
        "alice's first turn ran on {alice}, not on the spare ({booted:?})"
    );
    // Another spare follows for the next new owner.
    let booted = wait_for_spare(&served).await;
    let bob = namespace_of(&served, "bob", "b1").await;
    assert!(
        booted.contains(&bob),
        "bob's first turn ran on {bob}, not on a spare ({booted:?})"
    );
    assert_ne!(alice, bob);
}

/// Per-thread sandboxes take spares too: each new thread's first turn runs on a process booted
/// before it asked.
#[tokio::test]
async fn in_thread_mode_a_new_threads_first_turn_runs_on_a_spare() {
    let served = Served::start(Start {
        args: &["--prestart-harness", "true", "--sandbox", "thread"],
        ..Start::default()
    })
    .await;
    for thread in ["t1", "t2"] {
        let booted = wait_for_spare(&served).await;
        let ns = namespace_of(&served, "alice", thread).await;
        assert!(
            booted.contains(&ns),
            "{thread} ran on {ns}, not on a spare ({booted:?})"
        );
    }
}

/// New threads arriving one after another raise the stock of spares, on the real harness: with
/// `--max-spare-harnesses 3`, once two new threads have claimed one each, three are booted and
/// ready for the next.
#[tokio::test]
async fn in_thread_mode_arriving_threads_raise_the_stock_of_spares_to_the_maximum() {
    let served = Served::start(Start {
        args: &[
            "--prestart-harness",
            "true",
            "--sandbox",
            "thread",
            "--max-spare-harnesses",
            "3",
        ],
        ..Start::default()
    })
    .await;
    for thread in ["t1", "t2"] {
        let booted = wait_for_spare(&served).await;
        let ns = namespace_of(&served, "alice", thread).await;
        assert!(booted.contains(&ns), "{thread} ran on {ns}, not on a spare");
    }
    wait_for_spares(&served, 3).await;
}

/// The pid namespaces of the harnesses running once a spare is ready (`/metrics` counts it).
async fn wait_for_spare(served: &Served) -> BTreeSet<String> {
    wait_for_spares(served, 1).await;
    descendants(served.pid(), "localharness")
        .into_iter()
        .map(pid_namespace)
        .collect()
}

/// Waits until `/metrics` counts at least `want` spares ready.
async fn wait_for_spares(served: &Served, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metrics = reqwest::Client::new()
            .get(format!("http://{}/metrics", served.addr))
            .bearer_auth(token("alice"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let spares = metrics
            .lines()
            .find(|l| l.starts_with("agui_spare_harnesses"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0);
        if spares >= want as f64 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{spares} spares ready, not {want}:\n{}",
            served.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_fork_bomb_and_a_memory_hog_are_bounded_and_another_owner_still_answers() {
    let served = Served::start(Start {
        args: &["--sandbox-max-pids", "128", "--sandbox-memory-mb", "300"],
        ..Start::default()
    })
    .await;
    let caps = served.capabilities().await;
    let limits = caps["custom"]["sandbox"]["limits"].clone();
    if limits["cgroups"].is_null() {
        // Without cgroups the limits are not claimed, and the reason is given.
        assert!(
            limits["pids"].is_null() && limits["memoryBytes"].is_null(),
            "{caps}"
        );
        assert!(limits["cgroupsUnavailable"].as_str().is_some(), "{caps}");
        return;
    }
    assert_eq!(limits["pids"], 128, "{caps}");
    // The bomb ends bounded: it starts fewer processes than the limit, or takes down only its
    // own owner's harness (the Go runtime cannot start a thread), whose run then says so.
    let bomb = served
        .run(
            "alice",
            "bomb",
            // The sleeps outlive the loop, so the processes alive at its end are the most it
            // held at once. `sh` (dash) gives up on the first refused fork, where bash retries
            // for 15 s and the harness sends a command that takes over 10 s to the background.
            // The sleeps are counted and killed with builtins only, as a fork may be refused.
            "sh -c 'for i in $(seq 400); do (sleep 600 &) 2>/dev/null || break; done; \
             live=0; for c in /proc/[0-9]*/comm; do read -r x < \"$c\" 2>/dev/null \
             && [ \"$x\" = sleep ] && live=$((live+1)) && p=${c#/proc/} && kill ${p%/comm}; \
             done; echo started=$live; echo bombed'",
        )
        .await;
    match bomb.last() {
        Some(Event::RunFinished(_)) => {
            let out = support::served::tool_results(&bomb);
            let started: usize = out
                .lines()
                .find_map(|l| l.trim().strip_prefix("started="))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("the bomb ran: {out}\n{bomb:#?}\n{}", served.log()));
            assert!(
                started < 128,
                "the bomb was not bounded: {started} processes"
            );
        }
        Some(Event::RunError(error)) => {
            assert_eq!(error.code.as_deref(), Some("HARNESS_LOST"), "{error:?}");
        }
        other => panic!("the bomb's run ended: {other:?}"),
    }
    let hog = served
        .run(
            "alice",
            "hog",
            "head -c 1200000000 /dev/zero | tail > /dev/null; echo exit=$?",
        )
        .await;
    let out = support::served::tool_results(&hog);
    assert!(!out.contains("exit=0"), "the hog got its memory: {out}");
    assert!(
        matches!(hog.last(), Some(Event::RunFinished(_) | Event::RunError(_))),
        "the hog's run ended: {hog:?}"
    );
    // Alice's next thread works again on a new harness.
    assert!(
        served
            .say("alice", "after", "echo recovered")
            .await
            .contains("recovered")
    );
    // Another owner answers meanwhile and after.
    let bob = served.say("bob", "b1", "echo bob-answers").await;
    assert!(bob.contains("bob-answers"), "{bob}");
}

#[tokio::test]
async fn a_disk_fill_stops_the_turn_at_the_cap_with_a_clear_error() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "5"],
        ..Start::default()
    })
    .await;
    let events = served
        .run(
            "alice",
            "fill",
            "head -c 9000000 /dev/urandom > fill.bin; sleep 30; echo finished",
        )
        .await;
    let Some(Event::RunError(error)) = events.last() else {
        panic!("the turn was stopped: {events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("WORKSPACE_FULL"), "{error:?}");
    assert!(error.message.contains("workspace_max_mb"), "{error:?}");
    // The agent can clean up: a turn that shrinks the tree is not stopped.
    let out = served
        .say("alice", "fill", "rm fill.bin; echo cleaned")
        .await;
    assert!(out.contains("cleaned"), "{out}");
}

#[tokio::test]
async fn deleting_a_thread_removes_its_files_and_frees_its_id_and_only_its_owner_may() {
    let served = Served::start(Start::default()).await;
    let secret = secret("delete-me");
    let out = served
        .say(
            "alice",
            "gone",
            &format!("echo {secret} > notes.txt && echo written"),
        )
        .await;
    assert!(out.contains("written"), "{out}");
    let client = reqwest::Client::new();
    let url = format!("http://{}/threads/gone", served.addr);
    let bob = client
        .delete(&url)
        .bearer_auth(token("bob"))
        .send()
        .await
        .unwrap();
    assert_eq!(bob.status(), 404, "bob cannot delete alice's thread");
    let deleted = client
        .delete(&url)
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(
        deleted.json::<serde_json::Value>().await.unwrap()["deleted"],
        true
    );
    let left: Vec<_> = walk(served.dir.path())
        .into_iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(&secret)))
        .collect();
    assert!(
        left.is_empty(),
        "files of the deleted thread remain: {left:?}"
    );
    // The id is free again: bob may use it now, as a new thread.
    let out = served.say("bob", "gone", "echo fresh; cat notes.txt").await;
    assert!(out.contains("fresh") && !out.contains(&secret), "{out}");
    let connect = client
        .post(format!("http://{}/connect", served.addr))
        .bearer_auth(token("alice"))
        .json(&serde_json::json!({"threadId": "gone", "runId": "r", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        connect.status(),
        404,
        "alice's thread is gone (the id is bob's now)"
    );
}

#[tokio::test]
async fn an_identity_at_its_limits_is_told_so() {
    let served = Served::start(Start {
        args: &["--max-threads-per-owner", "1"],
        ..Start::default()
    })
    .await;
    served.say("alice", "first", "echo one").await;
    let refused = reqwest::Client::new()
        .post(format!("http://{}/", served.addr))
        .bearer_auth(token("alice"))
        .json(&serde_json::json!({"threadId": "second", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "echo two"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(body.to_string().contains("max_threads_per_owner"), "{body}");
    // Bob is not limited by alice's threads.
    assert!(
        served
            .say("bob", "second", "echo bob")
            .await
            .contains("bob")
    );
}

/// The size on disk of `file` (0 when it is gone).
fn disk_size(file: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(file).map_or(0, |m| m.blocks() * 512)
}

/// A command the harness sends to the background (past its `WaitMsBeforeAsync`): the turn ends,
/// the command goes on writing at full speed (the finding of issue 37: the cap was checked only
/// while a turn ran). The owner's sandbox lives on, and so must its cap.
#[tokio::test]
async fn a_writer_left_running_after_its_turn_is_stopped_at_the_disk_cap() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "64"],
        ..Start::default()
    })
    .await;
    let workspace = served.workspace("alice", "bg").await;
    served
        .say(
            "alice",
            "bg",
            "echo STARTED; sleep 1; head -c 1000000000 /dev/zero > big; echo done > finished #background",
        )
        .await;
    // The turn is over; the writer starts a second later and would write 1 GB.
    let big = workspace.join("big");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut largest = 0;
    loop {
        largest = largest.max(disk_size(&big));
        if workspace.join("finished").exists() {
            panic!("the writer wrote its whole gigabyte: {largest} bytes");
        }
        if largest > 0 && descendants(served.pid(), "head").is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the writer was never stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cap = 64u64 << 20;
    let overshoot = disk_size(&big).saturating_sub(cap);
    eprintln!(
        "background writer stopped: file {} MiB, cap {} MiB, overshoot {} MiB",
        disk_size(&big) >> 20,
        cap >> 20,
        overshoot >> 20
    );
    assert!(
        disk_size(&big) < cap + (256 << 20),
        "stopped far past the cap: {} bytes",
        disk_size(&big)
    );
    // The owner's harness was not stopped, and cleaning up works (from another thread: the
    // harness answers the stopped command's end with a turn of its own on this one).
    let events = served
        .run(
            "alice",
            "cleaner",
            &format!("rm {}; echo CLEANED", big.display()),
        )
        .await;
    let out = support::served::tool_results(&events);
    assert!(out.contains("CLEANED"), "{out} {events:?}");
    assert!(!big.exists());
}

/// A writer that unlinks its file and goes on writing to it takes disk no directory walk sees:
/// the sandbox counts what its processes hold open.
#[tokio::test]
async fn a_writer_to_an_unlinked_file_is_stopped_at_the_disk_cap() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "64"],
        ..Start::default()
    })
    .await;
    let workspace = served.workspace("alice", "hidden").await;
    served
        .say(
            "alice",
            "hidden",
            "echo STARTED; exec 3>big; rm big; sleep 1; head -c 1000000000 /dev/zero >&3; echo done > finished #background",
        )
        .await;
    // Written to no name, the gigabyte would be done in a second or two; the server says when
    // it stops the commands, and what they held unlinked.
    let deadline = Instant::now() + Duration::from_secs(60);
    let stopped = loop {
        if let Some(line) = served
            .log()
            .lines()
            .find(|l| l.contains("the disk cap was passed while its commands wrote"))
        {
            break line.to_owned();
        }
        assert!(
            !workspace.join("finished").exists(),
            "the writer wrote its whole gigabyte to its unlinked file"
        );
        assert!(Instant::now() < deadline, "the writer was never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let plain: String = {
        // The log's colours out: `\x1b[…m`.
        let mut plain = String::new();
        let mut chars = stopped.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                chars.by_ref().find(|&c| c == 'm');
            } else {
                plain.push(c);
            }
        }
        plain
    };
    let unlinked: u64 = plain
        .split_whitespace()
        .find_map(|w| w.strip_prefix("unlinked="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the stop names what was held unlinked: {stopped}"));
    assert!(unlinked > 0, "{stopped}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !workspace.join("finished").exists(),
        "the writer finished instead of being stopped"
    );
}

/// libfaketime, which the test command installs (Debian's `faketime`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Issue 39's reproduction: an identity at its thread limit whose threads passed their
/// retention may make new ones — the retention sweep releases each thread's owner with its
/// record (the owner files stayed before, and the identity got 429 with no thread left).
#[tokio::test]
async fn threads_forgotten_past_their_retention_no_longer_count_against_their_owner() {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: `apt-get install faketime` (cargo xtask test installs it)"
    );
    let limits = [
        "--max-threads-per-owner",
        "2",
        "--thread-retention-days",
        "1",
    ];
    let mut first = Served::start(Start {
        args: &limits,
        ..Start::default()
    })
    .await;
    first.say("alice", "a1", "echo one").await;
    first.say("alice", "a2", "echo two").await;
    let third = || {
        let addr = first.addr.clone();
        async move {
            reqwest::Client::new()
                .post(format!("http://{addr}/"))
                .bearer_auth(token("alice"))
                .json(&serde_json::json!({"threadId": "a3", "runId": "r", "messages": [{"id": "m3", "role": "user", "content": "echo three"}]}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(third().await, 429, "alice is at her limit");
    first.stop();
    // Three days on: the retention sweep of the next server forgets both threads.
    let later = Served::start(Start {
        args: &limits,
        env: &[("LD_PRELOAD", LIBFAKETIME), ("FAKETIME", "+3d")],
        replica_of: Some(&first),
        ..Start::default()
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while later
        .log()
        .matches("removing a thread past its retention")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "{}", later.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = later.say("alice", "a3", "echo three").await;
    assert!(
        out.contains("three"),
        "a new thread once the old ones are forgotten: {out}"
    );
}
