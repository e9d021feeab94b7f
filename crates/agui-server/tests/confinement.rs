//! The attacks of issues 13 and 27 on files, against a real `agui-antigravity serve` (the
//! binary) under the default `sandbox = "owner"`, with the real harness and two owners, alice
//! and bob (see `support/served.rs`). Every attack across owners fails; within one owner, the
//! tests show exactly what the README says an owner's threads share (each other's workspaces
//! and transcripts) and what they do not (the key, the server's files, anything outside their
//! tree).
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::path::PathBuf;

use serde_json::json;
use support::served::{Served, Start, descendants, processes_running, secret, signal, walk};

/// Alice's thread works (writes `secret` into a file of its workspace and says it in its
/// prompt); returns its workspace.
async fn alice_works(served: &Served, thread: &str, secret: &str) -> PathBuf {
    let out = served
        .say(
            "alice",
            thread,
            &format!("echo {secret} > a.txt && echo written"),
        )
        .await;
    assert!(out.contains("written"), "alice's thread worked: {out}");
    served.workspace("alice", thread).await
}

#[tokio::test]
async fn commands_cannot_read_the_servers_environment_or_command_line() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "scan",
            "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null \
             | grep -a -o -e 'env-secre[t]-[0-9x]*' -e 'cmdline-secre[t]-[0-9x]*' | sort -u; \
             echo scanned $(ls -d /proc/[0-9]* | wc -l) processes",
        )
        .await;
    assert!(out.contains("scanned"), "the scan ran: {out}");
    assert!(
        !out.contains(&served.env_secret),
        "environment leaked: {out}"
    );
    assert!(
        !out.contains(&served.cmdline_secret),
        "command line leaked: {out}"
    );
}

#[tokio::test]
async fn view_file_cannot_read_the_servers_environment() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "view",
            &format!("/proc/./{}/environ", served.pid()),
        )
        .await;
    assert!(
        !out.contains(&served.env_secret),
        "environment leaked: {out}"
    );
}

#[tokio::test]
async fn another_owners_file_cannot_be_read_by_its_path() {
    let served = Served::start(Start::default()).await;
    let secret = secret("alice-file");
    let a = alice_works(&served, "a1", &secret).await;
    let by_command = served
        .say("bob", "b1", &format!("cat {}/a.txt", a.display()))
        .await;
    assert!(
        !by_command.contains(&secret),
        "read by a command: {by_command}"
    );
    let by_tool = served
        .say("bob", "b1", &format!("{}/./a.txt", a.display()))
        .await;
    assert!(!by_tool.contains(&secret), "read by view_file: {by_tool}");
}

/// Thread ids that collided in the old 40-bit naming: each owner gets a tree of its own, named
/// by random ids, whatever the thread ids.
#[tokio::test]
async fn threads_with_colliding_ids_still_get_separate_trees() {
    let served = Served::start(Start::default()).await;
    let secret = secret("collide");
    let a = alice_works(&served, "u-75aae30a-2488519", &secret).await;
    let b = served.workspace("bob", "u-75aae30a-2679837").await;
    assert_ne!(a, b);
    assert_ne!(a.parent(), b.parent(), "different owners' trees");
    let out = served
        .say(
            "bob",
            "u-75aae30a-2679837",
            "cat a.txt; cat ../*/a.txt; echo tried",
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(!out.contains(&secret), "bob read alice's file: {out}");
}

#[tokio::test]
async fn another_owners_file_cannot_be_found_by_grep_over_the_file_system() {
    let served = Served::start(Start::default()).await;
    let secret = secret("alice-grep");
    alice_works(&served, "a1", &secret).await;
    let pattern = format!("{}[{}]", &secret[..3], &secret[3..4]);
    let rest = &secret[4..];
    let out = served
        .say(
            "bob",
            "b1",
            &format!(
                "timeout 50 grep -rl -e '{pattern}{rest}' / --exclude-dir=proc --exclude-dir=sys \
                 --exclude-dir=usr > found.txt 2>/dev/null; echo grep-exit=$?; head found.txt"
            ),
        )
        .await;
    // A grep that ran out of time proves nothing: it must have seen the whole view.
    assert!(
        out.contains("grep-exit=") && !out.contains("grep-exit=124"),
        "grep searched everything it could see: {out}"
    );
    // Whatever holds the secret (alice's file, database, transcript) is in the test's directory.
    let root = served.dir.path().display().to_string();
    assert!(!out.contains(&root), "found alice's data: {out}");
}

#[tokio::test]
async fn a_symlink_planted_in_the_workspace_does_not_reach_another_owner() {
    let served = Served::start(Start::default()).await;
    let secret = secret("alice-link");
    let a = alice_works(&served, "a1", &secret).await;
    let by_command = served
        .say(
            "bob",
            "b1",
            &format!("ln -s {}/a.txt link.txt; cat link.txt", a.display()),
        )
        .await;
    assert!(
        !by_command.contains(&secret),
        "read by a command: {by_command}"
    );
    let b = served.workspace("bob", "b1").await;
    let by_tool = served
        .say("bob", "b1", &format!("{}/./link.txt", b.display()))
        .await;
    assert!(!by_tool.contains(&secret), "read by view_file: {by_tool}");
}

#[tokio::test]
async fn another_owners_transcripts_home_and_databases_are_out_of_sight() {
    let served = Served::start(Start::default()).await;
    let secret = secret("alice-prompt");
    let a = alice_works(&served, "a1", &secret).await;
    let alice_tree = a
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let save = served.save_dir();
    let out = served
        .say(
            "bob",
            "b1",
            &format!(
                "ls -R {save} 2>&1 | head -100; cat {save}/o/*/app/*/brain/*/.system_generated/logs/*.jsonl \
                 2>&1 | head -c 20000; find / -xdev \\( -name '*.db' -o -name '*.json' \\) \
                 2>/dev/null | grep -v '^/usr' | head -50; echo listed",
                save = save.display(),
            ),
        )
        .await;
    assert!(out.contains("listed"), "the commands ran: {out}");
    assert!(!out.contains(&secret), "alice's transcript leaked: {out}");
    assert!(!out.contains(&alice_tree), "alice's tree is visible: {out}");
    assert!(
        !out.contains("threads/"),
        "the thread store is visible: {out}"
    );
    assert!(!out.contains("owners/"), "the owners are visible: {out}");
    let databases: Vec<PathBuf> = walk(&save)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .collect();
    assert!(
        databases.len() >= 2,
        "one conversation per thread: {databases:?}"
    );
    for db in &databases {
        let in_alice = db.to_string_lossy().contains(&alice_tree);
        let name = db.file_name().unwrap().to_string_lossy();
        if in_alice {
            assert!(!out.contains(&*name), "alice's database is visible: {out}");
        }
    }
}

#[tokio::test]
async fn nothing_outside_the_owners_tree_can_be_written() {
    let served = Served::start(Start::default()).await;
    let a = alice_works(&served, "a1", &secret("alice-write")).await;
    let outside = served.dir.path().join("outside.txt");
    let targets = [
        a.join("pwned.txt"),
        served.save_dir().join("pwned.txt"),
        served.workspace_root().join("pwned.txt"),
        outside.clone(),
    ];
    let command: Vec<String> = targets
        .iter()
        .map(|t| format!("echo pwned > {}", t.display()))
        .collect();
    let out = served
        .say(
            "bob",
            "b1",
            &format!("{}; echo mine > mine.txt; echo tried", command.join("; ")),
        )
        .await;
    assert!(out.contains("tried"), "the commands ran: {out}");
    for target in &targets {
        assert!(!target.exists(), "wrote {}", target.display());
    }
    let mine = walk(&served.workspace_root())
        .into_iter()
        .any(|p| p.ends_with("mine.txt"));
    assert!(mine, "the agent still writes its own workspace");
    // Alice herself writes her tree only.
    let out = served
        .say(
            "alice",
            "a2",
            &format!(
                "echo x > {}; echo x > {}; echo tried",
                served.save_dir().join("pwned.txt").display(),
                outside.display()
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(!served.save_dir().join("pwned.txt").exists() && !outside.exists());
}

/// What an owner's threads share: each other's workspaces (and the owner's harness process),
/// nothing more — not the key, not anything outside the owner's tree.
#[tokio::test]
async fn an_owners_threads_share_their_workspaces_and_nothing_more() {
    let served = Served::start(Start::default()).await;
    let secret = secret("shared-within");
    let a1 = alice_works(&served, "a1", &secret).await;
    let out = served
        .say(
            "alice",
            "a2",
            &format!(
                "cat {}/a.txt; cat {}; readlink /proc/self/ns/pid; echo done",
                a1.display(),
                served.key_file.display()
            ),
        )
        .await;
    assert!(
        out.contains(&secret),
        "alice's threads share their workspaces: {out}"
    );
    assert!(!out.contains(&served.key_secret), "the key leaked: {out}");
    let first = served
        .say("alice", "a1", "readlink /proc/self/ns/pid")
        .await;
    let ns = |text: &str| {
        text.lines()
            .find(|l| l.trim().starts_with("pid:["))
            .map(|l| l.trim().to_owned())
    };
    assert_eq!(
        ns(&first),
        ns(&out),
        "one harness process serves both: {first} / {out}"
    );
}

#[tokio::test]
async fn the_key_file_and_secrets_under_etc_are_out_of_reach() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "keys",
            &format!(
                "cat {key}; cat /etc/shadow; ls -a /etc; ls {dir}; echo tried",
                key = served.key_file.display(),
                dir = served.key_file.parent().unwrap().display()
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(!out.contains(&served.key_secret), "the key leaked: {out}");
    for line in out.lines().map(str::trim) {
        assert!(
            !matches!(line, "shadow" | "gshadow" | "sudoers" | "ssh" | "agui"),
            "/etc/{line} is visible: {out}"
        );
    }
    assert!(out.contains("passwd"), "the basics stay: {out}");
}

/// The launcher's spec names host paths (the key file it masks, the tree, the cgroups): no
/// stage carries it on its command line, which every process inside reads in
/// `/proc/<pid>/cmdline` (and every process of the host, for the stages outside).
#[tokio::test]
async fn no_command_line_inside_or_outside_shows_the_sandboxs_spec() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "cmdline",
            "for f in /proc/1/cmdline /proc/[0-9]*/cmdline; do echo \"$f: $(tr '\\0' ' ' < $f)\"; done; \
             echo scanned $(ls -d /proc/[0-9]* | wc -l) processes",
        )
        .await;
    assert!(out.contains("scanned"), "the scan ran: {out}");
    assert!(
        out.contains("/proc/1/cmdline: ") && out.contains("localharness"),
        "the sandbox's PID 1 and the harness were read: {out}"
    );
    let key = served.key_file.display().to_string();
    let mut inside = Vec::new();
    for line in out.lines() {
        for leak in [
            key.as_str(),
            "read_write",
            "agui-sandboxes",
            "/sys/fs/cgroup",
        ] {
            if line.contains(leak) {
                inside.push(format!("{leak} in {line}"));
            }
        }
    }
    assert!(
        inside.is_empty(),
        "the spec is readable inside: {inside:#?}"
    );
    // Outside: every stage the server started (the server's own command line names the key
    // file: it is not a stage).
    let harness = descendants(served.pid(), "localharness");
    assert_eq!(harness.len(), 1, "{harness:?}");
    let stages: Vec<u32> = descendants(served.pid(), "agui-antigravity")
        .into_iter()
        .filter(|pid| *pid != served.pid())
        .collect();
    assert!(!stages.is_empty(), "the launcher's stages run");
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", harness[0]))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.display().to_string())
        .filter(|target| target.contains("memfd:"))
        .collect();
    assert!(held.is_empty(), "the harness inherited {held:?}");
    for pid in stages.into_iter().chain(harness) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        for leak in [key.as_str(), "read_write", "agui-sandboxes"] {
            assert!(
                !cmdline.contains(leak),
                "process {pid}'s command line shows the spec ({leak}): {cmdline}"
            );
        }
    }
}

/// The harness would store its 16.8 MB webm encoder (browser recordings) in every tree's
/// `HOME`; the sandbox keeps it out, and the agent cannot make room for it.
#[tokio::test]
async fn a_trees_home_holds_no_copy_of_the_harness_encoder_and_the_agent_cannot_make_room() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "a1",
            "rm -rf $HOME/.gemini/antigravity/bin; mkdir -p $HOME/.gemini/antigravity/bin \
             && echo made; echo tried",
        )
        .await;
    assert!(out.contains("tried"), "the commands ran: {out}");
    assert!(!out.contains("made"), "the agent replaced the mask: {out}");
    let out = served.say("alice", "a1", "echo again").await;
    assert!(out.contains("again"), "{out}");
    let files = walk(&served.save_dir());
    let encoders: Vec<_> = files
        .iter()
        .filter(|p| p.ends_with("webm_encoder"))
        .collect();
    assert!(
        encoders.is_empty(),
        "the encoder was installed: {encoders:?}"
    );
    let masks: Vec<_> = files
        .iter()
        .filter(|p| p.ends_with(".gemini/antigravity/bin"))
        .collect();
    assert_eq!(masks.len(), 1, "{files:?}");
    assert_eq!(std::fs::metadata(masks[0]).unwrap().len(), 0);
}

#[tokio::test]
async fn tmp_is_private_to_each_owner() {
    let served = Served::start(Start::default()).await;
    let secret = secret("tmp-secret");
    let name = format!("agui-{}", self::secret("confinement"));
    let out = served
        .say(
            "alice",
            "a1",
            &format!("echo {secret} > /tmp/{name} && echo written"),
        )
        .await;
    assert!(out.contains("written"), "{out}");
    let host = std::path::Path::new("/tmp").join(&name);
    let on_host = host.exists();
    let _ = std::fs::remove_file(&host);
    let out = served.say("bob", "b1", &format!("cat /tmp/{name}")).await;
    assert!(!out.contains(&secret), "bob read alice's /tmp: {out}");
    assert!(!on_host, "the host's /tmp got the file");
}

#[tokio::test]
async fn transcripts_workspaces_and_the_servers_files_are_private_to_its_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let served = Served::start(Start::default()).await;
    alice_works(&served, "a1", &secret("private")).await;
    let mut open = Vec::new();
    for root in [served.save_dir(), served.workspace_root()] {
        let mut pending = vec![root];
        while let Some(path) = pending.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            if meta.permissions().mode() & 0o077 != 0 {
                open.push(format!(
                    "{:o} {}",
                    meta.permissions().mode() & 0o777,
                    path.display()
                ));
            }
            if meta.is_dir() {
                pending.extend(
                    std::fs::read_dir(&path)
                        .unwrap()
                        .flatten()
                        .map(|e| e.path()),
                );
            }
        }
    }
    assert!(open.is_empty(), "readable by others: {open:#?}");
}

#[tokio::test]
async fn commands_die_with_their_owners_harness_even_when_it_crashes() {
    let served = Served::start(Start::default()).await;
    // A unique duration names the command.
    let seconds = 86_000 + std::process::id() % 400;
    let command = format!("sleep {seconds}");
    let run = served.run("alice", "crash", &command);
    let crash = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while processes_running(&command).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the command did not start"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The harness dies abruptly (a crash, an OOM kill): nothing gets to clean up.
        let harnesses = descendants(served.pid(), "localharness");
        assert_eq!(harnesses.len(), 1, "one harness for the owner");
        signal(harnesses[0], nix::sys::signal::Signal::SIGKILL);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !processes_running(&command).is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        processes_running(&command)
    };
    let (_, left) = tokio::join!(run, crash);
    for pid in &left {
        signal(*pid, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "the command outlived the harness: {left:?}"
    );
}

#[tokio::test]
async fn owner_mode_says_the_harness_is_sandboxed_per_owner() {
    let served = Served::start(Start::default()).await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], true, "{caps}");
    let sandbox = &caps["custom"]["sandbox"];
    assert_eq!(sandbox["mode"], "owner", "{caps}");
    assert_eq!(sandbox["isolation"], "owner", "{caps}");
    assert_eq!(sandbox["confined"], true, "{caps}");
    assert_eq!(sandbox["commandsIsolated"], true, "{caps}");
    assert!(
        sandbox["network"].as_str().unwrap().starts_with("private"),
        "{caps}"
    );
    assert!(
        sandbox.get("tcpPorts").is_none(),
        "no port allow-list: {caps}"
    );
    assert_eq!(caps["custom"]["threads"]["delete"], true, "{caps}");
}

#[tokio::test]
async fn thread_mode_gives_each_thread_a_sandbox_of_its_own_and_strict_is_its_other_name() {
    let served = Served::start(Start {
        args: &["--sandbox", "strict"],
        ..Start::default()
    })
    .await;
    let caps = served.capabilities().await;
    assert_eq!(caps["custom"]["sandbox"]["mode"], "thread", "{caps}");
    let secret = secret("thread-mode");
    let a1 = alice_works(&served, "a1", &secret).await;
    let out = served
        .say(
            "alice",
            "a2",
            &format!("cat {}/a.txt; echo tried", a1.display()),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(
        !out.contains(&secret),
        "another thread of alice read it: {out}"
    );
}

#[tokio::test]
async fn without_user_namespaces_the_tools_that_need_them_are_withheld_and_the_reason_given() {
    let served = Served::start(Start {
        env: &[(
            harness_client::sandbox::SIMULATE_UNAVAILABLE_ENV,
            "no user namespaces",
        )],
        ..Start::default()
    })
    .await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], false, "{caps}");
    let sandbox = &caps["custom"]["sandbox"];
    assert_eq!(sandbox["confined"], false, "{caps}");
    assert_eq!(
        sandbox["withheldTools"],
        json!(["run_command", "write_to_file"]),
        "{caps}"
    );
    assert!(
        sandbox["reason"]
            .as_str()
            .unwrap()
            .contains("no user namespaces"),
        "{caps}"
    );
    assert!(
        sandbox["fix"]
            .as_str()
            .unwrap()
            .contains("sandbox = \"off\""),
        "{caps}"
    );
    assert_eq!(
        caps["custom"]["builtinTools"],
        json!(["list_dir", "view_file"]),
        "{caps}"
    );
    assert!(
        served.log().contains("SANDBOX UNAVAILABLE"),
        "said loudly in the log: {}",
        served.log()
    );
    let out = served
        .say(
            "alice",
            "fallback",
            &format!("/proc/./{}/environ", served.pid()),
        )
        .await;
    assert!(!out.contains(&served.env_secret), "{out}");
    let declared = served.model.requests()[0].declared_functions();
    assert!(
        !declared
            .iter()
            .any(|f| f == "run_command" || f == "write_to_file"),
        "{declared:?}"
    );
    assert!(declared.iter().any(|f| f == "view_file"), "{declared:?}");
}

#[tokio::test]
async fn off_runs_unconfined_and_says_so() {
    let served = Served::start(Start {
        args: &["--sandbox", "off"],
        anonymous: true,
        ..Start::default()
    })
    .await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], false, "{caps}");
    assert_eq!(caps["custom"]["sandbox"]["mode"], "off", "{caps}");
    assert!(served.log().contains("SANDBOX OFF"), "{}", served.log());
}
