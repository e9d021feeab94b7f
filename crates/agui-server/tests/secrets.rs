//! The binary's secrets: gone from its environment once read (so neither its children nor
//! `/proc/<pid>/environ` show them), warned about when given as flags, read from a key file, and
//! never printed by `check-config`.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agui-antigravity"))
}

/// `check-config` with `args`, in a fresh data directory: `(success, stdout, stderr)`.
fn check_config(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = binary()
        .arg("check-config")
        .args(args)
        .env_clear()
        .env("AGUI_DATA_DIR", dir)
        .env("HOME", dir)
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_shows_the_key_file_but_never_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gemini.key");
    std::fs::write(&file, "  KEY-FROM-FILE-93c1\n").unwrap();
    let (ok, out, err) = check_config(dir.path(), &["--api-key-file", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains(file.to_str().unwrap()), "{out}");
    assert!(!out.contains("KEY-FROM-FILE"), "{out}");
    assert!(out.contains("api_key: Some(\n"), "the key was read: {out}");
    assert!(!err.contains("KEY-FROM-FILE"), "{err}");
}

#[test]
fn an_unreadable_or_empty_key_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.key");
    let (ok, _, err) = check_config(dir.path(), &["--api-key-file", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("cannot read api_key_file") && err.contains(missing.to_str().unwrap()),
        "{err}"
    );
    let empty = dir.path().join("empty.key");
    std::fs::write(&empty, "\n").unwrap();
    let (ok, _, err) = check_config(dir.path(), &["--api-key-file", empty.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("is empty") && err.contains(empty.to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn a_secret_given_as_a_flag_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = check_config(dir.path(), &["--api-key", "FLAG-KEY"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("`--api-key` on the command line is readable by every local process")
            && err.contains("api_key_file"),
        "{err}"
    );
    assert!(!err.contains("FLAG-KEY"), "{err}");
    let (_, _, quiet) = check_config(dir.path(), &[]);
    assert!(
        !quiet.contains("readable by every local process"),
        "{quiet}"
    );
}

#[tokio::test]
async fn secrets_read_from_the_environment_leave_the_servers_environment() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = [
        ("GEMINI_API_KEY", "ENV-GEMINI-5b8e"),
        ("GOOGLE_API_KEY", "ENV-GOOGLE-5b8e"),
        ("AGUI_AUTH_TOKEN", "ENV-TOKEN-5b8e-0123"),
        ("AGUI_METRICS_TOKEN", "ENV-METRICS-5b8e-0123"),
        ("AGUI_MODEL_HEADERS", "x-gateway=ENV-HEADER-5b8e"),
    ];
    let mut command = binary();
    command
        // Nothing listens on port 1: a run starts a harness and fails at once.
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--gemini-base-url",
            "http://127.0.0.1:1",
        ])
        .args(["--api-retries", "0"])
        .env("AGUI_DATA_DIR", dir.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in secrets {
        command.env(name, value);
    }
    let mut server = command.spawn().expect("the server starts");
    let pid = server.id();
    // Serving is announced, with the address, once the agents are built.
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    let mut log = String::new();
    while !line.contains("serving AG-UI on") {
        line.clear();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("the server stopped: {log}");
        }
        log.push_str(&line);
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        environ.contains("AGUI_DATA_DIR="),
        "the rest of the environment is kept"
    );
    for (name, value) in secrets {
        let secret = value.rsplit('=').next().unwrap();
        assert!(
            !environ.contains(secret),
            "{name}'s value in /proc/{pid}/environ"
        );
        assert!(
            !environ.contains(&format!("{name}=")),
            "{name} in /proc/{pid}/environ"
        );
    }
    // Children (the harness) inherit nothing of it either.
    let addr = line.trim().rsplit("http://").next().unwrap().to_owned();
    let run = reqwest::Client::new()
        .post(format!("http://{addr}/"))
        .bearer_auth("ENV-TOKEN-5b8e-0123")
        .json(&serde_json::json!({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        run.status(),
        200,
        "the token read from the environment is in force"
    );
    let _ = run.bytes().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let children = loop {
        let children = children_of(pid);
        if !children.is_empty() || Instant::now() > deadline {
            break children;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!children.is_empty(), "a harness runs");
    for child in children {
        let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap_or_default();
        for (name, value) in secrets {
            let secret = value.rsplit('=').next().unwrap();
            assert!(
                !String::from_utf8_lossy(&environ).contains(secret),
                "{name}'s value in the environment of child {child}"
            );
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = server.wait();
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let child = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`; comm may hold spaces, so read after its `)`.
            let ppid = stat.rsplit(')').next()?.split_whitespace().nth(1)?;
            (ppid.parse::<u32>().ok()? == pid).then_some(child)
        })
        .collect()
}
