//! The tool contract of a thread's conversation, and the harness config built from it.
//!
//! Antigravity fixes a conversation's tools when it connects, so the tools a client sends
//! (`RunAgentInput.tools`) are part of the conversation's identity: when they change, the
//! session reconnects with the new list (cold resume, history kept).

use std::collections::BTreeSet;
use std::path::Path;

use agui_types::Tool;
use harness_client::{BuiltinTool, ConversationConfig, CustomTool, ModelEndpoint, WarmUp, policy};
#[cfg(test)]
use harness_proto::lh::HarnessConfig;
use harness_proto::lh::{LifecycleHook, harness_config::SessionContinuationMode};
use serde_json::{Value, json};

#[cfg(test)]
use crate::error::SessionError;
use crate::options::AgentOptions;
use crate::thread::callbacks::{APP_CONTEXT_TOOL, APP_STATE_TOOL, CallbackPolicy};
use crate::tools::ToolRegistry;

/// The client tools a conversation was opened with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Contract {
    /// A digest of the accepted tools (name, description, schema), independent of order.
    pub(crate) signature: String,
    /// Accepted frontend tools.
    pub(crate) frontend: Vec<Tool>,
    /// Silent tools available in this contract (not shadowed by another tool).
    pub(crate) silent: BTreeSet<String>,
}

impl Contract {
    /// The contract for a run's `tools`. Tools that cannot be declared (invalid names, names
    /// taken by a server or built-in tool) are left out with a warning.
    pub(crate) fn new(tools: &[Tool], options: &AgentOptions, server: &ToolRegistry) -> Self {
        let mut frontend: Vec<Tool> = Vec::new();
        if options.frontend_tools {
            for tool in tools {
                if let Err(why) = declarable(&tool.name, options, server) {
                    tracing::warn!(tool = %tool.name, "leaving a client tool out: {why}");
                } else if frontend.iter().any(|t| t.name == tool.name) {
                    tracing::warn!(tool = %tool.name, "leaving a duplicate client tool out");
                } else {
                    frontend.push(tool.clone());
                }
            }
        }
        frontend.sort_by(|a, b| a.name.cmp(&b.name));
        let taken =
            |name: &str| server.get(name).is_some() || frontend.iter().any(|t| t.name == name);
        let mut silent = BTreeSet::new();
        if options.app_context_tool && !taken(APP_CONTEXT_TOOL) {
            silent.insert(APP_CONTEXT_TOOL.to_owned());
        }
        if options.app_state_tool && !taken(APP_STATE_TOOL) {
            silent.insert(APP_STATE_TOOL.to_owned());
        }
        let listed: Vec<Value> = frontend
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        let signature = crate::hash::sha256_hex(Value::Array(listed).to_string().as_bytes(), 8);
        Self {
            signature,
            frontend,
            silent,
        }
    }

    /// How the callbacks of a conversation with this contract behave.
    pub(crate) fn callback_policy(&self, options: &AgentOptions) -> CallbackPolicy {
        CallbackPolicy {
            frontend_tools: self.frontend.iter().map(|t| t.name.clone()).collect(),
            silent_tools: self.silent.clone(),
            tool_approval: options.tool_approval,
            auto_approve: options.auto_approve_tools.clone(),
            max_tool_calls: options.max_tool_calls_per_turn,
            questions: options.questions_reachable(),
            reasons: options.interrupt_reasons,
        }
    }

    /// Every tool name this contract suppresses in the step translation (the session emits
    /// their events itself).
    pub(crate) fn session_tool_names(&self, server: &ToolRegistry) -> BTreeSet<String> {
        server
            .iter()
            .map(|t| t.name().to_owned())
            .chain(self.frontend.iter().map(|t| t.name.clone()))
            .chain(self.silent.iter().cloned())
            .collect()
    }

    /// The harness config for a conversation of `thread` with this contract.
    #[cfg(test)]
    pub(crate) fn harness_config(
        &self,
        options: &AgentOptions,
        server: &ToolRegistry,
        workspace: &Path,
        conversation_id: &str,
    ) -> Result<HarnessConfig, SessionError> {
        Ok(self
            .conversation_config(
                options,
                server,
                workspace,
                &workspace.join(".app"),
                conversation_id,
                false,
            )
            .build()?)
    }

    /// The builder of [`harness_config`](Self::harness_config).
    ///
    /// `resume`: the harness has this conversation, so it must resume it (an init that finds
    /// it missing fails, rather than silently starting a conversation that forgot everything).
    pub(crate) fn conversation_config(
        &self,
        options: &AgentOptions,
        server: &ToolRegistry,
        workspace: &Path,
        app_data_dir: &Path,
        conversation_id: &str,
        resume: bool,
    ) -> ConversationConfig {
        let mut config = ConversationConfig::new(&options.model, options.endpoint.clone());
        // Extra settings go first, so the agent's own settings win where both set something.
        if let Some(extra) = &options.harness_settings {
            config = extra.apply(config);
        }
        config = config
            .builtin_tools(options.builtin_tools.iter().copied())
            .workspace(workspace)
            .app_data_dir(app_data_dir)
            .behavior(options.behavior.to_harness())
            .conversation_id(
                conversation_id,
                if resume {
                    SessionContinuationMode::Resume
                } else {
                    SessionContinuationMode::CreateOrResume
                },
            );
        if let Some(model) = &options.image_model {
            config = config.image_model(model);
        }
        if let Some(instructions) = &options.system_instructions {
            config = config.system_instructions(instructions.clone());
        }
        if let Some((schema, _)) = &options.response_schema {
            config = config.response_schema(schema.clone());
        }
        if let Some((retries, sleep)) = options.api_retry {
            config = config.api_retry(retries, sleep);
        }
        if options.tool_approval || options.max_tool_calls_per_turn.is_some() {
            config = config.hook(LifecycleHook::PreTool);
        }
        // Approval asks the user about every call, which is the check the harness requires;
        // otherwise every tool is allowed, unless the extra settings bring a policy (their own
        // or their base config's): allow-all only fills the gap.
        if !options.tool_approval && !has_policy(&config, options) {
            config = config.policy(if options.workspace_containment {
                policy::allow_all_in_workspace()
            } else {
                policy::allow_all()
            });
        }
        for tool in server.iter() {
            config = config.tool(CustomTool {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.parameters(),
            });
        }
        for tool in &self.frontend {
            config = config.tool(CustomTool {
                name: tool.name.clone(),
                description: if tool.description.trim().is_empty() {
                    format!("Client-side tool: {}", tool.name)
                } else {
                    tool.description.clone()
                },
                parameters: match &tool.parameters {
                    Some(schema @ Value::Object(map))
                        if !map.is_empty() && schema.get("type").is_none_or(|t| t == "object") =>
                    {
                        schema.clone()
                    }
                    _ => json!({"type": "object", "properties": {}}),
                },
            });
        }
        for name in &self.silent {
            let description = if name == APP_CONTEXT_TOOL {
                "Returns what the app shares about the user, the page and the app. Call it before answering \
                 anything that may depend on them."
            } else {
                "Returns the app's shared state, including the user's edits in the UI. Call it before answering \
                 anything that may depend on the app state."
            };
            config = config.tool(CustomTool {
                name: name.clone(),
                description: description.into(),
                parameters: Value::Null,
            });
        }
        config
    }
}

/// Whether `config` has a policy from the extra harness settings. The builder does not say, so
/// a trial build is read, with a pre-tool hook so that write tools without a policy do not fail
/// it. A trial that fails anyway counts as a policy: the real build then reports the error
/// rather than an allow-all policy hiding a broken one.
fn has_policy(config: &ConversationConfig, options: &AgentOptions) -> bool {
    options.harness_settings.is_some()
        && config
            .clone()
            .hook(LifecycleHook::PreTool)
            .build()
            .map_or(true, |built| built.policy_config.is_some())
}

/// The harness config (harness-client's builder) an agent configured with `options` and
/// `server_tools` opens a thread's conversation with, for a run whose `RunAgentInput.tools` are
/// `client_tools`, working in `workspace` and keeping its transcripts in `app_data_dir`:
/// exactly what a session sends (tools, policy, behaviour, hooks, model endpoint, continuation
/// mode); `build()` it to open a conversation.
///
/// For programs that drive the harness directly with a server's settings, such as the
/// benchmark's raw floor (`crates/agui-bench`); a session never needs it.
pub fn conversation_config(
    options: &AgentOptions,
    server_tools: &ToolRegistry,
    client_tools: &[Tool],
    workspace: &Path,
    app_data_dir: &Path,
    conversation_id: &str,
) -> ConversationConfig {
    Contract::new(client_tools, options, server_tools).conversation_config(
        options,
        server_tools,
        workspace,
        app_data_dir,
        conversation_id,
        false,
    )
}

/// What a warm-up turn says (its answer is thrown away).
const WARM_UP_PROMPT: &str = "Reply with one word: ready.";

/// The throwaway turn that harness processes of an agent configured with `options` run when
/// they are started ahead of need ([`harness_client::WarmUp`]): a conversation with the agent's
/// tools, instructions and behaviour, talking to `endpoint` — one that answers at once, never
/// the agent's paid model — in the warm-up's scratch directories. Extra harness settings are
/// left out: they may start MCP servers or subagents.
pub fn warm_up(
    options: &AgentOptions,
    server_tools: &ToolRegistry,
    endpoint: ModelEndpoint,
) -> WarmUp {
    let options = AgentOptions {
        endpoint,
        harness_settings: None,
        ..options.clone()
    };
    let server = server_tools.clone();
    WarmUp::new(WARM_UP_PROMPT, move |scratch| {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Contract::new(&[], &options, &server)
            .conversation_config(
                &options,
                &server,
                &scratch.join("workspace"),
                &scratch.join("app"),
                &id,
                false,
            )
            .build()
    })
}

fn declarable(name: &str, options: &AgentOptions, server: &ToolRegistry) -> Result<(), String> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && name.len() <= 64;
    if !valid {
        return Err("not a valid function name".into());
    }
    if server.get(name).is_some() {
        return Err("a server tool has this name".into());
    }
    if BuiltinTool::from_name(name).is_some_and(|b| options.builtin_tools.contains(&b)) {
        return Err("an enabled built-in tool has this name".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use harness_client::ModelEndpoint;

    use super::*;

    fn options() -> AgentOptions {
        let mut o = AgentOptions::new("m", ModelEndpoint::gemini("http://x", "k"), "/tmp/agent");
        o.builtin_tools = [BuiltinTool::RunCommand].into();
        o.app_state_tool = true;
        o
    }

    fn tool(name: &str, description: &str, parameters: Option<Value>) -> Tool {
        Tool {
            name: name.into(),
            description: description.into(),
            parameters,
            metadata: None,
        }
    }

    #[test]
    fn the_signature_covers_schema_and_description_but_not_order() {
        let a = tool("pick", "Pick a colour", Some(json!({"type": "object"})));
        let b = tool("ask", "Ask", None);
        let one = Contract::new(&[a.clone(), b.clone()], &options(), &ToolRegistry::new());
        let two = Contract::new(&[b.clone(), a.clone()], &options(), &ToolRegistry::new());
        assert_eq!(one.signature, two.signature);
        let changed = Contract::new(
            &[
                tool("pick", "Pick a color", Some(json!({"type": "object"}))),
                b,
            ],
            &options(),
            &ToolRegistry::new(),
        );
        assert_ne!(one.signature, changed.signature);
    }

    #[test]
    fn undeclarable_tools_are_left_out() {
        let tools = [
            tool("bad name", "", None),
            tool("run_command", "", None),
            tool("ok", "", None),
            tool("ok", "dup", None),
        ];
        let contract = Contract::new(&tools, &options(), &ToolRegistry::new());
        assert_eq!(
            contract
                .frontend
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["ok"]
        );
        assert!(contract.silent.contains(APP_STATE_TOOL));
        let shadowed = Contract::new(
            &[tool(APP_STATE_TOOL, "mine", None)],
            &options(),
            &ToolRegistry::new(),
        );
        assert!(
            shadowed.silent.is_empty(),
            "a client tool with the name takes precedence"
        );
    }

    #[test]
    fn the_harness_config_declares_every_tool() {
        let contract = Contract::new(
            &[tool("pick", "", Some(json!({"type": "string"})))],
            &options(),
            &ToolRegistry::new(),
        );
        let config = contract
            .harness_config(
                &options(),
                &ToolRegistry::new(),
                Path::new("/tmp/w/abc"),
                "c0ffee",
            )
            .unwrap();
        let names: Vec<&str> = config.tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["pick", APP_STATE_TOOL]);
        assert_eq!(config.tools[0].description(), "Client-side tool: pick");
        assert_eq!(
            config.tools[0].parameters_json_schema(),
            r#"{"properties":{},"type":"object"}"#
        );
        assert_eq!(config.cascade_id(), "c0ffee");
        assert!(
            config.policy_config.is_some(),
            "without approval, everything is allowed explicitly"
        );
    }

    #[test]
    fn the_public_entry_point_builds_what_a_session_sends() {
        let tools = [tool("pick", "Pick", Some(json!({"type": "object"})))];
        let (ws, id) = (Path::new("/tmp/w/abc"), "c0ffee");
        let registry = ToolRegistry::new();
        assert_eq!(
            conversation_config(&options(), &registry, &tools, ws, &ws.join(".app"), id)
                .build()
                .unwrap(),
            Contract::new(&tools, &options(), &registry)
                .harness_config(&options(), &registry, ws, id)
                .unwrap()
        );
    }

    #[test]
    fn a_policy_from_the_extra_harness_settings_is_kept() {
        let rules = policy::allow_all();
        let mut own = policy::allow_all();
        own.rules[0].name = Some("mine".into());
        let mut with_base = options();
        let base = HarnessConfig {
            policy_config: Some(own.clone()),
            ..Default::default()
        };
        with_base.harness_settings = Some(crate::options::HarnessSettings::new(move |c| {
            c.base(base.clone())
        }));
        let config = |o: &AgentOptions| {
            Contract::new(&[], o, &ToolRegistry::new())
                .harness_config(o, &ToolRegistry::new(), Path::new("/tmp/w"), "c")
                .unwrap()
                .policy_config
        };
        assert_eq!(config(&with_base), Some(own));
        assert_eq!(config(&options()), Some(rules));
    }
}
