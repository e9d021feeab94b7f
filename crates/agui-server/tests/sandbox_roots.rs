//! Sandbox roots on the host, against a real `agui-antigravity serve` (see `support/served.rs`):
//! a killed launcher leaves its root in the temporary directory, and the next server starting
//! up removes it; a server stopped gracefully leaves none. The roots lie in the
//! host's temporary directory when the sandbox runs as the server's own user (a server not run
//! as root, or `sandbox_uid = 0`, as here); as another user they lie in the launcher's own tmpfs.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::served::{Served, Start, descendants, signal};

/// The sandbox roots in `tmp` (the launcher's own naming, or hakoniwa's).
fn roots(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("agui-sandbox-") || n.starts_with("hakoniwa-"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_starting_up_removes_the_sandbox_roots_its_killed_predecessor_left() {
    let tmp = tempfile::tempdir().unwrap();
    let tmpdir = tmp.path().to_str().unwrap();
    let mut first = Served::start(Start {
        args: &["--sandbox-uid", "0"],
        env: &[("TMPDIR", tmpdir)],
        ..Start::default()
    })
    .await;
    let out = first
        .say("alice", "t-roots", "echo confined-$((6*7))")
        .await;
    assert!(out.contains("confined-42"), "{out}");
    // SIGKILL of the launchers (as the OOM killer or an operator may), then of their server:
    // a launcher that ends normally removes its root, a killed one cannot.
    let launchers: Vec<u32> = descendants(first.pid(), "agui-antigravity")
        .into_iter()
        .filter(|pid| *pid != first.pid())
        .collect();
    assert!(
        !launchers.is_empty(),
        "a confined harness runs in a launcher"
    );
    for pid in &launchers {
        signal(*pid, Signal::SIGKILL);
    }
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while launchers
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
    {
        assert!(
            Instant::now() < deadline,
            "the launchers {launchers:?} outlived their server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left = roots(tmp.path());
    assert!(!left.is_empty(), "a killed launcher cannot remove its root");

    let mut second = Served::start(Start {
        args: &["--sandbox-uid", "0"],
        env: &[("TMPDIR", tmpdir)],
        replica_of: Some(&first),
        ..Start::default()
    })
    .await;
    assert_eq!(
        roots(tmp.path()),
        Vec::<PathBuf>::new(),
        "the roots {left:?} are left after a new server started:\n{}",
        second.log()
    );
    let out = second
        .say("alice", "t-roots-2", "echo again-$((6*7))")
        .await;
    assert!(out.contains("again-42"), "{out}");
    assert!(
        !roots(tmp.path()).is_empty(),
        "the running sandbox has a root"
    );
    second.stop();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !roots(tmp.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "a gracefully stopped server's sandboxes left {:?}",
            roots(tmp.path())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
