//! Issue 37 on the sandbox's host identity, against a real `agui-antigravity serve` run as
//! root (see `support/served.rs`): its confined harnesses and commands run as an unprivileged
//! host user (`sandbox_uid`, 65534 by default), never as root, so a root-owned file that the
//! sandbox's view shows but only root may read stays closed to them, whatever else protects it.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::PathBuf;

use support::served::{Served, Start, secret};

/// The user this test (and the server it starts) runs as: `/proc/self` belongs to it.
fn server_uid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// Tests run as root, where the sandbox must be another user.
fn server_is_root() -> bool {
    server_uid() == 0
}

/// What a command writes in its workspace belongs, on the host, to the sandbox's user: its
/// user namespace maps inside 0 to that user and nothing else (host root least of all).
#[tokio::test]
async fn a_command_runs_as_the_sandboxs_unprivileged_user_not_as_root() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "whoami",
            "echo mine > owned.txt; echo MAP=$(cat /proc/self/uid_map); \
             echo INSIDE=$(stat -c %u owned.txt); echo WS=$PWD",
        )
        .await;
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} was printed: {out}"))
            .trim()
            .to_owned()
    };
    let map: Vec<String> = field("MAP=")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let file = PathBuf::from(field("WS=")).join("owned.txt");
    let owner = std::fs::metadata(&file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{out}", file.display()))
        .uid();
    let server = server_uid();
    if server_is_root() {
        assert_ne!(owner, 0, "the command wrote as host root: {out}");
        assert_eq!(owner, 65534, "the default sandbox_uid: {out}");
        assert_eq!(
            map,
            ["0", "65534", "1"],
            "only the sandbox's user is mapped"
        );
    } else {
        assert_eq!(owner, server, "{out}");
        assert_eq!(map, ["0".to_owned(), server.to_string(), "1".to_owned()]);
    }
    assert_eq!(field("INSIDE="), "0", "inside, its own user is 0: {out}");
}

/// A file only root may read (`0600`), under a path the operator lets sandboxes read
/// (`sandbox_ro_paths`): the mount shows it, the file's mode keeps it closed, since the sandbox
/// is not root. A file of the same directory that anyone may read is read.
#[tokio::test]
async fn a_file_only_root_may_read_stays_closed_under_a_readable_path() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = secret("root-only");
    let public = secret("anyone");
    let (private_file, public_file) = (shared.join("private.txt"), shared.join("public.txt"));
    std::fs::write(&private_file, &private).unwrap();
    std::fs::set_permissions(&private_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&public_file, &public).unwrap();
    std::fs::set_permissions(&public_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ro = shared.display().to_string();
    let served = Served::start(Start {
        args: &["--sandbox-ro-paths", &ro],
        ..Start::default()
    })
    .await;
    let out = served
        .say(
            "alice",
            "rootonly",
            &format!(
                "cat {}; cat {}; ls -ln {ro}; echo tried",
                private_file.display(),
                public_file.display()
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(
        out.contains(&public),
        "the readable path is in the view: {out}"
    );
    if server_is_root() {
        assert!(
            !out.contains(&private),
            "the sandbox read a file only root may read: {out}"
        );
    }
}
