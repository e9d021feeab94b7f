//! The scenario definitions.

use serde_json::json;

use super::{ApiRetry, CustomTool, HostSetup, Scenario, Turn, TurnEnd};
use crate::{
    matcher::Matcher,
    reply::{Call, Reply},
    script::Script,
};

/// How long the host of the parallel-call scenarios takes to answer: long enough that what the
/// harness sends while a call waits (the rest of the reply, its usage update) is recorded
/// before the answer, as it is when the call waits for a client.
const PARK_DELAY_MS: u64 = 300;

fn prompt(text: &'static str) -> Matcher {
    Matcher::user_text().user_text_contains(text)
}

fn get_weather() -> CustomTool {
    CustomTool {
        name: "get_weather",
        description: "Returns the weather forecast for a city.",
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]
        }),
        result: json!({"city": "Paris", "forecast": ["sunny", "sunny"]}),
    }
}

/// A host tool answering with a fixed result, for the parallel-call scenarios.
fn lookup_tool(
    name: &'static str,
    description: &'static str,
    result: serde_json::Value,
) -> CustomTool {
    CustomTool {
        name,
        description,
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }),
        result,
    }
}

fn get_time() -> CustomTool {
    lookup_tool(
        "get_time",
        "Returns the local time in a city.",
        json!({"time": "09:30"}),
    )
}

fn get_news() -> CustomTool {
    lookup_tool(
        "get_news",
        "Returns the headlines of a city.",
        json!({"headlines": ["calm day"]}),
    )
}

/// One streamed text answer.
pub fn plain_text() -> Scenario {
    Scenario {
        name: "plain_text",
        doc: "Prompt \"Say hello\"; the model streams \"Hello from the scripted model.\" in three chunks.",
        turns: vec![Turn::new("Say hello")],
        script: Script::new().then(
            Reply::text(["Hello ", "from the ", "scripted model."]).when(prompt("Say hello")),
        ),
        setup: HostSetup::default(),
    }
}

/// Thought parts, then text, with a thought signature.
pub fn thinking_text() -> Scenario {
    Scenario {
        name: "thinking_text",
        doc: "Prompt \"What is the answer?\"; two thought chunks then two text chunks in one step \
              (thinkingDelta then textDelta); the last text part carries a thoughtSignature.",
        turns: vec![Turn::new("What is the answer?")],
        script: Script::new().then(
            Reply::text(["The answer ", "is 42."])
                .thought([
                    "**Planning** I should think first.",
                    " Then answer briefly.",
                ])
                .signature("c2lnLWZvci10ZXh0")
                .when(prompt("What is the answer?")),
        ),
        setup: HostSetup::default(),
    }
}

/// A custom (host) tool call and the answer after its result.
pub fn custom_tool_round_trip() -> Scenario {
    Scenario {
        name: "custom_tool_round_trip",
        doc: "Prompt \"Weather in Paris?\" with host tool get_weather declared; the model thinks, \
              calls get_weather{city: Paris, days: 2}; the host answers the toolCall with the \
              canned forecast; the model then streams \"Paris will be sunny.\".",
        turns: vec![Turn::new("Weather in Paris?")],
        script: Script::new()
            .then(
                Reply::call("get_weather", json!({"city": "Paris", "days": 2}))
                    .thought("I need the weather.")
                    .signature("c2lnLWNhbGwtMQ==")
                    .when(prompt("Weather in Paris?")),
            )
            .then(
                Reply::text(["Paris will be ", "sunny."])
                    .when(Matcher::function_response_to("get_weather")),
            ),
        setup: HostSetup {
            custom_tools: vec![get_weather()],
            ..HostSetup::default()
        },
    }
}

/// Two built-in tools in sequence: `list_dir`, then `run_command`.
pub fn builtin_list_dir_and_run_command() -> Scenario {
    Scenario {
        name: "builtin_list_dir_and_run_command",
        doc: "Prompt \"List the workspace and run a command\" with listDir and runCommand enabled \
              (allow-all policy); the model calls list_dir on the workspace, then run_command \
              `echo hello-from-run-command` in it, then answers. The workspace holds hello.txt \
              and notes/todo.md.",
        turns: vec![Turn::new("List the workspace and run a command")],
        script: Script::new()
            .then(
                Reply::call("list_dir", json!({"DirectoryPath": "{{workspace}}"}))
                    .when(prompt("List the workspace")),
            )
            .then(
                Reply::call(
                    "run_command",
                    json!({
                        "CommandLine": "echo hello-from-run-command",
                        "Cwd": "{{workspace}}",
                        "WaitMsBeforeAsync": 5000
                    }),
                )
                .when(Matcher::function_response_to("list_dir")),
            )
            .then(
                Reply::text("I listed the workspace and ran the command.")
                    .when(Matcher::function_response_to("run_command")),
            ),
        setup: HostSetup {
            builtin_tools: vec!["listDir", "runCommand"],
            workspace_files: vec![
                ("hello.txt", "hello\n"),
                ("notes/todo.md", "- write tests\n"),
            ],
            ..HostSetup::default()
        },
    }
}

/// The built-in `ask_question` tool, answered by the host.
pub fn ask_question() -> Scenario {
    Scenario {
        name: "ask_question",
        doc: "Prompt \"Ask me something\" with userQuestions enabled (interactive behaviour); the \
              model says \"Let me ask you.\" and calls ask_question (one multiple-choice \
              question); the step goes WAITING_FOR_USER with a questionsRequest; the host picks \
              choice 1 (Green); the model answers \"Thanks, green it is.\".",
        turns: vec![Turn::new("Ask me something")],
        script: Script::new()
            .then(
                Reply::text("Let me ask you.")
                    .and_call(
                        "ask_question",
                        json!({"questions": [{
                            "question": "Which color?",
                            "options": ["Red", "Green", "Blue"],
                            "is_multi_select": false
                        }]}),
                    )
                    .when(prompt("Ask me something")),
            )
            .then(
                Reply::text("Thanks, green it is.")
                    .when(Matcher::function_response_to("ask_question")),
            ),
        setup: HostSetup {
            builtin_tools: vec!["userQuestions"],
            interactive: true,
            question_answer: Some(
                json!({"answers": [{"multipleChoiceAnswer": {"selectedChoiceIndices": [1]}}]}),
            ),
            ..HostSetup::default()
        },
    }
}

/// A retryable 429, then success.
pub fn rate_limited_then_ok() -> Scenario {
    Scenario {
        name: "rate_limited_then_ok",
        doc: "Prompt \"first prompt\" with retryConfig.apiRetry{maxRetries: 2, \
              initialSleepDurationMs: 100}; the first model request gets HTTP 429 \
              RESOURCE_EXHAUSTED (a SYSTEM ERROR step with httpCode 429), the retry gets \
              \"Recovered after a rate limit.\".",
        turns: vec![Turn::new("first prompt")],
        script: Script::new()
            .then(
                Reply::error(429)
                    .message("Resource has been exhausted (e.g. check quota).")
                    .when(prompt("first prompt"))
                    .named("rate limited"),
            )
            .then(Reply::text("Recovered after a rate limit.").when(prompt("first prompt"))),
        setup: HostSetup {
            api_retry: Some(ApiRetry {
                max_retries: 2,
                initial_sleep_ms: 100,
            }),
            ..HostSetup::default()
        },
    }
}

/// A terminal 400.
pub fn bad_request() -> Scenario {
    Scenario {
        name: "bad_request",
        doc: "Prompt \"first prompt\"; the model endpoint answers HTTP 400 INVALID_ARGUMENT; the \
              harness reports a SYSTEM ERROR step (httpCode 400), then STATE_FULLY_IDLE with an \
              error, then closes the socket.",
        turns: vec![Turn {
            expect: TurnEnd::Failed,
            ..Turn::new("first prompt")
        }],
        script: Script::new().then(
            Reply::error(400)
                .message("Request contains an invalid argument.")
                .when(prompt("first prompt")),
        ),
        setup: HostSetup::default(),
    }
}

/// Two turns on one socket.
pub fn two_turns() -> Scenario {
    Scenario {
        name: "two_turns",
        doc: "Prompts \"first question\" then \"second question\"; text \"One two.\", then \
              thinking \"hmm\" and text \"Three.\"; step indices continue across turns.",
        turns: vec![Turn::new("first question"), Turn::new("second question")],
        script: Script::new()
            .then(Reply::text(["One ", "two."]).when(prompt("first question")))
            .then(
                Reply::text("Three.")
                    .thought("hmm")
                    .when(prompt("second question")),
            ),
        setup: HostSetup::default(),
    }
}

/// A conversation re-attached after its socket closed.
pub fn resume_history() -> Scenario {
    Scenario {
        name: "resume_history",
        doc: "Turn 1 \"turn one please\": thinking, a host tool call lookup{key: alpha}, the \
              host's result, text \"alpha resolved\". Then the host closes the socket and \
              re-attaches with the same conversation id and CREATE_OR_RESUME (the \
              initializeConversationResponse carries the history); turn 2 \"turn two please\" \
              gets \"turn two reply\".",
        turns: vec![
            Turn::new("turn one please"),
            Turn {
                reattach: true,
                ..Turn::new("turn two please")
            },
        ],
        script: Script::new()
            .then(
                Reply::call("lookup", json!({"key": "alpha"}))
                    .thought("think first")
                    .when(prompt("turn one please")),
            )
            .then(Reply::text("alpha resolved").when(Matcher::function_response_to("lookup")))
            .then(Reply::text("turn two reply").when(prompt("turn two please"))),
        setup: HostSetup {
            custom_tools: vec![CustomTool {
                name: "lookup",
                description: "Looks a key up.",
                parameters: json!({
                    "type": "object",
                    "properties": {"key": {"type": "string"}},
                    "required": ["key"]
                }),
                result: json!({"result": "value-for-alpha"}),
            }],
            ..HostSetup::default()
        },
    }
}

/// A `research` subagent started by the root agent.
pub fn subagent() -> Scenario {
    Scenario {
        name: "subagent",
        doc: "Prompt \"delegate please\" with subagents enabled; the root calls invoke_subagent \
              (type research, prompt \"SUBTASK-XYZ say hi\") and says \"A subagent is on it.\" \
              (root goes WAITING_FOR_SUBAGENTS); the subagent thinks and answers \"subagent \
              result text\" (delayed 0.3 s, so that it ends after the root's reply); the root \
              is told the subagent went idle and answers \"The subagent says hi.\". The turn \
              ends at the root's FULLY_IDLE.",
        turns: vec![Turn::new("delegate please")],
        script: Script::new()
            .then(
                Reply::text("A subagent is on it.")
                    .when(Matcher::function_response_to("invoke_subagent"))
                    .named("root after invoke"),
            )
            .then(
                Reply::text("The subagent says hi.")
                    .when(
                        Matcher::user_text()
                            .system_message(true)
                            .user_text_contains("has gone idle"),
                    )
                    .named("root after subagent"),
            )
            // The subagent answers after the root's reply to the invocation: one finished
            // before that request would have its idle message in the invocation's result, and
            // the root would answer once, leaving "root after subagent" unused.
            .then(
                Reply::text("subagent result text")
                    .thought("sub thinking")
                    .delay_ms(300)
                    .when(
                        Matcher::user_text()
                            .system_message(true)
                            .user_text_contains("SUBTASK-XYZ"),
                    )
                    .named("subagent"),
            )
            .then(
                Reply::call(
                    "invoke_subagent",
                    json!({"Subagents": [{
                        "TypeName": "research",
                        "Role": "Helper",
                        "Prompt": "SUBTASK-XYZ say hi"
                    }]}),
                )
                .when(prompt("delegate please").system_message(false))
                .named("root invokes"),
            ),
        setup: HostSetup {
            builtin_tools: vec!["subagents"],
            ..HostSetup::default()
        },
    }
}

/// Two `research` subagents started by two `invoke_subagent` calls in one model reply.
pub fn two_subagents_in_parallel() -> Scenario {
    let invoke = |n: &str| {
        Call::new(
            "invoke_subagent",
            json!({"Subagents": [{
                "TypeName": "research",
                "Role": format!("Helper {n}"),
                "Prompt": format!("SUBTASK-{n} say {n}")
            }]}),
        )
    };
    // The subagents answer one after the other, each after the root's previous answer, so
    // the root's steps come in the same order in every recording.
    let subagent = |n: &str, delay_ms: u64| {
        Reply::text(format!("result {n}"))
            .delay_ms(delay_ms)
            .when(
                Matcher::user_text()
                    .system_message(true)
                    .user_text_contains(format!("SUBTASK-{n}")),
            )
            .named(format!("subagent {n}"))
    };
    Scenario {
        name: "two_subagents_in_parallel",
        doc: "Prompt \"delegate twice please\" with subagents enabled; the root calls \
              invoke_subagent twice in one reply (research subagents prompted \"SUBTASK-ONE say \
              ONE\" and \"SUBTASK-TWO say TWO\"; the harness runs both at once) and says \"Two \
              subagents are on it.\"; each subagent answers \"result ONE\" / \"result TWO\" \
              (each reply event delayed, 0.3 s and 1 s, so they finish one after the other); the root answers \"A \
              subagent reported.\" each time one goes idle. The turn ends at the \
              root's FULLY_IDLE.",
        turns: vec![Turn::new("delegate twice please")],
        script: Script::new()
            .then(
                Reply::text("Two subagents are on it.")
                    .when(Matcher::function_response_to("invoke_subagent"))
                    .named("root after invoke"),
            )
            .then(
                Reply::text("A subagent reported.")
                    .when(
                        Matcher::user_text()
                            .system_message(true)
                            .user_text_contains("has gone idle"),
                    )
                    .named("root after a subagent")
                    .times(2),
            )
            .then(subagent("ONE", 300))
            .then(subagent("TWO", 1000))
            .then(
                Reply::calls([invoke("ONE"), invoke("TWO")])
                    .when(prompt("delegate twice please").system_message(false))
                    .named("root invokes twice"),
            ),
        setup: HostSetup {
            builtin_tools: vec!["subagents"],
            ..HostSetup::default()
        },
    }
}

/// A coding agent's progress: a file created, then edited, then a command run on it.
pub fn file_edits_and_command() -> Scenario {
    Scenario {
        name: "file_edits_and_command",
        doc: "Prompt \"write the notes\" with writeToFile, fileEdit and runCommand enabled; the \
              model creates notes.md (write_to_file, 3 lines), replaces its second line \
              (replace_file_content), runs `cat notes.md` in the workspace (run_command), then \
              answers \"The notes are written.\". The workspace starts empty.",
        turns: vec![Turn::new("write the notes")],
        script: Script::new()
            .then(
                Reply::call(
                    "write_to_file",
                    json!({
                        "TargetFile": "{{workspace}}/notes.md",
                        "CodeContent": "# Notes\n- first\n- second\n",
                        "Overwrite": false
                    }),
                )
                .when(prompt("write the notes"))
                .named("write"),
            )
            .then(
                Reply::call(
                    "replace_file_content",
                    json!({
                        "TargetFile": "{{workspace}}/notes.md",
                        "Instruction": "change the first item",
                        "AllowMultiple": false,
                        "TargetContent": "- first\n",
                        "ReplacementContent": "- first, edited\n- inserted\n",
                        "StartLine": 1,
                        "EndLine": 3
                    }),
                )
                .when(Matcher::function_response_to("write_to_file"))
                .named("edit"),
            )
            .then(
                Reply::call(
                    "run_command",
                    json!({
                        "CommandLine": "cat notes.md",
                        "Cwd": "{{workspace}}",
                        "WaitMsBeforeAsync": 5000
                    }),
                )
                .when(Matcher::function_response_to("replace_file_content"))
                .named("run"),
            )
            .then(
                Reply::text("The notes are written.")
                    .when(Matcher::function_response_to("run_command"))
                    .named("answer"),
            ),
        setup: HostSetup {
            builtin_tools: vec!["writeToFile", "fileEdit", "runCommand"],
            ..HostSetup::default()
        },
    }
}

/// Two host tool calls in one model reply.
pub fn two_parallel_custom_calls() -> Scenario {
    Scenario {
        name: "two_parallel_custom_calls",
        doc: "Prompt \"Weather and time in Paris?\" with host tools get_weather and get_time; the \
              model says \"Checking both.\" and calls get_weather{city: Paris} and \
              get_time{city: Paris} in one reply (both steps go ACTIVE before the reply's \
              usageUpdate; the harness sends the second toolCall only after the first \
              toolResponse); then \"Sunny, 09:30.\".",
        turns: vec![Turn::new("Weather and time in Paris?")],
        script: Script::new()
            .then(
                Reply::text("Checking both.")
                    .with_call(Call::new("get_weather", json!({"city": "Paris"})))
                    .with_call(Call::new("get_time", json!({"city": "Paris"})))
                    .when(prompt("Weather and time in Paris?")),
            )
            .then(Reply::text("Sunny, 09:30.").when(Matcher::function_response_to("get_time"))),
        setup: HostSetup {
            custom_tools: vec![get_weather(), get_time()],
            answer_delay_ms: PARK_DELAY_MS,
            ..HostSetup::default()
        },
    }
}

/// Three host tool calls in one model reply.
pub fn three_parallel_custom_calls() -> Scenario {
    Scenario {
        name: "three_parallel_custom_calls",
        doc: "Prompt \"Everything about Rome?\" with host tools get_weather, get_time and \
              get_news; the model calls all three {city: Rome} in one reply with no text; the \
              host answers each toolCall as it comes (one at a time); then \"Rome: sunny, \
              09:30, calm.\".",
        turns: vec![Turn::new("Everything about Rome?")],
        script: Script::new()
            .then(
                Reply::calls([
                    Call::new("get_weather", json!({"city": "Rome"})),
                    Call::new("get_time", json!({"city": "Rome"})),
                    Call::new("get_news", json!({"city": "Rome"})),
                ])
                .when(prompt("Everything about Rome?")),
            )
            .then(
                Reply::text("Rome: sunny, 09:30, calm.")
                    .when(Matcher::function_response_to("get_news")),
            ),
        setup: HostSetup {
            custom_tools: vec![get_weather(), get_time(), get_news()],
            answer_delay_ms: PARK_DELAY_MS,
            ..HostSetup::default()
        },
    }
}

/// A built-in call and a host call in one model reply, the built-in first.
pub fn builtin_and_custom_calls() -> Scenario {
    Scenario {
        name: "builtin_and_custom_calls",
        doc: "Prompt \"List the files and get the weather\" with listDir enabled and host tool \
              get_weather; one reply calls list_dir on the workspace, then get_weather{city: \
              Oslo}; the harness runs list_dir first, then sends the toolCall; then \"Done \
              both.\".",
        turns: vec![Turn::new("List the files and get the weather")],
        script: Script::new()
            .then(
                Reply::calls([
                    Call::new("list_dir", json!({"DirectoryPath": "{{workspace}}"})),
                    Call::new("get_weather", json!({"city": "Oslo"})),
                ])
                .when(prompt("List the files and get the weather")),
            )
            .then(Reply::text("Done both.").when(Matcher::function_response_to("get_weather"))),
        setup: HostSetup {
            builtin_tools: vec!["listDir"],
            custom_tools: vec![get_weather()],
            answer_delay_ms: PARK_DELAY_MS,
            workspace_files: vec![("hello.txt", "hello\n")],
            ..HostSetup::default()
        },
    }
}

/// A host call and a built-in call in one reply, both behind the pre-tool hook.
pub fn custom_and_builtin_calls_with_pre_tool_hook() -> Scenario {
    Scenario {
        name: "custom_and_builtin_calls_with_pre_tool_hook",
        doc: "Prompt \"Weather, then list the files\" with the PreTool hook enabled (the host \
              allows every call), listDir enabled and host tool get_weather; one reply calls \
              get_weather{city: Oslo}, then list_dir on the workspace; each call is preceded by \
              a PreTool hook request; then \"Both done.\".",
        turns: vec![Turn::new("Weather, then list the files")],
        script: Script::new()
            .then(
                Reply::calls([
                    Call::new("get_weather", json!({"city": "Oslo"})),
                    Call::new("list_dir", json!({"DirectoryPath": "{{workspace}}"})),
                ])
                .when(prompt("Weather, then list the files")),
            )
            .then(Reply::text("Both done.").when(Matcher::function_response_to("list_dir"))),
        setup: HostSetup {
            builtin_tools: vec!["listDir"],
            custom_tools: vec![get_weather()],
            pre_tool_hook: true,
            answer_delay_ms: PARK_DELAY_MS,
            workspace_files: vec![("hello.txt", "hello\n")],
            ..HostSetup::default()
        },
    }
}
