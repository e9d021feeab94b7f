//! Shared set-up for tests against the real harness and the scripted model.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use gemini_script::{Handle, Script, ScriptedModel};
use harness_client::{
    Callbacks, Conversation, ConversationConfig, ConversationEvent, HarnessProcess, ModelEndpoint,
    ProcessOptions, Step, StepSource, StepStatus, StepTarget, TurnEnd, policy,
};

/// A scripted model, a scratch directory and the options to start a harness in it.
pub struct Fixture {
    pub model: Handle,
    pub dir: tempfile::TempDir,
}

/// Guard against a hang: tests never wait longer than this for anything.
pub const PATIENCE: Duration = Duration::from_secs(60);

impl Fixture {
    pub async fn new(script: Script) -> Self {
        init_tracing();
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        Self {
            model: ScriptedModel::start(script).await.expect("scripted model"),
            dir,
        }
    }

    pub fn process_options(&self) -> ProcessOptions {
        ProcessOptions::new(self.dir.path().join("save"))
    }

    pub async fn spawn(&self) -> HarnessProcess {
        HarnessProcess::spawn(&self.process_options())
            .await
            .expect("harness starts")
    }

    /// A config pointing at the scripted model, workspace `ws/`, allow-all policy.
    pub fn config(&self) -> ConversationConfig {
        ConversationConfig::new(
            "gemini-3-flash-preview",
            ModelEndpoint::gemini(self.model.base_url(), "test-key"),
        )
        .workspace(self.dir.path().join("ws"))
        .app_data_dir(self.dir.path().join("app"))
        .policy(policy::allow_all())
        .api_retry(2, 100)
    }

    pub async fn open(
        &self,
        process: &HarnessProcess,
        config: ConversationConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Conversation {
        Conversation::open(process, config.build().expect("valid config"), callbacks)
            .await
            .expect("conversation opens")
    }
}

/// What a turn produced.
#[derive(Debug, Default)]
pub struct TurnLog {
    pub steps: Vec<Step>,
    pub events: Vec<ConversationEvent>,
    pub end: Option<TurnEnd>,
}

impl TurnLog {
    /// The model's answer text (model → user steps that are not failures), from deltas.
    pub fn answer(&self) -> String {
        self.steps
            .iter()
            .filter(|s| {
                s.source == StepSource::Model
                    && s.target == StepTarget::User
                    && s.status != StepStatus::Error
            })
            .map(|s| s.text_delta.as_str())
            .collect()
    }

    pub fn thinking(&self) -> String {
        self.steps
            .iter()
            .map(|s| s.thinking_delta.as_str())
            .collect()
    }

    /// The final snapshot of every step, in first-seen order.
    pub fn final_steps(&self) -> Vec<&Step> {
        let mut keys = Vec::new();
        for s in &self.steps {
            if !keys.contains(&&s.key) {
                keys.push(&s.key);
            }
        }
        keys.into_iter()
            .map(|k| self.steps.iter().rev().find(|s| &s.key == k).unwrap())
            .collect()
    }

    pub fn errors(&self) -> Vec<&Step> {
        self.steps
            .iter()
            .filter(|s| s.status == StepStatus::Error)
            .collect()
    }
}

/// Reads events until the turn ends (or the connection closes).
pub async fn read_turn(conversation: &mut Conversation) -> TurnLog {
    let mut log = TurnLog::default();
    loop {
        let event = tokio::time::timeout(PATIENCE, conversation.next_event())
            .await
            .expect("the turn ends in time")
            .expect("the connection stays up until the turn ends");
        match &event {
            ConversationEvent::Step(step) => log.steps.push(step.clone()),
            ConversationEvent::TurnEnded(end) => {
                log.end = Some(end.clone());
                log.events.push(event);
                return log;
            }
            ConversationEvent::Closed(reason) => panic!("closed before the turn ended: {reason}"),
            _ => {}
        }
        log.events.push(event);
    }
}

/// Sends `prompt` and reads the turn.
pub async fn turn(conversation: &mut Conversation, prompt: &str) -> TurnLog {
    conversation.send_text(prompt).await.expect("send");
    read_turn(conversation).await
}

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Debug, Clone, Copy)]
pub struct ProcEntry {
    pub pid: u32,
    pub ppid: u32,
    pub pgrp: u32,
    /// Exited but not yet reaped.
    pub zombie: bool,
}

/// Every process on the machine, from `/proc`.
pub fn process_table() -> Vec<ProcEntry> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // Fields after the parenthesised command: state ppid pgrp …
            let (_, rest) = stat.rsplit_once(") ")?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            Some(ProcEntry {
                pid,
                zombie: state == "Z",
                ppid: fields.next()?.parse().ok()?,
                pgrp: fields.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// Pids of live processes whose process group is `pgid` (the harness and what it started).
pub fn processes_in_group(pgid: u32) -> Vec<u32> {
    process_table()
        .into_iter()
        .filter(|p| p.pgrp == pgid && !p.zombie)
        .map(|p| p.pid)
        .collect()
}

/// Pids of the live descendants of `root` (the harness runs each command in its own session,
/// so they are not all in its group).
pub fn descendants(root: u32) -> Vec<u32> {
    let table: Vec<ProcEntry> = process_table().into_iter().filter(|p| !p.zombie).collect();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in table.iter().filter(|p| p.ppid == parent) {
            found.push(p.pid);
            frontier.push(p.pid);
        }
    }
    found
}

/// Waits (bounded) until no process of group `pgid` is left.
pub async fn assert_group_gone(pgid: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_in_group(pgid);
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "processes of group {pgid} still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TEST_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}
