//! Micro-benchmark: replays every recorded fixture many times through fresh translators and
//! prints steps/second and events/second. Std only (`harness = false`); run it with
//! `cargo bench -p agui-translate` (optionally `-- <rounds>`).

#[path = "../tests/common/fixtures.rs"]
#[allow(dead_code)]
mod fixtures;

use std::hint::black_box;
use std::time::{Duration, Instant};

use agui_translate::{SequentialIds, Translator, TranslatorOptions};
use fixtures::Input;

/// Rounds over all fixtures when no count is given.
const DEFAULT_ROUNDS: u64 = 20_000;

fn main() {
    // `cargo bench` passes `--bench`; any number is the round count.
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<u64>().ok())
        .unwrap_or(DEFAULT_ROUNDS);
    let fixtures: Vec<(String, Vec<Input>)> = fixtures::fixture_names()
        .into_iter()
        .map(|name| {
            let inputs = fixtures::load(&name);
            (name, inputs)
        })
        .collect();
    let options = TranslatorOptions::default();

    // One untimed round, so allocation caches and branch predictors are warm.
    replay_all(&fixtures, &options);
    let mut steps = 0u64;
    let mut events = 0u64;
    let started = Instant::now();
    for _ in 0..rounds {
        let (s, e) = replay_all(&fixtures, &options);
        steps += s;
        events += e;
    }
    let elapsed = started.elapsed();
    println!(
        "agui-translate: {} fixtures x {rounds} rounds: {steps} steps -> {events} events in {:.3} s",
        fixtures.len(),
        elapsed.as_secs_f64()
    );
    println!(
        "  {:.0} steps/s, {:.0} events/s, {:.0} ns/step",
        per_second(steps, elapsed),
        per_second(events, elapsed),
        elapsed.as_nanos() as f64 / steps.max(1) as f64
    );
}

/// Replays every fixture once (a new translator per turn); returns (steps, events).
fn replay_all(fixtures: &[(String, Vec<Input>)], options: &TranslatorOptions) -> (u64, u64) {
    let mut steps = 0;
    let mut events = 0;
    for (_, inputs) in fixtures {
        let mut translator = new_translator(options);
        for input in inputs {
            let produced = match input {
                Input::Step(step) => {
                    steps += 1;
                    translator.step(step).events.len()
                }
                Input::Trajectory(change) => translator.trajectory(change).events.len(),
                Input::EndTurn => {
                    let n = translator.close_run().len();
                    translator = new_translator(options);
                    n
                }
                Input::HostAnswer | Input::CloseRun => translator.close_run().len(),
            };
            events += black_box(produced) as u64;
        }
        events += translator.close_run().len() as u64;
    }
    (steps, events)
}

fn new_translator(options: &TranslatorOptions) -> Translator {
    Translator::new(options.clone(), Box::new(SequentialIds::new()))
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}
