//! Commands left running in the background, with the real harness: the thread stays with its
//! conversation while its process runs one, and not once none runs, whatever the harness says.

mod support;

use std::time::Duration;

use agui_session::{Agent, AgentOptions, Backend, ToolRegistry};
use agui_types::Event;
use gemini_script::{Handle, Matcher, Reply, Script, ScriptedModel};
use harness_client::{BuiltinTool, HarnessPool, ModelEndpoint, PoolOptions, ProcessOptions};
use serde_json::json;
use support::{finish, input_of, last, text, types, user};

/// An agent on the real harness that hibernates a thread idle for a second.
fn agent(dir: &std::path::Path, model: &Handle) -> Agent {
    let mut options = AgentOptions::new(
        "gemini-3-flash-preview",
        ModelEndpoint::gemini(model.base_url(), "test-key"),
        dir,
    );
    options.builtin_tools = [BuiltinTool::RunCommand].into();
    options.api_retry = Some((2, 100));
    options.hibernate_after = Duration::from_secs(1);
    let pool = HarnessPool::new(PoolOptions::default()).unwrap();
    let backend = Backend::harness(pool, ProcessOptions::new(options.save_dir.clone()));
    Agent::new(options, backend, ToolRegistry::new()).unwrap()
}

/// Runs `messages` (text) on the thread and asserts the run finished with `answer`.
async fn answered(agent: &Agent, messages: &[&str], answer: &str) {
    let messages: Vec<_> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| user(&format!("m{i}"), m))
        .collect();
    let events = finish(agent.run(input_of(json!({ "messages": messages })))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)) && text(&events).ends_with(answer),
        "{}: {}",
        types(&events),
        text(&events)
    );
}

/// Polls every 100 ms, at most `within`, until the agent has no conversation open.
async fn hibernates_within(agent: &Agent, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if agent.stats().live_conversations == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// The harness keeps, in the conversation it saves, the commands a turn left running; resumed
/// by a new process after a crash, it says every later turn ends waiting for them, for good
/// (the replica soak saw a replica keep such a thread five minutes, the replica its client was
/// sent to answering `THREAD_ELSEWHERE`). The thread waits only while its process runs a
/// command: after the crash it hibernates, and a command it starts then holds it until the
/// command ends.
#[tokio::test]
async fn after_a_crash_a_thread_waits_only_for_commands_its_process_runs() {
    support::init_tracing();
    let script = Script::new()
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "sleep 3 && touch finished.txt", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 200}),
            )
            .when(Matcher::user_text().keywords(["serve"]))
            .forever(),
        )
        .then(
            Reply::text(["Started it."])
                .when(Matcher::function_response_to("run_command"))
                .forever(),
        )
        .then(Reply::text(["Noted."]).forever());
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().to_owned();

    let first = agent(&save, &model);
    answered(&first, &["serve the site"], "Started it.").await;
    // The harness crashes while the command runs; the server goes too, without a shutdown.
    support::crash(&save, first).await;

    let agent = agent(&save, &model);
    answered(&agent, &["serve the site", "hello"], "Noted.").await;
    assert!(
        hibernates_within(&agent, Duration::from_secs(10)).await,
        "the thread hibernates: no command of its process runs"
    );

    // A command started now holds the thread until it ends, then lets it go.
    let workspace = std::fs::read_dir(save.join("w"))
        .unwrap()
        .flatten()
        .flat_map(|tree| std::fs::read_dir(tree.path()).unwrap().flatten())
        .map(|slot| slot.path())
        .next()
        .expect("the thread's workspace");
    std::fs::remove_file(workspace.join("finished.txt")).ok();
    answered(
        &agent,
        &["serve the site", "hello", "serve it again"],
        "Started it.",
    )
    .await;
    while !workspace.join("finished.txt").exists() {
        assert_eq!(
            agent.stats().live_conversations,
            1,
            "the thread hibernated while its process ran its command"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        hibernates_within(&agent, Duration::from_secs(10)).await,
        "the thread hibernates once the command ended"
    );
    agent.shutdown().await;
}
