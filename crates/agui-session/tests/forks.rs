//! Edits and regenerates (issue 42) with the real harness and the scripted model: a run whose
//! messages change the thread's past is never ignored.

mod support;

use agui_session::threads::ThreadPatch;
use agui_session::{Agent, AgentOptions, Backend, Owner, ToolRegistry};
use agui_types::Event;
use std::time::Duration;

use gemini_script::{Handle, Matcher, Reply, Script, ScriptedModel};
use harness_client::{BuiltinTool, HarnessPool, ModelEndpoint, PoolOptions, ProcessOptions};
use serde_json::{Value, json};
use support::{finish, input_of, last, restated, run_error, text, types, user};

fn agent(dir: &std::path::Path, model: &Handle) -> Agent {
    agent_with(dir, model, Default::default())
}

fn agent_with(
    dir: &std::path::Path,
    model: &Handle,
    builtin_tools: std::collections::BTreeSet<BuiltinTool>,
) -> Agent {
    let mut options = AgentOptions::new(
        "gemini-3-flash-preview",
        ModelEndpoint::gemini(model.base_url(), "test-key"),
        dir,
    );
    options.builtin_tools = builtin_tools;
    options.api_retry = Some((2, 100));
    let pool = HarnessPool::new(PoolOptions::default()).unwrap();
    let backend = Backend::harness(pool, ProcessOptions::new(options.save_dir.clone()));
    Agent::new(options, backend, ToolRegistry::new()).unwrap()
}

/// The model answers each message with "Answer N." (N counts its requests).
fn numbered() -> Script {
    (1..=8).fold(Script::new(), |s, n| {
        s.then(Reply::text([format!("Answer {n}.")]))
    })
}

/// The id of the run's (one) assistant message.
fn answer_id(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            Event::TextMessageStart(s) => Some(s.message_id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("an answer: {}", types(events)))
}

fn assistant(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "assistant", "content": text})
}

/// The user and model texts of the model's last request, one line each.
fn last_request(model: &Handle) -> Vec<String> {
    let requests = model.requests();
    let body = &requests.last().expect("a request").body;
    gemini_script::inspect::contents(body)
        .iter()
        .flat_map(|c| {
            let role = c["role"].as_str().unwrap_or("").to_owned();
            c["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["text"].as_str())
                .map(move |t| {
                    format!(
                        "{role}: {}",
                        gemini_script::inspect::strip_user_request(t).trim()
                    )
                })
                .collect::<Vec<_>>()
        })
        .filter(|line| {
            !line.contains("<SYSTEM_MESSAGE>") && !line.contains("<ADDITIONAL_METADATA>")
        })
        .collect()
}

/// A thread with two turns: `(agent, model, dir, [u1, a1, u2, a2])`.
async fn two_turns() -> (Agent, Handle, tempfile::TempDir, Vec<Value>) {
    let model = ScriptedModel::start(numbered()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), &model);
    let mut transcript = vec![user("u1", "What is the weather in Paris?")];
    let first = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&first), "Answer 1.");
    transcript.push(assistant(&answer_id(&first), "Answer 1."));
    transcript.push(user("u2", "And in Rome?"));
    let second = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&second), "Answer 2.");
    transcript.push(assistant(&answer_id(&second), "Answer 2."));
    (agent, model, dir, transcript)
}

#[tokio::test]
async fn an_edit_forks_the_thread_and_the_model_sees_only_the_kept_history() {
    let (agent, model, _dir, transcript) = two_turns().await;
    let mut edited = vec![
        transcript[0].clone(),
        transcript[1].clone(),
        user("u2", "And in Oslo?"),
    ];
    let events = finish(agent.run(input_of(json!({"messages": edited})))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{}",
        types(&events)
    );
    assert_eq!(text(&events), "Answer 3.");
    let request = last_request(&model);
    eprintln!("request log of the edit: {request:#?}");
    assert_eq!(
        request,
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Oslo?",
        ]
    );
    // The thread goes on from the fork.
    edited.push(assistant(&answer_id(&events), "Answer 3."));
    edited.push(user("u3", "Thanks"));
    let events = finish(agent.run(input_of(json!({"messages": edited})))).await;
    assert_eq!(text(&events), "Answer 4.");
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Oslo?",
            "model: Answer 3.",
            "user: Thanks",
        ]
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_regenerate_forks_the_thread_and_answers_again_from_the_kept_history() {
    let (agent, model, _dir, transcript) = two_turns().await;
    let cut = transcript[..3].to_vec();
    let events = finish(agent.run(input_of(json!({"messages": cut})))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{}",
        types(&events)
    );
    assert_eq!(text(&events), "Answer 3.");
    let request = last_request(&model);
    eprintln!("request log of the regenerate: {request:#?}");
    assert_eq!(
        request,
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Rome?",
        ]
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn an_edit_of_the_first_message_starts_over() {
    let (agent, model, _dir, _transcript) = two_turns().await;
    let events = finish(agent.run(input_of(
        json!({"messages": [user("u1", "list the files")]}),
    )))
    .await;
    assert_eq!(text(&events), "Answer 3.");
    assert_eq!(last_request(&model), ["user: list the files"]);
    agent.shutdown().await;
}

#[tokio::test]
async fn a_fork_works_after_a_server_restart() {
    let (agent, model, dir, transcript) = two_turns().await;
    agent.shutdown().await;
    let agent = self::agent(dir.path(), &model);
    let edited = vec![
        transcript[0].clone(),
        transcript[1].clone(),
        user("u2", "And in Oslo?"),
    ];
    let events = finish(agent.run(input_of(json!({"messages": edited})))).await;
    assert_eq!(text(&events), "Answer 3.", "{}", types(&events));
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Oslo?",
        ]
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_regenerate_the_client_marks_forks_after_a_restart_and_its_run_sent_again_does_not() {
    let (agent, model, dir, transcript) = two_turns().await;
    agent.shutdown().await;
    let cut = transcript[..3].to_vec();
    // Unmarked, a server that has not read the history back takes the cut transcript for a
    // client retrying a run whose stream broke: the answer is restated, nothing is asked.
    let agent = self::agent(dir.path(), &model);
    let asked = model.requests().len();
    let retry = finish(agent.run(input_of(json!({"messages": cut})))).await;
    assert!(
        matches!(last(&retry), Event::RunFinished(_)),
        "{}",
        types(&retry)
    );
    assert_eq!(
        model.requests().len(),
        asked,
        "an unmarked cut was sent to the model"
    );
    agent.shutdown().await;

    // Marked, the same cut after another restart is a regenerate.
    let agent = self::agent(dir.path(), &model);
    let regenerate = json!({"runId": "run-regenerate", "messages": cut,
        "forwardedProps": {"regenerate": true}});
    let events = finish(agent.run(input_of(regenerate.clone()))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{}",
        types(&events)
    );
    assert_eq!(text(&events), "Answer 3.");
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Rome?",
        ]
    );
    let asked = model.requests().len();
    let branches = agent
        .thread_as(&Owner::local(), "thread-1")
        .await
        .unwrap()
        .branches;
    assert_eq!(branches.len(), 1, "the old answer's branch is kept");
    agent.shutdown().await;

    // The same run sent again (its stream was cut), on a restarted server: it forked already.
    let agent = self::agent(dir.path(), &model);
    let again = finish(agent.run(input_of(regenerate))).await;
    assert!(
        matches!(last(&again), Event::RunFinished(_)),
        "{}",
        types(&again)
    );
    assert_eq!(
        model.requests().len(),
        asked,
        "the run sent again forked again"
    );
    assert_eq!(
        agent
            .thread_as(&Owner::local(), "thread-1")
            .await
            .unwrap()
            .branches
            .len(),
        1
    );
    assert_eq!(
        restated(&agent).await.last().map(String::as_str),
        Some("assistant: Answer 3."),
        "a connect restates the regenerated answer"
    );

    // A mark on a run that cannot be a regenerate is refused, and nothing is sent.
    for (messages, props, why) in [
        (
            transcript.clone(),
            json!({"regenerate": true}),
            "ending on an answer",
        ),
        (
            vec![user("u9", "A new message")],
            json!({"regenerate": true}),
            "ending on a new message",
        ),
        (cut.clone(), json!({"regenerate": "yes"}), "not a boolean"),
    ] {
        let events = finish(agent.run(input_of(
            json!({"messages": messages, "forwardedProps": props}),
        )))
        .await;
        let error = run_error(&events);
        assert_eq!(
            error.code.as_deref(),
            Some("INVALID_INPUT"),
            "{why}: {error:?}"
        );
        assert!(
            error.message.contains("regenerate"),
            "{why}: {}",
            error.message
        );
    }
    assert_eq!(
        model.requests().len(),
        asked,
        "a refused run reached the model"
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_fork_is_refused_with_a_reason_while_a_turn_is_in_flight() {
    let script = Script::new()
        .then(Reply::text(["Answer 1."]))
        .then(Reply::text(["Slow."]).delay_ms(3000));
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), &model);
    let first = finish(agent.run(input_of(json!({"messages": [user("u1", "Hi")]})))).await;
    let transcript = vec![
        user("u1", "Hi"),
        assistant(&answer_id(&first), "Answer 1."),
        user("u2", "Slow one"),
    ];
    // Its client leaves once the model has the request: the next run takes the thread over
    // while the turn runs on.
    let slow = agent.run(input_of(json!({"messages": transcript})));
    support::eventually(Duration::from_secs(20), "the model has the request", || {
        model.requests().len() == 2
    })
    .await;
    drop(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = finish(agent.run(input_of(json!({"messages": [user("u1", "Hello")]})))).await;
    let error = run_error(&events);
    assert_eq!(error.code.as_deref(), Some("CANNOT_FORK"), "{error:?}");
    assert!(
        error.message.contains("u1 was edited") && error.message.contains("in flight"),
        "{}",
        error.message
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn a_lagging_client_is_not_taken_for_a_divergence() {
    let (agent, model, _dir, transcript) = two_turns().await;
    // It saw only the first turn, and sends its new message after it.
    let lagging = vec![
        transcript[0].clone(),
        transcript[1].clone(),
        user("u3", "Thanks"),
    ];
    let events = finish(agent.run(input_of(json!({"messages": lagging})))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{}",
        types(&events)
    );
    assert_eq!(text(&events), "Answer 3.");
    // Only its new message.
    let events = finish(agent.run(input_of(json!({"messages": [user("u4", "Bye")]})))).await;
    assert_eq!(text(&events), "Answer 4.");
    // An older transcript ending on an answer it saw: nothing to do.
    let events = finish(agent.run(input_of(json!({"messages": transcript[..2]})))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{}",
        types(&events)
    );
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Rome?",
            "model: Answer 2.",
            "user: Thanks",
            "model: Answer 3.",
            "user: Bye",
        ]
    );
    agent.shutdown().await;
}

#[tokio::test]
async fn the_earlier_branch_is_kept_listed_and_can_be_switched_back_to() {
    let (agent, model, _dir, transcript) = two_turns().await;
    let owner = Owner::local();
    let before = agent.thread_as(&owner, "thread-1").await.unwrap();
    assert!(before.branches.is_empty());
    let edited = vec![
        transcript[0].clone(),
        transcript[1].clone(),
        user("u2", "And in Oslo?"),
    ];
    let events = finish(agent.run(input_of(json!({"messages": edited})))).await;
    assert_eq!(text(&events), "Answer 3.");

    let forked = agent.thread_as(&owner, "thread-1").await.unwrap();
    assert_eq!(forked.branches.len(), 1, "{forked:?}");
    let old = forked.branches[0].clone();
    assert_eq!(
        old.id, before.branch,
        "the earlier branch is the earlier conversation"
    );
    assert_eq!(old.left_at, "u2");
    assert_ne!(forked.branch, before.branch);
    assert_eq!(
        restated(&agent).await,
        [
            "user: What is the weather in Paris?",
            "assistant: Answer 1.",
            "user: And in Oslo?",
            "assistant: Answer 3.",
        ]
    );

    // Back to the earlier branch: intact.
    let patch = ThreadPatch {
        branch: Some(old.id.clone()),
        ..ThreadPatch::default()
    };
    let switched = agent
        .update_thread_as(&owner, "thread-1", patch)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(switched.branch, old.id);
    assert_eq!(switched.branches.len(), 1);
    assert_eq!(switched.branches[0].id, forked.branch);
    assert_eq!(
        switched.branches[0].left_at, "u2",
        "the branch left by the switch parts from the earlier one where they forked"
    );
    assert_eq!(
        restated(&agent).await,
        [
            "user: What is the weather in Paris?",
            "assistant: Answer 1.",
            "user: And in Rome?",
            "assistant: Answer 2.",
        ]
    );
    // It goes on from there, its own u2 not taken for an edit.
    let mut going_on = transcript.clone();
    going_on.push(user("u9", "Thanks"));
    let events = finish(agent.run(input_of(json!({"messages": going_on})))).await;
    assert_eq!(text(&events), "Answer 4.", "{}", types(&events));
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Rome?",
            "model: Answer 2.",
            "user: Thanks",
        ]
    );
    // An unknown branch is refused.
    let patch = ThreadPatch {
        branch: Some("nope".into()),
        ..ThreadPatch::default()
    };
    assert!(matches!(
        agent.update_thread_as(&owner, "thread-1", patch).await,
        Err(agui_session::threads::ThreadsError::NoSuchBranch(_))
    ));
    agent.shutdown().await;
}

/// A run that names a branch (`forwardedProps.branch`) continues that one: the model sees its
/// history and the new message; an unknown branch is refused, and the thread is unchanged.
#[tokio::test]
async fn a_run_naming_a_branch_switches_to_it_and_continues_it() {
    let (agent, model, _dir, transcript) = two_turns().await;
    let owner = Owner::local();
    let earlier = agent.thread_as(&owner, "thread-1").await.unwrap().branch;
    let edited = vec![
        transcript[0].clone(),
        transcript[1].clone(),
        user("u2", "And in Oslo?"),
    ];
    let events = finish(agent.run(input_of(json!({"messages": edited})))).await;
    assert_eq!(text(&events), "Answer 3.");
    let forked = agent.thread_as(&owner, "thread-1").await.unwrap().branch;

    let refused = finish(agent.run(input_of(json!({
        "messages": edited,
        "forwardedProps": {"branch": "nope"},
    }))))
    .await;
    let error = run_error(&refused);
    assert_eq!(error.code.as_deref(), Some("INVALID_INPUT"), "{error:?}");
    assert!(
        error.message.contains("no branch nope"),
        "{}",
        error.message
    );
    assert_eq!(
        agent.thread_as(&owner, "thread-1").await.unwrap().branch,
        forked,
        "an unknown branch changes nothing"
    );

    let mut going_on = transcript.clone();
    going_on.push(user("u9", "Thanks"));
    let events = finish(agent.run(input_of(json!({
        "messages": going_on,
        "forwardedProps": {"branch": earlier},
    }))))
    .await;
    assert_eq!(text(&events), "Answer 4.", "{}", types(&events));
    assert_eq!(
        last_request(&model),
        [
            "user: What is the weather in Paris?",
            "model: Answer 1.",
            "user: And in Rome?",
            "model: Answer 2.",
            "user: Thanks",
        ],
        "the model sees the branch switched to, and the new message"
    );
    let now = agent.thread_as(&owner, "thread-1").await.unwrap();
    assert_eq!(now.branch, earlier);
    assert_eq!(now.branches.len(), 1);
    assert_eq!(now.branches[0].id, forked);
    agent.shutdown().await;
}

/// The one thread's workspace: `w/<its owner's tree>/<its slot>`.
fn workspace(dir: &std::path::Path) -> std::path::PathBuf {
    let only = |dir: std::path::PathBuf| {
        let entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(entries.len(), 1, "one entry in {}", dir.display());
        entries.into_iter().next().unwrap()
    };
    only(only(dir.join("w")))
}

#[tokio::test]
async fn a_rewind_restores_what_the_file_tools_changed_and_reports_commands_and_planted_links() {
    let write = |file: &str, content: &str| {
        Reply::call(
            "write_to_file",
            json!({"TargetFile": format!("{{{{workspace}}}}/{file}"), "CodeContent": content, "Overwrite": false}),
        )
    };
    let script = Script::new()
        .then(write("keep.txt", "a\nb\nc\n").when(Matcher::user_text().user_text_contains("write keep")))
        .then(Reply::text(["Answer 1."]).when(Matcher::function_response_to("write_to_file")))
        .then(write("link.txt", "x\ny\n").when(Matcher::user_text().user_text_contains("write link")))
        .then(Reply::text(["Answer 2."]).when(Matcher::function_response_to("write_to_file")))
        .then(
            Reply::call(
                "replace_file_content",
                json!({"TargetFile": "{{workspace}}/keep.txt", "Instruction": "capital b",
                    "AllowMultiple": false, "TargetContent": "b\n", "ReplacementContent": "B\n",
                    "StartLine": 1, "EndLine": 3}),
            )
            .when(Matcher::user_text().user_text_contains("change things")),
        )
        .then(
            Reply::call(
                "replace_file_content",
                json!({"TargetFile": "{{workspace}}/link.txt", "Instruction": "capital y",
                    "AllowMultiple": false, "TargetContent": "y\n", "ReplacementContent": "Y\n",
                    "StartLine": 1, "EndLine": 2}),
            )
            .when(Matcher::function_response_to("replace_file_content")),
        )
        .then(write("new.txt", "new\n").when(Matcher::function_response_to("replace_file_content")))
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "echo cmd > cmd.txt", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 5000}),
            )
            .when(Matcher::function_response_to("write_to_file")),
        )
        .then(Reply::text(["Answer 3."]).when(Matcher::function_response_to("run_command")))
        .then(Reply::text(["Answer 4."]).when(Matcher::user_text().user_text_contains("change things")));
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tools = [
        BuiltinTool::CreateFile,
        BuiltinTool::EditFile,
        BuiltinTool::RunCommand,
    ]
    .into();
    let agent = agent_with(dir.path(), &model, tools);
    let mut transcript = vec![user("u1", "write keep")];
    let events = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&events), "Answer 1.", "{}", types(&events));
    transcript.push(assistant(&answer_id(&events), "Answer 1."));
    transcript.push(user("u2", "write link"));
    let events = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&events), "Answer 2.", "{}", types(&events));
    transcript.push(assistant(&answer_id(&events), "Answer 2."));
    transcript.push(user("u3", "change things"));
    let events = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&events), "Answer 3.", "{}", types(&events));
    let ws = workspace(dir.path());
    let read = |name: &str| std::fs::read_to_string(ws.join(name)).unwrap_or_default();
    assert_eq!(read("keep.txt"), "a\nB\nc\n");
    assert_eq!(read("link.txt"), "x\nY\n");
    assert_eq!(read("new.txt"), "new\n");
    assert_eq!(read("cmd.txt"), "cmd\n");
    // The agent plants a link where the rewind writes: a file outside the workspace, holding
    // what the rewind expects to find.
    let outside = dir.path().join("outside.txt");
    std::fs::write(&outside, "x\nY\n").unwrap();
    std::fs::remove_file(ws.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link.txt")).unwrap();

    // Regenerate the answer to u3, rewinding the files.
    let cut = transcript.clone();
    let events = finish(agent.run(input_of(
        json!({"messages": cut, "forwardedProps": {"rewindFiles": true}}),
    )))
    .await;
    assert_eq!(text(&events), "Answer 4.", "{}", types(&events));
    let report = events
        .iter()
        .find_map(|e| match e {
            Event::Custom(c) if c.name == "antigravity:rewind" => Some(c.value.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a rewind report: {}", types(&events)));
    eprintln!("rewind report: {report:#}");
    assert_eq!(read("keep.txt"), "a\nb\nc\n", "the edit is undone");
    assert!(!ws.join("new.txt").exists(), "the created file is removed");
    assert_eq!(read("cmd.txt"), "cmd\n", "a command's file is not rewound");
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "x\nY\n",
        "nothing was written through the planted link"
    );
    assert!(
        ws.join("link.txt").is_symlink(),
        "the link is left as it is"
    );
    assert_eq!(report["commandsAfter"], 1);
    let names = |key: &str| {
        let mut v: Vec<String> = report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let path = r["path"].as_str().unwrap();
                path.rsplit('/').next().unwrap().to_owned()
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("restored"), ["keep.txt", "new.txt"], "{report}");
    assert_eq!(names("notRestored"), ["link.txt"], "{report}");
    agent.shutdown().await;
}
