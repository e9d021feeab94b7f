//! `MessageLog` holds the messages the official client holds after the same events: checked
//! against `@ag-ui/client` 1.0.0 (installed in `tests/agui-client/`) on hand-written streams
//! that exercise each placement rule and on every event stream the translator's snapshot
//! tests record from the real harness.

use std::path::{Path, PathBuf};
use std::process::Command;

use agui_types::{Event, Message, MessageLog};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("workspace root")
        .to_owned()
}

struct Case {
    name: String,
    initial: Vec<Message>,
    runs: Vec<Vec<Event>>,
}

/// The messages the official client holds after each case, by running `apply-events.mjs`.
fn client_messages(cases: &[Case]) -> Vec<(String, Vec<Value>, Vec<String>)> {
    let dir = workspace().join("tests/agui-client");
    assert!(
        dir.join("node_modules/@ag-ui/client/package.json")
            .is_file(),
        "the official AG-UI client is not installed: run `npm ci --prefix tests/agui-client`"
    );
    let input: Vec<Value> = cases
        .iter()
        .map(|c| json!({"name": c.name, "initial": c.initial, "runs": c.runs}))
        .collect();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(&input).unwrap()).unwrap();
    let output = Command::new("node")
        .current_dir(&dir)
        .arg("apply-events.mjs")
        .arg(file.path())
        .output()
        .expect("node runs (Node.js >= 20 is required)");
    assert!(
        output.status.success(),
        "apply-events.mjs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    results
        .into_iter()
        .map(|r| {
            let failures = r["failures"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap_or_default().to_owned())
                .collect();
            (
                r["name"].as_str().unwrap().to_owned(),
                r["messages"].as_array().unwrap().clone(),
                failures,
            )
        })
        .collect()
}

fn ours(case: &Case) -> Vec<Value> {
    let mut log = MessageLog::from_messages(case.initial.clone());
    for event in case.runs.iter().flatten() {
        log.apply(event);
    }
    log.messages()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect()
}

fn check(cases: Vec<Case>) {
    let theirs = client_messages(&cases);
    for (case, (name, messages, failures)) in cases.iter().zip(theirs) {
        assert_eq!(case.name, name);
        assert!(
            failures.is_empty(),
            "{name}: the client failed a run: {failures:?}"
        );
        assert!(!messages.is_empty(), "{name}: the client holds messages");
        assert_eq!(ours(case), messages, "{name}");
    }
}

fn events(values: Value) -> Vec<Event> {
    values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| Event::from_value(v.clone()).unwrap())
        .collect()
}

fn run(n: u32, body: Value) -> Vec<Event> {
    let mut all =
        vec![json!({"type": "RUN_STARTED", "threadId": "thread-1", "runId": format!("r{n}")})];
    all.extend(body.as_array().unwrap().iter().cloned());
    all.push(json!({"type": "RUN_FINISHED", "threadId": "thread-1", "runId": format!("r{n}")}));
    events(Value::Array(all))
}

#[test]
fn placement_rules_match_the_official_client() {
    let user = Message::user("u1", "hello");
    check(vec![
        Case {
            name: "text, reasoning and a call with its parent".into(),
            initial: vec![user.clone()],
            runs: vec![run(
                1,
                json!([
                    {"type": "REASONING_START", "messageId": "rs"},
                    {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "hmm"},
                    {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
                    {"type": "REASONING_END", "messageId": "rs"},
                    {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Let me "},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "look."},
                    {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
                    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "look", "parentMessageId": "a1"},
                    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"x\":1}"},
                    {"type": "TOOL_CALL_END", "toolCallId": "c1"}
                ]),
            )],
        },
        Case {
            name: "a result goes after its call, past results and before later text".into(),
            initial: vec![user.clone()],
            runs: vec![run(
                1,
                json!([
                    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "a"},
                    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
                    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "b", "parentMessageId": "c1"},
                    {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{}"},
                    {"type": "TOOL_CALL_END", "toolCallId": "c2"},
                    {"type": "TEXT_MESSAGE_START", "messageId": "a2", "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a2", "delta": "after"},
                    {"type": "TEXT_MESSAGE_END", "messageId": "a2"},
                    {"type": "TOOL_CALL_RESULT", "messageId": "t2", "toolCallId": "c2", "content": "two"},
                    {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "one", "role": "tool"}
                ]),
            )],
        },
        Case {
            name: "a call whose parent is not a message yet creates it".into(),
            initial: vec![user.clone()],
            runs: vec![run(
                1,
                json!([
                    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "a", "parentMessageId": "p9"},
                    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "renamed"},
                    {"type": "TOOL_CALL_END", "toolCallId": "c1"}
                ]),
            )],
        },
        Case {
            name: "activities are created, replaced and patched".into(),
            initial: vec![user.clone()],
            runs: vec![run(
                1,
                json!([
                    {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "command", "content": {"command": "ls", "state": "running"}},
                    {"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "command", "patch": [{"op": "replace", "path": "/state", "value": "completed"}, {"op": "add", "path": "/output", "value": "a\nb"}]},
                    {"type": "ACTIVITY_SNAPSHOT", "messageId": "act2", "activityType": "plan", "content": {"tasks": []}},
                    {"type": "ACTIVITY_SNAPSHOT", "messageId": "act2", "activityType": "plan", "content": {"tasks": [1]}, "replace": false},
                    {"type": "ACTIVITY_DELTA", "messageId": "nope", "activityType": "plan", "patch": [{"op": "add", "path": "/x", "value": 1}]},
                    {"type": "ACTIVITY_DELTA", "messageId": "act2", "activityType": "plan", "patch": [{"op": "remove", "path": "/missing"}]}
                ]),
            )],
        },
        Case {
            name: "a snapshot replaces, drops and appends; activity survives a snapshot with none"
                .into(),
            initial: vec![user.clone()],
            runs: vec![
                run(
                    1,
                    json!([
                        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
                        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "old"},
                        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
                        {"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "x", "content": {}}
                    ]),
                ),
                run(
                    2,
                    json!([
                        {"type": "MESSAGES_SNAPSHOT", "messages": [
                            {"id": "a1", "role": "assistant", "content": "new"},
                            {"id": "u1", "role": "user", "content": "hello"},
                            {"id": "a3", "role": "assistant", "content": "appended"}
                        ]}
                    ]),
                ),
            ],
        },
        Case {
            name: "subagent attribution lands on the messages".into(),
            initial: vec![user],
            runs: vec![run(
                1,
                json!([
                    {"type": "TOOL_CALL_START", "toolCallId": "inv", "toolCallName": "invoke_subagent"},
                    {"type": "TOOL_CALL_END", "toolCallId": "inv"},
                    {"type": "SUBAGENT_STARTED", "subagentRunId": "sa", "name": "research", "parentToolCallId": "inv"},
                    {"type": "TEXT_MESSAGE_START", "messageId": "s1", "role": "assistant", "subagentRunId": "sa"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "s1", "delta": "sub"},
                    {"type": "TEXT_MESSAGE_END", "messageId": "s1"},
                    {"type": "TOOL_CALL_START", "toolCallId": "sc", "toolCallName": "look", "subagentRunId": "sa"},
                    {"type": "TOOL_CALL_END", "toolCallId": "sc"},
                    {"type": "TOOL_CALL_RESULT", "messageId": "sr", "toolCallId": "sc", "content": "x", "subagentRunId": "sa"},
                    {"type": "SUBAGENT_FINISHED", "subagentRunId": "sa"},
                    {"type": "TOOL_CALL_RESULT", "messageId": "ir", "toolCallId": "inv", "content": "done"}
                ]),
            )],
        },
    ]);
}

/// The events of one translator snapshot, split into runs.
fn snapshot_runs(path: &Path) -> Vec<Vec<Event>> {
    let text = std::fs::read_to_string(path).unwrap();
    let body = text.splitn(3, "---\n").nth(2).expect("insta header");
    let value: Value = serde_json::from_str(body).unwrap();
    let mut runs: Vec<Vec<Event>> = Vec::new();
    for event in events(value["events"].clone()) {
        if matches!(event, Event::RunStarted(_)) || runs.is_empty() {
            runs.push(Vec::new());
        }
        runs.last_mut().unwrap().push(event);
    }
    runs
}

#[test]
fn every_recorded_translation_builds_the_messages_the_client_builds() {
    let dir = workspace().join("crates/agui-translate/tests/snapshots");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 10,
        "translator snapshots found in {}",
        dir.display()
    );
    let cases: Vec<Case> = paths
        .iter()
        .map(|p| Case {
            name: p.file_stem().unwrap().to_string_lossy().into_owned(),
            initial: vec![Message::user("u1", "prompt")],
            runs: snapshot_runs(p),
        })
        .collect();
    check(cases);
}
