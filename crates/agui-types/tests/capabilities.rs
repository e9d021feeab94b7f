//! `AgentCapabilities` wire shape: camelCase, absent means omitted, 1.0 key names.

use agui_types::{
    AgentCapabilities, ExecutionCapabilities, HumanInTheLoopCapabilities, IdentityCapabilities,
    MultiAgentCapabilities, SubagentInfo, TransportCapabilities,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Serializes `capabilities`, compares with `expected`, and parses it back unchanged.
fn check(capabilities: AgentCapabilities, expected: Value) {
    let json = serde_json::to_value(&capabilities).expect("serializes");
    assert_eq!(json, expected);
    let back: AgentCapabilities = serde_json::from_value(json).expect("parses");
    assert_eq!(back, capabilities);
}

#[test]
fn capabilities_serialize_only_what_is_declared() {
    let cases = [
        (AgentCapabilities::default(), json!({})),
        (
            AgentCapabilities {
                identity: Some(IdentityCapabilities {
                    name: Some("antigravity".into()),
                    kind: Some("antigravity".into()),
                    documentation_url: Some("https://example.com/docs".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            json!({ "identity": { "name": "antigravity", "type": "antigravity", "documentationUrl": "https://example.com/docs" } }),
        ),
        (
            AgentCapabilities {
                transport: Some(TransportCapabilities {
                    streaming: Some(true),
                    http_binary: Some(false),
                    ..Default::default()
                }),
                execution: Some(ExecutionCapabilities {
                    max_execution_time: Some(600_000),
                    ..Default::default()
                }),
                human_in_the_loop: Some(HumanInTheLoopCapabilities {
                    interrupts: Some(true),
                    approve_with_edits: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            },
            json!({
                "transport": { "streaming": true, "httpBinary": false },
                "execution": { "maxExecutionTime": 600000 },
                "humanInTheLoop": { "interrupts": true, "approveWithEdits": true }
            }),
        ),
        (
            AgentCapabilities {
                multi_agent: Some(MultiAgentCapabilities {
                    supported: Some(true),
                    subagents: Some(vec![SubagentInfo {
                        name: "researcher".into(),
                        description: Some("finds".into()),
                    }]),
                    ..Default::default()
                }),
                custom: Some(json!({ "antigravity": { "model": "gemini" } })),
                ..Default::default()
            },
            json!({
                "multiAgent": { "supported": true, "subagents": [{ "name": "researcher", "description": "finds" }] },
                "custom": { "antigravity": { "model": "gemini" } }
            }),
        ),
    ];
    for (capabilities, expected) in cases {
        check(capabilities, expected);
    }
}

#[test]
fn retired_and_unknown_keys_are_ignored_on_input() {
    let parsed: AgentCapabilities = serde_json::from_value(json!({
        "multiAgent": { "subAgents": [{ "name": "old" }] },
        "futureCategory": { "x": true },
        "custom": null
    }))
    .expect("lenient");
    assert_eq!(parsed.multi_agent, Some(MultiAgentCapabilities::default()));
    assert_eq!(parsed.custom, None);
    assert_eq!(
        serde_json::to_value(&parsed).expect("json"),
        json!({ "multiAgent": {} })
    );
}
