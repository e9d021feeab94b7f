//! Shared set-up for session tests.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use agui_session::testing::FakeHarness;
use agui_session::{Agent, AgentOptions, ToolRegistry};
use agui_types::{Event, RunAgentInput, StreamVerifier};
use harness_client::ModelEndpoint;
use serde_json::{Value, json};

/// An agent on the fake harness, in a scratch directory.
pub struct FakeAgent {
    pub agent: Agent,
    pub harness: FakeHarness,
    pub dir: tempfile::TempDir,
}

pub fn options(dir: &std::path::Path) -> AgentOptions {
    let mut options = AgentOptions::new(
        "test-model",
        ModelEndpoint::gemini("http://127.0.0.1:9", "k"),
        dir,
    );
    options.concurrent_runs = agui_session::ConcurrentRuns::Wait(Duration::from_secs(5));
    options
}

impl FakeAgent {
    pub fn new() -> Self {
        Self::with(|_| {}, ToolRegistry::new())
    }

    pub fn with(configure: impl FnOnce(&mut AgentOptions), tools: ToolRegistry) -> Self {
        init_tracing();
        let dir = tempfile::tempdir().unwrap();
        let harness = FakeHarness::new();
        let mut options = options(dir.path());
        configure(&mut options);
        let agent = Agent::new(options, harness.backend(), tools).unwrap();
        Self {
            agent,
            harness,
            dir,
        }
    }

    /// A restarted server: this agent shut down, a new one on the same save dir and a
    /// restarted fake harness (which keeps the conversations it saved).
    pub async fn restart(&self) -> (Agent, FakeHarness) {
        self.agent.shutdown().await;
        self.another_server()
    }

    /// A second server on this agent's save dir, with the harness restarted, the first left as
    /// it is: what a server started after this one was killed (or a replica that took its
    /// threads over) finds.
    pub fn another_server(&self) -> (Agent, FakeHarness) {
        let harness = self.harness.restarted();
        let agent = Agent::new(
            options(self.dir.path()),
            harness.backend(),
            ToolRegistry::new(),
        )
        .unwrap();
        (agent, harness)
    }

    /// An agent whose model may ask the user questions.
    pub fn asking() -> Self {
        Self::with(
            |o| {
                o.builtin_tools
                    .insert(harness_client::BuiltinTool::AskQuestion);
            },
            ToolRegistry::new(),
        )
    }

    /// Starts a run with the user message `m1` saying `text` on a new thread, and waits until
    /// its conversation received it and is running.
    pub async fn begin(
        &self,
        text: &str,
    ) -> (
        agui_session::RunStream,
        agui_session::testing::FakeConversation,
    ) {
        let run = self.start(json!({"messages": [user("m1", text)]}));
        let conversation = self.harness.conversation(0).await;
        conversation.next_input().await;
        conversation.running();
        (run, conversation)
    }

    /// A first turn answered: `text` sent as `m1`, echoed, answered `reply`, the run finished.
    pub async fn answered(
        &self,
        text: &str,
        reply: &str,
    ) -> agui_session::testing::FakeConversation {
        let (run, conversation) = self.begin(text).await;
        conversation.echo(0, text);
        conversation.say(1, reply);
        conversation.idle(None);
        finish(run).await;
        conversation
    }

    /// Starts a run; the caller drives the fake harness, then collects with [`finish`].
    pub fn start(&self, input: Value) -> agui_session::RunStream {
        self.agent.run(input_of(input))
    }
}

/// Waits (up to `within`) until `condition` holds, failing with `what` otherwise.
pub async fn eventually(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The harness asks the user of `conversation` one question: "Colour?", Red or Green.
pub fn ask_colour(
    conversation: &agui_session::testing::FakeConversation,
) -> tokio::task::JoinHandle<harness_client::QuestionAnswer> {
    conversation.ask(harness_client::QuestionRequest {
        trajectory_id: conversation.id().into(),
        step_index: 2,
        questions: vec![harness_client::Question {
            text: "Colour?".into(),
            choices: vec!["Red".into(), "Green".into()],
            multi_select: false,
        }],
    })
}

/// A RunAgentInput from a JSON fragment (threadId/runId defaulted).
pub fn input_of(extra: Value) -> RunAgentInput {
    let mut base = json!({"threadId": "thread-1", "runId": uuid(), "messages": []});
    base.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    RunAgentInput::from_json(base.to_string().as_bytes()).expect("valid input")
}

pub fn uuid() -> String {
    format!(
        "run-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

pub fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": text})
}

/// Collects a run's events (bounded wait) and checks them with the official ordering rules.
pub async fn finish(stream: agui_session::RunStream) -> Vec<Event> {
    finish_after(Vec::new(), stream).await
}

/// [`finish`] for a run whose first events (`seen`) were already read with [`until`].
pub async fn finish_after(mut seen: Vec<Event>, stream: agui_session::RunStream) -> Vec<Event> {
    let rest = tokio::time::timeout(Duration::from_secs(20), stream.collect())
        .await
        .expect("the run ends");
    seen.extend(rest);
    StreamVerifier::verify_all(&seen)
        .unwrap_or_else(|v| panic!("invalid stream: {v}\n{}", types(&seen)));
    seen
}

/// Reads a run's events up to and including the first of type `kind` (bounded wait), so a
/// test knows the run has got that far before it drives the harness on.
pub async fn until(stream: &mut agui_session::RunStream, kind: &str) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.next_event())
            .await
            .expect("the run goes on")
            .unwrap_or_else(|| panic!("the run ended before {kind}: {}", types(&seen)));
        let found = event.event_type().as_str() == kind;
        seen.push(event);
        if found {
            return seen;
        }
    }
}

/// The terminal `RUN_ERROR` of a run (panics, listing the events, when it did not fail).
pub fn run_error(events: &[Event]) -> &agui_types::RunError {
    match last(events) {
        Event::RunError(error) => error,
        _ => panic!("the run did not fail: {}", types(events)),
    }
}

/// Event types, space separated, for assertions and messages.
pub fn types(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| e.event_type().as_str().to_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text of all TEXT_MESSAGE_CONTENT events.
pub fn text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageContent(c) => Some(c.delta.as_str()),
            _ => None,
        })
        .collect()
}

pub fn last(events: &[Event]) -> &Event {
    events.last().expect("at least one event")
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TEST_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A harness process working in `save` (its save dir) or below it (an owner's tree), if one
/// runs.
pub fn harness_in(save: &std::path::Path) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
        let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
        let exe = std::fs::read_link(e.path().join("exe")).ok()?;
        (cwd.starts_with(save) && exe.ends_with("localharness")).then_some(pid)
    })
}

/// A crash: the harness working in `save` is SIGKILLed and `agent` dropped without a shutdown;
/// returns once no harness runs there.
pub async fn crash(save: &std::path::Path, agent: agui_session::Agent) {
    let pid = harness_in(save).expect("the harness runs in the save dir");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    drop(agent);
    eventually(Duration::from_secs(20), "the harness is gone", || {
        harness_in(save).is_none()
    })
    .await;
}

/// A small tmpfs mounted on a directory (unmounted when dropped), to fill up.
pub struct SmallVolume(std::path::PathBuf);

impl SmallVolume {
    /// Mounts a tmpfs of `bytes` on `dir` (needs root, as the sandbox tests do).
    pub fn mount(dir: &std::path::Path, bytes: u64) -> Self {
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "this test mounts a small tmpfs (it needs root, as the sandbox tests do)"
        );
        Self(dir.to_owned())
    }

    /// Writes `filler` until the volume has no byte left.
    pub fn fill(&self) -> std::path::PathBuf {
        use std::io::Write as _;
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while file.write_all(&block).is_ok() {}
        while file.write_all(&[0]).is_ok() {}
        filler
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The messages of the first `MESSAGES_SNAPSHOT` of `events`.
pub fn snapshot(events: &[Event]) -> Vec<agui_types::Message> {
    events
        .iter()
        .find_map(|e| match e {
            Event::MessagesSnapshot(s) => Some(s.messages.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no MESSAGES_SNAPSHOT: {}", types(events)))
}

/// The messages a connect restates, `role: text` each.
pub async fn restated(agent: &Agent) -> Vec<String> {
    let stream = agent.connect(input_of(json!({}))).await.unwrap();
    let events = finish(stream).await;
    snapshot(&events)
        .iter()
        .filter_map(|m| {
            let value = serde_json::to_value(m).unwrap();
            let text = value["content"].as_str()?.to_owned();
            Some(format!("{}: {text}", value["role"].as_str().unwrap_or("")))
        })
        .collect()
}
