//! Named scenario scripts for driving the real harness (fixture recording).
//!
//! Each function returns a [`Scenario`]: the script, the prompts to send (one
//! per turn), what each turn should end with, and the [`HostSetup`] the host
//! must use (built-in tools to enable, custom tools and their canned results,
//! question answers, retry settings, workspace files). A recorder runs
//! `for turn in scenario.turns`, sends `turn.prompt`, answers `toolCall`s with
//! [`HostSetup::tool_result`] and questions with [`HostSetup::question_answer`],
//! and stops at the root trajectory's `STATE_FULLY_IDLE`.
//!
//! Replies are deterministic: fixed texts, fixed usage numbers, no call ids
//! (the harness mints them), and paths only through `{{workspace}}`.

mod catalog;

use serde_json::{Value, json};

use crate::script::Script;

pub use catalog::{
    ask_question, bad_request, builtin_and_custom_calls, builtin_list_dir_and_run_command,
    custom_and_builtin_calls_with_pre_tool_hook, custom_tool_round_trip, file_edits_and_command,
    plain_text, rate_limited_then_ok, resume_history, subagent, thinking_text,
    three_parallel_custom_calls, two_parallel_custom_calls, two_subagents_in_parallel, two_turns,
};

/// A scripted conversation with the harness.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short identifier, e.g. `plain_text` (the fixture file stem).
    pub name: &'static str,
    /// What the scenario shows and which prompts it expects.
    pub doc: &'static str,
    /// The turns, in order.
    pub turns: Vec<Turn>,
    /// The model script.
    pub script: Script,
    /// How the host must configure and answer the harness.
    pub setup: HostSetup,
}

/// One user turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The text sent as `userInput`.
    pub prompt: &'static str,
    /// Close the socket and re-attach to the same conversation id with
    /// `CREATE_OR_RESUME` before sending this turn.
    pub reattach: bool,
    /// How the turn ends.
    pub expect: TurnEnd,
}

impl Turn {
    fn new(prompt: &'static str) -> Self {
        Self {
            prompt,
            reattach: false,
            expect: TurnEnd::Idle,
        }
    }
}

/// How a turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The root trajectory reaches `STATE_FULLY_IDLE` without `error`.
    Idle,
    /// `STATE_FULLY_IDLE` with an `error` (terminal model error); the harness
    /// then closes the socket.
    Failed,
}

/// A host-side (custom) tool and the result the host returns for every call.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomTool {
    /// Tool name.
    pub name: &'static str,
    /// Tool description.
    pub description: &'static str,
    /// JSON schema of the arguments.
    pub parameters: Value,
    /// The `responseJson` object the host sends back.
    pub result: Value,
}

/// `retryConfig.apiRetry`, so retryable errors resolve in well under a second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRetry {
    /// `maxRetries`.
    pub max_retries: u32,
    /// `initialSleepDurationMs`.
    pub initial_sleep_ms: u64,
}

/// The `harnessSideTools` keys, in the order the Python SDK sends them.
pub const HARNESS_SIDE_TOOLS: &[&str] = &[
    "find",
    "runCommand",
    "subagents",
    "userQuestions",
    "fileEdit",
    "viewFile",
    "writeToFile",
    "grepSearch",
    "listDir",
    "generateImage",
    "searchWeb",
    "readUrlContent",
    "manageTask",
    "schedule",
    "runWorkflow",
];

/// What the host must configure for a scenario.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSetup {
    /// `harnessSideTools` keys to enable (see [`HARNESS_SIDE_TOOLS`]); all others are disabled.
    pub builtin_tools: Vec<&'static str>,
    /// Custom tools to declare in `HarnessConfig.tools`.
    pub custom_tools: Vec<CustomTool>,
    /// `questionResponse.response` for `ask_question` steps.
    pub question_answer: Option<Value>,
    /// `retryConfig.apiRetry`, if the scenario needs quick retries.
    pub api_retry: Option<ApiRetry>,
    /// Use `AGENT_BEHAVIOR_INTERACTIVE` instead of autonomous.
    pub interactive: bool,
    /// Files (relative path, content) to create in the workspace first.
    pub workspace_files: Vec<(&'static str, &'static str)>,
    /// Enable the PreTool lifecycle hook; the host allows every call.
    pub pre_tool_hook: bool,
    /// How long the host waits before answering a tool call, question or hook, so the frames
    /// the harness sends meanwhile are recorded (0: at once).
    pub answer_delay_ms: u64,
}

impl HostSetup {
    /// The `harnessSideTools` object with every key present and only ours enabled.
    pub fn harness_side_tools(&self) -> Value {
        HARNESS_SIDE_TOOLS
            .iter()
            .map(|key| {
                let enabled = self.builtin_tools.contains(key);
                ((*key).to_owned(), json!({"enabled": enabled}))
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// `HarnessConfig.tools` (schemas as JSON strings, as the harness expects), or `None`.
    pub fn tools(&self) -> Option<Value> {
        (!self.custom_tools.is_empty()).then(|| {
            self.custom_tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "parametersJsonSchema": t.parameters.to_string(),
                    })
                })
                .collect()
        })
    }

    /// `HarnessConfig.retryConfig`, or `None`.
    pub fn retry_config(&self) -> Option<Value> {
        self.api_retry.map(|r| {
            json!({"apiRetry": {"maxRetries": r.max_retries, "initialSleepDurationMs": r.initial_sleep_ms}})
        })
    }

    /// `HarnessConfig.agentBehavior`.
    pub fn agent_behavior(&self) -> &'static str {
        if self.interactive {
            "AGENT_BEHAVIOR_INTERACTIVE"
        } else {
            "AGENT_BEHAVIOR_AUTONOMOUS"
        }
    }

    /// The canned result for a custom tool call.
    pub fn tool_result(&self, name: &str) -> Option<&Value> {
        self.custom_tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| &t.result)
    }
}

/// Every scenario, in a stable order.
pub fn all() -> Vec<Scenario> {
    vec![
        plain_text(),
        thinking_text(),
        custom_tool_round_trip(),
        builtin_list_dir_and_run_command(),
        ask_question(),
        rate_limited_then_ok(),
        bad_request(),
        two_turns(),
        resume_history(),
        subagent(),
        two_subagents_in_parallel(),
        file_edits_and_command(),
        two_parallel_custom_calls(),
        three_parallel_custom_calls(),
        builtin_and_custom_calls(),
        custom_and_builtin_calls_with_pre_tool_hook(),
    ]
}

/// The scenario with this name.
pub fn by_name(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_are_valid_and_uniquely_named() {
        let scenarios = all();
        for s in &scenarios {
            s.script
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert!(!s.turns.is_empty(), "{} has no turns", s.name);
            assert!(!s.doc.is_empty(), "{} has no doc", s.name);
            assert!(
                s.setup
                    .builtin_tools
                    .iter()
                    .all(|t| HARNESS_SIDE_TOOLS.contains(t)),
                "{} enables an unknown built-in",
                s.name
            );
            assert_eq!(by_name(s.name).map(|b| b.name), Some(s.name));
        }
        let mut names: Vec<_> = scenarios.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), scenarios.len(), "scenario names are unique");
    }

    #[test]
    fn host_setup_renders_config_fragments() {
        let setup = custom_tool_round_trip().setup;
        let tools = setup.tools().unwrap_or_default();
        assert_eq!(tools[0]["name"], "get_weather");
        assert!(tools[0]["parametersJsonSchema"].is_string());
        let side = setup.harness_side_tools();
        assert_eq!(
            side.as_object().map(|o| o.len()),
            Some(HARNESS_SIDE_TOOLS.len())
        );
        assert_eq!(
            builtin_list_dir_and_run_command()
                .setup
                .harness_side_tools()["listDir"],
            json!({"enabled": true})
        );
        assert_eq!(
            rate_limited_then_ok().setup.retry_config(),
            Some(json!({"apiRetry": {"maxRetries": 2, "initialSleepDurationMs": 100}}))
        );
    }
}
