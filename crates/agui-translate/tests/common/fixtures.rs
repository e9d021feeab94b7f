//! Loading `fixtures/steps/*.jsonl` (frames recorded from the real harness) as translator
//! input. Shared by the tests and the benchmark.

use std::path::{Path, PathBuf};

use agui_translate::{TrajectoryChange, TrajectoryStatus};
use harness_proto::lh::{OutputEvent, output_event};
use harness_proto::step::Step;

/// One translator input, or a marker for the replay.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    /// A step snapshot.
    Step(Box<Step>),
    /// A trajectory state change.
    Trajectory(TrajectoryChange),
    /// The root trajectory ended: the run and the turn are over.
    EndTurn,
    /// The host answered a parked request (a question): a session would have ended the run
    /// before it and starts a new run of the same turn with it.
    HostAnswer,
    /// Close the run here (hand-written scripts).
    CloseRun,
}

/// The recorded fixtures folder.
pub(crate) fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/steps")
}

/// Names of every recorded fixture (file stems), sorted.
pub(crate) fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures/steps is readable")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            (path.extension()? == "jsonl").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

/// The translator inputs of a fixture, in recorded order.
pub(crate) fn load(name: &str) -> Vec<Input> {
    let path = fixtures_dir().join(format!("{name}.jsonl"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut inputs = Vec::new();
    for (number, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let frame: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{name}.jsonl:{}: {e}", number + 1));
        if let Some(input) = frame.get("in") {
            if input.get("questionResponse").is_some() {
                inputs.push(Input::HostAnswer);
            }
            continue;
        }
        let Some(out) = frame.get("out") else {
            continue;
        };
        let event: OutputEvent = harness_proto::from_json(&out.to_string())
            .unwrap_or_else(|e| panic!("{name}.jsonl:{}: {e}", number + 1));
        match event.event {
            Some(output_event::Event::StepUpdate(update)) => {
                inputs.push(Input::Step(Box::new(Step::from(&update))));
            }
            Some(output_event::Event::TrajectoryStateUpdate(update)) => {
                let change = TrajectoryChange::from(&update);
                let ends_turn = change.parent_trajectory_id.is_none()
                    && matches!(
                        change.status,
                        TrajectoryStatus::Idle | TrajectoryStatus::Cancelled
                    );
                inputs.push(Input::Trajectory(change));
                if ends_turn {
                    inputs.push(Input::EndTurn);
                }
            }
            _ => {}
        }
    }
    inputs
}
