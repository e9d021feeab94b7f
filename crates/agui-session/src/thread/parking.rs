//! What waits for the client: frontend tool calls, questions, approvals and server tools'
//! interrupts, with the per-turn bookkeeping that goes with them (frontend-tool dedup, the
//! tool-call budget). Owned by the thread's task; callbacks reach it through messages and get
//! their answer on a oneshot channel.

use std::collections::{HashMap, HashSet};

use agui_types::Interrupt;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::activity::Blocked;
use crate::interrupts::InterruptAnswer;
use crate::store::PendingTool;

/// A frontend tool call as the harness makes it: what announcing it ahead of its callback and
/// the callback itself share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallRequest<'a> {
    /// The harness's id of the call.
    pub(crate) harness_id: &'a str,
    /// The tool.
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a Map<String, Value>,
    /// The trajectory (root or subagent) that made it.
    pub(crate) trajectory: &'a str,
}

/// What a frontend tool call receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolAnswer {
    /// The client's result text.
    Result(String),
    /// The client reported a failure (`ToolMessage.error`).
    Error(String),
    /// The user sent a new message instead.
    Abandoned,
    /// The session closed, or the turn was stopped.
    Closed,
}

/// Which kind of interrupt, for logs and for how it blocks its trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InterruptKind {
    Question,
    Approval,
    Tool,
}

/// Why an answer resolved nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResolveError {
    /// No parked request has this id.
    Unknown,
    /// The id names a request of the other kind (an interrupt answer never resolves a frontend
    /// tool, a tool message never resolves an interrupt).
    WrongKind,
}

/// A frontend tool call waiting for a tool message.
struct FrontendCall {
    tool_call_id: String,
    name: String,
    trajectory: String,
    /// The harness's id for the call (its callback carries it).
    harness_id: String,
    /// The callback waiting for the answer; `None` for a call announced ahead of its callback.
    reply: Option<oneshot::Sender<ToolAnswer>>,
}

struct ParkedInterrupt {
    interrupt: Interrupt,
    kind: InterruptKind,
    trajectory: String,
    reply: oneshot::Sender<InterruptAnswer>,
}

/// A frontend tool's first call of the turn, for dedup.
struct Claim {
    arguments: Map<String, Value>,
    outcome: Option<ToolAnswer>,
    waiters: Vec<oneshot::Sender<ToolAnswer>>,
}

/// How a frontend tool call the harness called back for is handled.
pub(crate) enum FrontendCallback {
    /// Parked (or answered early); the answer comes on the callback's channel. `announce`
    /// says whether its events must be shown (false when it was announced ahead of the
    /// callback).
    Parked {
        tool_call_id: String,
        announce: bool,
    },
    /// A repeat of a call this turn: it gets the first call's answer, or a note that the tool
    /// already ran with other arguments, on the callback's channel.
    Repeat,
}

/// The parked requests of a thread and its per-turn tool bookkeeping.
#[derive(Default)]
pub(crate) struct Parking {
    frontend: Vec<FrontendCall>,
    interrupts: Vec<ParkedInterrupt>,
    /// Answers to announced calls that arrived before the harness asked for them.
    answered_early: HashMap<String, ToolAnswer>,
    /// Harness ids of the frontend calls the harness called back for this turn.
    called_back: HashSet<String>,
    claims: HashMap<String, Claim>,
    tool_calls: u32,
    budget_exhausted: bool,
}

impl Parking {
    /// Whether anything waits for the client.
    pub(crate) fn is_parked(&mut self) -> bool {
        self.prune();
        !self.frontend.is_empty() || !self.interrupts.is_empty()
    }

    /// How many questions, approvals and custom interrupts wait for the client.
    pub(crate) fn parked_interrupts(&mut self) -> usize {
        self.prune();
        self.interrupts.len()
    }

    /// What the thread waits for, if anything: an approval before a question or a custom
    /// interrupt, before a frontend tool.
    pub(crate) fn waiting_for(&mut self) -> Option<crate::threads::model::WaitingFor> {
        use crate::threads::model::WaitingFor;
        self.prune();
        let kinds = || self.interrupts.iter().map(|p| p.kind);
        if kinds().any(|k| k == InterruptKind::Approval) {
            Some(WaitingFor::Approval)
        } else if !self.interrupts.is_empty() {
            Some(WaitingFor::Question)
        } else if !self.frontend.is_empty() {
            Some(WaitingFor::FrontendTool)
        } else {
            None
        }
    }

    /// The trajectories with parked requests, and what each waits for.
    pub(crate) fn blocked(&mut self) -> HashMap<String, Blocked> {
        self.prune();
        let mut blocked = HashMap::new();
        for call in &self.frontend {
            blocked
                .entry(call.trajectory.clone())
                .or_insert(Blocked::OnAnswer);
        }
        for parked in &self.interrupts {
            let why = if parked.kind == InterruptKind::Approval {
                Blocked::OnApproval
            } else {
                Blocked::OnAnswer
            };
            let entry = blocked.entry(parked.trajectory.clone()).or_insert(why);
            if why == Blocked::OnApproval {
                *entry = why;
            }
        }
        blocked
    }

    /// The open interrupts, in the order they were raised.
    pub(crate) fn interrupts(&mut self) -> Vec<Interrupt> {
        self.prune();
        self.interrupts
            .iter()
            .map(|p| p.interrupt.clone())
            .collect()
    }

    /// The parked interrupts' ids with the trajectory that raised each.
    pub(crate) fn interrupt_owners(&mut self) -> Vec<(String, String)> {
        self.prune();
        self.interrupts
            .iter()
            .map(|p| (p.interrupt.id.clone(), p.trajectory.clone()))
            .collect()
    }

    /// The harness ids of the parked frontend calls the harness called back for.
    pub(crate) fn called_back_ids(&self) -> impl Iterator<Item = &str> {
        self.frontend
            .iter()
            .filter(|c| c.reply.is_some())
            .map(|c| c.harness_id.as_str())
    }

    /// The frontend tool calls waiting for a tool message, in the order they were parked.
    pub(crate) fn pending_tool_calls(&mut self) -> Vec<PendingTool> {
        self.prune();
        self.frontend
            .iter()
            .map(|c| PendingTool {
                tool_call_id: c.tool_call_id.clone(),
                name: c.name.clone(),
            })
            .collect()
    }

    /// Parks an interrupt of `trajectory`.
    pub(crate) fn park_interrupt(
        &mut self,
        interrupt: Interrupt,
        kind: InterruptKind,
        trajectory: String,
        reply: oneshot::Sender<InterruptAnswer>,
    ) {
        self.interrupts.push(ParkedInterrupt {
            interrupt,
            kind,
            trajectory,
            reply,
        });
    }

    /// Announces a frontend call the harness has not called back for yet (a later call of a
    /// parallel group: the harness asks for a reply's calls one at a time), so the client can
    /// answer the whole group at once. `tool_call_id` is the id shown to the client. False when
    /// it was already shown, or when dedup answers it from an earlier call of the turn (it is
    /// then not shown at all).
    pub(crate) fn announce(
        &mut self,
        call: CallRequest<'_>,
        tool_call_id: impl FnOnce() -> String,
        deduplicate: bool,
    ) -> Option<String> {
        if self.called_back.contains(call.harness_id)
            || self
                .frontend
                .iter()
                .any(|c| c.harness_id == call.harness_id)
        {
            return None;
        }
        if deduplicate && !self.claim(call.name, call.arguments) {
            return None;
        }
        Some(self.show(call, tool_call_id(), None))
    }

    /// Keeps `call` as shown to the client under `tool_call_id`, waiting for its answer (and,
    /// with `reply`, for the harness that asks for it).
    fn show(
        &mut self,
        call: CallRequest<'_>,
        tool_call_id: String,
        reply: Option<oneshot::Sender<ToolAnswer>>,
    ) -> String {
        self.frontend.push(FrontendCall {
            tool_call_id: tool_call_id.clone(),
            name: call.name.to_owned(),
            trajectory: call.trajectory.to_owned(),
            harness_id: call.harness_id.to_owned(),
            reply,
        });
        tool_call_id
    }

    /// The harness called back for the frontend call `harness_id`: parks it (or attaches it to
    /// its announcement, or answers it with an answer that came early), or, with dedup, makes
    /// a repeat wait for the turn's first call of the tool.
    pub(crate) fn frontend_callback(
        &mut self,
        call: CallRequest<'_>,
        tool_call_id: impl FnOnce() -> String,
        deduplicate: bool,
        reply: oneshot::Sender<ToolAnswer>,
    ) -> FrontendCallback {
        let CallRequest {
            harness_id,
            name,
            arguments,
            ..
        } = call;
        self.called_back.insert(harness_id.to_owned());
        if let Some(answer) = self.answered_early.remove(harness_id) {
            if deduplicate {
                self.settle(name, &answer);
            }
            let _ = reply.send(answer);
            return FrontendCallback::Repeat;
        }
        if let Some(call) = self
            .frontend
            .iter_mut()
            .find(|c| c.harness_id == harness_id)
        {
            call.reply = Some(reply);
            return FrontendCallback::Parked {
                tool_call_id: call.tool_call_id.clone(),
                announce: false,
            };
        }
        if deduplicate {
            match self.claims.get_mut(name) {
                None => {}
                Some(claim) => {
                    let same = claim.arguments == *arguments;
                    let first = claim.arguments.clone();
                    let (tx, rx) = oneshot::channel();
                    match &claim.outcome {
                        Some(outcome) => {
                            let _ = tx.send(outcome.clone());
                        }
                        None => claim.waiters.push(tx),
                    }
                    let name = name.to_owned();
                    tokio::spawn(async move {
                        let first_answer = rx.await.unwrap_or(ToolAnswer::Closed);
                        let answer = if same {
                            first_answer
                        } else {
                            ToolAnswer::Result(already_ran(&name, &first, &first_answer))
                        };
                        let _ = reply.send(answer);
                    });
                    return FrontendCallback::Repeat;
                }
            }
            self.claim(name, arguments);
        }
        let tool_call_id = self.show(call, tool_call_id(), Some(reply));
        FrontendCallback::Parked {
            tool_call_id,
            announce: true,
        }
    }

    /// Answers the interrupt `id`.
    pub(crate) fn resolve_interrupt(
        &mut self,
        id: &str,
        answer: InterruptAnswer,
    ) -> Result<(), ResolveError> {
        self.prune();
        let Some(i) = self.interrupts.iter().position(|p| p.interrupt.id == id) else {
            return Err(if self.frontend.iter().any(|c| c.tool_call_id == id) {
                ResolveError::WrongKind
            } else {
                ResolveError::Unknown
            });
        };
        let parked = self.interrupts.remove(i);
        tracing::debug!(interrupt_id = %id, kind = ?parked.kind, status = answer.status(), "interrupt answered");
        let _ = parked.reply.send(answer);
        Ok(())
    }

    /// Answers the frontend tool call `tool_call_id`.
    pub(crate) fn resolve_tool(
        &mut self,
        tool_call_id: &str,
        answer: ToolAnswer,
        deduplicate: bool,
    ) -> Result<(), ResolveError> {
        self.prune();
        let Some(i) = self
            .frontend
            .iter()
            .position(|c| c.tool_call_id == tool_call_id)
        else {
            return Err(
                if self
                    .interrupts
                    .iter()
                    .any(|p| p.interrupt.id == tool_call_id)
                {
                    ResolveError::WrongKind
                } else {
                    ResolveError::Unknown
                },
            );
        };
        let call = self.frontend.remove(i);
        if deduplicate {
            self.settle(&call.name, &answer);
        }
        match call.reply {
            Some(reply) => {
                let _ = reply.send(answer);
            }
            // Announced ahead of its callback: the answer waits for it.
            None => {
                self.answered_early.insert(call.harness_id, answer);
            }
        }
        Ok(())
    }

    /// Releases every parked request with the answer its kind gets when the user moved on.
    pub(crate) fn abandon_all(&mut self) -> usize {
        self.release_all(ToolAnswer::Abandoned, InterruptAnswer::Abandoned)
    }

    /// Fails every parked request (the session closes, or the turn was stopped).
    pub(crate) fn close_all(&mut self) -> usize {
        self.release_all(ToolAnswer::Closed, InterruptAnswer::Closed)
    }

    fn release_all(&mut self, tool: ToolAnswer, interrupt: InterruptAnswer) -> usize {
        let count = self.frontend.len() + self.interrupts.len();
        for call in self.frontend.drain(..) {
            if let Some(reply) = call.reply {
                let _ = reply.send(tool.clone());
            }
        }
        for parked in self.interrupts.drain(..) {
            let _ = parked.reply.send(interrupt.clone());
        }
        count
    }

    /// Starts a new turn: forgets dedup claims, early answers and callbacks of the last one,
    /// and resets the tool budget.
    pub(crate) fn new_turn(&mut self) {
        self.claims.clear();
        self.answered_early.clear();
        self.called_back.clear();
        self.tool_calls = 0;
        self.budget_exhausted = false;
        // Announced calls the harness can no longer ask for (their turn is over).
        self.frontend.retain(|c| c.reply.is_some());
    }

    /// Counts a tool call against the turn's budget: false once it is exceeded. `Some(true)`
    /// in the second field the first time, when the turn must be stopped.
    pub(crate) fn count_tool_call(&mut self, max: u32) -> (bool, bool) {
        self.tool_calls += 1;
        if self.tool_calls <= max {
            return (true, false);
        }
        let first = !self.budget_exhausted;
        self.budget_exhausted = true;
        (false, first)
    }

    /// Whether the current turn hit the tool budget.
    pub(crate) fn budget_exhausted(&self) -> bool {
        self.budget_exhausted
    }

    /// Claims a frontend tool for the turn's first call of it; false if it was claimed before.
    fn claim(&mut self, name: &str, arguments: &Map<String, Value>) -> bool {
        if self.claims.contains_key(name) {
            return false;
        }
        self.claims.insert(
            name.to_owned(),
            Claim {
                arguments: arguments.clone(),
                outcome: None,
                waiters: Vec::new(),
            },
        );
        true
    }

    /// Records the first call's answer and hands it to every repeat waiting for it.
    fn settle(&mut self, name: &str, answer: &ToolAnswer) {
        if let Some(claim) = self.claims.get_mut(name) {
            claim.outcome = Some(answer.clone());
            for waiter in claim.waiters.drain(..) {
                let _ = waiter.send(answer.clone());
            }
        }
    }

    /// Drops requests whose caller is gone (the harness connection closed and aborted the
    /// callback); announced calls have no caller yet and stay.
    fn prune(&mut self) {
        self.frontend
            .retain(|c| c.reply.as_ref().is_none_or(|r| !r.is_closed()));
        self.interrupts.retain(|p| !p.reply.is_closed());
    }
}

/// What the model is told when a frontend tool it called again with other arguments had
/// already run this turn.
pub(crate) fn already_ran(
    name: &str,
    arguments: &Map<String, Value>,
    first: &ToolAnswer,
) -> String {
    let returned = match first {
        ToolAnswer::Result(text) => text.clone(),
        ToolAnswer::Error(e) => format!("an error: {e}"),
        ToolAnswer::Abandoned => crate::interrupts::ABANDONED_TEXT.to_owned(),
        ToolAnswer::Closed => "nothing (the session closed)".to_owned(),
    };
    format!(
        "{name} already ran in this turn with arguments {} and returned {returned}. It was not run again. Tell the \
         user the result; only call it again on a later turn if they ask for another change.",
        serde_json::to_string(arguments).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    /// A root-trajectory frontend callback for harness call `harness_id` (deduplicated), which
    /// would be given tool call id `call_id`; returns what parking did and the answer's receiver.
    fn call_back(
        parking: &mut Parking,
        harness_id: &str,
        call_id: &str,
        name: &str,
        arguments: Value,
    ) -> (FrontendCallback, oneshot::Receiver<ToolAnswer>) {
        let (tx, rx) = oneshot::channel();
        let arguments = args(arguments);
        let call = CallRequest {
            harness_id,
            name,
            arguments: &arguments,
            trajectory: "root",
        };
        let handled = parking.frontend_callback(call, || call_id.into(), true, tx);
        (handled, rx)
    }

    fn interrupt(id: &str) -> Interrupt {
        Interrupt {
            id: id.into(),
            reason: "r".into(),
            ..Interrupt::default()
        }
    }

    #[tokio::test]
    async fn answers_reach_only_their_own_kind() {
        let mut parking = Parking::default();
        let (_, mut tool) = call_back(&mut parking, "h1", "call-1", "pick", json!({}));
        let (tx, mut question) = oneshot::channel();
        parking.park_interrupt(
            interrupt("int-1"),
            InterruptKind::Question,
            "root".into(),
            tx,
        );
        assert_eq!(
            parking.resolve_interrupt("call-1", InterruptAnswer::Cancelled),
            Err(ResolveError::WrongKind)
        );
        assert_eq!(
            parking.resolve_tool("int-1", ToolAnswer::Result("x".into()), true),
            Err(ResolveError::WrongKind)
        );
        assert!(tool.try_recv().is_err() && question.try_recv().is_err());
        assert_eq!(
            parking.resolve_tool("call-1", ToolAnswer::Result("x".into()), true),
            Ok(())
        );
        assert_eq!(tool.await.unwrap(), ToolAnswer::Result("x".into()));
        assert_eq!(
            parking.resolve_interrupt("int-1", InterruptAnswer::Cancelled),
            Ok(())
        );
        assert_eq!(question.await.unwrap(), InterruptAnswer::Cancelled);
        assert_eq!(
            parking.resolve_interrupt("nope", InterruptAnswer::Cancelled),
            Err(ResolveError::Unknown)
        );
    }

    #[tokio::test]
    async fn an_announced_call_answered_early_gets_its_answer_when_the_harness_asks() {
        let mut parking = Parking::default();
        let shown = parking.announce(
            CallRequest {
                harness_id: "h2",
                name: "clock",
                arguments: &args(json!({"c": 1})),
                trajectory: "root",
            },
            || "h2".into(),
            true,
        );
        assert_eq!(shown.as_deref(), Some("h2"));
        assert_eq!(
            parking.announce(
                CallRequest {
                    harness_id: "h2",
                    name: "clock",
                    arguments: &args(json!({})),
                    trajectory: "root"
                },
                || "again".into(),
                true,
            ),
            None,
            "announced once"
        );
        assert_eq!(
            parking.pending_tool_calls().len(),
            1,
            "an announced call is pending"
        );
        parking
            .resolve_tool("h2", ToolAnswer::Result("9:30".into()), true)
            .unwrap();
        assert!(!parking.is_parked());
        let (handled, rx) = call_back(&mut parking, "h2", "unused", "clock", json!({"c": 1}));
        assert!(matches!(handled, FrontendCallback::Repeat));
        assert_eq!(rx.await.unwrap(), ToolAnswer::Result("9:30".into()));
    }

    #[tokio::test]
    async fn repeats_of_a_frontend_tool_share_its_answer_or_learn_it_already_ran() {
        let mut parking = Parking::default();
        let (_, _first) = call_back(&mut parking, "h1", "c1", "pick", json!({"a": 1}));
        let (handled, same) = call_back(&mut parking, "h2", "c2", "pick", json!({"a": 1}));
        assert!(matches!(handled, FrontendCallback::Repeat));
        let (_, other) = call_back(&mut parking, "h3", "c3", "pick", json!({"a": 2}));
        parking
            .resolve_tool("c1", ToolAnswer::Result("red".into()), true)
            .unwrap();
        assert_eq!(same.await.unwrap(), ToolAnswer::Result("red".into()));
        let ToolAnswer::Result(note) = other.await.unwrap() else {
            panic!()
        };
        assert!(
            note.contains("already ran") && note.contains("red"),
            "{note}"
        );
    }

    #[tokio::test]
    async fn a_request_whose_caller_is_gone_no_longer_counts_and_the_budget_stops_once() {
        let mut parking = Parking::default();
        let (tx, rx) = oneshot::channel();
        parking.park_interrupt(interrupt("i"), InterruptKind::Approval, "root".into(), tx);
        assert_eq!(parking.blocked().get("root"), Some(&Blocked::OnApproval));
        drop(rx);
        assert!(!parking.is_parked());
        assert_eq!(parking.count_tool_call(1), (true, false));
        assert_eq!(parking.count_tool_call(1), (false, true));
        assert_eq!(parking.count_tool_call(1), (false, false));
        assert!(parking.budget_exhausted());
        parking.new_turn();
        assert!(!parking.budget_exhausted());
    }
}
