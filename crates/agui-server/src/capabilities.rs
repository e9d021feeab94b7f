//! `GET <path>/capabilities`: what an agent can do, in the shape of AG-UI's `AgentCapabilities`
//! (`basic/capabilities.mdx`), derived from its actual configuration — nothing is advertised
//! that the configuration cannot deliver, and what it cannot do is said with an explicit
//! `false` ("an omitted field means undeclared, not unsupported"). What the spec has no key
//! for (connect, stop, the shape of subagents and activities) is under `custom`.

use agui_session::{Agent, StructuredOutputMode, SubagentEvents};
use agui_session::{COMMAND_ACTIVITY, FILE_CHANGE_ACTIVITY};
use agui_types::{
    AgentCapabilities, ExecutionCapabilities, HumanInTheLoopCapabilities, IdentityCapabilities,
    MultiAgentCapabilities, MultimodalCapabilities, MultimodalInputCapabilities,
    OutputCapabilities, ReasoningCapabilities, StateCapabilities, SubagentInfo, ToolsCapabilities,
    TransportCapabilities,
};
use harness_client::BuiltinTool;
use serde_json::{Map, Value, json};

use crate::sandbox::SandboxStatus;

/// The capabilities of `agent`; `demo` marks an agent served by the scripted demo model,
/// `sandbox` says how its harness processes are confined.
pub(crate) fn derive(agent: &Agent, demo: bool, sandbox: &SandboxStatus) -> AgentCapabilities {
    let options = agent.options();
    let server_tools: Vec<agui_types::Tool> = agent
        .tools()
        .iter()
        .map(|t| agui_types::Tool {
            name: t.name().to_owned(),
            description: t.description().to_owned(),
            parameters: Some(t.parameters()),
            metadata: None,
        })
        .collect();
    let has_server_tools = !server_tools.is_empty();
    let questions = options.questions_reachable();
    let structured_state = matches!(
        options.response_schema,
        Some((_, StructuredOutputMode::State))
    );
    let subagents = options.builtin_tools.contains(&BuiltinTool::Subagents);
    let mut custom = Map::new();
    custom.insert("model".into(), Value::String(options.model.clone()));
    custom.insert(
        "builtinTools".into(),
        json!(
            options
                .builtin_tools
                .iter()
                .map(|t| t.model_name())
                .collect::<Vec<_>>()
        ),
    );
    if questions || options.tool_approval {
        // Frontends match interrupts by reason; tell them which names this agent uses.
        let mut reasons = Map::new();
        if questions {
            reasons.insert(
                "question".into(),
                json!(options.interrupt_reasons.question()),
            );
        }
        if options.tool_approval {
            reasons.insert(
                "approval".into(),
                json!(options.interrupt_reasons.approval()),
            );
        }
        custom.insert("interruptReasons".into(), Value::Object(reasons));
    }
    // Not in the spec's capability shape: the routes beside the run that a client can use on a
    // thread that outlives its request.
    custom.insert(
        "threads".into(),
        json!({
            "connect": true,
            "stop": true,
            "delete": true,
            "onDisconnect": match options.on_disconnect {
                agui_session::OnDisconnect::Detach => "detach",
                agui_session::OnDisconnect::Cancel => "cancel",
            },
        }),
    );
    custom.insert(
        "sandbox".into(),
        serde_json::to_value(sandbox).unwrap_or_default(),
    );
    if subagents {
        custom.insert(
            "subagentEvents".into(),
            json!(match options.subagent_events {
                SubagentEvents::Subagent => "subagent",
                SubagentEvents::Steps => "steps",
            }),
        );
    }
    // The activity types this agent's tools can produce.
    let mut activities = Vec::new();
    if options.activities {
        let writes = [BuiltinTool::CreateFile, BuiltinTool::EditFile];
        if writes.iter().any(|t| options.builtin_tools.contains(t)) {
            activities.push(FILE_CHANGE_ACTIVITY);
        }
        if options.builtin_tools.contains(&BuiltinTool::RunCommand) {
            activities.push(COMMAND_ACTIVITY);
        }
    }
    custom.insert("activityTypes".into(), json!(activities));
    if demo {
        custom.insert("demo".into(), Value::Bool(true));
        custom.insert(
            "notice".into(),
            Value::String("Offline demo: answers come from a scripted model, not Gemini.".into()),
        );
    }
    AgentCapabilities {
        identity: Some(IdentityCapabilities {
            name: Some(options.name.clone()),
            kind: Some("antigravity".into()),
            description: Some(if demo {
                "Google Antigravity agent exposed over AG-UI (offline demo model).".into()
            } else {
                "Google Antigravity agent exposed over AG-UI.".into()
            }),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            provider: Some("agui-antigravity".into()),
            ..Default::default()
        }),
        transport: Some(TransportCapabilities {
            streaming: Some(true),
            http_binary: Some(true),
            websocket: Some(false),
            push_notifications: Some(false),
            resumable: Some(false),
        }),
        tools: Some(ToolsCapabilities {
            supported: Some(true),
            items: if server_tools.is_empty() {
                None
            } else {
                Some(server_tools)
            },
            parallel_calls: Some(true),
            client_provided: Some(options.frontend_tools),
        }),
        output: Some(OutputCapabilities {
            structured_output: Some(options.response_schema.is_some()),
            ..Default::default()
        }),
        state: Some(StateCapabilities {
            // Server tools may write the shared state; structured output may arrive as a snapshot.
            snapshots: Some(structured_state || has_server_tools),
            deltas: Some(false),
            persistent_state: Some(true),
            ..Default::default()
        }),
        multi_agent: Some(if subagents {
            MultiAgentCapabilities {
                supported: Some(true),
                delegation: Some(true),
                handoffs: Some(false),
                // The definitions `invoke_subagent` offers the model (its `TypeName`s).
                subagents: Some(vec![
                    SubagentInfo {
                        name: "research".into(),
                        description: Some("Built-in research subagent".into()),
                    },
                    SubagentInfo {
                        name: "self".into(),
                        description: Some("A copy of this agent".into()),
                    },
                ]),
            }
        } else {
            MultiAgentCapabilities {
                supported: Some(false),
                ..Default::default()
            }
        }),
        reasoning: Some(ReasoningCapabilities {
            supported: Some(true),
            streaming: Some(true),
            encrypted: Some(false),
        }),
        multimodal: Some(MultimodalCapabilities {
            input: Some(MultimodalInputCapabilities {
                image: Some(true),
                audio: Some(true),
                video: Some(true),
                pdf: Some(true),
                file: Some(false),
            }),
            ..Default::default()
        }),
        execution: Some(ExecutionCapabilities {
            code_execution: Some(options.builtin_tools.contains(&BuiltinTool::RunCommand)),
            sandboxed: Some(sandbox.confined),
            max_iterations: options.max_tool_calls_per_turn.map(u64::from),
            ..Default::default()
        }),
        human_in_the_loop: Some(HumanInTheLoopCapabilities {
            supported: Some(options.frontend_tools || questions || options.tool_approval),
            approvals: Some(options.tool_approval),
            // Nothing lets a human change the agent's plan mid-run (a frontend tool answers
            // a call; it does not intervene), nor rate or edit what the agent did.
            interventions: Some(false),
            feedback: Some(false),
            interrupts: Some(questions || options.tool_approval),
            // An approval is yes or no: edited arguments in the resume payload are not applied.
            approve_with_edits: options.tool_approval.then_some(false),
        }),
        custom: Some(Value::Object(custom)),
    }
}
