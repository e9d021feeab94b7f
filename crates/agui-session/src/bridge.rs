//! The meeting point of the harness side (callbacks, which may run with no client attached)
//! and the client side (the run that streams events): the queue of events callbacks produce,
//! the registry of parked requests, the shared state and context of the thread, and per-turn
//! tool bookkeeping (frontend-tool dedup, the tool-call budget).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use agui_translate::ToolCallIds;
use agui_types::{Context, Event, Interrupt};
use serde_json::{Map, Value};
use tokio::sync::{Notify, oneshot};

use crate::activity::Blocked;
use crate::interrupts::InterruptAnswer;
use crate::store::PendingTool;

/// What a parked frontend tool receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolAnswer {
    /// The client's result text.
    Result(String),
    /// The client reported a failure (`ToolMessage.error`).
    Error(String),
    /// The user sent a new message instead.
    Abandoned,
    /// The session closed.
    Closed,
}

/// A request parked until a later run answers it.
pub(crate) enum Parked {
    /// A frontend tool call, answered by a `ToolMessage` with this id.
    FrontendTool {
        tool_call_id: String,
        name: String,
        /// The trajectory the call blocks.
        trajectory: String,
        reply: oneshot::Sender<ToolAnswer>,
    },
    /// An interrupt (question, approval, or a server tool's own), answered by `resume` entries
    /// or `forwardedProps.command`.
    Interrupt {
        interrupt: Interrupt,
        kind: InterruptKind,
        /// The trajectory the request blocks.
        trajectory: String,
        reply: oneshot::Sender<InterruptAnswer>,
    },
}

/// Which kind of interrupt, for logs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum InterruptKind {
    Question,
    Approval,
    Tool,
}

impl Parked {
    fn id(&self) -> &str {
        match self {
            Self::FrontendTool { tool_call_id, .. } => tool_call_id,
            Self::Interrupt { interrupt, .. } => &interrupt.id,
        }
    }

    fn trajectory(&self) -> &str {
        match self {
            Self::FrontendTool { trajectory, .. } | Self::Interrupt { trajectory, .. } => {
                trajectory
            }
        }
    }
}

/// Why an answer did not resolve anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResolveError {
    /// No parked request has this id.
    Unknown,
    /// The id names a request of the other kind (an interrupt answer never resolves a frontend
    /// tool, a tool message never resolves an interrupt).
    WrongKind,
}

/// A frontend tool's claim in the current turn, for dedup.
struct Claim {
    arguments: Map<String, Value>,
    outcome: Option<ToolAnswer>,
    waiters: Vec<oneshot::Sender<ToolAnswer>>,
}

/// The outcome of claiming a frontend tool for a call.
pub(crate) enum ClaimResult {
    /// First call this turn: dispatch it to the client.
    First,
    /// An identical call already ran (or is running): use its answer.
    Same(oneshot::Receiver<ToolAnswer>),
    /// A call with other arguments already ran (or is running): tell the model, with its
    /// first arguments, once it has the answer.
    Different {
        first_arguments: Map<String, Value>,
        answer: oneshot::Receiver<ToolAnswer>,
    },
}

/// An event queued for the client, with the trajectory a tool call was made in (so the run
/// can attach it to that trajectory's open reply).
pub(crate) struct Queued {
    pub(crate) trajectory: Option<String>,
    pub(crate) event: Event,
}

#[derive(Default)]
struct State {
    events: VecDeque<Queued>,
    parked: Vec<Parked>,
    shared_state: Value,
    /// A server write the client has not received yet (its copy predates it).
    state_undelivered: bool,
    context: Vec<Context>,
    claims: HashMap<String, Claim>,
    tool_calls: u32,
    budget_exhausted: bool,
    /// Frontend calls announced from their steps before the harness called back for them
    /// (the harness calls parallel calls one at a time), by harness call id: the answer waits
    /// here for the callback.
    announced: HashMap<String, oneshot::Receiver<ToolAnswer>>,
    /// Harness ids of the frontend calls the harness called back for this turn.
    called_back: HashSet<String>,
    canceller: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

/// Shared by a session's callbacks and its runs.
pub(crate) struct Bridge {
    thread_id: String,
    /// The AG-UI tool call ids used on this thread, by the session's own calls and by every
    /// turn's translator (which shares it): a harness id is used unless already used here.
    tool_call_ids: ToolCallIds,
    state: Mutex<State>,
    changed: Notify,
}

impl Bridge {
    pub(crate) fn new(thread_id: String) -> Arc<Self> {
        Arc::new(Self {
            thread_id,
            tool_call_ids: ToolCallIds::new(),
            state: Mutex::new(State {
                shared_state: Value::Object(Map::new()),
                ..State::default()
            }),
            changed: Notify::new(),
        })
    }

    pub(crate) fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes the run (if one is attached) after a change.
    fn notify(&self) {
        self.changed.notify_one();
    }

    /// Resolves when something changed since the last wake-up (cancel-safe).
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Queues events for the client (delivered by the current run, or the next one).
    pub(crate) fn emit(&self, events: impl IntoIterator<Item = Event>) {
        self.emit_in(None, events);
    }

    /// Queues events produced by a callback of `trajectory` (a tool call made there).
    pub(crate) fn emit_in(
        &self,
        trajectory: Option<&str>,
        events: impl IntoIterator<Item = Event>,
    ) {
        self.lock().queue(trajectory, events);
        self.notify();
    }

    /// Takes every queued event. A delivered snapshot means the client is up to date again.
    pub(crate) fn drain_events(&self) -> Vec<Queued> {
        let mut state = self.lock();
        let events: Vec<Queued> = state.events.drain(..).collect();
        if events
            .iter()
            .any(|q| matches!(q.event, Event::StateSnapshot(_)))
        {
            state.state_undelivered = false;
        }
        events
    }

    /// Parks a frontend tool call of `trajectory` until a tool message answers it.
    pub(crate) fn park_tool(
        &self,
        tool_call_id: String,
        name: String,
        trajectory: &str,
    ) -> oneshot::Receiver<ToolAnswer> {
        let answer = self.lock().park_tool(tool_call_id, name, trajectory);
        self.notify();
        answer
    }

    /// Announces a frontend call the harness has not called back for yet (a later call of a
    /// parallel group, which the harness asks for only once the earlier ones are answered):
    /// its events are queued and it is parked like a called-back one, so the client answers
    /// the whole group at once; the answer waits for the callback
    /// ([`Bridge::callback_arrived`]). False when the call was already shown, or when dedup
    /// answers it from an earlier call of the turn (it is then not shown at all).
    pub(crate) fn announce_tool(
        &self,
        harness_id: &str,
        name: &str,
        arguments: &Map<String, Value>,
        trajectory: &str,
        deduplicate: bool,
    ) -> bool {
        let mut state = self.lock();
        if state.announced.contains_key(harness_id) || state.called_back.contains(harness_id) {
            return false;
        }
        if deduplicate && !matches!(state.claim(name, arguments), ClaimResult::First) {
            return false;
        }
        let id = self.tool_call_id(harness_id);
        let answer = state.park_tool(id.clone(), name.to_owned(), trajectory);
        state.announced.insert(harness_id.to_owned(), answer);
        state.queue(Some(trajectory), tool_call_events(&id, name, arguments));
        drop(state);
        tracing::debug!(thread_id = %self.thread_id, tool = %name, tool_call_id = %id, "frontend tool announced ahead of its callback");
        self.notify();
        true
    }

    /// Records the harness's callback for the frontend call `harness_id`; if the call was
    /// announced ahead of it, the answer to wait for.
    pub(crate) fn callback_arrived(
        &self,
        harness_id: &str,
    ) -> Option<oneshot::Receiver<ToolAnswer>> {
        let mut state = self.lock();
        let announced = state.announced.remove(harness_id);
        if announced.is_none() {
            state.called_back.insert(harness_id.to_owned());
        }
        announced
    }

    /// Parks an interrupt of `trajectory` until a resume answers it.
    pub(crate) fn park_interrupt(
        &self,
        interrupt: Interrupt,
        kind: InterruptKind,
        trajectory: &str,
    ) -> oneshot::Receiver<InterruptAnswer> {
        let (reply, answer) = oneshot::channel();
        tracing::debug!(thread_id = %self.thread_id, interrupt_id = %interrupt.id, reason = %interrupt.reason, "parking an interrupt");
        self.lock().parked.push(Parked::Interrupt {
            interrupt,
            kind,
            trajectory: trajectory.to_owned(),
            reply,
        });
        self.notify();
        answer
    }

    /// Whether anything waits for the client.
    pub(crate) fn is_parked(&self) -> bool {
        let mut state = self.lock();
        prune(&mut state.parked);
        !state.parked.is_empty()
    }

    /// The trajectories with parked requests, and what each waits for.
    pub(crate) fn blocked_trajectories(&self) -> HashMap<String, Blocked> {
        let mut state = self.lock();
        prune(&mut state.parked);
        let mut blocked = HashMap::new();
        for parked in &state.parked {
            let why = match parked {
                Parked::Interrupt {
                    kind: InterruptKind::Approval,
                    ..
                } => Blocked::OnApproval,
                _ => Blocked::OnAnswer,
            };
            let entry = blocked.entry(parked.trajectory().to_owned()).or_insert(why);
            if why == Blocked::OnApproval {
                *entry = why;
            }
        }
        blocked
    }

    /// The open interrupts, in the order they were raised.
    pub(crate) fn interrupts(&self) -> Vec<Interrupt> {
        self.parked_where(|p| match p {
            Parked::Interrupt { interrupt, .. } => Some(interrupt.clone()),
            Parked::FrontendTool { .. } => None,
        })
    }

    /// The frontend tool calls waiting for a tool message.
    pub(crate) fn pending_tool_calls(&self) -> Vec<PendingTool> {
        self.parked_where(|p| match p {
            Parked::FrontendTool {
                tool_call_id, name, ..
            } => Some(PendingTool {
                tool_call_id: tool_call_id.clone(),
                name: name.clone(),
            }),
            Parked::Interrupt { .. } => None,
        })
    }

    /// What `pick` takes from each live parked request, in the order they were parked.
    fn parked_where<T>(&self, pick: impl FnMut(&Parked) -> Option<T>) -> Vec<T> {
        let mut state = self.lock();
        prune(&mut state.parked);
        state.parked.iter().filter_map(pick).collect()
    }

    /// Answers the interrupt `id`.
    pub(crate) fn resolve_interrupt(
        &self,
        id: &str,
        answer: InterruptAnswer,
    ) -> Result<(), ResolveError> {
        if let Parked::Interrupt {
            reply,
            interrupt,
            kind,
            ..
        } = self.take(id, true)?
        {
            tracing::debug!(thread_id = %self.thread_id, interrupt_id = %interrupt.id, ?kind, status = answer.status(), "interrupt answered");
            let _ = reply.send(answer);
        }
        Ok(())
    }

    /// Answers the frontend tool call `tool_call_id`.
    pub(crate) fn resolve_tool(
        &self,
        tool_call_id: &str,
        answer: ToolAnswer,
    ) -> Result<(), ResolveError> {
        if let Parked::FrontendTool { reply, .. } = self.take(tool_call_id, false)? {
            let _ = reply.send(answer);
        }
        Ok(())
    }

    /// Removes the parked request `id` if it is of the kind asked for (an interrupt or a
    /// frontend tool call): each answer channel resolves only its own kind.
    fn take(&self, id: &str, interrupt: bool) -> Result<Parked, ResolveError> {
        let mut state = self.lock();
        prune(&mut state.parked);
        let index = state
            .parked
            .iter()
            .position(|p| p.id() == id)
            .ok_or(ResolveError::Unknown)?;
        if matches!(state.parked[index], Parked::Interrupt { .. }) != interrupt {
            return Err(ResolveError::WrongKind);
        }
        Ok(state.parked.remove(index))
    }

    /// Releases every parked request with the answer its kind gets when the user moved on.
    pub(crate) fn abandon_all(&self) -> usize {
        self.release_all(ToolAnswer::Abandoned, InterruptAnswer::Abandoned)
    }

    /// Fails every parked request because the session is closing.
    pub(crate) fn close_all(&self) -> usize {
        self.release_all(ToolAnswer::Closed, InterruptAnswer::Closed)
    }

    fn release_all(&self, tool: ToolAnswer, interrupt: InterruptAnswer) -> usize {
        let parked: Vec<Parked> = std::mem::take(&mut self.lock().parked);
        let count = parked.len();
        for p in parked {
            match p {
                Parked::FrontendTool { reply, .. } => {
                    let _ = reply.send(tool.clone());
                }
                Parked::Interrupt { reply, .. } => {
                    let _ = reply.send(interrupt.clone());
                }
            }
        }
        count
    }

    /// Adopts the client's state at the start of a run, unless the server wrote a newer one
    /// the client has not received (its copy predates that write).
    pub(crate) fn adopt_client_state(&self, state: Option<&Value>) {
        let mut s = self.lock();
        if s.state_undelivered {
            return;
        }
        s.shared_state = match state {
            Some(Value::Object(map)) => Value::Object(map.clone()),
            _ => Value::Object(Map::new()),
        };
    }

    /// A copy of the shared state.
    pub(crate) fn shared_state(&self) -> Value {
        self.lock().shared_state.clone()
    }

    /// Replaces the shared state and queues a `STATE_SNAPSHOT` for the client.
    pub(crate) fn set_shared_state(&self, state: Value) {
        self.lock().shared_state = state.clone();
        self.emit([Event::state_snapshot(state)]);
    }

    /// Replaces the run's context.
    pub(crate) fn set_context(&self, context: Vec<Context>) {
        self.lock().context = context;
    }

    /// A copy of the run's context.
    pub(crate) fn context(&self) -> Vec<Context> {
        self.lock().context.clone()
    }

    /// Starts a new turn: forgets dedup claims and calls announced ahead of a callback that
    /// can no longer come, and resets the tool budget.
    pub(crate) fn new_turn(&self) {
        let mut state = self.lock();
        state.claims.clear();
        state.announced.clear();
        state.called_back.clear();
        state.tool_calls = 0;
        state.budget_exhausted = false;
    }

    /// Claims a frontend tool for a call (see [`ClaimResult`]).
    pub(crate) fn claim(&self, name: &str, arguments: &Map<String, Value>) -> ClaimResult {
        self.lock().claim(name, arguments)
    }

    /// Records the first call's answer and hands it to every repeat waiting for it.
    pub(crate) fn settle_claim(&self, name: &str, answer: &ToolAnswer) {
        let mut state = self.lock();
        if let Some(claim) = state.claims.get_mut(name) {
            claim.outcome = Some(answer.clone());
            for waiter in claim.waiters.drain(..) {
                let _ = waiter.send(answer.clone());
            }
        }
    }

    /// Counts a tool call against the turn's budget; returns false once it is exceeded (the
    /// first time, the turn is cancelled).
    pub(crate) fn count_tool_call(&self, max: u32) -> bool {
        let mut state = self.lock();
        state.tool_calls += 1;
        if state.tool_calls <= max {
            return true;
        }
        if !state.budget_exhausted {
            state.budget_exhausted = true;
            if let Some(cancel) = &state.canceller
                && !cancel()
            {
                tracing::warn!(thread_id = %self.thread_id, "could not cancel the turn that ran out of tool calls");
            }
            tracing::warn!(thread_id = %self.thread_id, max, "the turn ran out of tool calls; stopping it");
        }
        false
    }

    /// Whether the current turn hit the tool budget.
    pub(crate) fn budget_exhausted(&self) -> bool {
        self.lock().budget_exhausted
    }

    /// How the budget hook stops the turn.
    pub(crate) fn set_canceller(&self, canceller: Option<Arc<dyn Fn() -> bool + Send + Sync>>) {
        self.lock().canceller = canceller;
    }

    /// The AG-UI id of a tool call the session shows itself: the harness's id unless it was
    /// used before on this thread, else a fresh UUID ([`ToolCallIds::assign`]).
    pub(crate) fn tool_call_id(&self, harness_id: &str) -> String {
        self.tool_call_ids
            .assign(Some(harness_id), || uuid::Uuid::new_v4().to_string())
    }

    /// The thread's record of used tool call ids, for each turn's translator to share.
    pub(crate) fn tool_call_ids(&self) -> ToolCallIds {
        self.tool_call_ids.clone()
    }
}

impl State {
    fn queue(&mut self, trajectory: Option<&str>, events: impl IntoIterator<Item = Event>) {
        for event in events {
            if matches!(event, Event::StateSnapshot(_)) {
                self.state_undelivered = true;
            }
            self.events.push_back(Queued {
                trajectory: trajectory.map(str::to_owned),
                event,
            });
        }
    }

    fn park_tool(
        &mut self,
        tool_call_id: String,
        name: String,
        trajectory: &str,
    ) -> oneshot::Receiver<ToolAnswer> {
        let (reply, answer) = oneshot::channel();
        self.parked.push(Parked::FrontendTool {
            tool_call_id,
            name,
            trajectory: trajectory.to_owned(),
            reply,
        });
        answer
    }

    fn claim(&mut self, name: &str, arguments: &Map<String, Value>) -> ClaimResult {
        let Some(claim) = self.claims.get_mut(name) else {
            self.claims.insert(
                name.to_owned(),
                Claim {
                    arguments: arguments.clone(),
                    outcome: None,
                    waiters: Vec::new(),
                },
            );
            return ClaimResult::First;
        };
        let (tx, rx) = oneshot::channel();
        match &claim.outcome {
            Some(outcome) => {
                let _ = tx.send(outcome.clone());
            }
            None => claim.waiters.push(tx),
        }
        if claim.arguments == *arguments {
            ClaimResult::Same(rx)
        } else {
            ClaimResult::Different {
                first_arguments: claim.arguments.clone(),
                answer: rx,
            }
        }
    }
}

/// `TOOL_CALL_START/ARGS/END` for a call the session shows itself; the run attaches it to the
/// trajectory's open reply when it delivers it.
pub(crate) fn tool_call_events(id: &str, name: &str, arguments: &Map<String, Value>) -> [Event; 3] {
    [
        Event::tool_call_start(id, name, None),
        Event::tool_call_args(id, serde_json::to_string(arguments).unwrap_or_default()),
        Event::tool_call_end(id),
    ]
}

/// Drops requests whose waiter is gone (the harness connection closed and aborted the callback).
fn prune(parked: &mut Vec<Parked>) {
    parked.retain(|p| match p {
        Parked::FrontendTool { reply, .. } => !reply.is_closed(),
        Parked::Interrupt { reply, .. } => !reply.is_closed(),
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn answers_reach_only_their_own_kind() {
        let bridge = Bridge::new("t".into());
        let tool = bridge.park_tool("call-1".into(), "pick".into(), "root");
        let question = bridge.park_interrupt(
            Interrupt {
                id: "int-1".into(),
                reason: "x".into(),
                ..Default::default()
            },
            InterruptKind::Tool,
            "root",
        );
        assert_eq!(
            bridge.resolve_interrupt("call-1", InterruptAnswer::Cancelled),
            Err(ResolveError::WrongKind)
        );
        assert_eq!(
            bridge.resolve_tool("int-1", ToolAnswer::Result("x".into())),
            Err(ResolveError::WrongKind)
        );
        assert_eq!(
            bridge.resolve_tool("nope", ToolAnswer::Result("x".into())),
            Err(ResolveError::Unknown)
        );
        assert_eq!(bridge.interrupts().len(), 1);
        assert_eq!(
            bridge.pending_tool_calls(),
            [PendingTool {
                tool_call_id: "call-1".into(),
                name: "pick".into()
            }]
        );
        bridge
            .resolve_tool("call-1", ToolAnswer::Result("red".into()))
            .unwrap();
        assert_eq!(tool.await.unwrap(), ToolAnswer::Result("red".into()));
        bridge
            .resolve_interrupt("int-1", InterruptAnswer::Resolved(json!(1)))
            .unwrap();
        assert_eq!(question.await.unwrap(), InterruptAnswer::Resolved(json!(1)));
        assert!(!bridge.is_parked());
    }

    #[tokio::test]
    async fn abandoning_releases_each_kind_with_its_answer() {
        let bridge = Bridge::new("t".into());
        let tool = bridge.park_tool("c".into(), "pick".into(), "root");
        let interrupt = bridge.park_interrupt(
            Interrupt {
                id: "i".into(),
                ..Default::default()
            },
            InterruptKind::Approval,
            "root",
        );
        assert_eq!(bridge.abandon_all(), 2);
        assert_eq!(tool.await.unwrap(), ToolAnswer::Abandoned);
        assert_eq!(interrupt.await.unwrap(), InterruptAnswer::Abandoned);
    }

    #[tokio::test]
    async fn a_request_whose_caller_is_gone_no_longer_counts() {
        let bridge = Bridge::new("t".into());
        drop(bridge.park_tool("c".into(), "pick".into(), "root"));
        assert!(!bridge.is_parked());
    }

    #[tokio::test]
    async fn repeats_of_a_frontend_tool_share_its_answer() {
        let bridge = Bridge::new("t".into());
        assert!(matches!(
            bridge.claim("pick", &args(json!({"a": 1}))),
            ClaimResult::First
        ));
        let ClaimResult::Same(same) = bridge.claim("pick", &args(json!({"a": 1}))) else {
            panic!()
        };
        let ClaimResult::Different {
            first_arguments,
            answer,
        } = bridge.claim("pick", &args(json!({"a": 2})))
        else {
            panic!()
        };
        assert_eq!(first_arguments, args(json!({"a": 1})));
        bridge.settle_claim("pick", &ToolAnswer::Result("done".into()));
        assert_eq!(same.await.unwrap(), ToolAnswer::Result("done".into()));
        assert_eq!(answer.await.unwrap(), ToolAnswer::Result("done".into()));
        let ClaimResult::Same(late) = bridge.claim("pick", &args(json!({"a": 1}))) else {
            panic!()
        };
        assert_eq!(late.await.unwrap(), ToolAnswer::Result("done".into()));
        bridge.new_turn();
        assert!(matches!(
            bridge.claim("pick", &args(json!({"a": 1}))),
            ClaimResult::First
        ));
    }

    #[test]
    fn the_budget_cancels_the_turn_once() {
        let bridge = Bridge::new("t".into());
        let cancels = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = cancels.clone();
        bridge.set_canceller(Some(Arc::new(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            true
        })));
        assert!(bridge.count_tool_call(2) && bridge.count_tool_call(2));
        assert!(!bridge.count_tool_call(2) && !bridge.count_tool_call(2));
        assert_eq!(cancels.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(bridge.budget_exhausted());
        bridge.new_turn();
        assert!(!bridge.budget_exhausted() && bridge.count_tool_call(2));
    }

    #[test]
    fn client_state_does_not_overwrite_an_undelivered_server_write() {
        let bridge = Bridge::new("t".into());
        bridge.adopt_client_state(Some(&json!({"a": 1})));
        assert_eq!(bridge.shared_state(), json!({"a": 1}));
        bridge.set_shared_state(json!({"a": 2}));
        bridge.adopt_client_state(Some(&json!({"a": 1})));
        assert_eq!(
            bridge.shared_state(),
            json!({"a": 2}),
            "the client's copy predates the write"
        );
        assert_eq!(bridge.drain_events().len(), 1);
        bridge.adopt_client_state(Some(&json!({"a": 3})));
        assert_eq!(bridge.shared_state(), json!({"a": 3}));
        bridge.adopt_client_state(Some(&json!(7)));
        assert_eq!(
            bridge.shared_state(),
            json!({}),
            "a non-object state is read as empty"
        );
    }

    #[test]
    fn harness_call_ids_are_reused_only_once() {
        let bridge = Bridge::new("t".into());
        assert_eq!(bridge.tool_call_id("abc"), "abc");
        assert_ne!(bridge.tool_call_id("abc"), "abc");
        assert_ne!(bridge.tool_call_id(""), "");
    }
}
