//! The standalone `gemini-script` binary: it serves, and it stops on EOF or on SIGTERM.

use std::{
    process::{ExitStatus, Stdio},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt as _, BufReader},
    process::{Child, Command},
};

/// A guard against a stuck process, not a speed expectation.
const GUARD: Duration = Duration::from_secs(60);

/// Starts the binary with `--stop-on-eof` and returns it with the base URL it printed.
async fn start() -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gemini-script"))
        .args(["--demo", "--stop-on-eof"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start gemini-script");
    let stdout = child.stdout.take().expect("stdout pipe");
    let line = tokio::time::timeout(GUARD, BufReader::new(stdout).lines().next_line())
        .await
        .expect("the binary announces its address")
        .expect("read stdout")
        .expect("a line");
    let url = line
        .strip_prefix("gemini-script listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

async fn exit(child: &mut Child) -> ExitStatus {
    tokio::time::timeout(GUARD, child.wait())
        .await
        .expect("the binary exits")
        .expect("wait")
}

#[tokio::test]
async fn serves_until_stdin_closes() {
    let (mut child, url) = start().await;
    let state: serde_json::Value = reqwest::get(format!("{url}/_script/state"))
        .await
        .expect("request")
        .json()
        .await
        .expect("JSON");
    assert!(
        state["entries"].as_array().is_some_and(|e| !e.is_empty()),
        "{state}"
    );
    drop(child.stdin.take());
    assert!(exit(&mut child).await.success());
}

#[tokio::test]
async fn sigterm_stops_it_while_stdin_is_still_open() {
    let (mut child, url) = start().await;
    // Held open until the end (`Child::wait` would close it, and EOF alone stops the binary).
    let stdin = child.stdin.take();
    // Once the server answers, the stdin reader has been started; give it time to block in
    // `read` (the old bug only showed then). A correct binary passes however long this takes.
    reqwest::get(format!("{url}/_script/state"))
        .await
        .expect("serving");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = child.id().expect("pid").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(kill.success());
    assert!(exit(&mut child).await.success());
    drop(stdin);
}
