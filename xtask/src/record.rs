//! `cargo xtask record`: records the real harness's frames for scripted scenarios into
//! `fixtures/steps/` (the inputs of the translator's snapshot tests).
//!
//! The recording itself is `harness-client`'s `record` example (it needs the harness client and
//! the scripted model; xtask stays free of generated code so it can always regenerate it).
//!
//! The harness coalesces model chunks depending on timing, so two recordings of a scenario can
//! differ in how many intermediate snapshots a step gets. `--check` therefore compares the
//! *content*: every step's final snapshot and concatenated deltas, every trajectory state,
//! tool call and host frame — ids and timestamps are already normalised by the recorder.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use crate::util::{cargo, run_checked, workspace_root};

const OUT_DIR: &str = "fixtures/steps";

/// Arguments of `record`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Record every scenario.
    #[arg(long)]
    all: bool,
    /// Re-record into a temporary directory and fail if the content differs from the fixtures.
    #[arg(long)]
    check: bool,
    /// Scenario names (see gemini_script::scenarios).
    scenarios: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if !args.all && args.scenarios.is_empty() {
        bail!("name the scenarios to record, or pass --all");
    }
    let root = workspace_root();
    let fixtures = root.join(OUT_DIR);
    let scratch = tempfile::tempdir()?;
    let target = if args.check {
        scratch.path().to_owned()
    } else {
        fixtures.clone()
    };
    let mut command = cargo();
    command
        .current_dir(&root)
        .args([
            "run",
            "--quiet",
            "-p",
            "harness-client",
            "--example",
            "record",
            "--",
        ])
        .arg(&target);
    if args.all {
        command.arg("--all");
    }
    command.args(&args.scenarios);
    run_checked(&mut command, "the recorder")?;
    if !args.check {
        return Ok(());
    }
    let mut differences = Vec::new();
    for entry in std::fs::read_dir(&target)? {
        let fresh = entry?.path();
        let name = fresh.file_name().expect("files have names").to_owned();
        let committed = fixtures.join(&name);
        if !committed.is_file() {
            differences.push(format!("{}: not committed", name.to_string_lossy()));
        } else if digest(&fresh)? != digest(&committed)? {
            differences.push(format!("{}: content changed", name.to_string_lossy()));
        }
    }
    if args.all {
        // Every scenario was recorded: a committed fixture that none produced is stale.
        for entry in std::fs::read_dir(&fixtures)? {
            let name = entry?.file_name();
            if !target.join(&name).exists() {
                differences.push(format!(
                    "{}: no scenario records it any more",
                    name.to_string_lossy()
                ));
            }
        }
    }
    if !differences.is_empty() {
        bail!(
            "fixtures differ from a fresh recording:\n- {}\nrun `cargo xtask record --all`, review and commit",
            differences.join("\n- ")
        );
    }
    eprintln!("fixtures match a fresh recording");
    Ok(())
}

/// The timing-independent content of a recording.
fn digest(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut inbound = Vec::new();
    let mut steps: BTreeMap<String, (Value, String, String)> = BTreeMap::new();
    let mut others = Vec::new();
    let mut states: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let frame: Value =
            serde_json::from_str(line).with_context(|| format!("{}:{}", path.display(), n + 1))?;
        if let Some(input) = frame.get("in") {
            // A resumed conversation's initialize is retried while the harness still holds the
            // previous socket ("already in use"), so the same config may be sent twice.
            let retried_config = input.get("config").is_some() && inbound.last() == Some(input);
            if !retried_config {
                inbound.push(input.clone());
            }
            continue;
        }
        let Some(Value::Object(out)) = frame.get("out") else {
            bail!("{}:{}: neither in nor out", path.display(), n + 1)
        };
        let mut out: Map<String, Value> = out.clone();
        out.remove("seqNum");
        if let Some(Value::Object(step)) = out.get_mut("stepUpdate") {
            let key = format!(
                "{}:{}",
                step["trajectoryId"].as_str().unwrap_or(""),
                step["stepIndex"].as_u64().unwrap_or(0)
            );
            let text_delta = take_str(step, "textDelta");
            let thinking_delta = take_str(step, "thinkingDelta");
            let entry = steps
                .entry(key)
                .or_insert_with(|| (Value::Null, String::new(), String::new()));
            entry.0 = Value::Object(step.clone());
            entry.1.push_str(&text_delta);
            entry.2.push_str(&thinking_delta);
        } else if let Some(Value::Object(update)) = out.get("trajectoryStateUpdate") {
            // Whether the root waits for a subagent (WAITING → RUNNING) depends on who finishes
            // first; keep each trajectory's states without the waits and repeated RUNNINGs.
            let state = update.get("state").cloned().unwrap_or(Value::Null);
            let waiting = state
                .as_str()
                .is_some_and(|s| s.starts_with("STATE_WAITING"));
            let running = state == "STATE_RUNNING";
            let list = states
                .entry(update["trajectoryId"].as_str().unwrap_or("").to_owned())
                .or_default();
            let entry = json!({"state": state, "update": update});
            let repeated = list.last().is_some_and(|last| {
                *last == entry || (running && last["state"] == "STATE_RUNNING")
            });
            if !waiting && !repeated {
                list.push(entry);
            }
        } else if !out.contains_key("usageUpdate") {
            // Usage updates arrive at timing-dependent points; their totals show in the steps' turns anyway.
            others.push(Value::Object(out));
        }
    }
    let steps: Map<String, Value> = steps
        .into_iter()
        .map(|(k, (last, text, thinking))| {
            (
                k,
                json!({"final": last, "text": text, "thinking": thinking}),
            )
        })
        .collect();
    // Answers to concurrent requests (a tool's result and another call's hook decision) and the
    // requests themselves interleave by timing; compare them as sets within each user turn.
    sort_within_turns(&mut inbound);
    others.sort_by_cached_key(Value::to_string);
    Ok(json!({"in": inbound, "steps": steps, "states": states, "other": others}))
}

/// Sorts each run of host answers between two turn boundaries (a config or a user input).
fn sort_within_turns(inbound: &mut [Value]) {
    let boundary =
        |frame: &Value| frame.get("config").is_some() || frame.get("userInput").is_some();
    for run in inbound.split_mut(boundary) {
        run.sort_by_cached_key(Value::to_string);
    }
}

fn take_str(map: &mut Map<String, Value>, key: &str) -> String {
    match map.remove(key) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of `fixture` after `edit` changes its lines.
    fn digest_edited(fixture: &str, edit: impl Fn(&mut Vec<String>)) -> Value {
        let path = workspace_root().join(OUT_DIR).join(fixture);
        let mut lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        edit(&mut lines);
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join(fixture);
        std::fs::write(&copy, lines.join("\n")).unwrap();
        digest(&copy).unwrap()
    }

    #[test]
    fn timing_noise_is_ignored_and_content_is_not() {
        let fixture = "resume_history.jsonl";
        let original = digest_edited(fixture, |_| {});
        let config_at = |lines: &Vec<String>| {
            lines
                .iter()
                .rposition(|l| l.starts_with(r#"{"in":{"config""#))
                .unwrap()
        };
        // A retried initialize, and usage updates at other points, are timing.
        let retried = digest_edited(fixture, |lines| {
            let at = config_at(lines);
            let again = lines[at].clone();
            lines.insert(at, again);
        });
        assert_eq!(retried, original);
        let no_usage = digest_edited(fixture, |lines| {
            lines.retain(|l| !l.contains("usageUpdate"))
        });
        assert_eq!(no_usage, original);
        // What the model said is content.
        let changed = digest_edited(fixture, |lines| {
            for line in lines.iter_mut() {
                *line = line.replace("turn two please", "turn 2 please");
            }
        });
        assert_ne!(changed, original);
    }

    #[test]
    fn answers_to_concurrent_requests_compare_in_any_order() {
        let fixture = "custom_and_builtin_calls_with_pre_tool_hook.jsonl";
        let original = digest_edited(fixture, |_| {});
        let answer = |line: &String| {
            line.starts_with(r#"{"in":{"toolResponse""#)
                || line.starts_with(r#"{"in":{"callHookResponse""#)
        };
        let swapped = digest_edited(fixture, |lines| {
            let last = lines.iter().rposition(answer).unwrap();
            lines.swap(last - 1, last);
        });
        assert_eq!(swapped, original);
        // A different answer is still content.
        let denied = digest_edited(fixture, |lines| {
            let last = lines.iter().rposition(answer).unwrap();
            lines[last] = lines[last].replace("ALLOW", "DENY");
        });
        assert_ne!(denied, original);
    }
}
