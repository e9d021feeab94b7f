//! When a turn is over: the root trajectory going idle (or waiting only for tasks it left running
//! in the background), unless the harness is about to wake it again for a subagent that finished
//! during the turn.
//!
//! A subagent that goes idle sends its parent a system message (`Subagent <id> has gone idle.
//! …`), which wakes the parent. Two orders of events make the root report FULLY_IDLE although
//! the harness then runs it again, with no input from the host:
//!
//! - the subagent went idle while the root was still producing its own reply, and the root went
//!   idle before taking the message in: the message is certain to come, as a new RUNNING period;
//! - the root took the message in while still running (the subagent finished before the root
//!   ever reported WAITING_FOR_SUBAGENTS for it): the wake-up the message scheduled can still
//!   fire after the root went idle, and the harness then calls the model once more (observed in
//!   about one such turn out of ten, 0–5 ms after the idle).
//!
//! Ending the turn at that idle would leave the harness's next reply outside the turn that
//! caused it, so the end is held until the root runs again (the turn goes on) or, when no wake-up
//! comes, until a bound passes ([`UNANNOUNCED_BOUND`], [`STRAY_WAKE_GRACE`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use harness_proto::step::{Step, StepSource, StepStatus};

use crate::events::{TrajectoryState, TrajectoryStatus, TurnEnd};

/// How long an idle root is held when a subagent's idle message has not reached it yet: the
/// message comes (it is how the harness reports the subagent's result), so the bound only guards
/// against a harness that stops sending it.
pub(crate) const UNANNOUNCED_BOUND: Duration = Duration::from_secs(10);

/// How long an idle root is held when the harness may wake it once more (the second order in the
/// module documentation): a few milliseconds are observed; the grace leaves room for a loaded
/// machine and costs only turns in which a subagent finished before its parent's reply.
pub(crate) const STRAY_WAKE_GRACE: Duration = Duration::from_millis(200);

/// What a trajectory change means for the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnSignal {
    /// The turn is over.
    Ended(TurnEnd),
    /// The root is idle, but the harness is expected to run it again: `end` stands unless the
    /// root runs again within `within`.
    IdleAwaitingWake { end: TurnEnd, within: Duration },
    /// The root runs (again): a held end is void.
    Running,
}

/// A direct subagent of the root, while it runs.
#[derive(Debug, Default)]
struct Child {
    /// The root reported WAITING_FOR_SUBAGENTS while this subagent ran: its idle message wakes
    /// a waiting root, not a running one.
    awaited: bool,
}

/// Detects the end of a turn: the root trajectory (whose id is the conversation id) reporting
/// FULLY_IDLE, CANCELLED or WAITING_FOR_TASKS. Subagent trajectories going idle, and the root waiting for its
/// subagents, are not the end. A second input queued while running yields one idle only.
#[derive(Debug)]
pub(crate) struct TurnTracker {
    root: String,
    root_status: TrajectoryStatus,
    halted: bool,
    last_error: Option<String>,
    /// The root's direct subagents that are running.
    children: HashMap<String, Child>,
    /// Subagents that went idle whose idle message the root has not shown yet.
    unannounced: HashSet<String>,
    /// Idle messages the root showed before the subagent's own idle state arrived.
    announced_early: HashSet<String>,
    /// A subagent went idle while the root ran and had not waited for it.
    stray_wake_possible: bool,
}

impl TurnTracker {
    pub(crate) fn new(root: String) -> Self {
        Self {
            root,
            root_status: TrajectoryStatus::Unknown,
            halted: false,
            last_error: None,
            children: HashMap::new(),
            unannounced: HashSet::new(),
            announced_early: HashSet::new(),
            stray_wake_possible: false,
        }
    }

    /// Records that this host sent a `haltRequest`.
    pub(crate) fn halted(&mut self) {
        self.halted = true;
    }

    /// Notes that the host sent user input. With the root not running, the input starts a new
    /// turn, so a halt recorded since the last end (sent as that turn was ending) is stale; with
    /// the root running, the input queues behind the turn the halt is for.
    pub(crate) fn input_sent(&mut self) {
        if !matches!(
            self.root_status,
            TrajectoryStatus::Running | TrajectoryStatus::WaitingForSubagents
        ) {
            self.halted = false;
        }
    }

    /// Takes a halt recorded since the last end: one sent while an end was held belongs to
    /// that turn, not to the next.
    pub(crate) fn take_halted(&mut self) -> bool {
        std::mem::take(&mut self.halted)
    }

    /// The error of the last finished turn (reported with a following socket close).
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.clone()
    }

    /// Notes a step: the root showing a subagent's idle message.
    pub(crate) fn on_step(&mut self, step: &Step) {
        if !is_system_message(step) || step.key.trajectory_id != self.root {
            return;
        }
        if let Some(subagent) = idle_message_subject(&step.text)
            && !self.unannounced.remove(subagent)
        {
            self.announced_early.insert(subagent.to_owned());
        }
    }

    /// Notes a trajectory change; says what it means for the turn, if anything.
    pub(crate) fn on_trajectory(&mut self, state: &TrajectoryState) -> Option<TurnSignal> {
        if state.trajectory_id != self.root {
            if state.parent_trajectory_id.as_deref() == Some(self.root.as_str()) {
                self.on_child(state);
            }
            return None;
        }
        self.root_status = state.status;
        match state.status {
            TrajectoryStatus::Running => {
                self.last_error = None;
                Some(TurnSignal::Running)
            }
            TrajectoryStatus::WaitingForSubagents => {
                for child in self.children.values_mut() {
                    child.awaited = true;
                }
                None
            }
            // Waiting for tasks it left running in the background (a command past its
            // `WaitMsBeforeAsync`), the root's reply is over: the turn ends, and the harness
            // starts one of its own when the tasks end. Held open, a command that never ends (a
            // dev server) would hold the turn until a stall timeout.
            TrajectoryStatus::Idle
            | TrajectoryStatus::Cancelled
            | TrajectoryStatus::WaitingForTasks => {
                let end = TurnEnd {
                    cancelled: state.status == TrajectoryStatus::Cancelled,
                    halted: std::mem::take(&mut self.halted),
                    error: state.error.clone(),
                    error_code: state.error_code.clone(),
                    stop_reason: state.stop_reason.clone(),
                    background_tasks: state.status == TrajectoryStatus::WaitingForTasks,
                };
                self.last_error = end.error.clone();
                let wake = if end.cancelled || end.halted || end.error.is_some() {
                    None
                } else if !self.unannounced.is_empty() {
                    Some(UNANNOUNCED_BOUND)
                } else if self.stray_wake_possible {
                    Some(STRAY_WAKE_GRACE)
                } else {
                    None
                };
                // A wake-up ends this running period; what follows is judged on its own.
                self.stray_wake_possible = false;
                match wake {
                    Some(within) => Some(TurnSignal::IdleAwaitingWake { end, within }),
                    None => {
                        self.unannounced.clear();
                        self.announced_early.clear();
                        Some(TurnSignal::Ended(end))
                    }
                }
            }
            _ => None,
        }
    }

    fn on_child(&mut self, state: &TrajectoryState) {
        match state.status {
            TrajectoryStatus::Running => {
                self.children
                    .entry(state.trajectory_id.clone())
                    .or_default();
            }
            TrajectoryStatus::Idle => {
                let child = self.children.remove(&state.trajectory_id);
                if self.root_status == TrajectoryStatus::Running
                    && !child.is_some_and(|c| c.awaited)
                {
                    self.stray_wake_possible = true;
                }
                if !self.announced_early.remove(&state.trajectory_id) {
                    self.unannounced.insert(state.trajectory_id.clone());
                }
            }
            TrajectoryStatus::Cancelled => {
                self.children.remove(&state.trajectory_id);
            }
            _ => {}
        }
    }
}

/// The end of a turn held back while the harness may wake the root again (the reader's side
/// of [`TurnSignal`]): at most one, so a turn ends once.
#[derive(Debug, Default)]
pub(crate) struct HeldEnd {
    held: Option<(TurnEnd, tokio::time::Instant)>,
}

impl HeldEnd {
    /// Applies a signal; returns the end to report now, if any. A root that ends again (a
    /// cancel, an error, another idle) while an end is held replaces the held end: the newer
    /// state is the same turn's end.
    pub(crate) fn on_signal(
        &mut self,
        signal: TurnSignal,
        now: tokio::time::Instant,
    ) -> Option<TurnEnd> {
        match signal {
            TurnSignal::Ended(end) => {
                self.held = None;
                Some(end)
            }
            TurnSignal::IdleAwaitingWake { end, within } => {
                self.held = Some((end, now + within));
                None
            }
            TurnSignal::Running => {
                self.held = None;
                None
            }
        }
    }

    /// When the held end is due, if one is held.
    pub(crate) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.held.as_ref().map(|(_, deadline)| *deadline)
    }

    /// Takes the held end (at its deadline, or before the connection's close).
    pub(crate) fn release(&mut self) -> Option<TurnEnd> {
        self.held.take().map(|(end, _)| end)
    }
}

/// A finished step the harness itself addressed: the only kind [`TurnTracker::on_step`] reads,
/// so a reader can skip the tracker for every other step.
pub(crate) fn is_system_message(step: &Step) -> bool {
    step.source == StepSource::System && step.status == StepStatus::Done
}

/// The subagent an idle message is about: `… Subagent <id> has gone idle. …`.
fn idle_message_subject(text: &str) -> Option<&str> {
    let (before, _) = text.split_once(" has gone idle")?;
    let (_, id) = before.rsplit_once("Subagent ")?;
    (!id.is_empty() && !id.contains(char::is_whitespace)).then_some(id)
}

#[cfg(test)]
mod tests;
