//! Test support: a replay driver that frames runs for the verifier, a compact event
//! rendering, step builders and the data-driven `check` helper.
#![allow(dead_code)] // each test binary uses a different part

pub(crate) mod fixtures;

use std::collections::{BTreeMap, HashMap};

use agui_translate::{
    SequentialIds, StepFailure, TrajectoryChange, TrajectoryStatus, Translator, TranslatorOptions,
};
use agui_types::{Event, StreamVerifier};
use harness_proto::step::{
    Step, StepAction, StepError, StepKey, StepSource, StepStatus, StepTarget, ToolAction, ToolKind,
};
use serde_json::{Map, Value};

pub(crate) use fixtures::Input;

/// What one run produced.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Events of the run, `close_run` included, without RUN_STARTED/RUN_FINISHED.
    pub(crate) events: Vec<Event>,
    /// Failures reported during the run.
    pub(crate) failures: Vec<StepFailure>,
    /// Events and failures in production order, for rendering.
    pub(crate) log: Vec<Entry>,
}

/// One item of a run's log.
#[derive(Debug, Clone)]
pub(crate) enum Entry {
    /// An event.
    Event(Event),
    /// A failure.
    Failure(StepFailure),
}

/// Feeds inputs to translators (a new one per turn) and records runs.
pub(crate) struct Driver {
    options: TranslatorOptions,
    translator: Translator,
    turn: usize,
    runs: Vec<Run>,
    current: Run,
}

impl Driver {
    /// A driver whose translators use `options` and sequential ids.
    pub(crate) fn new(options: TranslatorOptions) -> Self {
        Self {
            translator: Self::translator(&options, 1),
            options,
            turn: 1,
            runs: Vec::new(),
            current: Run::default(),
        }
    }

    fn translator(options: &TranslatorOptions, turn: usize) -> Translator {
        let prefix = if turn == 1 {
            String::new()
        } else {
            format!("t{turn}.")
        };
        Translator::new(
            options.clone(),
            Box::new(SequentialIds::with_prefix(prefix)),
        )
    }

    /// Feeds one input.
    pub(crate) fn feed(&mut self, input: &Input) {
        match input {
            Input::Step(step) => {
                let t = self.translator.step(step);
                self.record(t.events, t.failures);
            }
            Input::Trajectory(change) => {
                let t = self.translator.trajectory(change);
                self.record(t.events, t.failures);
            }
            Input::CloseRun | Input::HostAnswer => self.close_run(),
            Input::EndTurn => {
                let events = self.translator.close_turn();
                self.record(events, Vec::new());
                self.runs.push(std::mem::take(&mut self.current));
                self.turn += 1;
                self.translator = Self::translator(&self.options, self.turn);
            }
        }
    }

    fn record(&mut self, events: Vec<Event>, failures: Vec<StepFailure>) {
        for event in events {
            self.current.log.push(Entry::Event(event.clone()));
            self.current.events.push(event);
        }
        for failure in failures {
            self.current.log.push(Entry::Failure(failure.clone()));
            self.current.failures.push(failure);
        }
    }

    fn close_run(&mut self) {
        let events = self.translator.close_run();
        self.record(events, Vec::new());
        self.runs.push(std::mem::take(&mut self.current));
    }

    /// Closes the last run (unless nothing happened since the previous one) and returns
    /// every run (at least one).
    pub(crate) fn finish(mut self) -> Vec<Run> {
        let tail = self.translator.close_run();
        self.record(tail, Vec::new());
        if !self.current.log.is_empty() || self.runs.is_empty() {
            self.runs.push(std::mem::take(&mut self.current));
        }
        self.runs
    }
}

/// Replays inputs with `options`.
pub(crate) fn replay(inputs: &[Input], options: &TranslatorOptions) -> Vec<Run> {
    let mut driver = Driver::new(options.clone());
    for input in inputs {
        driver.feed(input);
    }
    driver.finish()
}

/// The runs as one stream, each wrapped in RUN_STARTED/RUN_FINISHED.
pub(crate) fn framed(runs: &[Run]) -> Vec<Event> {
    let mut events = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let run_id = format!("run-{}", i + 1);
        events.push(Event::run_started("thread-1", run_id.clone()));
        events.extend(run.events.iter().cloned());
        events.push(Event::run_finished("thread-1", run_id));
    }
    events
}

/// Asserts the stream invariants every translation must keep: the official client's ordering
/// rules, one JSON document of arguments per tool call, and at most one START and one RESULT
/// per tool call id over the whole turn.
pub(crate) fn assert_valid(runs: &[Run]) {
    let stream = framed(runs);
    if let Err(violation) = StreamVerifier::verify_all(&stream) {
        panic!("{violation}\n{}", render(&stream));
    }
    let mut args: BTreeMap<&str, String> = BTreeMap::new();
    let mut starts: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<&str, usize> = HashMap::new();
    for event in &stream {
        match event {
            Event::ToolCallStart(e) => *starts.entry(&e.tool_call_id).or_default() += 1,
            Event::ToolCallArgs(e) => args.entry(&e.tool_call_id).or_default().push_str(&e.delta),
            Event::ToolCallResult(e) => *results.entry(&e.tool_call_id).or_default() += 1,
            _ => {}
        }
    }
    for (id, text) in &args {
        if let Err(e) = serde_json::from_str::<Value>(text) {
            panic!("arguments of {id} are not one JSON document ({e}): {text}");
        }
    }
    for (id, n) in starts.iter().chain(&results) {
        assert!(*n <= 1, "tool call {id} started or answered {n} times");
    }
}

/// One line per event (`TYPE key=value …`, keys sorted, `role` left out) and per failure
/// (`! FAILURE …`); `-- run end` after each run.
pub(crate) fn render_runs(runs: &[Run]) -> String {
    let mut lines = Vec::new();
    for run in runs {
        for entry in &run.log {
            lines.push(match entry {
                Entry::Event(event) => render_event(event),
                Entry::Failure(f) => format!(
                    "! FAILURE step={} http={} source={:?} message={}",
                    f.step,
                    f.http_code,
                    f.source,
                    scalar(&Value::String(f.message.clone()))
                ),
            });
        }
        lines.push("-- run end".to_owned());
    }
    lines.join("\n")
}

/// One line per event.
pub(crate) fn render(events: &[Event]) -> String {
    events
        .iter()
        .map(render_event)
        .collect::<Vec<_>>()
        .join("\n")
}

fn render_event(event: &Event) -> String {
    let value = serde_json::to_value(event).expect("events serialize");
    let mut fields: Vec<(String, Value)> = value
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    fields.retain(|(k, _)| k != "type" && k != "role");
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    let mut line = event.event_type().to_string();
    for (key, value) in fields {
        line.push_str(&format!(" {key}={}", scalar(&value)));
    }
    line
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.:#".contains(c)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// Runs a hand-written script and compares its rendering with `expected` (lines trimmed,
/// blank lines ignored); also asserts the stream is valid.
pub(crate) fn check(inputs: &[Input], expected: &str) {
    check_with(&TranslatorOptions::default(), inputs, expected);
}

/// [`check`] with options.
pub(crate) fn check_with(options: &TranslatorOptions, inputs: &[Input], expected: &str) {
    let runs = replay(&script(inputs), options);
    assert_valid(&runs);
    let expected: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    pretty_assertions::assert_eq!(render_runs(&runs), expected.join("\n"));
}

/// Fills each step's cumulative `text`/`thinking` from its deltas (unless set), as the harness
/// does, so scripts only spell out deltas.
pub(crate) fn script(inputs: &[Input]) -> Vec<Input> {
    let mut text: HashMap<StepKey, (String, String)> = HashMap::new();
    inputs
        .iter()
        .map(|input| match input {
            Input::Step(step) => {
                let mut step = step.clone();
                let (t, th) = text.entry(step.key.clone()).or_default();
                if step.text.is_empty() {
                    t.push_str(&step.text_delta);
                    step.text = t.clone();
                } else {
                    t.clone_from(&step.text);
                }
                if step.thinking.is_empty() {
                    th.push_str(&step.thinking_delta);
                    step.thinking = th.clone();
                } else {
                    th.clone_from(&step.thinking);
                }
                Input::Step(step)
            }
            other => other.clone(),
        })
        .collect()
}

/// An ACTIVE MODEL→USER snapshot of step `index` of `trajectory`, with nothing in it.
pub(crate) fn step(trajectory: &str, index: u32) -> Input {
    Input::Step(Box::new(Step {
        key: StepKey::new(trajectory, index),
        status: StepStatus::Active,
        source: StepSource::Model,
        target: StepTarget::User,
        ..Step::default()
    }))
}

/// Ends the run.
pub(crate) fn close() -> Input {
    Input::CloseRun
}

/// A subagent trajectory starts.
pub(crate) fn running(trajectory: &str, parent: &str) -> Input {
    trajectory_change(trajectory, Some(parent), TrajectoryStatus::Running)
}

/// A subagent trajectory goes idle.
pub(crate) fn idle(trajectory: &str, parent: &str) -> Input {
    trajectory_change(trajectory, Some(parent), TrajectoryStatus::Idle)
}

/// Any trajectory change.
pub(crate) fn trajectory_change(
    trajectory: &str,
    parent: Option<&str>,
    status: TrajectoryStatus,
) -> Input {
    Input::Trajectory(TrajectoryChange {
        trajectory_id: trajectory.to_owned(),
        parent_trajectory_id: parent.map(str::to_owned),
        status,
        error: None,
    })
}

/// Builders for step snapshots (no-ops on other inputs).
impl Input {
    fn with(mut self, f: impl FnOnce(&mut Step)) -> Self {
        if let Input::Step(step) = &mut self {
            f(step);
        }
        self
    }

    /// New text.
    pub(crate) fn say(self, delta: &str) -> Self {
        self.with(|s| s.text_delta = delta.to_owned())
    }

    /// New reasoning.
    pub(crate) fn think(self, delta: &str) -> Self {
        self.with(|s| s.thinking_delta = delta.to_owned())
    }

    /// The whole text (a snapshot that does not follow from the deltas).
    pub(crate) fn full_text(self, text: &str) -> Self {
        self.with(|s| s.text = text.to_owned())
    }

    /// State DONE.
    pub(crate) fn done(self) -> Self {
        self.with(|s| s.status = StepStatus::Done)
    }

    /// State WAITING_FOR_USER.
    pub(crate) fn waiting(self) -> Self {
        self.with(|s| s.status = StepStatus::WaitingForUser)
    }

    /// State ERROR with a message and HTTP code.
    pub(crate) fn error(self, message: &str, http_code: u32) -> Self {
        self.with(|s| {
            s.status = StepStatus::Error;
            s.error = Some(StepError {
                message: message.to_owned(),
                http_code,
            });
        })
    }

    /// Source SYSTEM, target MODEL (a harness message).
    pub(crate) fn system(self) -> Self {
        self.with(|s| {
            s.source = StepSource::System;
            s.target = StepTarget::Model;
        })
    }

    /// Source SYSTEM, target USER (how model API errors are addressed).
    pub(crate) fn system_to_user(self) -> Self {
        self.with(|s| s.source = StepSource::System)
    }

    /// Source USER, target MODEL (the prompt echo).
    pub(crate) fn user(self) -> Self {
        self.with(|s| {
            s.source = StepSource::User;
            s.target = StepTarget::Model;
        })
    }

    /// A step of a subagent trajectory.
    pub(crate) fn child_of(self, parent: &str) -> Self {
        self.with(|s| s.parent_trajectory_id = Some(parent.to_owned()))
    }

    /// A built-in tool call with its request and (at DONE) result fields; the step's text
    /// becomes the summary label.
    pub(crate) fn builtin(self, name: &str, arguments: Value, result: Value) -> Self {
        self.tool_action(name, ToolKind::Builtin, arguments, result)
    }

    /// A custom (host) tool call.
    pub(crate) fn custom(self, call_id: &str, name: &str, arguments: Value, result: Value) -> Self {
        let kind = ToolKind::Custom {
            call_id: call_id.to_owned(),
        };
        self.tool_action(name, kind, arguments, result)
    }

    fn tool_action(self, name: &str, kind: ToolKind, arguments: Value, result: Value) -> Self {
        let object = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.with(|s| {
            s.target = StepTarget::Environment;
            s.text = format!("Using {name}");
            s.action = Some(StepAction::Tool(ToolAction {
                name: name.to_owned(),
                kind,
                arguments: object(arguments),
                result: object(result),
            }));
        })
    }

    /// An `invoke_subagent` step whose summary label is `label`.
    pub(crate) fn invoke(self, label: &str) -> Self {
        self.with(|s| {
            s.target = StepTarget::Environment;
            s.text = label.to_owned();
            s.action = Some(StepAction::InvokeSubagent);
        })
    }

    /// A `finish` step with `output`.
    pub(crate) fn finish(self, output: &str) -> Self {
        self.with(|s| {
            s.target = StepTarget::Environment;
            s.text = "Finish".to_owned();
            s.action = Some(StepAction::Finish {
                output: output.to_owned(),
            });
        })
    }

    /// A compaction step.
    pub(crate) fn compaction(self) -> Self {
        self.with(|s| s.action = Some(StepAction::Compaction))
    }

    /// A step blocked on a question.
    pub(crate) fn asking(self) -> Self {
        self.with(|s| {
            s.target = StepTarget::Environment;
            s.request = Some(harness_proto::step::UserRequest::ToolConfirmation);
        })
    }
}

/// A failure as it appears in snapshots.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FailureDoc {
    step: String,
    http_code: u32,
    source: String,
    message: String,
}

/// The snapshot document of some runs: the framed stream and the failures.
#[derive(Debug, serde::Serialize)]
pub(crate) struct SnapshotDoc {
    events: Vec<Event>,
    failures: Vec<FailureDoc>,
}

/// The snapshot document of some runs.
pub(crate) fn snapshot_doc(runs: &[Run]) -> SnapshotDoc {
    let failures = runs
        .iter()
        .flat_map(|r| &r.failures)
        .map(|f| FailureDoc {
            step: f.step.to_string(),
            http_code: f.http_code,
            source: format!("{:?}", f.source),
            message: f.message.clone(),
        })
        .collect();
    SnapshotDoc {
        events: framed(runs),
        failures,
    }
}

/// Asserts the JSON snapshot `tests/snapshots/<name>.snap` of `runs` (after checking they are
/// valid), with maps sorted so the file does not depend on serde_json's map ordering.
pub(crate) fn assert_snapshot(name: &str, runs: &[Run]) {
    assert_valid(runs);
    insta::with_settings!({
        sort_maps => true,
        prepend_module_to_snapshot => false,
        snapshot_path => "../snapshots",
        omit_expression => true,
    }, {
        insta::assert_json_snapshot!(name, snapshot_doc(runs));
    });
}
