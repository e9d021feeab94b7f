//! A typed view of `StepUpdate`, the harness's snapshot of one step of a trajectory.
//!
//! The harness sends many snapshots of the same step (ACTIVE, ACTIVE, …, DONE), each a full
//! copy with `*_delta` holding what is new. [`Step`] flattens the proto's optional fields,
//! names the action (which of the ~18 action fields is set) and splits a tool action's fields
//! into the request the model made and the result the harness reported, so consumers need no
//! knowledge of the action messages. It lives here, with the protocol, so that both the I/O
//! layer (`harness-client`) and the pure translator (`agui-translate`) can share it.

use serde_json::{Map, Value};

use crate::lh::{StepUpdate, UserQuestionsRequest, step_update};

/// Identity of a step: its trajectory and its index in that trajectory.
///
/// Indices restart at 0 in every (sub)trajectory, so the index alone is not an identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepKey {
    /// The trajectory (the conversation id for the root agent, another id for subagents).
    pub trajectory_id: String,
    /// Position of the step in its trajectory; never reused within a conversation.
    pub index: u32,
}

impl StepKey {
    /// Step `index` of `trajectory_id`.
    pub fn new(trajectory_id: impl Into<String>, index: u32) -> Self {
        Self {
            trajectory_id: trajectory_id.into(),
            index,
        }
    }
}

impl std::fmt::Display for StepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.trajectory_id, self.index)
    }
}

/// Lifecycle state of a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StepStatus {
    /// Still being produced.
    Active,
    /// Finished; later snapshots of it are redeliveries.
    Done,
    /// Blocked on a host answer (a question or a tool confirmation).
    WaitingForUser,
    /// Failed (model error, denied or failed tool, invalid model output).
    Error,
    /// A state this version does not know.
    #[default]
    Unknown,
}

/// Who produced a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StepSource {
    /// The user (the echo of a user input).
    User,
    /// The model.
    Model,
    /// The harness itself (errors, injected system messages, subagent notices).
    System,
    /// A source this version does not know.
    #[default]
    Unknown,
}

/// Who a step is addressed to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StepTarget {
    /// Shown to the user (answers, errors).
    User,
    /// Fed to the model (user input, system messages).
    Model,
    /// Executed in the environment (tool calls).
    Environment,
    /// A target this version does not know.
    #[default]
    Unknown,
}

/// A failure reported on a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    /// The failure text (from `errorMessage`, else the error action, else the step text).
    pub message: String,
    /// HTTP status of a model API error; 0 when not an HTTP error (the harness also uses
    /// small non-HTTP codes, e.g. 2 for a context-limit failure).
    pub http_code: u32,
}

/// How a tool step's action is executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolKind {
    /// A tool the harness runs itself (files, shell, web…).
    Builtin,
    /// A host ("custom") tool: the harness sends a `toolCall` to the host with this id.
    Custom {
        /// The call id (also the `toolCall.id` the host answers).
        call_id: String,
    },
    /// A tool of an MCP server.
    Mcp {
        /// The MCP server name.
        server: String,
    },
}

/// A tool call carried by a step.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAction {
    /// Tool name: the harness's internal built-in names (`list_directory`, `view_file`,
    /// `create_file`, `edit_file`, `run_command`, …, the same names hooks and policies use),
    /// the custom tool's name, or the MCP tool's name.
    pub name: String,
    /// How it is executed.
    pub kind: ToolKind,
    /// What the model asked for: the action's request fields (protojson names), or for custom
    /// and MCP tools the parsed call arguments.
    pub arguments: Map<String, Value>,
    /// What the harness reported back (result fields, present from DONE on); for custom tools
    /// the parsed response, or `{"error": …}`.
    pub result: Map<String, Value>,
}

/// What a step does besides carrying text.
#[derive(Debug, Clone, PartialEq)]
pub enum StepAction {
    /// A tool call (built-in, custom or MCP).
    Tool(ToolAction),
    /// An `invoke_subagent` call; the subagents' steps arrive on their own trajectories.
    InvokeSubagent,
    /// A context compaction.
    Compaction,
    /// The `finish` tool with its (structured) output text.
    Finish {
        /// The raw output string (JSON when a response schema is configured).
        output: String,
    },
}

/// A request the step is blocked on (state WAITING_FOR_USER).
#[derive(Debug, Clone, PartialEq)]
pub enum UserRequest {
    /// `ask_question`: the questions to answer (with `questionResponse`).
    Questions(UserQuestionsRequest),
    /// A tool confirmation (answer with `toolConfirmation`).
    ToolConfirmation,
}

/// One snapshot of one step.
///
/// The default is what an all-default `StepUpdate` converts to: step 0 of trajectory `""`,
/// state, source and target unknown, no text, action, error or request. Tests build the
/// snapshots they need from it with struct update syntax.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// Identity of the step.
    pub key: StepKey,
    /// The parent trajectory, for subagent steps.
    pub parent_trajectory_id: Option<String>,
    /// Lifecycle state.
    pub status: StepStatus,
    /// Producer.
    pub source: StepSource,
    /// Addressee.
    pub target: StepTarget,
    /// The whole text so far (for tool steps: the model's `toolSummary` label, not an answer).
    pub text: String,
    /// Text new in this snapshot.
    pub text_delta: String,
    /// The whole reasoning so far.
    pub thinking: String,
    /// Reasoning new in this snapshot.
    pub thinking_delta: String,
    /// The action, if any.
    pub action: Option<StepAction>,
    /// The failure, for ERROR steps.
    pub error: Option<StepError>,
    /// The pending request, for WAITING_FOR_USER steps.
    pub request: Option<UserRequest>,
}

impl Step {
    /// Whether this is a finished snapshot (DONE or ERROR): no later snapshot adds anything.
    pub fn is_final(&self) -> bool {
        matches!(self.status, StepStatus::Done | StepStatus::Error)
    }

    /// The tool call of this step, if it is one.
    pub fn tool(&self) -> Option<&ToolAction> {
        match &self.action {
            Some(StepAction::Tool(tool)) => Some(tool),
            _ => None,
        }
    }
}

impl From<&StepUpdate> for Step {
    fn from(update: &StepUpdate) -> Self {
        Step::from(update.clone())
    }
}

impl From<StepUpdate> for Step {
    /// Takes the snapshot by value: `text` and `thinking` hold everything so far, so moving them
    /// instead of copying keeps a long streamed answer from being copied once per snapshot.
    fn from(mut update: StepUpdate) -> Self {
        use step_update::{Source, State, Target};
        let status = match update.state() {
            State::Active => StepStatus::Active,
            State::Done => StepStatus::Done,
            State::WaitingForUser => StepStatus::WaitingForUser,
            State::Error => StepStatus::Error,
            State::Unspecified => StepStatus::Unknown,
        };
        let source = match update.source() {
            Source::User => StepSource::User,
            Source::Model => StepSource::Model,
            Source::System => StepSource::System,
            Source::Unspecified => StepSource::Unknown,
        };
        let target = match update.target() {
            Target::User => StepTarget::User,
            Target::Model => StepTarget::Model,
            Target::Environment => StepTarget::Environment,
            Target::Unspecified => StepTarget::Unknown,
        };
        let text = update.text.take().unwrap_or_default();
        let error = (status == StepStatus::Error || update.error.is_some()).then(|| {
            let action = update.error.as_ref();
            let message = [
                update.error_message(),
                action.map(|e| e.error_message()).unwrap_or(""),
                &text,
            ]
            .into_iter()
            .find(|m| !m.is_empty())
            .unwrap_or("the harness reported a failure")
            .to_owned();
            StepError {
                message,
                http_code: action.map(|e| e.http_code()).unwrap_or(0),
            }
        });
        let request = match (
            update.questions_request.take(),
            &update.tool_confirmation_request,
        ) {
            (Some(q), _) => Some(UserRequest::Questions(q)),
            (None, Some(_)) => Some(UserRequest::ToolConfirmation),
            (None, None) => None,
        };
        Step {
            key: StepKey {
                trajectory_id: update.trajectory_id.take().unwrap_or_default(),
                index: update.step_index(),
            },
            parent_trajectory_id: update.parent_trajectory_id.take().filter(|p| !p.is_empty()),
            status,
            source,
            target,
            text_delta: update.text_delta.take().unwrap_or_default(),
            text,
            thinking: update.thinking.take().unwrap_or_default(),
            thinking_delta: update.thinking_delta.take().unwrap_or_default(),
            action: action_of(&update),
            error,
            request,
        }
    }
}

/// Splits a built-in action's protojson fields into request and result.
fn builtin(name: &str, message: &impl serde::Serialize, result_keys: &[&str]) -> StepAction {
    let fields = match serde_json::to_value(message) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let (result, arguments) = fields
        .into_iter()
        .partition(|(k, _)| result_keys.contains(&k.as_str()));
    StepAction::Tool(ToolAction {
        name: name.to_owned(),
        kind: ToolKind::Builtin,
        arguments,
        result,
    })
}

fn action_of(u: &StepUpdate) -> Option<StepAction> {
    // Result keys are the fields the harness fills in when the tool finishes; everything else
    // is the request. Keeping them apart means a call first seen at DONE never leaks its result
    // into its arguments.
    Some(if let Some(a) = &u.list_directory {
        builtin("list_directory", a, &["results"])
    } else if let Some(a) = &u.find_file {
        builtin("find_file", a, &["output"])
    } else if let Some(a) = &u.search_directory {
        builtin("search_directory", a, &["numResults"])
    } else if let Some(a) = &u.view_file {
        builtin("view_file", a, &["contentOffset"])
    } else if let Some(a) = &u.create_file {
        builtin("create_file", a, &[])
    } else if let Some(a) = &u.edit_file {
        builtin("edit_file", a, &["diffBlock"])
    } else if let Some(a) = &u.run_command {
        builtin("run_command", a, &["exitCode", "combinedOutput"])
    } else if let Some(a) = &u.generate_image {
        builtin("generate_image", a, &["outputPath"])
    } else if let Some(a) = &u.search_web {
        builtin("search_web", a, &["summary"])
    } else if let Some(a) = &u.read_url_content {
        builtin("read_url_content", a, &["title", "summary", "contentPath"])
    } else if let Some(a) = &u.run_workflow {
        builtin("run_workflow", a, &["output"])
    } else if let Some(a) = &u.skill_lookup {
        builtin("skill_lookup", a, &["resolvedSkillNames", "errorMessage"])
    } else if let Some(a) = &u.mcp_tool {
        StepAction::Tool(ToolAction {
            name: a.tool_name().to_owned(),
            kind: ToolKind::Mcp {
                server: a.server_name().to_owned(),
            },
            arguments: json_object(a.arguments_json()),
            result: Map::new(),
        })
    } else if let Some(a) = &u.custom_tool {
        let call = a.tool_call.as_ref();
        let mut result = Map::new();
        if let Some(response) = &a.tool_response {
            if !response.error_message().is_empty() {
                result.insert("error".into(), response.error_message().into());
            } else if response.response_json.is_some() {
                result = json_object(response.response_json());
            }
        }
        StepAction::Tool(ToolAction {
            name: call.map(|c| c.name()).unwrap_or_default().to_owned(),
            kind: ToolKind::Custom {
                call_id: call.map(|c| c.id()).unwrap_or_default().to_owned(),
            },
            arguments: json_object(call.map(|c| c.arguments_json()).unwrap_or_default()),
            result,
        })
    } else if u.invoke_subagent.is_some() {
        StepAction::InvokeSubagent
    } else if u.compaction.is_some() {
        StepAction::Compaction
    } else if let Some(a) = &u.finish {
        StepAction::Finish {
            output: a.output_string().to_owned(),
        }
    } else {
        return None;
    })
}

/// Parses JSON object text; anything else (empty, invalid, not an object) is kept under `value`.
fn json_object(text: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => Map::from_iter([("value".to_owned(), other)]),
        Err(_) if text.is_empty() => Map::new(),
        Err(_) => Map::from_iter([("value".to_owned(), Value::String(text.to_owned()))]),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn step(update: Value) -> Step {
        Step::from(&crate::from_json::<StepUpdate>(&update.to_string()).unwrap())
    }

    #[test]
    fn the_default_step_is_an_empty_update() {
        assert_eq!(Step::default(), Step::from(StepUpdate::default()));
    }

    #[test]
    fn a_builtin_splits_request_and_result() {
        let s = step(
            json!({"trajectoryId": "t", "stepIndex": 2, "state": "STATE_DONE", "source": "SOURCE_MODEL",
            "target": "TARGET_ENVIRONMENT", "text": "s", "runCommand": {"commandLine": "pwd", "workingDir": "/w",
            "exitCode": 0, "combinedOutput": "/w\n"}}),
        );
        assert_eq!(s.key, StepKey::new("t", 2));
        assert!(s.is_final());
        let tool = s.tool().unwrap();
        assert_eq!(tool.name, "run_command");
        assert_eq!(
            Value::Object(tool.arguments.clone()),
            json!({"commandLine": "pwd", "workingDir": "/w"})
        );
        assert_eq!(
            Value::Object(tool.result.clone()),
            json!({"exitCode": 0, "combinedOutput": "/w\n"})
        );
    }

    #[test]
    fn a_custom_tool_parses_its_json() {
        let s = step(
            json!({"trajectoryId": "t", "stepIndex": 1, "state": "STATE_DONE",
            "customTool": {"toolCall": {"id": "c1", "name": "get_weather", "argumentsJson": "{\"city\":\"Paris\"}"},
                           "toolResponse": {"id": "get_weather", "responseJson": "{\"temp\":21}"}}}),
        );
        let tool = s.tool().unwrap();
        assert_eq!(
            tool.kind,
            ToolKind::Custom {
                call_id: "c1".into()
            }
        );
        assert_eq!(tool.arguments["city"], "Paris");
        assert_eq!(tool.result["temp"], 21);
        let failed = step(
            json!({"customTool": {"toolCall": {"name": "x", "argumentsJson": "not json"},
            "toolResponse": {"errorMessage": "boom"}}}),
        );
        assert_eq!(failed.tool().unwrap().arguments["value"], "not json");
        assert_eq!(failed.tool().unwrap().result["error"], "boom");
    }

    #[test]
    fn errors_carry_their_http_code_and_best_message() {
        let s = step(
            json!({"trajectoryId": "t", "state": "STATE_ERROR", "source": "SOURCE_SYSTEM",
            "errorMessage": "Encountered retryable error", "error": {"errorMessage": "inner", "httpCode": 429}}),
        );
        assert_eq!(
            s.error,
            Some(StepError {
                message: "Encountered retryable error".into(),
                http_code: 429
            })
        );
        let denied = step(json!({"state": "STATE_ERROR", "text": "denied by pre-tool hook: no"}));
        assert_eq!(denied.error.unwrap().message, "denied by pre-tool hook: no");
        assert_eq!(step(json!({"state": "STATE_DONE"})).error, None);
    }

    #[test]
    fn waiting_steps_carry_their_request() {
        let s = step(
            json!({"state": "STATE_WAITING_FOR_USER", "questionsRequest": {"questions": [
            {"multipleChoice": {"question": "Colour?", "choices": ["Red", "Green"]}}]}}),
        );
        assert_eq!(s.status, StepStatus::WaitingForUser);
        let Some(UserRequest::Questions(q)) = s.request else {
            panic!("{s:?}")
        };
        assert_eq!(q.questions.len(), 1);
        assert_eq!(
            step(json!({"invokeSubagent": {}})).action,
            Some(StepAction::InvokeSubagent)
        );
        assert_eq!(step(json!({"textDelta": "hi"})).action, None);
    }
}
