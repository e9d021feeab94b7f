//! Process death, shutdown and cleanup with the real harness.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gemini_script::{Reply, Script};
use harness_client::{
    BuiltinTool, CallContext, Callbacks, CloseReason, ConversationEvent, CustomTool,
    DefaultCallbacks, ToolCallRequest, ToolOutcome,
};
use serde_json::json;
use support::{Fixture, assert_group_gone, descendants, turn};

/// A tool that never answers: its conversation stays parked.
struct Forever;

#[async_trait]
impl Callbacks for Forever {
    async fn tool_call(&self, _ctx: &CallContext, _call: ToolCallRequest) -> ToolOutcome {
        std::future::pending().await
    }
}

async fn wait_closed(conversation: &mut harness_client::Conversation) -> CloseReason {
    loop {
        match tokio::time::timeout(support::PATIENCE, conversation.next_event())
            .await
            .expect("no hang")
        {
            Some(ConversationEvent::Closed(reason)) => return reason,
            Some(_) => {}
            None => panic!("events ended without a Closed event"),
        }
    }
}

#[tokio::test]
async fn a_killed_harness_fails_every_conversation_on_it() {
    let script = Script::new().then(Reply::call("wait", json!({})).forever());
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let tool = CustomTool {
        name: "wait".into(),
        description: "Waits".into(),
        parameters: json!(null),
    };
    let mut parked = fx
        .open(&process, fx.config().tool(tool), Arc::new(Forever))
        .await;
    let mut idle = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    parked.send_text("wait for it").await.unwrap();
    // Let the parked conversation reach its tool call.
    while fx.model.request_count() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let killed_at = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(process.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    for conversation in [&mut parked, &mut idle] {
        let reason = wait_closed(conversation).await;
        let CloseReason::ProcessExited(info) = &reason else {
            panic!("expected a process exit, got {reason}")
        };
        assert!(info.status.contains("SIGKILL"), "{info:?}");
        let err = conversation
            .send_text("anyone?")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("exited"), "{err}");
    }
    // Reported for the record; the property tested is that both fail instead of hanging.
    eprintln!(
        "both conversations failed {:?} after the SIGKILL",
        killed_at.elapsed()
    );
    assert!(process.exit_info().is_some());
    assert_group_gone(process.pid()).await;
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test]
async fn dropping_the_host_leaves_no_process_behind() {
    // A long command still running when the host goes away.
    let script = Script::new().then(Reply::call(
        "run_command",
        json!({"CommandLine": "sleep 300", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 60000}),
    ));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let pid = process.pid();
    let conversation = fx
        .open(
            &process,
            fx.config().builtin_tools([BuiltinTool::RunCommand]),
            Arc::new(DefaultCallbacks),
        )
        .await;
    conversation.send_text("start something").await.unwrap();
    let deadline = Instant::now() + support::PATIENCE;
    let commands = loop {
        let found = descendants(pid);
        if found.iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.contains("sleep"))
        }) {
            break found;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(conversation);
    drop(process);
    assert_group_gone(pid).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while commands.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < deadline,
            "commands left running: {commands:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn shutdown_closes_conversations_and_exits_cleanly() {
    let fx = Fixture::new(Script::new().then(Reply::text(["Hi."]))).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(&process, fx.config(), Arc::new(DefaultCallbacks))
        .await;
    turn(&mut conversation, "hello").await;
    let (exit, reason) = tokio::join!(process.shutdown(), wait_closed(&mut conversation));
    assert_eq!(
        exit.code,
        Some(0),
        "closing stdin is a clean exit: {exit:?}"
    );
    assert!(
        matches!(
            reason,
            CloseReason::ClosedByHost
                | CloseReason::ProcessExited(_)
                | CloseReason::ClosedByHarness { .. }
        ),
        "{reason}"
    );
    assert!(!process.is_usable());
    assert_group_gone(process.pid()).await;
}

#[tokio::test]
async fn a_harness_that_ignores_stdin_eof_is_terminated() {
    // A stand-in binary that completes the handshake but never exits on its own: the
    // escalation must end it with signals.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("stubborn-harness");
    std::fs::write(
        &fake,
        "#!/usr/bin/env python3\nimport sys, struct, signal, time\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         n = struct.unpack('<I', sys.stdin.buffer.read(4))[0]; sys.stdin.buffer.read(n)\n\
         body = bytes([0x08, 0xb9, 0x60, 0x12, 0x02]) + b'kk'\n\
         sys.stdout.buffer.write(struct.pack('<I', len(body)) + body); sys.stdout.flush()\n\
         while True: time.sleep(1)\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut options = harness_client::ProcessOptions::new(dir.path().join("save"));
    options.binary = Some(fake);
    let process = harness_client::HarnessProcess::spawn(&options)
        .await
        .expect("the stub hand-shakes");
    assert_eq!(process.port(), 12345);
    let exit = process
        .shutdown_with_grace(Duration::from_millis(200), Duration::from_millis(200))
        .await;
    assert!(
        exit.status.contains("SIGKILL"),
        "SIGTERM is ignored, so SIGKILL ends it: {exit:?}"
    );
    assert_group_gone(process.pid()).await;
}

#[tokio::test]
async fn a_binary_that_fails_the_handshake_reports_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("broken-harness");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'Failed to read InputConfig: simulated' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut options = harness_client::ProcessOptions::new(dir.path().join("save"));
    options.binary = Some(fake);
    let err = harness_client::HarnessProcess::spawn(&options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("failed to start") && err.contains("simulated"),
        "{err}"
    );
}
