//! The trusted side never acts through what the agent wrote (issue 37): against a real
//! `agui-antigravity serve` under the default `sandbox = "owner"`, a command of alice's thread
//! plants links in her tree (its `app`, `home` directories, a directory chain too deep to name)
//! and then the server deletes a thread, places a new one, starts a new sandbox and measures
//! the tree — following none of them. Each test fails on the code before the door
//! (`harness_sandbox::AgentDir`): the server removed or made host directories through the link,
//! mounted the link's target into the next sandbox, or missed the chain's size.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agui_types::Event;
use support::served::{Served, Start, descendants, secret, token};

/// What a command printed after `KEY=`.
fn printed(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} was printed: {out}"))
        .trim()
        .to_owned()
}

/// A host directory outside every tree, holding `<name>/precious`: what a planted link aims at.
fn host_dir(served: &Served, name: &str) -> PathBuf {
    let host = served.dir.path().join("host");
    std::fs::create_dir_all(host.join(name)).unwrap();
    std::fs::write(host.join(name).join("precious"), "precious").unwrap();
    host
}

fn assert_host_intact(host: &Path, name: &str) {
    assert_eq!(
        std::fs::read_to_string(host.join(name).join("precious"))
            .ok()
            .as_deref(),
        Some("precious"),
        "the host directory {name} under {} was removed through the link",
        host.display()
    );
}

/// The thread's slot (its workspace's name) and its tree's state directory (`$HOME/..`).
async fn where_it_works(served: &Served, owner: &str, thread: &str) -> (String, String) {
    let out = served
        .say(
            owner,
            thread,
            "echo SLOT=$(basename $PWD); echo STATE=$(dirname $HOME)",
        )
        .await;
    (printed(&out, "SLOT"), printed(&out, "STATE"))
}

async fn delete(served: &Served, owner: &str, thread: &str) {
    let deleted = reqwest::Client::new()
        .delete(format!("http://{}/threads/{thread}", served.addr))
        .bearer_auth(token(owner))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200, "the thread was deleted");
}

#[tokio::test]
async fn deleting_a_thread_whose_app_dir_is_a_planted_link_removes_no_host_directory() {
    let served = Served::start(Start::default()).await;
    let (slot, state) = where_it_works(&served, "alice", "victim").await;
    let host = host_dir(&served, &slot);
    let out = served
        .say(
            "alice",
            "victim",
            &format!(
                "cd {state} && mv app app.bak && ln -s {} app && echo PLANTED=yes",
                host.display()
            ),
        )
        .await;
    assert_eq!(printed(&out, "PLANTED"), "yes");
    delete(&served, "alice", "victim").await;
    assert_host_intact(&host, &slot);
    // And a new thread's placement makes nothing through the link.
    let before: Vec<_> = std::fs::read_dir(&host).unwrap().flatten().collect();
    let out = served.say("alice", "next", "echo NEXT=ok").await;
    assert_eq!(printed(&out, "NEXT"), "ok");
    let after: Vec<_> = std::fs::read_dir(&host).unwrap().flatten().collect();
    assert_eq!(
        before.len(),
        after.len(),
        "a new thread made a directory in the host directory through the link: {after:?}"
    );
    assert_host_intact(&host, &slot);
}

/// The harness process's `HOME` (and storage dir) lie in the tree: replaced by a link, they
/// must not be what the next sandbox mounts (a bind mount follows links on the host).
#[tokio::test]
async fn a_home_replaced_by_a_link_is_not_mounted_into_the_next_sandbox() {
    let served = Served::start(Start {
        args: &[
            "--hibernate-after-secs",
            "1",
            "--harness-idle-grace-secs",
            "1",
        ],
        ..Start::default()
    })
    .await;
    let (_, state) = where_it_works(&served, "alice", "a1").await;
    let host = served.dir.path().join("host-home");
    std::fs::create_dir_all(&host).unwrap();
    let secret = secret("host-home");
    std::fs::write(host.join("secret.txt"), &secret).unwrap();
    let out = served
        .say(
            "alice",
            "a1",
            &format!(
                "cd {state} && mv home home.bak && ln -s {} home && echo PLANTED=yes",
                host.display()
            ),
        )
        .await;
    assert_eq!(printed(&out, "PLANTED"), "yes");
    // The harness lets go once the thread hibernates; the next run starts a new sandbox.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !descendants(served.pid(), "localharness").is_empty() {
        assert!(Instant::now() < deadline, "the harness never stopped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let events = served
        .run(
            "alice",
            "a1",
            "cat $HOME/secret.txt; ls -la $HOME; echo LOOKED=yes",
        )
        .await;
    let out = support::served::tool_results(&events);
    assert!(
        matches!(events.last(), Some(Event::RunFinished(_))),
        "the thread still works after the planted link: {events:?}"
    );
    assert_eq!(printed(&out, "LOOKED"), "yes");
    assert!(
        !out.contains(&secret),
        "the host directory the link aimed at was mounted into the sandbox: {out}"
    );
    assert!(host.join("secret.txt").exists());
}

/// A chain of directories deeper than a path can name (`PATH_MAX`) hid what lay below it from
/// a walk by paths: the cap must still see it.
#[tokio::test]
async fn a_directory_chain_too_deep_to_name_still_counts_against_the_disk_cap() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "16"],
        ..Start::default()
    })
    .await;
    let workspace = served.workspace("alice", "deep").await;
    let events = served
        .run(
            "alice",
            "deep",
            "python3 -c \"import os\nfor _ in range(2500):\n    os.mkdir('d'); os.chdir('d')\nopen('big', 'wb').write(b'x' * 24_000_000)\"; sleep 20; echo finished",
        )
        .await;
    let Some(Event::RunError(error)) = events.last() else {
        panic!("the turn that filled the disk below a deep chain was not stopped: {events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("WORKSPACE_FULL"), "{error:?}");
    // Deleting the thread removes the whole chain.
    delete(&served, "alice", "deep").await;
    assert!(!workspace.exists(), "the chain went with its thread");
}
