//! Checks against the official AG-UI 1.0 TypeScript client (`@ag-ui/client`, `@ag-ui/core`,
//! `@ag-ui/proto` 1.0.0), installed in `tests/agui-client/` by
//! `npm ci --prefix tests/agui-client`:
//!
//! * everything we encode — every event type in both encodings, whole runs, run inputs and
//!   capabilities — passes the official schemas, transport parsers and `verifyEvents`, and our
//!   protobuf frames decode exactly like the official encoder's (whose frames we decode too);
//! * every `RunAgentInput` the official `HttpAgent` posts during a multi-turn, tool-using,
//!   resuming conversation with multimodal content parses with our types.
//!
//! Without the Node packages these tests fail (never skip): CI installs them.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agui_types::{
    AgentCapabilities, Content, ContentPart, Encoding, Event, IdentityCapabilities, Interrupt,
    Message, MultiAgentCapabilities, PartSource, ReasoningMessageChunk, ResumeStatus, Role,
    RunAgentInput, RunOutcome, SubagentInfo, TextMessageChunk, Tool, ToolCallChunk,
    TransportCapabilities, protobuf,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// `tests/agui-client`, after checking that its packages are installed.
fn client_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("workspace root");
    let dir = workspace.join("tests/agui-client");
    let installed = dir.join("node_modules/@ag-ui/client/package.json");
    assert!(
        installed.is_file(),
        "the official AG-UI client is not installed in {}: run `npm ci --prefix tests/agui-client` \
         from the repository root (needs Node.js >= 20 and the npm registry)",
        dir.display()
    );
    dir
}

/// Runs a script of `tests/agui-client` with Node.
fn node(script: &str, args: &[&Path]) -> Output {
    let dir = client_dir();
    Command::new("node")
        .current_dir(&dir)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run `node {script}` (Node.js >= 20 is required): {error}")
        })
}

fn sample_events() -> Vec<Event> {
    let samples: Vec<Value> =
        serde_json::from_str(include_str!("data/sample_events.json")).expect("sample JSON");
    samples
        .into_iter()
        .map(|v| Event::from_value(v).expect("sample event"))
        .collect()
}

/// A run built with the crate's constructors, with every base field and attribution in use.
fn constructed_run() -> Vec<Event> {
    let meta = |k: &str| serde_json::Map::from_iter([(k.to_owned(), json!(true))]);
    let input = RunAgentInput {
        thread_id: "t9".into(),
        run_id: "r9".into(),
        messages: vec![Message::user("u9", "hello")],
        tools: vec![Tool {
            name: "ping".into(),
            description: "no args".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut started = agui_types::RunStarted::new("t9", "r9");
    started.input = Some(Box::new(input));
    vec![
        Event::from(started).with_timestamp(1_767_225_600_123),
        Event::step_started("work").with_metadata(meta("ag-ui")),
        Event::reasoning_start("rz"),
        Event::reasoning_message_start("rz"),
        Event::reasoning_message_content("rz", "thinking"),
        Event::reasoning_message_end("rz"),
        Event::reasoning_end("rz"),
        Event::text_message_start("m9").with_raw_event(json!({ "candidate": 0 })),
        Event::text_message_content("m9", "héllo \"world\"\n"),
        Event::text_message_end("m9"),
        Event::tool_call_start("c9", "ping", Some("m9".into())),
        Event::tool_call_args("c9", "{}"),
        Event::tool_call_end("c9"),
        Event::tool_call_result(
            "tr9",
            "c9",
            vec![
                ContentPart::text("pong"),
                ContentPart::Image(agui_types::MediaPart::new(PartSource::File {
                    value: "files/x".into(),
                    provider: Some("google".into()),
                    mime_type: Some("image/png".into()),
                })),
            ],
        ),
        TextMessageChunk {
            message_id: Some("m10".into()),
            delta: Some("chunk".into()),
            ..Default::default()
        }
        .into(),
        ToolCallChunk {
            tool_call_id: Some("c10".into()),
            tool_call_name: Some("ping".into()),
            delta: Some("{}".into()),
            ..Default::default()
        }
        .into(),
        ReasoningMessageChunk {
            message_id: Some("rz2".into()),
            delta: Some("more".into()),
            ..Default::default()
        }
        .into(),
        Event::state_snapshot(
            json!({ "big": 9_007_199_254_740_991_i64, "pi": 3.25, "list": [null, true] }),
        ),
        Event::custom("acme:done", json!(null)),
        Event::step_finished("work"),
        Event::run_finished_with(
            "t9",
            "r9",
            RunOutcome::Interrupt {
                interrupts: vec![Interrupt {
                    tool_call_id: Some("c9".into()),
                    response_schema: Some(serde_json::Map::from_iter([(
                        "type".to_owned(),
                        json!("object"),
                    )])),
                    ..Interrupt::new("i9", Interrupt::REASON_TOOL_CALL)
                }],
            },
        ),
    ]
}

fn capabilities() -> Vec<AgentCapabilities> {
    let full = AgentCapabilities {
        identity: Some(IdentityCapabilities {
            name: Some("antigravity".into()),
            kind: Some("antigravity".into()),
            version: Some("0.1.0".into()),
            ..Default::default()
        }),
        transport: Some(TransportCapabilities {
            streaming: Some(true),
            http_binary: Some(true),
            ..Default::default()
        }),
        multi_agent: Some(MultiAgentCapabilities {
            supported: Some(true),
            subagents: Some(vec![SubagentInfo {
                name: "researcher".into(),
                description: None,
            }]),
            ..Default::default()
        }),
        custom: Some(json!({ "harness": "localharness" })),
        ..Default::default()
    };
    let mut all: AgentCapabilities = serde_json::from_value(json!({
        "tools": { "supported": true, "items": [], "parallelCalls": true, "clientProvided": true },
        "output": { "structuredOutput": false, "supportedMimeTypes": ["text/plain"] },
        "state": { "snapshots": true, "deltas": true, "memory": false, "persistentState": false },
        "reasoning": { "supported": true, "streaming": true, "encrypted": false },
        "multimodal": { "input": { "image": true, "audio": true, "video": true, "pdf": true, "file": true },
                        "output": { "image": false, "audio": false } },
        "execution": { "codeExecution": true, "sandboxed": true, "maxIterations": 20, "maxExecutionTime": 600000 },
        "humanInTheLoop": { "supported": true, "approvals": true, "interventions": false, "feedback": false,
                            "interrupts": true, "approveWithEdits": true }
    }))
    .expect("capabilities");
    all.identity = full.identity.clone();
    vec![full, all, AgentCapabilities::default()]
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(dir.join(name), bytes).expect("temp file");
}

fn encode_all(events: &[Event], encoding: Encoding) -> Vec<u8> {
    events
        .iter()
        .flat_map(|e| encoding.encode(e).to_vec())
        .collect()
}

#[test]
fn official_client_accepts_everything_we_encode() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut events = sample_events();
    events.extend(constructed_run());
    let json: Vec<Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    write(
        dir.path(),
        "events.json",
        serde_json::to_vec(&json).expect("json"),
    );
    write(dir.path(), "events.sse", encode_all(&events, Encoding::Sse));
    write(
        dir.path(),
        "events.bin",
        encode_all(&events, Encoding::Protobuf),
    );

    let mut runs = Vec::new();
    for (index, stream) in support::deterministic_streams(24).iter().enumerate() {
        let (sse, bin) = (format!("run-{index}.sse"), format!("run-{index}.bin"));
        write(dir.path(), &sse, encode_all(stream, Encoding::Sse));
        write(dir.path(), &bin, encode_all(stream, Encoding::Protobuf));
        runs.push(json!({ "name": format!("generated #{index}"), "sse": sse, "bin": bin, "events": stream.len() }));
    }
    write(
        dir.path(),
        "runs.json",
        serde_json::to_vec(&runs).expect("json"),
    );

    let inputs: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::RunStarted(started) => started
                .input
                .as_deref()
                .map(|i| serde_json::to_value(i).expect("json")),
            _ => None,
        })
        .collect();
    assert_eq!(inputs.len(), 2);
    write(
        dir.path(),
        "inputs.json",
        serde_json::to_vec(&inputs).expect("json"),
    );
    write(
        dir.path(),
        "capabilities.json",
        serde_json::to_vec(&capabilities()).expect("json"),
    );

    let output = node("check-encodings.mjs", &[dir.path()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "check-encodings.mjs printed no report:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let errors = report["errors"].as_array().cloned().unwrap_or_default();
    let listing: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e["where"], e["message"]))
        .collect();
    assert!(
        errors.is_empty() && output.status.success(),
        "the official client objects:\n{}",
        listing.join("\n")
    );
    assert_eq!(report["checked"]["events"], json!(events.len()));
    assert_eq!(report["checked"]["runs"], json!(runs.len() + 1));

    // Frames written by the official encoder decode to our events.
    let official: Vec<String> = serde_json::from_slice(
        &std::fs::read(dir.path().join("official-frames.json")).expect("frames"),
    )
    .expect("frames JSON");
    assert_eq!(official.len(), events.len());
    for (index, (frame, event)) in official.iter().zip(&events).enumerate() {
        let bytes = decode_base64(frame);
        let decoded =
            protobuf::decode(&bytes).unwrap_or_else(|e| panic!("official frame #{index}: {e}"));
        assert_eq!(
            &decoded,
            event,
            "official frame #{index} ({})",
            event.event_type()
        );
    }
}

/// Minimal base64 decoder for the official frames (the crate has no base64 dependency).
fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text.bytes().filter(|b| *b != b'=') {
        let value = ALPHABET
            .iter()
            .position(|a| *a == byte)
            .expect("base64 digit") as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

#[test]
fn we_parse_every_input_the_official_http_agent_sends() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("capture.json");
    let output = node("drive-http-agent.mjs", &[&out]);
    assert!(
        output.status.success(),
        "drive-http-agent.mjs failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let capture: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("capture")).expect("capture JSON");
    let outcomes: Vec<&str> = capture["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or("failed"))
        .collect();
    assert_eq!(outcomes, ["success", "interrupt", "success", "success"]);

    let requests = capture["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 4);
    let mut inputs = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        assert_eq!(request["method"], "POST");
        assert_eq!(request["contentType"], "application/json");
        assert_eq!(request["accept"], "text/event-stream");
        let body = request["body"].as_str().expect("body");
        let input = RunAgentInput::from_json(body.as_bytes())
            .unwrap_or_else(|e| panic!("request #{index}: {e}\n{body}"));
        // Nothing is lost: our serialization is the document the client sent.
        let sent: Value = serde_json::from_str(body).expect("JSON body");
        assert_eq!(
            serde_json::to_value(&input).expect("json"),
            sent,
            "request #{index}"
        );
        inputs.push(input);
    }

    for input in &inputs {
        assert_eq!(input.thread_id, "thread-conformance");
        assert_eq!(input.protocol_version.as_deref(), Some("1.0"));
        assert!(
            input.forwarded_props.is_some(),
            "HttpAgent always sends forwardedProps"
        );
    }
    let run_ids: std::collections::HashSet<&str> =
        inputs.iter().map(|i| i.run_id.as_str()).collect();
    assert_eq!(run_ids.len(), 4, "a fresh run id per run");

    // Turn 1: multimodal user message, frontend tools (with and without a schema), context.
    let first = &inputs[0];
    assert_eq!(first.state, Some(json!({ "count": 0 })));
    assert_eq!(first.forwarded_props, Some(json!({ "tenant": "acme" })));
    assert_eq!(first.context[0].value, "en-GB");
    assert!(first.tools[0].parameters.is_some() && first.tools[1].parameters.is_none());
    let Message::User(user) = &first.messages[0] else {
        panic!("user message first")
    };
    let Content::Parts(parts) = &user.content else {
        panic!("multimodal parts")
    };
    let sources: Vec<&PartSource> = parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Image(m) | ContentPart::Document(m) | ContentPart::Audio(m) => {
                Some(&m.source)
            }
            _ => None,
        })
        .collect();
    assert!(matches!(sources[0], PartSource::Data { mime_type, .. } if mime_type == "image/png"));
    assert!(matches!(sources[1], PartSource::Url { .. }));
    assert!(matches!(sources[2], PartSource::File { provider: Some(p), .. } if p == "google"));

    // Turn 2: the streamed reasoning, the assistant's tool call and the app's tool answer.
    let second = &inputs[1];
    let roles: Vec<Role> = second.messages.iter().map(Message::role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Reasoning, Role::Assistant, Role::Tool]
    );
    let Message::Assistant(assistant) = &second.messages[2] else {
        panic!("assistant")
    };
    assert_eq!(assistant.tool_calls[0].id, "tc-1");
    assert_eq!(assistant.tool_calls[0].function.name, "get_weather");
    assert_eq!(
        assistant.tool_calls[0].function.arguments,
        r#"{"city":"Paris"}"#
    );
    let Message::Tool(tool) = &second.messages[3] else {
        panic!("tool")
    };
    assert_eq!(tool.tool_call_id, "tc-1");
    assert_eq!(tool.content.text(), r#"{"tempC":21}"#);
    assert_eq!(
        second.state,
        Some(json!({ "count": 1 })),
        "state from STATE_SNAPSHOT"
    );
    assert!(second.resume.is_empty());

    // Turn 3: the resume entry answering the interrupt.
    let third = &inputs[2];
    assert_eq!(third.resume.len(), 1);
    assert_eq!(third.resume[0].interrupt_id, "int-1");
    assert_eq!(third.resume[0].status, ResumeStatus::Resolved);
    assert_eq!(third.resume[0].payload, Some(json!({ "approved": true })));

    // Turn 4: the whole history, the new multimodal message last, no resume.
    let fourth = &inputs[3];
    assert_eq!(fourth.messages.len(), 7);
    assert_eq!(fourth.messages.last().map(Message::id), Some("user-2"));
    assert!(fourth.resume.is_empty() && fourth.tools.is_empty());
}
