//! Every frame captured between a host and the real harness (fixtures/harness-frames/, copied from
//! the reference captures by `cargo xtask import-captures`) decodes into our types and re-encodes to
//! JSON that is semantically equal to what was on the wire.
//!
//! "Semantically equal" means: the same fields and values, where lowerCamelCase and snake_case
//! names are the same field, a 64-bit integer written as a string equals the same number, and
//! `2` equals `2.0`. Anything else is a failure unless listed in [`EXCEPTIONS`] with its reason.

use std::path::{Path, PathBuf};

use harness_proto::lh::{
    InitializeConversationEvent, InputConfig, InputEvent, OutputConfig, OutputEvent,
};
use serde_json::Value;

/// Frames whose re-encoding legitimately differs, as (capture, seq, reason).
const EXCEPTIONS: &[(&str, u64, &str)] = &[
    (
        "raw_bad_frames",
        18,
        "deliberately not JSON; the harness drops it too",
    ),
    (
        "raw_bad_frames",
        21,
        "deliberately unknown field `fooBar`: the harness rejects the frame, we ignore the field",
    ),
    (
        "raw_bad_frames",
        28,
        "deliberately unknown field `userInput.bogus`: as above",
    ),
    (
        "raw_bad_frames",
        31,
        "deliberately a binary frame, not text",
    ),
    (
        "raw_basic",
        19,
        "enums sent as numbers (`types: [1]`, `agent_behavior: 1`); we re-encode them by name, which the harness \
         also accepts (decoding checked in `numbers_and_snake_case_are_read`)",
    ),
];

fn frames_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/harness-frames")
}

#[test]
fn every_captured_frame_round_trips() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(frames_dir())
        .expect("fixtures/harness-frames exists (cargo xtask import-captures)")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 40,
        "expected the full capture set, found {} files",
        files.len()
    );
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in &files {
        let capture = file.file_stem().unwrap().to_string_lossy().into_owned();
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let record: Value = serde_json::from_str(line).unwrap();
            let seq = record["seq"].as_u64().unwrap();
            let outcome = check_record(&record);
            let exception = EXCEPTIONS
                .iter()
                .find(|(c, s, _)| *c == capture && *s == seq);
            match (outcome, exception) {
                (Ok(()), None) => checked += 1,
                (Ok(()), Some((_, _, why))) => failures.push(format!(
                    "{capture}#{seq}: listed as an exception ({why}) but round-trips; remove it"
                )),
                (Err(_), Some(_)) => checked += 1,
                (Err(e), None) => failures.push(format!("{capture}#{seq}: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} frame(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked > 1200, "only {checked} frames checked");
}

/// Decodes one captured record and compares its re-encoding with the original.
fn check_record(record: &Value) -> Result<(), String> {
    let dir = record["dir"].as_str().unwrap();
    match record["channel"].as_str().unwrap() {
        "ws" => {
            let raw = record["raw"].as_str().ok_or("ws frame without raw text")?;
            let original: Value =
                serde_json::from_str(raw).map_err(|e| format!("not JSON: {e}"))?;
            let reencoded = match (dir, original.get("config").is_some()) {
                ("in", true) => reencode::<InitializeConversationEvent>(raw)?,
                ("in", false) => reencode::<InputEvent>(raw)?,
                _ => reencode::<OutputEvent>(raw)?,
            };
            semantic_eq(&original, &reencoded, "$")
        }
        "stdin" => {
            // The captured bytes were redacted (they held host paths), so the decoded form the
            // capture kept is checked through a binary round trip instead of byte equality.
            let json = record["frame"].to_string();
            let config: InputConfig = harness_proto::from_json(&json).map_err(|e| e.to_string())?;
            let frame = harness_proto::encode_stdio_frame(&config);
            let again: InputConfig =
                harness_proto::decode_stdio_frame(&frame).map_err(|e| e.to_string())?;
            if again != config {
                return Err("InputConfig changed in a binary round trip".into());
            }
            if let Some(raw) = record["raw"].as_str()
                && frame != hex(raw)
            {
                return Err("InputConfig bytes differ".into());
            }
            // The capture tool printed the empty `env` map; protobuf has no "empty map" distinct
            // from an absent one, so it is not re-encoded.
            let mut original = record["frame"].clone();
            if original["env"] == serde_json::json!({}) {
                original.as_object_mut().unwrap().remove("env");
            }
            semantic_eq(&original, &serde_json::to_value(&config).unwrap(), "$")
        }
        "stdout" => {
            let bytes = hex(record["raw"].as_str().ok_or("stdout frame without bytes")?);
            let config: OutputConfig =
                harness_proto::decode_stdio_frame(&bytes).map_err(|e| e.to_string())?;
            if harness_proto::encode_stdio_frame(&config) != bytes {
                return Err("OutputConfig does not re-encode to the same bytes".into());
            }
            let expected = &record["frame"];
            if config.port.map(i64::from) != expected["port"].as_i64()
                || config.api_key.as_deref() != expected["api_key"].as_str()
            {
                return Err(format!("decoded {config:?}, capture says {expected}"));
            }
            Ok(())
        }
        other => Err(format!("unexpected channel {other}")),
    }
}

fn reencode<
    T: serde::de::DeserializeOwned + serde::Serialize + prost::Message + Default + PartialEq,
>(
    raw: &str,
) -> Result<Value, String> {
    let message: T = harness_proto::from_json(raw).map_err(|e| e.to_string())?;
    // The binary form must survive too: that is what proves the types, not only the JSON.
    let again = T::decode(message.encode_to_vec().as_slice()).map_err(|e| e.to_string())?;
    if again != message {
        return Err("binary round trip changed the message".into());
    }
    serde_json::from_str(&harness_proto::to_json(&message)).map_err(|e| e.to_string())
}

/// Compares two JSON documents under the protojson equivalences described at the top.
fn semantic_eq(original: &Value, ours: &Value, path: &str) -> Result<(), String> {
    match (original, ours) {
        (Value::Object(a), Value::Object(b)) => {
            let a: Vec<(String, &Value)> = a.iter().map(|(k, v)| (camel(k), v)).collect();
            for (key, value) in &a {
                let Some(other) = b.get(key) else {
                    return Err(format!(
                        "{path}.{key}: present on the wire, missing after re-encoding"
                    ));
                };
                semantic_eq(value, other, &format!("{path}.{key}"))?;
            }
            for key in b.keys() {
                if !a.iter().any(|(k, _)| k == key) {
                    return Err(format!("{path}.{key}: added by re-encoding ({})", b[key]));
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .try_for_each(|(i, (x, y))| semantic_eq(x, y, &format!("{path}[{i}]"))),
        _ if number(original).is_some() && number(original) == number(ours) => Ok(()),
        _ if original == ours => Ok(()),
        _ => Err(format!(
            "{path}: wire has {original}, re-encoded has {ours}"
        )),
    }
}

/// A JSON number, or a string holding one (protojson writes 64-bit integers as strings).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse::<i128>().ok().map(|n| n as f64),
        _ => None,
    }
}

fn camel(key: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in key.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_semantic_comparison_catches_real_differences() {
    use serde_json::json;
    let ok = [
        (json!({"seq_num": "3"}), json!({"seqNum": "3"})),
        (json!({"n": 100000}), json!({"n": "100000"})),
        (json!({"d": 2}), json!({"d": 2.0})),
    ];
    for (a, b) in ok {
        assert_eq!(semantic_eq(&a, &b, "$"), Ok(()), "{a} vs {b}");
    }
    let bad = [
        (json!({"a": 1}), json!({})),
        (json!({}), json!({"a": ""})),
        (json!({"a": "x"}), json!({"a": "y"})),
        (json!({"a": [1, 2]}), json!({"a": [1]})),
        (json!({"n": "3"}), json!({"n": "4"})),
    ];
    for (a, b) in bad {
        assert!(
            semantic_eq(&a, &b, "$").is_err(),
            "{a} vs {b} should differ"
        );
    }
}

#[test]
fn numbers_and_snake_case_are_read() {
    use harness_proto::lh::{AgentBehavior, ModelType};
    let record = std::fs::read_to_string(frames_dir().join("raw_basic.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["seq"] == 19)
        .unwrap();
    let event: InitializeConversationEvent =
        harness_proto::from_json(record["raw"].as_str().unwrap()).unwrap();
    let config = event.config.unwrap();
    assert_eq!(config.agent_behavior(), AgentBehavior::Autonomous);
    assert_eq!(
        config.models[0].types().collect::<Vec<_>>(),
        [ModelType::Text]
    );
    assert_eq!(
        config.models[0].name.as_deref(),
        Some("gemini-3-flash-preview")
    );
}

/// Every captured step snapshot converts into a typed [`harness_proto::step::Step`] that keeps
/// its action, error and pending request.
#[test]
fn every_captured_step_has_a_typed_view() {
    use harness_proto::step::{Step, StepStatus};
    const ACTIONS: &[&str] = &[
        "listDirectory",
        "findFile",
        "searchDirectory",
        "viewFile",
        "createFile",
        "editFile",
        "runCommand",
        "compaction",
        "invokeSubagent",
        "generateImage",
        "finish",
        "mcpTool",
        "searchWeb",
        "readUrlContent",
        "customTool",
        "skillLookup",
        "runWorkflow",
    ];
    let mut steps = 0;
    for entry in std::fs::read_dir(frames_dir()).unwrap() {
        for line in std::fs::read_to_string(entry.unwrap().path())
            .unwrap()
            .lines()
        {
            let record: Value = serde_json::from_str(line).unwrap();
            let Some(raw) = record["raw"]
                .as_str()
                .filter(|_| record["dir"] == "out" && record["channel"] == "ws")
            else {
                continue;
            };
            let json: Value = serde_json::from_str(raw).unwrap();
            let updates: Vec<&Value> = match (
                &json["stepUpdate"],
                &json["initializeConversationResponse"]["history"],
            ) {
                (Value::Object(_), _) => vec![&json["stepUpdate"]],
                (_, Value::Array(history)) => history.iter().collect(),
                _ => continue,
            };
            for update in updates {
                let typed = Step::from(&harness_proto::from_json(&update.to_string()).unwrap());
                steps += 1;
                let has_action = ACTIONS.iter().any(|a| update.get(*a).is_some());
                assert_eq!(typed.action.is_some(), has_action, "{update}");
                assert_eq!(
                    typed.status == StepStatus::Error,
                    typed.error.is_some() && update["state"] == "STATE_ERROR",
                    "{update}"
                );
                assert_eq!(
                    typed.request.is_some(),
                    update.get("questionsRequest").is_some(),
                    "{update}"
                );
                assert_eq!(
                    typed.key.trajectory_id,
                    update["trajectoryId"].as_str().unwrap_or(""),
                    "{update}"
                );
            }
        }
    }
    assert!(steps > 500, "only {steps} step snapshots found");
}
