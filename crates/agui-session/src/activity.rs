//! What the harness is doing in a turn, as much as a run needs to know to end when the turn
//! parks: which trajectories are working, whether their model replies are complete, and which
//! host tool calls those replies made.
//!
//! A run that has something parked on the client ends as soon as the harness can make no more
//! progress without the client — read from the protocol itself, never from a quiet period:
//! - a trajectory works from its `RUNNING` state until it is idle, cancelled or waiting for its
//!   subagents (each subagent is a trajectory of its own); background tasks count as work;
//! - a working trajectory blocked on a parked request does nothing until it is answered;
//! - the harness executes a reply's calls while the reply still streams, one at a time, so the
//!   first call of a parallel group can park before the later calls' steps exist. A reply is
//!   complete once a usage update changes its trajectory's usage after the reply's last new
//!   model step (a step carrying text or thinking, not a call's step: those can come after
//!   the usage update); the later host calls whose steps exist then are announced from them
//!   (the harness asks for them only once the earlier ones are answered);
//! - an approval (the pre-tool hook) holds the reply itself: its usage update comes only after
//!   the answer, so a trajectory blocked on an approval is settled as it stands;
//! - the harness sends a reply's steps, its calls' among them, and the reply's usage update
//!   before it calls back for a call; under load it was seen calling back first. A call whose
//!   callback came before its step therefore holds the park until its step and then a usage
//!   update of its trajectory have come (the whole reply), for at most [`CALL_STEP_WAIT`], so
//!   frames that never come cost a delay, not the run.
//!
//! The run drains every event the harness sent before a callback (the event stream is filled
//! before a callback starts) and then asks [`TurnActivity::settled`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use harness_client::{TrajectoryState, TrajectoryStatus, Usage};
use harness_proto::lh::UsageMetadata;
use harness_proto::step::{Step, StepKey, StepSource, ToolKind};
use serde_json::{Map, Value};
use tokio::time::Instant;

/// How long a parked call whose callback came before its step waits for that step before the
/// run settles without it.
pub(crate) const CALL_STEP_WAIT: Duration = Duration::from_secs(2);

/// What a trajectory with parked requests waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// An answer to a call or question of a reply (the reply may still be streaming).
    OnAnswer,
    /// An approval, which holds the rest of the reply until it is answered.
    OnApproval,
}

/// The working trajectories, their replies and open host tool calls in one turn.
#[derive(Debug, Default)]
pub(crate) struct TurnActivity {
    working: HashSet<String>,
    replies: HashMap<String, ReplyProgress>,
    /// Host tool calls seen in steps and not finished, in step order.
    open_calls: BTreeMap<StepKey, HostCall>,
    /// Host calls whose callback came before their step, by harness id.
    called_back_ahead: HashMap<String, CallbackAhead>,
}

/// A host call the harness called back for before its reply was seen.
#[derive(Debug)]
struct CallbackAhead {
    /// When the callback came.
    at: Instant,
    /// The trajectory that made the call.
    trajectory: String,
    /// Whether the call's step has come since.
    step_seen: bool,
}

/// How far a trajectory's model output has been accounted for by usage updates.
#[derive(Debug, Default)]
struct ReplyProgress {
    /// The newest model step seen.
    newest_step: Option<u32>,
    /// The newest model step when the trajectory's usage last changed.
    newest_at_usage: Option<u32>,
    usage: Option<UsageMetadata>,
}

impl ReplyProgress {
    fn streaming(&self) -> bool {
        self.newest_step > self.newest_at_usage
    }
}

/// A host ("custom") tool call a step carries.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostCall {
    /// The harness's call id (the `toolCall.id` its callback will carry).
    pub(crate) harness_id: String,
    /// The tool.
    pub(crate) name: String,
    /// The call's arguments.
    pub(crate) arguments: Map<String, Value>,
}

impl TurnActivity {
    /// Notes a step snapshot.
    pub(crate) fn step(&mut self, step: &Step) {
        // A reply's output is its model step; the steps of the calls it made are not: the
        // harness may create a call's step after the reply's usage update (recorded: a built-in
        // call's step, the usage, then the host call's step and its callback), and counting it
        // as new output would hold the park until an answer that cannot come.
        if step.source == StepSource::Model && step.tool().is_none() {
            let reply = self
                .replies
                .entry(step.key.trajectory_id.clone())
                .or_default();
            reply.newest_step = reply.newest_step.max(Some(step.key.index));
        }
        let Some(tool) = step.tool() else { return };
        let ToolKind::Custom { call_id } = &tool.kind else {
            return;
        };
        if let Some(ahead) = self.called_back_ahead.get_mut(call_id) {
            ahead.step_seen = true;
        }
        if step.is_final() {
            self.open_calls.remove(&step.key);
        } else if !call_id.is_empty() {
            self.open_calls
                .entry(step.key.clone())
                .or_insert_with(|| HostCall {
                    harness_id: call_id.clone(),
                    name: tool.name.clone(),
                    arguments: tool.arguments.clone(),
                });
        }
    }

    /// Notes a trajectory's new state.
    pub(crate) fn trajectory(&mut self, state: &TrajectoryState) {
        match state.status {
            TrajectoryStatus::Running | TrajectoryStatus::WaitingForTasks => {
                self.working.insert(state.trajectory_id.clone());
            }
            TrajectoryStatus::Idle
            | TrajectoryStatus::Cancelled
            | TrajectoryStatus::WaitingForSubagents
            | TrajectoryStatus::Unknown => {
                self.working.remove(&state.trajectory_id);
            }
        }
    }

    /// Notes a usage update: a trajectory whose usage changed has completed its reply.
    pub(crate) fn usage(&mut self, usage: &Usage) {
        for (trajectory, metadata) in &usage.by_trajectory {
            let reply = self.replies.entry(trajectory.clone()).or_default();
            if reply.usage.as_ref() != Some(metadata) {
                reply.usage = Some(metadata.clone());
                reply.newest_at_usage = reply.newest_step;
                // The reply of a call that was called back ahead of it is complete.
                self.called_back_ahead
                    .retain(|_, ahead| !(ahead.step_seen && ahead.trajectory == *trajectory));
            }
        }
    }

    /// Whether the harness can do nothing more until the client answers: something is parked
    /// (`blocked` maps the trajectories with parked requests to what they wait for), every
    /// working trajectory is blocked, and a trajectory blocked on an answer has finished its
    /// reply.
    pub(crate) fn settled(&self, blocked: &HashMap<String, Blocked>) -> bool {
        let streaming = |t: &str| self.replies.get(t).is_some_and(ReplyProgress::streaming);
        !blocked.is_empty()
            && self.working.iter().all(|t| blocked.contains_key(t))
            && blocked
                .iter()
                .all(|(t, why)| *why == Blocked::OnApproval || !streaming(t))
    }

    /// Notes that the harness called back at `at` for the host call `harness_id` of
    /// `trajectory`.
    pub(crate) fn called_back(&mut self, harness_id: &str, trajectory: &str, at: Instant) {
        // The harness calls back while the call's step is open: seen, it is among the open
        // calls.
        let seen = self.open_calls.values().any(|c| c.harness_id == harness_id);
        if !seen {
            self.called_back_ahead
                .entry(harness_id.to_owned())
                .or_insert_with(|| CallbackAhead {
                    at,
                    trajectory: trajectory.to_owned(),
                    step_seen: false,
                });
        }
    }

    /// When the park may settle at the earliest, while one of the `parked` calls (harness ids)
    /// waits for the reply its callback came before; `None` when none waits at `now` (their
    /// replies came, or their wait is over).
    pub(crate) fn call_steps_awaited<'a>(
        &self,
        parked: impl IntoIterator<Item = &'a str>,
        now: Instant,
    ) -> Option<Instant> {
        parked
            .into_iter()
            .filter_map(|id| self.called_back_ahead.get(id))
            .map(|ahead| ahead.at + CALL_STEP_WAIT)
            .filter(|end| *end > now)
            .max()
    }

    /// The open host calls of the `blocked` trajectories, in step order: the rest of the
    /// parallel groups their parked calls belong to.
    pub(crate) fn open_calls_in<'a>(
        &'a self,
        blocked: &'a HashMap<String, Blocked>,
    ) -> impl Iterator<Item = (&'a str, &'a HostCall)> + 'a {
        self.open_calls
            .iter()
            .filter(|(key, _)| blocked.contains_key(&key.trajectory_id))
            .map(|(key, call)| (key.trajectory_id.as_str(), call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_proto::step::{StepAction, StepStatus, StepTarget, ToolAction};

    fn step(index: u32, status: StepStatus, tool: Option<(&str, &str)>) -> Step {
        Step {
            key: StepKey::new("root", index),
            status,
            source: StepSource::Model,
            target: StepTarget::Environment,
            action: tool.map(|(call_id, name)| {
                StepAction::Tool(ToolAction {
                    name: name.into(),
                    kind: ToolKind::Custom {
                        call_id: call_id.into(),
                    },
                    arguments: Map::new(),
                    result: Map::new(),
                })
            }),
            ..Step::default()
        }
    }

    fn state(id: &str, status: TrajectoryStatus) -> TrajectoryState {
        TrajectoryState {
            trajectory_id: id.into(),
            parent_trajectory_id: None,
            depth: 0,
            status,
            error: None,
            error_code: None,
            stop_reason: None,
        }
    }

    fn usage(trajectory: &str, total: u64) -> Usage {
        let metadata = UsageMetadata {
            total_token_count: Some(total),
            ..UsageMetadata::default()
        };
        Usage {
            total: metadata.clone(),
            by_trajectory: vec![(trajectory.into(), metadata)],
        }
    }

    fn blocked(entries: &[(&str, Blocked)]) -> HashMap<String, Blocked> {
        entries.iter().map(|(t, b)| ((*t).to_owned(), *b)).collect()
    }

    #[test]
    fn settled_needs_a_parked_request_and_every_working_trajectory_blocked() {
        let mut activity = TurnActivity::default();
        activity.trajectory(&state("root", TrajectoryStatus::Running));
        assert!(!activity.settled(&blocked(&[])), "nothing parked");
        assert!(activity.settled(&blocked(&[("root", Blocked::OnAnswer)])));
        activity.trajectory(&state("sub", TrajectoryStatus::Running));
        assert!(
            !activity.settled(&blocked(&[("root", Blocked::OnAnswer)])),
            "a subagent still works"
        );
        activity.trajectory(&state("root", TrajectoryStatus::WaitingForSubagents));
        assert!(
            activity.settled(&blocked(&[("sub", Blocked::OnAnswer)])),
            "the root only waits"
        );
        activity.trajectory(&state("sub", TrajectoryStatus::WaitingForTasks));
        assert!(
            !activity.settled(&blocked(&[("root", Blocked::OnAnswer)])),
            "a background task is work"
        );
        activity.trajectory(&state("sub", TrajectoryStatus::Idle));
        assert!(activity.settled(&blocked(&[("root", Blocked::OnAnswer)])));
    }

    #[test]
    fn a_call_waits_for_its_reply_to_complete_but_an_approval_does_not() {
        let mut activity = TurnActivity::default();
        activity.trajectory(&state("root", TrajectoryStatus::Running));
        activity.usage(&usage("root", 10));
        activity.step(&step(1, StepStatus::Active, None));
        activity.step(&step(2, StepStatus::Active, Some(("c1", "first"))));
        let on_answer = blocked(&[("root", Blocked::OnAnswer)]);
        assert!(!activity.settled(&on_answer), "the reply still streams");
        assert!(activity.settled(&blocked(&[("root", Blocked::OnApproval)])));
        activity.usage(&usage("root", 10));
        assert!(
            !activity.settled(&on_answer),
            "an unchanged usage ends nothing"
        );
        activity.usage(&usage("root", 30));
        assert!(activity.settled(&on_answer));
        activity.step(&step(1, StepStatus::Active, None));
        assert!(
            activity.settled(&on_answer),
            "a repeated snapshot is no new output"
        );
        activity.step(&step(3, StepStatus::Active, None));
        assert!(!activity.settled(&on_answer), "a new reply streams");
    }

    #[test]
    fn a_call_step_created_after_its_replys_usage_does_not_hold_the_park() {
        // The order recorded from the real harness in about one turn in 200: the reply, a
        // built-in call's step, the usage update, then the host call's step and its callback.
        let mut activity = TurnActivity::default();
        activity.trajectory(&state("root", TrajectoryStatus::Running));
        activity.step(&step(1, StepStatus::Active, None));
        activity.step(&step(2, StepStatus::Active, Some(("", "list_dir"))));
        activity.step(&step(1, StepStatus::Done, None));
        activity.usage(&usage("root", 10));
        activity.step(&step(2, StepStatus::Done, Some(("", "list_dir"))));
        activity.step(&step(3, StepStatus::Active, Some(("c3", "weather"))));
        assert!(
            activity.settled(&blocked(&[("root", Blocked::OnAnswer)])),
            "the reply was complete before its last call's step"
        );
    }

    #[test]
    fn a_callback_ahead_of_its_reply_holds_the_park_until_the_reply_comes_or_the_wait_ends() {
        let mut activity = TurnActivity::default();
        let now = Instant::now();
        activity.called_back("c1", "root", now);
        let until = Some(now + CALL_STEP_WAIT);
        assert_eq!(activity.call_steps_awaited(["c1"], now), until);
        assert_eq!(
            activity.call_steps_awaited(["c2"], now),
            None,
            "only parked calls count"
        );
        assert_eq!(
            activity.call_steps_awaited(["c1"], now + CALL_STEP_WAIT),
            None,
            "the wait is over"
        );
        // What comes next, and whether the call still waits after it.
        let frames = [
            (
                Some(("root", 10)),
                true,
                "a usage update before the call's step is an earlier reply's",
            ),
            (None, true, "the reply's usage update has not come"),
            (
                Some(("other", 5)),
                true,
                "another trajectory's usage is not its reply's",
            ),
            (Some(("root", 20)), false, "its reply came"),
        ];
        for (usage_of, waits, why) in frames {
            match usage_of {
                Some((trajectory, total)) => activity.usage(&usage(trajectory, total)),
                None => activity.step(&step(2, StepStatus::Active, Some(("c1", "weather")))),
            }
            assert_eq!(
                activity.call_steps_awaited(["c1"], now).is_some(),
                waits,
                "{why}"
            );
        }
        activity.called_back("c1", "root", now);
        assert_eq!(
            activity.call_steps_awaited(["c1"], now),
            None,
            "a call called back after its step waits for nothing"
        );
    }

    #[test]
    fn open_host_calls_are_listed_in_step_order_until_done() {
        let mut activity = TurnActivity::default();
        activity.step(&step(3, StepStatus::Active, Some(("c3", "third"))));
        activity.step(&step(2, StepStatus::Active, Some(("c2", "second"))));
        activity.step(&step(2, StepStatus::Active, Some(("c2", "second"))));
        activity.step(&step(4, StepStatus::Active, Some(("", "no id yet"))));
        let root = blocked(&[("root", Blocked::OnAnswer)]);
        let names: Vec<&str> = activity
            .open_calls_in(&root)
            .map(|(_, c)| c.name.as_str())
            .collect();
        assert_eq!(names, ["second", "third"]);
        activity.step(&step(2, StepStatus::Done, Some(("c2", "second"))));
        let ids: Vec<&str> = activity
            .open_calls_in(&root)
            .map(|(_, c)| c.harness_id.as_str())
            .collect();
        assert_eq!(ids, ["c3"]);
        let other = blocked(&[("other", Blocked::OnAnswer)]);
        assert_eq!(activity.open_calls_in(&other).count(), 0);
    }

    /// Replays a recording of the real harness whose host answered every request after a
    /// delay, parking as a session does (a `toolCall` parks until its `toolResponse`, a hook
    /// request until its response), and returns, for each moment the turn settled, the harness
    /// ids of the open host calls then, and whether an answer had been sent before.
    ///
    /// With `callback_first`, the first `toolCall` is replayed before the first step update, as
    /// a loaded harness was seen to send it.
    fn settle_points(
        fixture: &str,
        callback_first: bool,
    ) -> (Vec<(Vec<String>, bool)>, Vec<String>) {
        use harness_proto::lh::{InputEvent, OutputEvent, input_event, output_event};
        let path = format!(
            "{}/../../fixtures/steps/{fixture}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut lines: Vec<&str> = text.lines().collect();
        if callback_first {
            let is = |line: &str, member: &str| {
                let frame: Value = serde_json::from_str(line).unwrap();
                frame.get("out").and_then(|out| out.get(member)).is_some()
            };
            let call = lines.iter().position(|l| is(l, "toolCall")).unwrap();
            let first_step = lines.iter().position(|l| is(l, "stepUpdate")).unwrap();
            assert!(
                first_step < call,
                "{fixture}: the recording calls back after its steps"
            );
            let moved = lines.remove(call);
            lines.insert(first_step, moved);
        }
        let now = Instant::now();
        let mut activity = TurnActivity::default();
        let mut parked: HashMap<String, (String, Blocked)> = HashMap::new();
        let mut points = Vec::new();
        let mut all_calls = Vec::new();
        let mut answered = false;
        let mut settled_now = false;
        for line in lines {
            let frame: Value = serde_json::from_str(line).unwrap();
            if let Some(input) = frame.get("in") {
                let input: InputEvent = harness_proto::from_json(&input.to_string()).unwrap();
                match input.event {
                    Some(input_event::Event::ToolResponse(r)) => {
                        parked.remove(r.id());
                        answered = true;
                    }
                    Some(input_event::Event::CallHookResponse(r)) => {
                        parked.remove(r.request_id());
                        answered = true;
                    }
                    _ => {}
                }
            } else {
                let output: OutputEvent =
                    harness_proto::from_json(&frame["out"].to_string()).unwrap();
                match output.event {
                    Some(output_event::Event::StepUpdate(update)) => {
                        let step = Step::from(update);
                        if let Some(ToolAction {
                            kind: ToolKind::Custom { call_id },
                            ..
                        }) = step.tool()
                            && !all_calls.contains(call_id)
                        {
                            all_calls.push(call_id.clone());
                        }
                        activity.step(&step);
                    }
                    Some(output_event::Event::TrajectoryStateUpdate(update)) => {
                        activity.trajectory(&TrajectoryState::from(&update))
                    }
                    Some(output_event::Event::UsageUpdate(update)) => {
                        activity.usage(&Usage::from(&update))
                    }
                    Some(output_event::Event::ToolCall(call)) => {
                        let trajectory = call.trajectory_id().to_owned();
                        activity.called_back(call.id(), call.trajectory_id(), now);
                        parked.insert(call.id().to_owned(), (trajectory, Blocked::OnAnswer));
                    }
                    Some(output_event::Event::CallHookRequest(request)) => {
                        let trajectory = match &request.args {
                            Some(harness_proto::lh::call_hook_request::Args::PreToolArgs(a)) => {
                                a.trajectory_id().to_owned()
                            }
                            _ => String::new(),
                        };
                        parked.insert(
                            request.request_id().to_owned(),
                            (trajectory, Blocked::OnApproval),
                        );
                    }
                    _ => {}
                }
            }
            let mut blocked_now: HashMap<String, Blocked> = HashMap::new();
            for (trajectory, why) in parked.values() {
                let entry = blocked_now.entry(trajectory.clone()).or_insert(*why);
                if *why == Blocked::OnApproval {
                    *entry = *why;
                }
            }
            let settled = activity.settled(&blocked_now)
                && activity
                    .call_steps_awaited(parked.keys().map(String::as_str), now)
                    .is_none();
            if settled && !settled_now {
                let open = activity
                    .open_calls_in(&blocked_now)
                    .map(|(_, c)| c.harness_id.clone())
                    .collect();
                points.push((open, answered));
            }
            settled_now = settled;
        }
        (points, all_calls)
    }

    #[test]
    fn parallel_host_calls_settle_only_once_every_call_of_the_reply_is_known() {
        for (fixture, callback_first) in [
            ("two_parallel_custom_calls", false),
            ("three_parallel_custom_calls", false),
            ("two_parallel_custom_calls", true),
            ("three_parallel_custom_calls", true),
        ] {
            let (points, all_calls) = settle_points(fixture, callback_first);
            let fixture = format!("{fixture} (callback first: {callback_first})");
            let (open, answered) = points
                .first()
                .unwrap_or_else(|| panic!("{fixture}: never settled"));
            assert!(!answered, "{fixture}: settled only after an answer");
            assert_eq!(
                open, &all_calls,
                "{fixture}: every call of the reply is open at the first park"
            );
        }
    }

    #[test]
    fn a_host_call_after_a_builtin_call_settles_once_the_builtin_ran() {
        let (points, all_calls) = settle_points("builtin_and_custom_calls", false);
        let (open, answered) = points.first().expect("never settled");
        assert!(!answered);
        assert_eq!(open, &all_calls);
        assert_eq!(all_calls.len(), 1);
    }

    #[test]
    fn an_approval_settles_before_the_reply_completes() {
        let (points, _) = settle_points("custom_and_builtin_calls_with_pre_tool_hook", false);
        let (_, answered) = points.first().expect("never settled");
        assert!(!answered, "the first approval settles the turn at once");
    }
}
