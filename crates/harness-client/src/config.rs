//! A typed builder for `HarnessConfig`, the per-conversation configuration.
//!
//! It encodes the traps of the protocol: built-in tools are always listed explicitly (omitting
//! `harnessSideTools` removes every built-in), a static ASK_USER policy rule is rejected before
//! the harness drops the connection over it, and write tools cannot be enabled without either a
//! policy or a pre-tool hook (the harness would run them unchecked).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use harness_proto::lh::{
    self, AgentBehavior, HarnessConfig, LifecycleHook, PolicyConfig, PolicyDecision, PolicyRule,
    harness_config::SessionContinuationMode, policy_config::WorkspaceContainment,
};
use serde_json::Value;

use crate::error::{HarnessError, Result};

/// The image model used when none is configured (the Python SDK's default).
pub const DEFAULT_IMAGE_MODEL: &str = "gemini-3.1-flash-lite-image";

/// Where the model lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelEndpoint {
    /// The Gemini API (or anything speaking it, such as the scripted test model).
    Gemini {
        /// Base URL; `None` means Google's default endpoint.
        base_url: Option<String>,
        /// API key (sent as `X-Goog-Api-Key`).
        api_key: Option<String>,
        /// Extra HTTP headers on every model request.
        headers: BTreeMap<String, String>,
        /// Gemini thinking level (`low`, `high`, …), if set.
        thinking_level: Option<String>,
    },
    /// Vertex AI.
    Vertex {
        /// Google Cloud project.
        project: String,
        /// Region, e.g. `us-central1`.
        location: String,
        /// Base URL override.
        base_url: Option<String>,
        /// API key, when not using ambient credentials.
        api_key: Option<String>,
        /// Extra HTTP headers.
        headers: BTreeMap<String, String>,
    },
    /// An OpenAI-compatible server (Ollama, LM Studio…): pass the server root; the harness
    /// appends `/v1/chat/completions`. It has no API key field.
    OpenAiCompatible {
        /// Server root URL.
        base_url: String,
    },
}

impl ModelEndpoint {
    /// A Gemini-API endpoint at `base_url` with `api_key`.
    pub fn gemini(base_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self::Gemini {
            base_url: Some(base_url.into()),
            api_key: Some(api_key.into()),
            headers: BTreeMap::new(),
            thinking_level: None,
        }
    }

    fn to_proto(&self, name: &str, kind: lh::ModelType) -> lh::ModelConfig {
        use lh::model_config::Endpoint;
        let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let endpoint = match self {
            Self::Gemini {
                base_url,
                api_key,
                headers,
                thinking_level,
            } => Endpoint::GeminiApiEndpoint(lh::GeminiApiEndpoint {
                base_url: non_empty(base_url),
                http_headers: headers.clone(),
                api_key: non_empty(api_key),
                options: thinking_level.clone().map(|level| lh::GeminiModelOptions {
                    thinking_level: Some(level),
                    ..Default::default()
                }),
            }),
            Self::Vertex {
                project,
                location,
                base_url,
                api_key,
                headers,
            } => Endpoint::VertexEndpoint(lh::VertexEndpoint {
                base_url: non_empty(base_url),
                http_headers: headers.clone(),
                project: Some(project.clone()),
                location: Some(location.clone()),
                options: None,
                api_key: non_empty(api_key),
            }),
            Self::OpenAiCompatible { base_url } => Endpoint::GemmaEndpoint(lh::GemmaEndpoint {
                base_url: Some(base_url.clone()),
            }),
        };
        lh::ModelConfig {
            endpoint: Some(endpoint),
            name: Some(name.to_owned()),
            types: vec![kind as i32],
        }
    }
}

/// Extra instructions for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemInstructions {
    /// Appended to Antigravity's own system prompt (keeps its tool and workspace guidance).
    Appended(String),
    /// Replaces it entirely.
    Custom(String),
}

/// A host tool the model may call; the harness sends a `toolCall` to the host.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomTool {
    /// Function name (letters, digits, `_`, `.`, `-`; up to 64; starting with a letter or `_`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments (an object schema). `Null` or `{}` means "no arguments".
    pub parameters: Value,
}

/// The harness's built-in tools, by the name hooks and policies use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BuiltinTool {
    /// `list_dir` (internal `list_directory`).
    ListDirectory,
    /// `view_file`.
    ViewFile,
    /// `write_to_file` (internal `create_file`).
    CreateFile,
    /// `replace_file_content` (internal `edit_file`).
    EditFile,
    /// `run_command`.
    RunCommand,
    /// `find_by_name` (internal `find_file`).
    FindFile,
    /// `grep_search` (internal `search_directory`).
    SearchDirectory,
    /// `ask_question`.
    AskQuestion,
    /// `read_url_content`.
    ReadUrlContent,
    /// `search_web`.
    SearchWeb,
    /// `generate_image`.
    GenerateImage,
    /// `invoke_subagent` and its companions.
    Subagents,
    /// `run_workflow`.
    RunWorkflow,
    /// `manage_task`.
    ManageTask,
    /// `schedule`.
    Schedule,
}

impl BuiltinTool {
    /// Every built-in tool.
    pub const ALL: [BuiltinTool; 15] = [
        Self::ListDirectory,
        Self::ViewFile,
        Self::CreateFile,
        Self::EditFile,
        Self::RunCommand,
        Self::FindFile,
        Self::SearchDirectory,
        Self::AskQuestion,
        Self::ReadUrlContent,
        Self::SearchWeb,
        Self::GenerateImage,
        Self::Subagents,
        Self::RunWorkflow,
        Self::ManageTask,
        Self::Schedule,
    ];

    /// The internal name (used by hooks, policies and steps).
    pub fn name(self) -> &'static str {
        match self {
            Self::ListDirectory => "list_directory",
            Self::ViewFile => "view_file",
            Self::CreateFile => "create_file",
            Self::EditFile => "edit_file",
            Self::RunCommand => "run_command",
            Self::FindFile => "find_file",
            Self::SearchDirectory => "search_directory",
            Self::AskQuestion => "ask_question",
            Self::ReadUrlContent => "read_url_content",
            Self::SearchWeb => "search_web",
            Self::GenerateImage => "generate_image",
            Self::Subagents => "invoke_subagent",
            Self::RunWorkflow => "run_workflow",
            Self::ManageTask => "manage_task",
            Self::Schedule => "schedule",
        }
    }

    /// The function name the model sees.
    pub fn model_name(self) -> &'static str {
        match self {
            Self::ListDirectory => "list_dir",
            Self::CreateFile => "write_to_file",
            Self::EditFile => "replace_file_content",
            Self::FindFile => "find_by_name",
            Self::SearchDirectory => "grep_search",
            other => other.name(),
        }
    }

    /// Parses an internal or model-facing name (also `start_subagent`, the deprecated alias).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "start_subagent" => Some(Self::Subagents),
            _ => Self::ALL
                .into_iter()
                .find(|t| t.name() == name || t.model_name() == name),
        }
    }

    /// Whether the tool changes files or runs programs (needs a policy or a pre-tool hook).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Self::CreateFile | Self::EditFile | Self::RunCommand | Self::RunWorkflow
        )
    }
}

/// The built-in tools the Python SDK enables when none are listed: all but listing and
/// searching the workspace and asking questions.
pub fn default_builtin_tools() -> BTreeSet<BuiltinTool> {
    use BuiltinTool::*;
    let left_out = [ListDirectory, FindFile, SearchDirectory, AskQuestion];
    BuiltinTool::ALL
        .into_iter()
        .filter(|tool| !left_out.contains(tool))
        .collect()
}

/// Policy rules.
pub mod policy {
    use super::*;

    /// Allow every tool (and disable workspace containment), like the SDK's `allow_all()`.
    pub fn allow_all() -> PolicyConfig {
        PolicyConfig {
            rules: vec![rule("*", PolicyDecision::Allow, "allow_all")],
            workspace_containment: Some(WorkspaceContainment::Disabled as i32),
            auto_config: None,
        }
    }

    /// Allow every tool, with the harness's workspace containment enforced: file tools refuse
    /// paths outside the workspaces, the app data dir and `/tmp` (like the SDK's
    /// `allow_all(workspace_only=True)`). The check resolves symlinks but is racy, so it
    /// filters mistakes rather than bounding an agent that can run commands.
    pub fn allow_all_in_workspace() -> PolicyConfig {
        PolicyConfig {
            workspace_containment: Some(WorkspaceContainment::Enabled as i32),
            ..allow_all()
        }
    }

    /// A static rule for `tool` (`*` for every tool).
    pub fn rule(tool: &str, decision: PolicyDecision, name: &str) -> PolicyRule {
        PolicyRule {
            tool: Some(tool.to_owned()),
            server_name: Some(String::new()),
            name: Some(name.to_owned()),
            decision: Some(decision as i32),
            deny_reason: Some(String::new()),
            is_dynamic: Some(false),
            rule_id: Some(String::new()),
        }
    }

    /// A dynamic rule: the harness asks the host (`policyDecisionRequest`) when it matches.
    pub fn ask(tool: &str, name: &str) -> PolicyRule {
        PolicyRule {
            is_dynamic: Some(true),
            ..rule(tool, PolicyDecision::AskUser, name)
        }
    }
}

/// Builds the `HarnessConfig` of one conversation.
#[derive(Debug, Clone)]
pub struct ConversationConfig {
    model: String,
    image_model: String,
    endpoint: ModelEndpoint,
    instructions: Option<SystemInstructions>,
    tools: Vec<CustomTool>,
    builtins: BTreeSet<BuiltinTool>,
    workspaces: Vec<PathBuf>,
    app_data_dir: Option<PathBuf>,
    policy: Option<PolicyConfig>,
    hooks: BTreeSet<LifecycleHook>,
    conversation_id: Option<String>,
    continuation: SessionContinuationMode,
    response_schema: Option<Value>,
    api_retry: Option<(u32, u32)>,
    behavior: Option<AgentBehavior>,
    raw: Option<HarnessConfig>,
}

impl ConversationConfig {
    /// A config for `model` at `endpoint`, with the SDK's default built-in tools.
    pub fn new(model: impl Into<String>, endpoint: ModelEndpoint) -> Self {
        Self {
            model: model.into(),
            image_model: DEFAULT_IMAGE_MODEL.to_owned(),
            endpoint,
            instructions: None,
            tools: Vec::new(),
            builtins: default_builtin_tools(),
            workspaces: Vec::new(),
            app_data_dir: None,
            policy: None,
            hooks: BTreeSet::new(),
            conversation_id: None,
            continuation: SessionContinuationMode::Unspecified,
            response_schema: None,
            api_retry: None,
            behavior: None,
            raw: None,
        }
    }

    /// The image model (same endpoint).
    pub fn image_model(mut self, name: impl Into<String>) -> Self {
        self.image_model = name.into();
        self
    }

    /// Extra system instructions.
    pub fn system_instructions(mut self, instructions: SystemInstructions) -> Self {
        self.instructions = Some(instructions);
        self
    }

    /// Adds a host tool.
    pub fn tool(mut self, tool: CustomTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Replaces the set of enabled built-in tools.
    pub fn builtin_tools(mut self, tools: impl IntoIterator<Item = BuiltinTool>) -> Self {
        self.builtins = tools.into_iter().collect();
        self
    }

    /// Adds a workspace directory (made absolute; the agent's file tools work inside it).
    pub fn workspace(mut self, dir: impl AsRef<Path>) -> Self {
        self.workspaces.push(dir.as_ref().to_owned());
        self
    }

    /// Where the harness keeps per-conversation artefacts (`brain/<id>/…`). Required.
    pub fn app_data_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.app_data_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// The policy rules.
    pub fn policy(mut self, policy: PolicyConfig) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Enables a lifecycle hook (the harness only sends requests for enabled hooks).
    pub fn hook(mut self, hook: LifecycleHook) -> Self {
        self.hooks.insert(hook);
        self
    }

    /// Continues (or creates) the conversation with this id.
    pub fn conversation_id(mut self, id: impl Into<String>, mode: SessionContinuationMode) -> Self {
        self.conversation_id = Some(id.into());
        self.continuation = mode;
        self
    }

    /// Structured output: the agent finishes by calling `finish` with JSON matching `schema`.
    pub fn response_schema(mut self, schema: Value) -> Self {
        self.response_schema = Some(schema);
        self
    }

    /// Model API retries for 429/503 (the harness default backs off for minutes).
    pub fn api_retry(mut self, max_retries: u32, initial_sleep_ms: u32) -> Self {
        self.api_retry = Some((max_retries, initial_sleep_ms));
        self
    }

    /// The agent's behaviour (autonomous by default; interactive lets it ask questions).
    pub fn behavior(mut self, behavior: AgentBehavior) -> Self {
        self.behavior = Some(behavior);
        self
    }

    /// Starts from a hand-made `HarnessConfig` for fields this builder does not cover (MCP
    /// servers, subagents, skills, budgets, compaction…); the builder's settings are applied on
    /// top of it (its policy is used when the builder sets none; its hooks are kept).
    pub fn base(mut self, raw: HarnessConfig) -> Self {
        self.raw = Some(raw);
        self
    }

    /// Validates and produces the `HarnessConfig`.
    pub fn build(&self) -> Result<HarnessConfig> {
        let bad = |m: String| Err(HarnessError::Config(m));
        if self.model.trim().is_empty() {
            return bad("the model name is empty".into());
        }
        let Some(app_data_dir) = &self.app_data_dir else {
            return bad(
                "app_data_dir is required (the harness writes per-conversation artefacts there)"
                    .into(),
            );
        };
        let mut names = BTreeSet::new();
        let mut tools = Vec::new();
        for tool in &self.tools {
            validate_tool_name(&tool.name).map_err(HarnessError::Config)?;
            if !names.insert(tool.name.as_str()) {
                return bad(format!("the tool `{}` is declared twice", tool.name));
            }
            if let Some(builtin) =
                BuiltinTool::from_name(&tool.name).filter(|b| self.builtins.contains(b))
            {
                return bad(format!(
                    "the tool `{}` clashes with the enabled built-in `{}`",
                    tool.name,
                    builtin.model_name()
                ));
            }
            tools.push(lh::Tool {
                name: Some(tool.name.clone()),
                description: Some(tool.description.clone()),
                parameters_json_schema: Some(
                    object_schema(&tool.name, &tool.parameters)?.to_string(),
                ),
                ..Default::default()
            });
        }
        let mut policy = self
            .policy
            .clone()
            .or_else(|| self.raw.as_ref().and_then(|r| r.policy_config.clone()));
        if let Some(policy) = &mut policy {
            for (index, rule) in policy.rules.iter_mut().enumerate() {
                if rule.decision() == PolicyDecision::AskUser && !rule.is_dynamic() {
                    return bad(format!(
                        "policy rule `{}` asks the user but is not dynamic; the harness refuses such a config",
                        rule.name()
                    ));
                }
                // The harness names the matched rule in `policyDecisionRequest.ruleId`; number
                // dynamic rules as the Python SDK does so the host can tell them apart.
                if rule.is_dynamic() && rule.rule_id().is_empty() {
                    rule.rule_id = Some(format!("rule_{index}"));
                }
            }
        }
        // Hooks enabled in the base config stay enabled: the builder adds to them.
        let mut hooks: BTreeSet<i32> = self
            .raw
            .as_ref()
            .map(|r| r.enabled_hooks.iter().copied().collect())
            .unwrap_or_default();
        hooks.extend(self.hooks.iter().map(|h| *h as i32));
        let guarded = policy.as_ref().is_some_and(|p| !p.rules.is_empty())
            || hooks.contains(&(LifecycleHook::PreTool as i32));
        if let Some(tool) = self
            .builtins
            .iter()
            .find(|t| t.writes())
            .filter(|_| !guarded)
        {
            return bad(format!(
                "`{}` is enabled but there is neither a policy nor a pre-tool hook, so the harness would run it \
                 unchecked; add a policy (e.g. policy::allow_all()) or a pre-tool hook",
                tool.model_name()
            ));
        }

        let mut config = self.raw.clone().unwrap_or_default();
        config.cascade_id = Some(self.conversation_id.clone().unwrap_or_default());
        config.session_continuation_mode = Some(self.continuation as i32);
        config.models = vec![
            self.endpoint.to_proto(&self.model, lh::ModelType::Text),
            self.endpoint
                .to_proto(&self.image_model, lh::ModelType::Image),
        ];
        config.harness_side_tools = Some(side_tools(&self.builtins));
        config.workspaces = self
            .workspaces
            .iter()
            .map(|dir| absolute(dir).map(|d| workspace(&d)))
            .collect::<Result<Vec<_>>>()?;
        config.app_data_dir = Some(absolute(app_data_dir)?.to_string_lossy().into_owned());
        if !tools.is_empty() {
            config.tools = tools;
        }
        if let Some(instructions) = &self.instructions {
            config.system_instructions = Some(system_instructions(instructions));
        }
        config.policy_config = policy;
        config.enabled_hooks = hooks.into_iter().collect();
        if let Some(schema) = &self.response_schema {
            config.finish_tool_schema_json = Some(schema.to_string());
        }
        if let Some((max_retries, initial_sleep_ms)) = self.api_retry {
            config.retry_config = Some(lh::RetryConfig {
                api_retry: Some(lh::ModelApiRetryConfig {
                    max_retries: Some(max_retries),
                    initial_sleep_duration_ms: Some(initial_sleep_ms),
                    ..Default::default()
                }),
                model_output_retry: None,
            });
        }
        if let Some(behavior) = self.behavior {
            config.agent_behavior = Some(behavior as i32);
        }
        Ok(config)
    }
}

fn validate_tool_name(name: &str) -> std::result::Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && name.len() <= 64 {
        Ok(())
    } else {
        Err(format!(
            "the tool name `{name}` is not a valid function name (letters, digits, `_`, `.`, `-`, at most 64, \
             starting with a letter or `_`)"
        ))
    }
}

/// The tool's parameters as an object schema; an empty or missing schema means no arguments.
fn object_schema(name: &str, schema: &Value) -> Result<Value> {
    match schema {
        Value::Null => Ok(serde_json::json!({"type": "object", "properties": {}})),
        Value::Object(map) if map.is_empty() => {
            Ok(serde_json::json!({"type": "object", "properties": {}}))
        }
        Value::Object(map) => match map.get("type") {
            None => Ok(schema.clone()),
            Some(Value::String(t)) if t == "object" => Ok(schema.clone()),
            Some(_) => Err(HarnessError::Config(format!(
                "the parameters of tool `{name}` must be an object schema (`\"type\": \"object\"`)"
            ))),
        },
        _ => Err(HarnessError::Config(format!(
            "the parameters of tool `{name}` must be a JSON Schema object"
        ))),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(HarnessError::io(format!("resolve {}", path.display())))
}

fn workspace(dir: &Path) -> lh::Workspace {
    lh::Workspace {
        workspace_type: Some(lh::workspace::WorkspaceType::FilesystemWorkspace(
            lh::FilesystemWorkspace {
                directory: Some(dir.to_string_lossy().into_owned()),
            },
        )),
    }
}

fn system_instructions(instructions: &SystemInstructions) -> lh::SystemInstructions {
    use lh::system_instructions::Type;
    let kind = match instructions {
        SystemInstructions::Appended(text) => Type::Appended(lh::AppendedSystemInstructions {
            custom_identity: None,
            appended_sections: vec![lh::appended_system_instructions::Section {
                title: Some("user_system_instructions".into()),
                content: Some(text.clone()),
            }],
        }),
        SystemInstructions::Custom(text) => Type::Custom(lh::CustomSystemInstructions {
            part: vec![lh::custom_system_instructions::Part {
                part: Some(lh::custom_system_instructions::part::Part::Text(
                    text.clone(),
                )),
            }],
        }),
    };
    lh::SystemInstructions {
        r#type: Some(kind),
        overrides: Vec::new(),
    }
}

/// Every built-in with an explicit flag: an absent entry would disable it silently.
fn side_tools(enabled: &BTreeSet<BuiltinTool>) -> lh::HarnessSideTools {
    use BuiltinTool::*;
    let on = |t: BuiltinTool| Some(enabled.contains(&t));
    lh::HarnessSideTools {
        find: Some(lh::FindToolConfig {
            enabled: on(FindFile),
        }),
        run_command: Some(lh::RunCommandToolConfig {
            enabled: on(RunCommand),
            ..Default::default()
        }),
        subagents: Some(lh::SubagentsConfig {
            enabled: on(Subagents),
            ..Default::default()
        }),
        user_questions: Some(lh::UserQuestionsConfig {
            enabled: on(AskQuestion),
        }),
        file_edit: Some(lh::FileEditToolConfig {
            enabled: on(EditFile),
        }),
        view_file: Some(lh::ViewFileToolConfig {
            enabled: on(ViewFile),
        }),
        write_to_file: Some(lh::WriteToFileToolConfig {
            enabled: on(CreateFile),
        }),
        grep_search: Some(lh::GrepSearchToolConfig {
            enabled: on(SearchDirectory),
        }),
        list_dir: Some(lh::ListDirToolConfig {
            enabled: on(ListDirectory),
        }),
        generate_image: Some(lh::GenerateImageToolConfig {
            enabled: on(GenerateImage),
        }),
        search_web: Some(lh::SearchWebToolConfig {
            enabled: on(SearchWeb),
        }),
        read_url_content: Some(lh::ReadUrlContentToolConfig {
            enabled: on(ReadUrlContent),
        }),
        manage_task: Some(lh::ManageTaskToolConfig {
            enabled: on(ManageTask),
        }),
        schedule: Some(lh::ScheduleToolConfig {
            enabled: on(Schedule),
        }),
        run_workflow: Some(lh::RunWorkflowToolConfig {
            enabled: on(RunWorkflow),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn base() -> ConversationConfig {
        ConversationConfig::new("m", ModelEndpoint::gemini("http://127.0.0.1:1", "k"))
            .app_data_dir("/tmp/app")
            .workspace("/tmp/ws")
            .policy(policy::allow_all())
    }

    fn check_err(config: ConversationConfig, expected: &str) {
        let err = config.build().unwrap_err().to_string();
        assert!(
            err.contains(expected),
            "{err:?} should contain {expected:?}"
        );
    }

    #[test]
    fn a_config_lists_every_builtin_and_both_models() {
        let cfg = base()
            .builtin_tools([BuiltinTool::ListDirectory])
            .build()
            .unwrap();
        let json: Value = serde_json::from_str(&harness_proto::to_json(&cfg)).unwrap();
        assert_eq!(
            json["harnessSideTools"]["listDir"],
            json!({"enabled": true})
        );
        assert_eq!(
            json["harnessSideTools"]["runCommand"],
            json!({"enabled": false})
        );
        assert_eq!(json["harnessSideTools"].as_object().unwrap().len(), 15);
        assert_eq!(json["models"][0]["types"], json!(["MODEL_TYPE_TEXT"]));
        assert_eq!(json["models"][1]["types"], json!(["MODEL_TYPE_IMAGE"]));
        assert_eq!(
            json["models"][0]["geminiApiEndpoint"],
            json!({"baseUrl": "http://127.0.0.1:1", "apiKey": "k"})
        );
        assert_eq!(
            json["workspaces"][0]["filesystemWorkspace"]["directory"],
            "/tmp/ws"
        );
        assert_eq!(
            json["policyConfig"]["workspaceContainment"],
            "WORKSPACE_CONTAINMENT_DISABLED"
        );
        assert_eq!(
            json["sessionContinuationMode"],
            "SESSION_CONTINUATION_MODE_UNSPECIFIED"
        );
    }

    #[test]
    fn tools_and_continuation_are_encoded() {
        let cfg = base()
            .tool(CustomTool {
                name: "get_weather".into(),
                description: "Weather".into(),
                parameters: Value::Null,
            })
            .conversation_id("abc", SessionContinuationMode::CreateOrResume)
            .response_schema(json!({"type": "object"}))
            .system_instructions(SystemInstructions::Appended("Be brief.".into()))
            .build()
            .unwrap();
        let json: Value = serde_json::from_str(&harness_proto::to_json(&cfg)).unwrap();
        assert_eq!(
            json["tools"][0]["parametersJsonSchema"],
            r#"{"properties":{},"type":"object"}"#
        );
        assert_eq!(json["cascadeId"], "abc");
        assert_eq!(json["sessionContinuationMode"], "CREATE_OR_RESUME");
        assert_eq!(json["finishToolSchemaJson"], r#"{"type":"object"}"#);
        assert_eq!(
            json["systemInstructions"]["appended"]["appendedSections"][0]["content"],
            "Be brief."
        );
    }

    #[test]
    fn invalid_configs_are_refused_with_a_reason() {
        let tool = |name: &str, parameters: Value| CustomTool {
            name: name.into(),
            description: String::new(),
            parameters,
        };
        check_err(
            base().tool(tool("bad name", Value::Null)),
            "not a valid function name",
        );
        check_err(
            base()
                .tool(tool("x", Value::Null))
                .tool(tool("x", Value::Null)),
            "declared twice",
        );
        check_err(
            base().tool(tool("run_command", Value::Null)),
            "clashes with the enabled built-in",
        );
        check_err(
            base().tool(tool("x", json!({"type": "string"}))),
            "must be an object schema",
        );
        check_err(
            base().tool(tool("x", json!([1]))),
            "must be a JSON Schema object",
        );
        check_err(
            ConversationConfig::new("", ModelEndpoint::gemini("u", "k")).app_data_dir("/a"),
            "model name is empty",
        );
        check_err(
            ConversationConfig::new("m", ModelEndpoint::gemini("u", "k")),
            "app_data_dir is required",
        );
        let unguarded =
            ConversationConfig::new("m", ModelEndpoint::gemini("u", "k")).app_data_dir("/a");
        check_err(unguarded.clone(), "neither a policy nor a pre-tool hook");
        assert!(
            unguarded
                .clone()
                .hook(LifecycleHook::PreTool)
                .build()
                .is_ok()
        );
        assert!(
            unguarded
                .builtin_tools([BuiltinTool::ViewFile])
                .build()
                .is_ok(),
            "read-only tools need no guard"
        );
        let static_ask = PolicyConfig {
            rules: vec![policy::rule("*", PolicyDecision::AskUser, "ask")],
            ..Default::default()
        };
        check_err(
            base().policy(static_ask),
            "asks the user but is not dynamic",
        );
        assert!(
            base()
                .policy(PolicyConfig {
                    rules: vec![policy::ask("*", "ask")],
                    ..Default::default()
                })
                .build()
                .is_ok()
        );
    }

    #[test]
    fn hooks_of_the_base_config_are_kept() {
        let raw = HarnessConfig {
            enabled_hooks: vec![LifecycleHook::PostTool as i32],
            ..Default::default()
        };
        let unguarded = ConversationConfig::new("m", ModelEndpoint::gemini("u", "k"))
            .app_data_dir("/a")
            .builtin_tools([BuiltinTool::RunCommand]);
        let cfg = unguarded
            .clone()
            .base(raw.clone())
            .hook(LifecycleHook::PreTool)
            .build()
            .unwrap();
        assert_eq!(
            cfg.enabled_hooks,
            [
                LifecycleHook::PreTool as i32,
                LifecycleHook::PostTool as i32
            ]
        );
        // A pre-tool hook enabled in the base guards the write tools too.
        let raw_pre_tool = HarnessConfig {
            enabled_hooks: vec![LifecycleHook::PreTool as i32],
            ..Default::default()
        };
        assert!(unguarded.base(raw_pre_tool).build().is_ok());
    }

    #[test]
    fn dynamic_rules_are_numbered_like_the_sdk_does() {
        let cfg = base()
            .policy(PolicyConfig {
                rules: vec![
                    policy::rule("view_file", PolicyDecision::Allow, "view"),
                    policy::ask("run_command", "shell"),
                    PolicyRule {
                        rule_id: Some("mine".into()),
                        ..policy::ask("*", "custom id")
                    },
                ],
                ..Default::default()
            })
            .build()
            .unwrap();
        let ids: Vec<&str> = cfg
            .policy_config
            .as_ref()
            .unwrap()
            .rules
            .iter()
            .map(|r| r.rule_id())
            .collect();
        assert_eq!(ids, ["", "rule_1", "mine"]);
    }

    #[test]
    fn builtin_names_round_trip() {
        for tool in BuiltinTool::ALL {
            assert_eq!(BuiltinTool::from_name(tool.name()), Some(tool));
            assert_eq!(BuiltinTool::from_name(tool.model_name()), Some(tool));
        }
        assert_eq!(
            BuiltinTool::from_name("start_subagent"),
            Some(BuiltinTool::Subagents)
        );
        assert_eq!(BuiltinTool::from_name("nope"), None);
    }
}
