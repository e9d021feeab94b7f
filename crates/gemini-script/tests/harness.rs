//! The real harness against the scripted endpoint: a text turn, a thinking
//! turn and a tool turn complete, and the log shows what the model was told.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use gemini_script::{
    AnsweredBy, Matcher, Reply, Script, ScriptedModel, demo,
    scenarios::{self, CustomTool, HostSetup, Scenario, TurnEnd},
};
use serde_json::{Value, json};
use support::{Harness, MODEL};

fn weather_tool() -> CustomTool {
    CustomTool {
        name: "get_weather",
        description: "Returns the weather for a city.",
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        result: json!({"city": "Paris", "forecast": "sunny"}),
    }
}

#[tokio::test]
async fn harness_completes_a_text_turn() {
    let model =
        ScriptedModel::start(Script::new().then(
            Reply::text(["Hello ", "from the ", "scripted model."]).when(Matcher::user_text()),
        ))
        .await
        .expect("start");
    let harness = Harness::spawn().await;
    let setup = HostSetup::default();
    let mut conversation = harness.connect(harness.config(&model, &setup, None)).await;
    let turn = conversation.turn("Say hello", &setup).await;

    assert_eq!(turn.error, None, "{}", turn.summary());
    assert_eq!(turn.model_texts(), vec!["Hello from the scripted model."]);
    let deltas: Vec<&str> = turn
        .frames
        .iter()
        .filter_map(|f| f["stepUpdate"]["textDelta"].as_str())
        .filter(|d| !d.is_empty() && *d != "Say hello")
        .collect();
    // How many deltas the harness emits depends on how the chunks arrive; their sum does not.
    assert_eq!(deltas.concat(), "Hello from the scripted model.");

    let log = model.requests();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(
        log[0].answered_by,
        AnsweredBy::Entry {
            index: 0,
            name: None
        }
    );
    assert_eq!(log[0].model.as_deref(), Some(MODEL));
    assert_eq!(
        log[0].path,
        format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
    );
    assert_eq!(log[0].header("x-goog-api-key"), Some("fake-key"));
    assert_eq!(log[0].last_user_text().as_deref(), Some("Say hello"));

    conversation.close().await;
    assert!(harness.shutdown().await.success());
}

#[tokio::test]
async fn harness_completes_a_thinking_turn_and_replays_the_signature() {
    let script = Script::new()
        .then(
            Reply::text(["The answer ", "is 42."])
                .thought(["**Planning** I should think.", " Then answer."])
                .signature("c2lnLWZvci10ZXh0")
                .when(Matcher::any().user_text_contains("What is the answer?")),
        )
        .then(Reply::text("Again 42.").when(Matcher::any().user_text_contains("And again?")));
    let model = ScriptedModel::start(script).await.expect("start");
    let harness = Harness::spawn().await;
    let setup = HostSetup::default();
    let mut conversation = harness.connect(harness.config(&model, &setup, None)).await;

    let first = conversation.turn("What is the answer?", &setup).await;
    assert_eq!(first.error, None, "{}", first.summary());
    assert_eq!(
        first.thinking(),
        vec!["**Planning** I should think. Then answer."]
    );
    assert_eq!(first.model_texts(), vec!["The answer is 42."]);
    let second = conversation.turn("And again?", &setup).await;
    assert_eq!(
        second.model_texts(),
        vec!["Again 42."],
        "{}",
        second.summary()
    );

    // The harness replays the thought and its signature in the next request.
    let log = model.requests();
    assert_eq!(log.len(), 2);
    let replayed = &log[1].body["contents"][1];
    assert_eq!(replayed["role"], "model");
    assert_eq!(
        replayed["parts"],
        json!([
            {"text": "**Planning** I should think. Then answer.", "thought": true},
            {"text": "The answer is 42.", "thoughtSignature": "c2lnLWZvci10ZXh0"}
        ])
    );
    conversation.close().await;
    assert!(harness.shutdown().await.success());
}

#[tokio::test]
async fn harness_completes_a_tool_turn() {
    let script = Script::new()
        .then(
            Reply::call("get_weather", json!({"city": "Paris"}))
                .thought("I need the weather.")
                .when(Matcher::user_text()),
        )
        .then(
            Reply::text("Paris will be sunny.").when(Matcher::function_response_to("get_weather")),
        );
    let model = ScriptedModel::start(script).await.expect("start");
    let harness = Harness::spawn().await;
    let setup = HostSetup {
        custom_tools: vec![weather_tool()],
        ..HostSetup::default()
    };
    let mut conversation = harness.connect(harness.config(&model, &setup, None)).await;
    let turn = conversation.turn("Weather in Paris?", &setup).await;

    assert_eq!(turn.error, None, "{}", turn.summary());
    let calls = turn.tool_calls();
    assert_eq!(calls.len(), 1, "{}", turn.summary());
    assert_eq!(calls[0]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(calls[0]["argumentsJson"].as_str().unwrap_or("null")).expect("args");
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(
        turn.model_texts().last().map(String::as_str),
        Some("Paris will be sunny.")
    );

    let log = model.requests();
    assert_eq!(log.len(), 2, "{log:#?}");
    // The tool's schema reached the model, with the harness's required extras.
    let declared = log[0]
        .function_declaration("get_weather")
        .expect("get_weather declared");
    let schema = &declared["parametersJsonSchema"];
    assert_eq!(schema["properties"]["city"], json!({"type": "string"}));
    assert_eq!(
        schema["required"],
        json!(["city", "toolSummary", "toolAction"])
    );
    // The result came back as a functionResponse in a role "model" content.
    let responses = log[1].function_responses();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].name, "get_weather");
    assert!(
        responses[0]
            .output
            .as_deref()
            .unwrap_or_default()
            .contains(r#""forecast": "sunny""#)
            || responses[0]
                .output
                .as_deref()
                .unwrap_or_default()
                .contains(r#""forecast":"sunny""#),
        "{responses:?}"
    );
    assert_eq!(log[1].body["contents"][2]["role"], "model");
    assert_eq!(log[1].answered_by.entry_index(), Some(1));

    conversation.close().await;
    assert!(harness.shutdown().await.success());
}

#[tokio::test]
async fn demo_script_drives_the_harness() {
    let model = ScriptedModel::start(demo::script()).await.expect("start");
    let harness = Harness::spawn().await;
    harness.write_workspace_files(&[("hello.txt", "hello\n"), ("src/main.rs", "fn main() {}\n")]);
    let setup = HostSetup {
        builtin_tools: vec!["listDir"],
        custom_tools: vec![
            CustomTool {
                name: demo::SERVER_TOOL,
                description: "Returns the weather for a location.",
                parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
                result: json!({"location": "Tokyo", "forecast": "sunny"}),
            },
            CustomTool {
                name: demo::FRONTEND_TOOL,
                description: "Changes the page background.",
                parameters: json!({"type": "object", "properties": {"background": {"type": "string"}}, "required": ["background"]}),
                result: json!({"ok": true}),
            },
        ],
        ..HostSetup::default()
    };
    let mut conversation = harness.connect(harness.config(&model, &setup, None)).await;

    let listing = conversation
        .turn("What files are in my workspace?", &setup)
        .await;
    assert_eq!(listing.error, None, "{}", listing.summary());
    let list_steps = listing.steps_with("listDirectory");
    assert_eq!(list_steps.len(), 1, "{}", listing.summary());
    assert_eq!(list_steps[0]["state"], "STATE_DONE");
    let summary = listing.model_texts().join("\n");
    assert!(
        summary.contains("hello.txt") && summary.contains("src"),
        "{summary}"
    );

    let weather = conversation
        .turn("What's the weather in Tokyo?", &setup)
        .await;
    let calls = weather.tool_calls();
    assert_eq!(calls.len(), 1, "{}", weather.summary());
    assert_eq!(calls[0]["name"], demo::SERVER_TOOL);
    assert_eq!(
        calls[0]["argumentsJson"]
            .as_str()
            .map(serde_json::from_str::<Value>)
            .and_then(Result::ok),
        Some(json!({"location": "Tokyo"}))
    );
    assert!(
        weather.model_texts().join("\n").contains("sunny"),
        "{}",
        weather.summary()
    );

    let background = conversation
        .turn("Please change the background", &setup)
        .await;
    let calls = background.tool_calls();
    assert_eq!(calls.len(), 1, "{}", background.summary());
    assert_eq!(calls[0]["name"], demo::FRONTEND_TOOL);
    assert!(
        background.model_texts().join("\n").starts_with("Done!"),
        "{}",
        background.summary()
    );

    let hello = conversation.turn("Hi there", &setup).await;
    assert_eq!(hello.thinking().len(), 1, "{}", hello.summary());
    assert!(
        hello
            .model_texts()
            .join("\n")
            .starts_with("Hi! I'm the **offline demo model**")
    );

    let answered: Vec<Option<String>> = model
        .requests()
        .iter()
        .map(|r| match &r.answered_by {
            AnsweredBy::Entry { name, .. } => name.clone(),
            other => Some(format!("{other:?}")),
        })
        .collect();
    let expected = [
        "list files",
        "list_dir result",
        "weather",
        "weather result",
        "background",
        "background result",
        "introduction",
    ];
    assert_eq!(answered, expected.map(|n| Some(n.to_owned())));
    conversation.close().await;
    assert!(harness.shutdown().await.success());
}

/// Runs one scenario the way the fixture recorder will, checking it plays out
/// exactly as scripted: every turn ends as expected and every entry is used.
async fn check_scenario(scenario: Scenario) {
    let name = scenario.name;
    let setup = &scenario.setup;
    let model = ScriptedModel::start(scenario.script.clone())
        .await
        .expect("start");
    let harness = Harness::spawn().await;
    harness.write_workspace_files(&setup.workspace_files);
    let mut conversation = harness.connect(harness.config(&model, setup, None)).await;
    let mut outcomes = Vec::new();
    for turn in &scenario.turns {
        if turn.reattach {
            let id = conversation.cascade_id.clone();
            conversation.close().await;
            conversation = harness
                .reattach(harness.config(&model, setup, Some(&id)))
                .await;
            assert_eq!(
                conversation.cascade_id, id,
                "{name}: re-attached to another conversation"
            );
            let history = conversation.init["history"].as_array().map_or(0, Vec::len);
            assert!(history > 0, "{name}: no history after re-attaching");
        }
        let outcome = conversation.turn(turn.prompt, setup).await;
        match turn.expect {
            TurnEnd::Idle => assert!(
                outcome.error.is_none() && !outcome.closed,
                "{name}: turn {:?} did not end idle:\n{}\nstderr:\n{}",
                turn.prompt,
                outcome.summary(),
                harness.stderr()
            ),
            TurnEnd::Failed => assert!(
                outcome.error.is_some(),
                "{name}: expected a failed turn:\n{}",
                outcome.summary()
            ),
        }
        outcomes.push(outcome);
    }
    let log = model.requests();
    assert!(
        log.iter().all(|r| r.answered_by.entry_index().is_some()),
        "{name}: a request fell through to the default reply: {:#?}",
        log.iter()
            .map(|r| (&r.answered_by, r.last_user_text()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        model.remaining(),
        vec![],
        "{name}: script entries left unused"
    );

    let frames: Vec<&Value> = outcomes.iter().flat_map(|o| &o.frames).collect();
    let has = |pointer: &str, needle: &str| {
        frames.iter().any(|f| {
            f.pointer(pointer)
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains(needle))
        })
    };
    match name {
        "builtin_list_dir_and_run_command" => {
            assert!(
                has("/stepUpdate/listDirectory/directoryPath", "ws"),
                "{name}: no list_dir step"
            );
            assert!(
                has(
                    "/stepUpdate/runCommand/combinedOutput",
                    "hello-from-run-command"
                ),
                "{name}: no command output"
            );
        }
        "ask_question" => assert!(
            frames
                .iter()
                .any(|f| f.pointer("/stepUpdate/questionsRequest").is_some()),
            "{name}: no questionsRequest"
        ),
        "rate_limited_then_ok" => assert_eq!(
            log.iter().map(|r| r.status).collect::<Vec<_>>(),
            vec![429, 200]
        ),
        "subagent" => assert!(
            frames
                .iter()
                .any(|f| f.pointer("/stepUpdate/parentTrajectoryId").is_some()),
            "{name}: no subagent steps"
        ),
        _ => {}
    }
    conversation.close().await;
    assert!(harness.shutdown().await.success(), "{name}: harness exit");
}

#[tokio::test]
async fn every_scenario_plays_out_against_the_harness() {
    for scenario in scenarios::all() {
        check_scenario(scenario).await;
    }
}
