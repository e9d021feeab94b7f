//! A scripted stand-in for the harness, for fast tests of session logic.
//!
//! [`FakeHarness`] is a [`Backend`] whose conversations are driven by the test: it sees what
//! the session sends, pushes events as the harness would, and calls the session's callbacks
//! the way the harness does (tool calls, hooks, questions). It is no substitute for the real
//! harness — the integration tests run that too — but it makes every session rule quick and
//! deterministic to check.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use harness_client::{
    CallContext, Callbacks, CloseReason, ConversationEvent, HarnessError, HookRequest,
    HookResponse, InitInfo, QuestionAnswer, QuestionRequest, Step, StepKey, StepSource, StepStatus,
    StepTarget, ToolCallRequest, ToolOutcome, TrajectoryState, TrajectoryStatus, TurnEnd, Usage,
};
use harness_proto::lh::{HarnessConfig, UsageMetadata, UserInput, user_input};
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc};

use crate::backend::{Backend, ConversationHandle, ConversationSource};

/// The fake harness: a [`Backend`] plus the test's view of every conversation it opened.
#[derive(Clone, Default)]
pub struct FakeHarness {
    state: Arc<Mutex<Vec<FakeConversation>>>,
    opened: Arc<Notify>,
    refuse_next_open: Arc<AtomicBool>,
    /// Which threads share a process (the label of its placement names it).
    isolation: Option<crate::places::Isolation>,
    /// What the harness keeps of each conversation (its saved state): the final snapshot of
    /// every root step, the user's inputs included, returned as history on resume.
    saved: Saved,
    /// Holds opens like a slow boot, until the test opens it (see [`FakeHarness::hold_boots`]).
    gate: Arc<Mutex<Option<Gate>>>,
    /// Holds closes (see [`FakeHarness::hold_closes`]).
    close_gate: Arc<Mutex<Option<Gate>>>,
    /// Holds re-attaches (see [`FakeHarness::hold_reconnects`]).
    reconnect_gate: Arc<Mutex<Option<Gate>>>,
    /// With spares ([`FakeHarness::with_spares`]): how many processes are held ahead of need.
    spares: Option<Arc<AtomicUsize>>,
}

/// A fake spare's hold: the process counts as held until it is dropped.
struct SpareHold(Arc<AtomicUsize>);

impl Drop for SpareHold {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A gate the fake's opens (or closes) wait at, as at a harness that takes long to boot: the
/// test sees them arrive ([`Gate::waiting`]) and lets them through ([`Gate::open`]), so tests
/// of what happens during a wait need no timer.
#[derive(Clone, Default)]
pub struct Gate {
    inner: Arc<GateInner>,
}

#[derive(Default)]
struct GateInner {
    open: AtomicBool,
    opened: Notify,
    arrived: AtomicU64,
    arrival: Notify,
}

impl Gate {
    /// Lets every held open through, and every later one.
    pub fn open(&self) {
        self.inner.open.store(true, Ordering::SeqCst);
        self.inner.opened.notify_waiters();
    }

    /// Waits until `n` opens in all have arrived at the gate.
    pub async fn waiting(&self, n: u64) {
        loop {
            let arrival = self.inner.arrival.notified();
            if self.inner.arrived.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::timeout(Duration::from_secs(10), arrival)
                .await
                .expect("an open arrives at the gate");
        }
    }

    async fn pass(&self) {
        self.inner.arrived.fetch_add(1, Ordering::SeqCst);
        self.inner.arrival.notify_waiters();
        loop {
            let opened = self.inner.opened.notified();
            if self.inner.open.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }
}

type Saved = Arc<Mutex<std::collections::HashMap<String, Vec<Step>>>>;

/// Records `step` (its latest snapshot) in a conversation's saved history.
fn save_step(saved: &Saved, id: &str, step: &Step) {
    let mut saved = saved.lock();
    let history = saved.entry(id.to_owned()).or_default();
    match history.iter_mut().find(|s| s.key == step.key) {
        Some(kept) => *kept = step.clone(),
        None => history.push(step.clone()),
    }
}

impl std::fmt::Debug for FakeHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeHarness")
            .field("conversations", &self.state.lock().len())
            .finish()
    }
}

impl FakeHarness {
    /// A fake with no conversations, whose threads share one process.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fake placing threads on processes as `isolation` says (per owner, per thread),
    /// as a confined backend does; each conversation tells which process it is on
    /// ([`FakeConversation::process`]).
    pub fn isolated(isolation: crate::places::Isolation) -> Self {
        Self {
            isolation: Some(isolation),
            ..Self::default()
        }
    }

    /// This fake, also holding processes ahead of need when asked (as a confined backend with
    /// `prestart_harness` does), which [`FakeHarness::held_spares`] counts.
    pub fn with_spares(mut self) -> Self {
        self.spares = Some(Arc::default());
        self
    }

    /// How many processes are held ahead of need now (spares, claimed or not, whose hold is
    /// not yet dropped).
    pub fn held_spares(&self) -> usize {
        self.spares.as_ref().map_or(0, |n| n.load(Ordering::SeqCst))
    }

    /// The backend to give an agent.
    pub fn backend(&self) -> Backend {
        Backend(Arc::new(self.clone()))
    }

    /// How many conversations were opened so far.
    pub fn opened(&self) -> usize {
        self.state.lock().len()
    }

    /// The `n`th opened conversation (0-based), waiting for it to be opened.
    pub async fn conversation(&self, n: usize) -> FakeConversation {
        loop {
            let notified = self.opened.notified();
            if let Some(c) = self.state.lock().get(n) {
                return c.clone();
            }
            tokio::time::timeout(Duration::from_secs(10), notified)
                .await
                .expect("the session opens a conversation");
        }
    }

    /// Holds every open from now on at a gate, as a harness that boots slowly would.
    pub fn hold_boots(&self) -> Gate {
        let gate = Gate::default();
        *self.gate.lock() = Some(gate.clone());
        gate
    }

    /// Holds every close of a conversation from now on at a gate: a thread asked to hibernate
    /// keeps its live slot until the test opens it.
    pub fn hold_closes(&self) -> Gate {
        let gate = Gate::default();
        *self.close_gate.lock() = Some(gate.clone());
        gate
    }

    /// Holds every re-attach of a conversation's connection from now on at a gate, as a
    /// harness slow to answer would.
    pub fn hold_reconnects(&self) -> Gate {
        let gate = Gate::default();
        *self.reconnect_gate.lock() = Some(gate.clone());
        gate
    }

    /// Makes the next open fail like an init the harness refused.
    pub fn refuse_next_open(&self) {
        self.refuse_next_open.store(true, Ordering::SeqCst);
    }

    /// A new fake harness on the same storage (what a restarted server finds: the
    /// conversations this one saved, none of its connections).
    pub fn restarted(&self) -> Self {
        Self {
            saved: self.saved.clone(),
            ..Self::default()
        }
    }

    /// Loses the saved state of conversation `id`, as a deleted database would.
    pub fn lose(&self, id: &str) {
        self.saved.lock().remove(id);
    }
}

#[async_trait]
impl ConversationSource for FakeHarness {
    fn isolation(&self) -> crate::places::Isolation {
        self.isolation.unwrap_or(crate::places::Isolation::Shared)
    }

    async fn open(
        &self,
        placement: &crate::places::Placement,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Box<dyn ConversationHandle>, HarnessError> {
        let gate = self.gate.lock().clone();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        if self.refuse_next_open.swap(false, Ordering::SeqCst) {
            return Err(HarnessError::InitFailed {
                kind: harness_client::InitRefusal::Other,
                reason: "refused by the fake harness".into(),
            });
        }
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (inputs_tx, inputs_rx) = mpsc::unbounded_channel();
        let id = config.cascade_id().to_owned();
        // The harness resumes what it kept, and refuses to resume what it does not have.
        let history = self.saved.lock().get(&id).cloned();
        let resume = config.session_continuation_mode()
            == harness_proto::lh::harness_config::SessionContinuationMode::Resume;
        if resume && history.is_none() {
            return Err(HarnessError::InitFailed {
                kind: harness_client::InitRefusal::NotFound,
                reason: format!(
                    "Failed to create agent: conversation \"{id}\" not found (cannot resume)"
                ),
            });
        }
        self.saved.lock().entry(id.clone()).or_default();
        let open = Arc::new(AtomicBool::new(true));
        let conversation = FakeConversation {
            process: placement.process.label.clone(),
            workspace: placement.workspace.path(),
            id: id.clone(),
            config: Arc::new(config),
            callbacks,
            events: events_tx.clone(),
            inputs: Arc::new(tokio::sync::Mutex::new(inputs_rx)),
            cancels: Arc::new(Mutex::new(0)),
            open: open.clone(),
            replies: Arc::new(AtomicU64::new(0)),
            kills: Arc::new(Mutex::new(0)),
            saved: self.saved.clone(),
            runs_commands: Arc::new(AtomicBool::new(true)),
            steps_precede_callbacks: Arc::new(AtomicBool::new(false)),
        };
        let cancels = conversation.cancels.clone();
        let kills = conversation.kills.clone();
        let runs_commands = conversation.runs_commands.clone();
        let steps_precede_callbacks = conversation.steps_precede_callbacks.clone();
        self.state.lock().push(conversation);
        self.opened.notify_waiters();
        Ok(Box::new(FakeHandle {
            init: InitInfo {
                conversation_id: id.clone(),
                history: history.unwrap_or_default(),
                cumulative_usage: None,
                sandbox_available: false,
            },
            own_events: events_tx,
            close_gate: self.close_gate.clone(),
            reconnect_gate: self.reconnect_gate.clone(),
            kills,
            saved: self.saved.clone(),
            id,
            events: events_rx,
            inputs: inputs_tx,
            cancels,
            open,
            runs_commands,
            steps_precede_callbacks,
        }))
    }

    async fn reserve(
        &self,
        _place: &crate::places::ProcessPlace,
        _warm_up: Option<harness_client::WarmUp>,
    ) -> Option<Box<dyn Send + Sync>> {
        let held = self.spares.as_ref()?;
        held.fetch_add(1, Ordering::SeqCst);
        Some(Box::new(SpareHold(held.clone())))
    }

    async fn shutdown(&self) {
        for c in self.state.lock().iter() {
            c.open.store(false, Ordering::SeqCst);
        }
    }
}

/// The test's side of one fake conversation.
#[derive(Clone)]
pub struct FakeConversation {
    /// The process it runs on (its tree, or `shared`).
    process: String,
    workspace: std::path::PathBuf,
    id: String,
    config: Arc<HarnessConfig>,
    callbacks: Arc<dyn Callbacks>,
    events: mpsc::UnboundedSender<ConversationEvent>,
    inputs: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<UserInput>>>,
    cancels: Arc<Mutex<usize>>,
    open: Arc<AtomicBool>,
    /// Model replies completed so far (drives the usage totals).
    replies: Arc<AtomicU64>,
    kills: Arc<Mutex<usize>>,
    saved: Saved,
    runs_commands: Arc<AtomicBool>,
    steps_precede_callbacks: Arc<AtomicBool>,
}

impl FakeConversation {
    /// The process it runs on: its directory tree's id (the same for threads that share a
    /// process), or `shared`.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// The thread's workspace.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// The conversation id (root trajectory).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The names of the host tools the session declared when it opened the conversation.
    pub fn declared_tools(&self) -> Vec<String> {
        self.config
            .tools
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// The next user input the session sent (waits for it).
    pub async fn next_input(&self) -> String {
        let mut inputs = self.inputs.lock().await;
        let input = tokio::time::timeout(Duration::from_secs(10), inputs.recv())
            .await
            .expect("the session sends an input")
            .expect("the conversation is open");
        input_text(&input)
    }

    /// Whether another input arrives within `wait`.
    pub async fn input_within(&self, wait: Duration) -> Option<String> {
        let mut inputs = self.inputs.lock().await;
        tokio::time::timeout(wait, inputs.recv())
            .await
            .ok()
            .flatten()
            .map(|i| input_text(&i))
    }

    /// Whether the session still has the conversation open.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// How many cancels the session sent.
    pub fn cancels(&self) -> usize {
        *self.cancels.lock()
    }

    /// How many times the session killed the conversation's process.
    pub fn kills(&self) -> usize {
        *self.kills.lock()
    }

    /// Pushes an event as the harness would (root steps are also kept as its saved history).
    pub fn emit(&self, event: ConversationEvent) {
        if let ConversationEvent::Step(step) = &event
            && step.key.trajectory_id == self.id
        {
            save_step(&self.saved, &self.id, step);
        }
        let _ = self.events.send(event);
    }

    /// A full text step of the root trajectory: one ACTIVE snapshot with the text, then DONE.
    pub fn say(&self, index: u32, text: &str) {
        let mut step = self.step(index, StepSource::Model, StepTarget::User);
        step.text = text.into();
        step.text_delta = text.into();
        self.emit(ConversationEvent::Step(step.clone()));
        step.status = StepStatus::Done;
        step.text_delta = String::new();
        self.emit(ConversationEvent::Step(step));
    }

    /// Part of a root text step still being written: `text` so far, `delta` the new part.
    pub fn say_part(&self, index: u32, text: &str, delta: &str) {
        let mut step = self.step(index, StepSource::Model, StepTarget::User);
        step.text = text.into();
        step.text_delta = delta.into();
        self.emit(ConversationEvent::Step(step));
    }

    /// A text step written with [`Self::say_part`] is complete.
    pub fn step_done(&self, index: u32, text: &str) {
        let mut step = self.step(index, StepSource::Model, StepTarget::User);
        step.text = text.into();
        step.status = StepStatus::Done;
        self.emit(ConversationEvent::Step(step));
    }

    /// The echo of the user input, as the harness sends it first in a turn.
    pub fn echo(&self, index: u32, text: &str) {
        let mut step = self.step(index, StepSource::User, StepTarget::Model);
        step.status = StepStatus::Done;
        step.text = text.into();
        step.text_delta = text.into();
        self.emit(ConversationEvent::Step(step));
    }

    /// A blank root step snapshot to fill in.
    pub fn step(&self, index: u32, source: StepSource, target: StepTarget) -> Step {
        Step {
            key: StepKey::new(self.id.clone(), index),
            status: StepStatus::Active,
            source,
            target,
            ..Step::default()
        }
    }

    /// The root's model reply is complete: a usage update with a larger root usage, as the
    /// harness sends after every model response.
    pub fn reply_done(&self) {
        let total = self.replies.fetch_add(1, Ordering::SeqCst) + 1;
        let usage = UsageMetadata {
            total_token_count: Some(total * 100),
            ..UsageMetadata::default()
        };
        self.emit(ConversationEvent::Usage(Usage {
            total: usage.clone(),
            by_trajectory: vec![(self.id.clone(), usage)],
        }));
    }

    /// The root trajectory starts running.
    pub fn running(&self) {
        self.trajectory(TrajectoryStatus::Running, None);
    }

    /// The turn ends (root idle), optionally with an error.
    pub fn idle(&self, error: Option<&str>) {
        self.trajectory(TrajectoryStatus::Idle, error);
        self.emit(ConversationEvent::TurnEnded(TurnEnd {
            cancelled: false,
            halted: false,
            error: error.map(str::to_owned),
            error_code: None,
            stop_reason: None,
            background_tasks: false,
        }));
    }

    /// Ends the turn as the harness does when the turn left tasks running in the background.
    pub fn waits_for_tasks(&self) {
        self.trajectory(TrajectoryStatus::WaitingForTasks, None);
        self.emit(ConversationEvent::TurnEnded(TurnEnd {
            cancelled: false,
            halted: false,
            error: None,
            error_code: None,
            stop_reason: None,
            background_tasks: true,
        }));
    }

    /// Whether its process runs a command, as the session's checks will see it (at first
    /// `true`, as for a process that cannot tell).
    pub fn set_runs_commands(&self, runs: bool) {
        self.runs_commands.store(runs, Ordering::SeqCst);
    }

    /// Makes the session take this conversation's callbacks as `localharness`'s: each comes
    /// after its call's step, so one that came first waits for it (at first `false`: a test
    /// calls back without steps).
    pub fn set_steps_precede_callbacks(&self, precede: bool) {
        self.steps_precede_callbacks
            .store(precede, Ordering::SeqCst);
    }

    /// A root step of a host tool call `harness_id` to `name` (ACTIVE), as the harness sends
    /// before calling back for it.
    pub fn call_step(&self, index: u32, harness_id: &str, name: &str) {
        let mut step = self.step(index, StepSource::Model, StepTarget::Environment);
        step.action = Some(harness_proto::step::StepAction::Tool(
            harness_proto::step::ToolAction {
                name: name.into(),
                kind: harness_proto::step::ToolKind::Custom {
                    call_id: harness_id.into(),
                },
                arguments: Map::new(),
                result: Map::new(),
            },
        ));
        self.emit(ConversationEvent::Step(step));
    }

    fn trajectory(&self, status: TrajectoryStatus, error: Option<&str>) {
        self.emit(ConversationEvent::Trajectory(TrajectoryState {
            trajectory_id: self.id.clone(),
            parent_trajectory_id: None,
            depth: 0,
            status,
            error: error.map(str::to_owned),
            error_code: None,
            stop_reason: None,
        }));
    }

    /// The connection ends for `reason`.
    pub fn close(&self, reason: CloseReason) {
        self.open.store(false, Ordering::SeqCst);
        self.emit(ConversationEvent::Closed(reason));
    }

    /// Calls a host tool as the harness would; the answer arrives when the session gives it.
    pub fn call_tool(
        &self,
        id: &str,
        name: &str,
        arguments: Value,
    ) -> tokio::task::JoinHandle<ToolOutcome> {
        let callbacks = self.callbacks.clone();
        let ctx = self.ctx();
        let call = ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: arguments.as_object().cloned().unwrap_or_else(Map::new),
        };
        tokio::spawn(async move { callbacks.tool_call(&ctx, call).await })
    }

    /// Sends a hook request as the harness would.
    pub fn hook(&self, request: HookRequest) -> tokio::task::JoinHandle<HookResponse> {
        let callbacks = self.callbacks.clone();
        let ctx = self.ctx();
        tokio::spawn(async move { callbacks.hook(&ctx, request).await })
    }

    /// Asks questions as the harness would for an `ask_question` step.
    pub fn ask(&self, request: QuestionRequest) -> tokio::task::JoinHandle<QuestionAnswer> {
        let callbacks = self.callbacks.clone();
        let ctx = self.ctx();
        tokio::spawn(async move { callbacks.question(&ctx, request).await })
    }

    fn ctx(&self) -> CallContext {
        CallContext {
            conversation_id: self.id.clone(),
            trajectory_id: self.id.clone(),
        }
    }
}

fn input_text(input: &UserInput) -> String {
    input
        .parts
        .iter()
        .map(|p| match &p.part {
            Some(user_input::part::Part::Text(t)) => t.clone(),
            Some(user_input::part::Part::Media(m)) => format!("[media {}]", m.mime_type()),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("")
}

struct FakeHandle {
    saved: Saved,
    id: String,
    init: InitInfo,
    events: mpsc::UnboundedReceiver<ConversationEvent>,
    /// Its own event stream, for the process's death when it is killed.
    own_events: mpsc::UnboundedSender<ConversationEvent>,
    close_gate: Arc<Mutex<Option<Gate>>>,
    reconnect_gate: Arc<Mutex<Option<Gate>>>,
    kills: Arc<Mutex<usize>>,
    inputs: mpsc::UnboundedSender<UserInput>,
    cancels: Arc<Mutex<usize>>,
    open: Arc<AtomicBool>,
    runs_commands: Arc<AtomicBool>,
    steps_precede_callbacks: Arc<AtomicBool>,
}

#[async_trait]
impl ConversationHandle for FakeHandle {
    fn id(&self) -> &str {
        &self.id
    }

    fn init_info(&self) -> &InitInfo {
        &self.init
    }

    async fn send(&mut self, input: UserInput) -> Result<(), HarnessError> {
        if !self.open.load(Ordering::SeqCst) {
            return Err(HarnessError::Closed(CloseReason::ClosedByHost));
        }
        // The harness keeps the user's input as the turn's first step.
        let index = self.saved.lock().get(&self.id).map_or(0, Vec::len);
        let echo = Step {
            key: StepKey {
                trajectory_id: self.id.clone(),
                index: u32::try_from(index).unwrap_or(u32::MAX),
            },
            status: StepStatus::Done,
            source: StepSource::User,
            target: StepTarget::Model,
            text: input_text(&input),
            ..Step::default()
        };
        save_step(&self.saved, &self.id, &echo);
        let _ = self.own_events.send(ConversationEvent::Step(echo));
        self.inputs
            .send(input)
            .map_err(|_| HarnessError::Closed(CloseReason::ClosedByHost))
    }

    fn canceller(&self) -> Arc<dyn Fn() -> bool + Send + Sync> {
        let cancels = self.cancels.clone();
        Arc::new(move || {
            *cancels.lock() += 1;
            true
        })
    }

    async fn next_event(&mut self) -> Option<ConversationEvent> {
        self.events.recv().await
    }

    fn try_next_event(&mut self) -> Option<ConversationEvent> {
        self.events.try_recv().ok()
    }

    async fn reconnect(&mut self) -> Result<InitInfo, HarnessError> {
        let gate = self.reconnect_gate.lock().clone();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        // The process keeps the conversation: a new connection resumes it, with its history.
        if !self.open.load(Ordering::SeqCst) {
            return Err(HarnessError::Closed(CloseReason::ClosedByHost));
        }
        self.init.history = self.saved.lock().get(&self.id).cloned().unwrap_or_default();
        Ok(self.init.clone())
    }

    async fn close(self: Box<Self>) {
        let gate = self.close_gate.lock().clone();
        if let Some(gate) = gate {
            gate.pass().await;
        }
        self.open.store(false, Ordering::SeqCst);
    }

    async fn runs_commands(&self) -> bool {
        self.runs_commands.load(Ordering::SeqCst)
    }

    fn steps_precede_callbacks(&self) -> bool {
        self.steps_precede_callbacks.load(Ordering::SeqCst)
    }

    fn kill_process(&self) {
        *self.kills.lock() += 1;
        self.open.store(false, Ordering::SeqCst);
        let _ = self
            .own_events
            .send(ConversationEvent::Closed(CloseReason::ProcessExited(
                harness_client::ExitInfo {
                    pid: 1,
                    status: "killed by SIGKILL".into(),
                    code: None,
                    stderr_tail: String::new(),
                },
            )));
    }
}
