//! Property tests: arbitrary turns (several trajectories, every kind of step, duplicates,
//! stale re-deliveries, interleavings that keep each step's own order, errors, steps that
//! never finish, run closes anywhere) always translate into a valid stream, with every call's
//! arguments one JSON document, and nothing lost or repeated.

mod common;

use std::collections::{HashMap, HashSet, VecDeque};

use agui_translate::{StructuredOutput, SubagentEvents, TrajectoryStatus, TranslatorOptions};
use agui_types::Event;
use common::{Input, assert_valid, replay, trajectory_change};
use harness_proto::step::{
    Step, StepAction, StepError, StepKey, StepSource, StepStatus, StepTarget, ToolAction, ToolKind,
    UserRequest,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const TRAJECTORIES: [&str; 3] = ["root", "sub1", "sub2"];
/// A tool name the options suppress.
const SECRET: &str = "secret_tool";

#[derive(Debug, Clone)]
enum Kind {
    Text(Vec<String>),
    Thinking(Vec<String>, Vec<String>),
    Builtin(String, Map<String, Value>, Map<String, Value>),
    Custom(String, String, Map<String, Value>, Map<String, Value>),
    Invoke(String),
    Finish(String),
    ModelError(u32),
    System,
    User,
    Question,
    Compaction,
}

#[derive(Debug, Clone, Copy)]
enum End {
    Done,
    Error,
    Never,
}

#[derive(Debug, Clone)]
struct Plan {
    trajectory: usize,
    kind: Kind,
    end: End,
    duplicates: usize,
    /// The step does not name its parent trajectory (odd harness output).
    no_parent: bool,
}

#[derive(Debug, Clone)]
struct Turn {
    plans: Vec<Plan>,
    sub2_under_sub1: bool,
    /// With `sub2_under_sub1`, the parents form a loop (odd harness output).
    sub1_under_sub2: bool,
    running_missing: [bool; 2],
    idle_missing: [bool; 2],
    schedule: Vec<u32>,
    emit_builtins: bool,
    custom_output: bool,
    /// Subagents as step brackets (the old shape) instead of subagent events.
    step_brackets: bool,
}

fn chunk() -> impl Strategy<Value = String> {
    "[a-zé日 ]{1,5}"
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::from),
        "[a-z\"\\\\{}]{0,4}".prop_map(Value::String),
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
    ]
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-c]", leaf(), 0..3).prop_map(|m| m.into_iter().collect())
}

fn kind() -> impl Strategy<Value = Kind> {
    let builtin = prop_oneof![
        Just("list_directory"),
        Just("run_command"),
        Just("view_file"),
        Just(SECRET)
    ];
    let custom = (
        prop_oneof![Just("c1"), Just("c2"), Just("")],
        prop_oneof![Just("lookup"), Just(SECRET)],
    );
    prop_oneof![
        3 => prop::collection::vec(chunk(), 1..4).prop_map(Kind::Text),
        2 => (prop::collection::vec(chunk(), 1..3), prop::collection::vec(chunk(), 0..3))
            .prop_map(|(t, x)| Kind::Thinking(t, x)),
        2 => (builtin, object(), object())
            .prop_map(|(n, a, r)| Kind::Builtin(n.to_owned(), a, r)),
        1 => (custom, object(), object())
            .prop_map(|((id, n), a, r)| Kind::Custom(id.to_owned(), n.to_owned(), a, r)),
        1 => prop_oneof![Just("Research"), Just("Helper"), Just("")]
            .prop_map(|l| Kind::Invoke(l.to_owned())),
        1 => prop_oneof![Just(r#"{"a":1}"#), Just("[1]"), Just("7"), Just("not json")]
            .prop_map(|o| Kind::Finish(o.to_owned())),
        1 => prop_oneof![Just(0u32), Just(429), Just(400)].prop_map(Kind::ModelError),
        1 => Just(Kind::System),
        1 => Just(Kind::User),
        1 => Just(Kind::Question),
        1 => Just(Kind::Compaction),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![6 => Just(End::Done), 1 => Just(End::Error), 1 => Just(End::Never)]
}

fn turn() -> impl Strategy<Value = Turn> {
    let plan = (
        0..3usize,
        kind(),
        end(),
        0..3usize,
        prop::bool::weighted(0.1),
    )
        .prop_map(|(trajectory, kind, end, duplicates, no_parent)| Plan {
            trajectory,
            kind,
            end,
            duplicates,
            no_parent,
        });
    (
        prop::collection::vec(plan, 1..14),
        any::<bool>(),
        prop::bool::weighted(0.1),
        any::<[bool; 2]>(),
        any::<[bool; 2]>(),
        prop::collection::vec(any::<u32>(), 64),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                plans,
                sub2_under_sub1,
                sub1_under_sub2,
                running_missing,
                idle_missing,
                schedule,
                emit_builtins,
                custom_output,
                step_brackets,
            )| Turn {
                plans,
                sub2_under_sub1,
                sub1_under_sub2,
                running_missing,
                idle_missing,
                schedule,
                emit_builtins,
                custom_output,
                step_brackets,
            },
        )
}

impl Turn {
    fn parent(&self, trajectory: usize) -> Option<&'static str> {
        match trajectory {
            0 => None,
            1 if self.sub1_under_sub2 && self.sub2_under_sub1 => Some(TRAJECTORIES[2]),
            2 if self.sub2_under_sub1 => Some(TRAJECTORIES[1]),
            _ => Some(TRAJECTORIES[0]),
        }
    }

    fn options(&self) -> TranslatorOptions {
        let mode = if self.custom_output {
            StructuredOutput::Custom
        } else {
            StructuredOutput::StateSnapshot
        };
        TranslatorOptions::default()
            .suppress(SECRET)
            .with_builtin_tool_calls(self.emit_builtins)
            .with_structured_output(mode)
            .with_subagent_events(if self.step_brackets {
                SubagentEvents::Steps
            } else {
                SubagentEvents::Subagent
            })
    }

    /// The delivered inputs: per-step snapshot queues and trajectory changes merged in the
    /// schedule's order, with run closes and stale re-deliveries sprinkled in.
    fn inputs(&self) -> Vec<Input> {
        let mut queues: Vec<VecDeque<Input>> = Vec::new();
        let mut next_index = [0u32; 3];
        for plan in &self.plans {
            let key = StepKey::new(TRAJECTORIES[plan.trajectory], next_index[plan.trajectory]);
            next_index[plan.trajectory] += 1;
            let parent = self.parent(plan.trajectory).filter(|_| !plan.no_parent);
            queues.push(snapshots(key, parent, plan).into());
        }
        for (sub, name) in TRAJECTORIES.iter().enumerate().skip(1) {
            if !self.plans.iter().any(|p| p.trajectory == sub) {
                continue;
            }
            let parent = self.parent(sub);
            let mut changes = VecDeque::new();
            if !self.running_missing[sub - 1] {
                changes.push_back(trajectory_change(name, parent, TrajectoryStatus::Running));
            }
            if !self.idle_missing[sub - 1] {
                changes.push_back(trajectory_change(name, parent, TrajectoryStatus::Idle));
            }
            queues.push(changes);
        }
        let mut delivered: Vec<Input> = Vec::new();
        let mut i = 0;
        loop {
            let open: Vec<usize> = (0..queues.len())
                .filter(|&q| !queues[q].is_empty())
                .collect();
            if open.is_empty() {
                break;
            }
            let bits = self.schedule[i % self.schedule.len()].rotate_left(i as u32 / 64);
            i += 1;
            if (bits >> 8) & 0xF == 0 {
                delivered.push(Input::CloseRun);
            }
            if (bits >> 12) & 0x7 == 0 {
                let steps: Vec<&Input> = delivered
                    .iter()
                    .filter(|d| matches!(d, Input::Step(_)))
                    .collect();
                if !steps.is_empty() {
                    let again = steps[(bits >> 16) as usize % steps.len()].clone();
                    delivered.push(again);
                }
            }
            let queue = open[(bits & 0xFF) as usize % open.len()];
            if let Some(input) = queues[queue].pop_front() {
                delivered.push(input);
            }
        }
        delivered
    }
}

fn base(key: &StepKey, parent: Option<&str>) -> Step {
    Step {
        key: key.clone(),
        parent_trajectory_id: parent.map(str::to_owned),
        status: StepStatus::Active,
        source: StepSource::Model,
        target: StepTarget::User,
        ..Step::default()
    }
}

/// The snapshots the harness would send for one step, in order.
fn snapshots(key: StepKey, parent: Option<&str>, plan: &Plan) -> Vec<Input> {
    let mut out: Vec<Step> = Vec::new();
    let mut step = base(&key, parent);
    let repeat = |out: &mut Vec<Step>, s: &Step| {
        for _ in 0..=plan.duplicates {
            out.push(s.clone());
        }
    };
    match &plan.kind {
        Kind::Text(chunks) | Kind::Thinking(_, chunks) => {
            if let Kind::Thinking(thinking, _) = &plan.kind {
                for c in thinking {
                    step.thinking.push_str(c);
                    step.thinking_delta.clone_from(c);
                    repeat(&mut out, &step);
                }
                step.thinking_delta.clear();
            }
            for c in chunks {
                step.text.push_str(c);
                step.text_delta.clone_from(c);
                repeat(&mut out, &step);
            }
            step.text_delta.clear();
        }
        Kind::Builtin(name, arguments, result) | Kind::Custom(_, name, arguments, result) => {
            let kind = match &plan.kind {
                Kind::Custom(id, ..) => ToolKind::Custom {
                    call_id: id.clone(),
                },
                _ => ToolKind::Builtin,
            };
            step.target = StepTarget::Environment;
            step.text = format!("Using {name}");
            let mut action = ToolAction {
                name: name.clone(),
                kind,
                arguments: arguments.clone(),
                result: Map::new(),
            };
            step.action = Some(StepAction::Tool(action.clone()));
            repeat(&mut out, &step);
            if matches!(plan.end, End::Done) {
                action.result = result.clone();
                step.action = Some(StepAction::Tool(action));
            }
        }
        Kind::Invoke(label) => {
            step.target = StepTarget::Environment;
            step.text.clone_from(label);
            step.action = Some(StepAction::InvokeSubagent);
            repeat(&mut out, &step);
        }
        Kind::Finish(output) => {
            step.target = StepTarget::Environment;
            step.action = Some(StepAction::Finish {
                output: output.clone(),
            });
            repeat(&mut out, &step);
        }
        Kind::ModelError(http_code) => {
            step.source = StepSource::System;
            step.text = "model failed".to_owned();
            step.text_delta = step.text.clone();
            step.status = StepStatus::Error;
            step.error = Some(StepError {
                message: step.text.clone(),
                http_code: *http_code,
            });
            return vec![Input::Step(Box::new(step))];
        }
        Kind::System | Kind::User => {
            (step.source, step.target) = match plan.kind {
                Kind::System => (StepSource::System, StepTarget::Model),
                _ => (StepSource::User, StepTarget::Model),
            };
            step.text = "[Message] hello".to_owned();
            step.text_delta = step.text.clone();
        }
        Kind::Question => {
            step.target = StepTarget::Environment;
            step.text = "User question".to_owned();
            repeat(&mut out, &step);
            step.status = StepStatus::WaitingForUser;
            step.request = Some(UserRequest::ToolConfirmation);
            repeat(&mut out, &step);
            step.request = None;
        }
        Kind::Compaction => {
            step.action = Some(StepAction::Compaction);
            repeat(&mut out, &step);
        }
    }
    match plan.end {
        End::Done => {
            step.status = StepStatus::Done;
            out.push(step);
        }
        End::Error => {
            step.status = StepStatus::Error;
            step.error = Some(StepError {
                message: "it failed".to_owned(),
                http_code: 0,
            });
            out.push(step);
        }
        End::Never => {}
    }
    out.into_iter().map(|s| Input::Step(Box::new(s))).collect()
}

/// What the translation of `inputs` must contain, computed from the inputs alone.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    text_bytes: usize,
    thinking_bytes: usize,
    tool_calls: usize,
    tool_results: usize,
    failures: usize,
}

fn expected(inputs: &[Input], options: &TranslatorOptions) -> Totals {
    let mut text: HashMap<StepKey, usize> = HashMap::new();
    let mut thinking: HashMap<StepKey, usize> = HashMap::new();
    let mut calls = HashSet::new();
    let mut results = HashSet::new();
    let mut failures = HashSet::new();
    let mut finished = HashSet::new();
    for input in inputs {
        let Input::Step(step) = input else { continue };
        if step.source == StepSource::User || finished.contains(&step.key) {
            continue;
        }
        let key = step.key.clone();
        let speaking = step.source == StepSource::Model
            && matches!(step.status, StepStatus::Active | StepStatus::Done);
        if speaking {
            let t = thinking.entry(key.clone()).or_default();
            *t = (*t).max(step.thinking.len());
            if step.action.is_none() && step.request.is_none() && step.target == StepTarget::User {
                let t = text.entry(key.clone()).or_default();
                *t = (*t).max(step.text.len());
            }
        }
        match &step.action {
            Some(StepAction::Tool(tool)) => {
                let hidden = options.suppressed_tools.contains(&tool.name)
                    || (tool.kind == ToolKind::Builtin && !options.emit_builtin_tool_calls);
                if !hidden {
                    calls.insert(key.clone());
                    if step.is_final() {
                        results.insert(key.clone());
                    }
                }
            }
            Some(StepAction::InvokeSubagent) => {}
            _ if step.status == StepStatus::Error => {
                failures.insert(key.clone());
            }
            _ => {}
        }
        if step.is_final() {
            finished.insert(key);
        }
    }
    Totals {
        text_bytes: text.values().sum(),
        thinking_bytes: thinking.values().sum(),
        tool_calls: calls.len(),
        tool_results: results.len(),
        failures: failures.len(),
    }
}

/// What the runs carry. The tool calls of subagent invocations are left out (the inputs have
/// no tool step for them); they are checked by [`invocations_are_complete`].
fn actual(runs: &[common::Run]) -> Totals {
    let mut totals = Totals::default();
    let invocations: HashSet<&str> = invocation_calls(runs);
    for run in runs {
        totals.failures += run.failures.len();
        for event in &run.events {
            match event {
                Event::TextMessageContent(e) => totals.text_bytes += e.delta.len(),
                Event::ReasoningMessageContent(e) => totals.thinking_bytes += e.delta.len(),
                Event::ToolCallStart(e) if !invocations.contains(e.tool_call_id.as_str()) => {
                    totals.tool_calls += 1;
                }
                Event::ToolCallResult(e) if !invocations.contains(e.tool_call_id.as_str()) => {
                    totals.tool_results += 1;
                }
                _ => {}
            }
        }
    }
    totals
}

/// The tool calls of subagent invocations (`invoke_subagent`).
fn invocation_calls(runs: &[common::Run]) -> HashSet<&str> {
    runs.iter()
        .flat_map(|r| &r.events)
        .filter_map(|e| match e {
            Event::ToolCallStart(s) if s.tool_call_name == "invoke_subagent" => {
                Some(s.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect()
}

/// With subagent events, every announced invocation is closed in the run that announced it
/// (checked by the verifier too), and every `SUBAGENT_STARTED` naming a tool call names an
/// `invoke_subagent` call of the stream.
fn invocations_are_complete(runs: &[common::Run]) {
    let calls = invocation_calls(runs);
    for run in runs {
        let mut open: Vec<&str> = Vec::new();
        for event in &run.events {
            match event {
                Event::SubagentStarted(s) => {
                    if let Some(call) = &s.parent_tool_call_id {
                        assert!(calls.contains(call.as_str()), "{call} is no invocation");
                    }
                    open.push(&s.subagent_run_id);
                }
                Event::SubagentFinished(f) => open.retain(|id| *id != f.subagent_run_id),
                Event::SubagentError(f) => open.retain(|id| *id != f.subagent_run_id),
                _ => {}
            }
        }
        assert!(open.is_empty(), "invocations left open: {open:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_turn_translates_into_a_valid_complete_stream(turn in turn()) {
        let inputs = turn.inputs();
        let options = turn.options();
        let runs = replay(&inputs, &options);
        assert_valid(&runs);
        invocations_are_complete(&runs);
        prop_assert_eq!(actual(&runs), expected(&inputs, &options));
    }
}

#[test]
fn the_generator_covers_the_interesting_cases() {
    // Guards the property test against a generator that silently stopped producing some kind
    // of input: a fixed turn with every kind of step, two subagents and a run close.
    let turn = Turn {
        plans: [
            Kind::Text(vec!["a".into()]),
            Kind::Thinking(vec!["t".into()], vec!["x".into()]),
            Kind::Builtin(
                "run_command".into(),
                Map::new(),
                Map::from_iter([("exitCode".into(), json!(0))]),
            ),
            Kind::Custom("c1".into(), "lookup".into(), Map::new(), Map::new()),
            Kind::Invoke("Research".into()),
            Kind::Finish("[1]".into()),
            Kind::ModelError(429),
            Kind::Question,
        ]
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Plan {
            trajectory: i % 3,
            kind,
            end: End::Done,
            duplicates: 1,
            no_parent: false,
        })
        .collect(),
        sub2_under_sub1: true,
        sub1_under_sub2: false,
        running_missing: [false, false],
        idle_missing: [false, false],
        schedule: vec![0x0000_0100, 1, 2, 3],
        emit_builtins: true,
        custom_output: false,
        step_brackets: true,
    };
    let inputs = turn.inputs();
    assert!(inputs.iter().any(|i| matches!(i, Input::CloseRun)));
    let options = turn.options();
    let runs = replay(&inputs, &options);
    assert_valid(&runs);
    let totals = expected(&inputs, &options);
    assert_eq!(actual(&runs), totals);
    assert_eq!(
        (totals.tool_calls, totals.tool_results, totals.failures),
        (2, 2, 1)
    );
    assert!(
        runs.iter()
            .flat_map(|r| &r.events)
            .any(|e| matches!(e, Event::StepStarted(_)))
    );
    // The same turn with subagent events: announced, attributed and closed.
    let turn = Turn {
        step_brackets: false,
        ..turn
    };
    let runs = replay(&inputs, &turn.options());
    assert_valid(&runs);
    invocations_are_complete(&runs);
    assert_eq!(actual(&runs), expected(&inputs, &turn.options()));
    let events: Vec<&Event> = runs.iter().flat_map(|r| &r.events).collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::SubagentStarted(_)))
    );
    assert!(
        events
            .iter()
            .any(|e| !matches!(e, Event::SubagentStarted(_)) && e.subagent_run_id().is_some()),
        "content events are attributed"
    );
}
