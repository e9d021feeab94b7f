//! The save dir's volume filling up while the real harness answers (the replica soak's
//! finding): the harness streams its answer but cannot save it, so a later connect (on another
//! replica, or after a restart) would not show it. The run must not end as if all were well.

mod support;

use agui_session::{Agent, AgentOptions, Backend, ToolRegistry};
use agui_types::Event;
use std::time::Duration;

use gemini_script::{Handle, Reply, Script, ScriptedModel};
use harness_client::{HarnessPool, ModelEndpoint, PoolOptions, ProcessOptions};
use serde_json::json;
use support::{
    SmallVolume, finish, input_of, last, restated, run_error, snapshot, text, types, user,
};

fn agent(dir: &std::path::Path, model: &Handle) -> Agent {
    let mut options = AgentOptions::new(
        "gemini-3-flash-preview",
        ModelEndpoint::gemini(model.base_url(), "test-key"),
        dir,
    );
    options.api_retry = Some((2, 100));
    let pool = HarnessPool::new(PoolOptions::default()).unwrap();
    let backend = Backend::harness(pool, ProcessOptions::new(options.save_dir.clone()));
    Agent::new(options, backend, ToolRegistry::new()).unwrap()
}

/// The volume fills up while the model answers: the harness logs nothing, and the run ends
/// `STORAGE_FULL` (its answer may be missing from the saved history) instead of finishing.
/// Also when the volume has room again before the turn ends (the replica soak lost such a
/// turn). Once there is room, the next message is answered, and saved: a restarted server's
/// connect shows it.
#[tokio::test]
async fn an_answer_given_while_the_volume_fills_up_ends_its_run_with_storage_full() {
    for freed_before_the_end in [false, true] {
        the_volume_fills_up_during_a_turn(freed_before_the_end).await;
    }
}

async fn the_volume_fills_up_during_a_turn(freed_before_the_end: bool) {
    let case = if freed_before_the_end {
        "freed before the turn ends"
    } else {
        "still full at the turn's end"
    };
    let dir = tempfile::tempdir().unwrap();
    let volume = SmallVolume::mount(dir.path(), 64 << 20);
    let script = Script::new()
        .then(Reply::text(["First."]))
        .then(Reply::text(["Second ", "answer ", "now."]).delay_ms(1_000))
        .then(Reply::text(["Third."]));
    let model = ScriptedModel::start(script).await.unwrap();
    let agent = agent(dir.path(), &model);
    let first = finish(agent.run(input_of(json!({"messages": [user("u1", "one")]})))).await;
    assert_eq!(text(&first), "First.", "{case}: {}", types(&first));

    let mut transcript = vec![
        user("u1", "one"),
        json!({"id": "a1", "role": "assistant", "content": "First."}),
        user("u2", "two"),
    ];
    let run = agent.run(input_of(json!({"messages": transcript})));
    support::eventually(Duration::from_secs(20), "the model has the request", || {
        model.requests().len() == 2
    })
    .await;
    let filler = volume.fill();
    let run = tokio::spawn(finish(run));
    if freed_before_the_end {
        // After the first chunk (1 s), before the last (3 s).
        tokio::time::sleep(Duration::from_millis(1_600)).await;
        std::fs::remove_file(&filler).unwrap();
    }
    let events = run.await.unwrap();
    let error = run_error(&events);
    assert_eq!(
        error.code.as_deref(),
        Some("STORAGE_FULL"),
        "{case}: {error:?}"
    );
    assert!(
        error.message.contains("could not be saved"),
        "{case}: {}",
        error.message
    );

    if !freed_before_the_end {
        std::fs::remove_file(filler).unwrap();
    }
    transcript.push(user("u3", "three"));
    let events = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert!(
        matches!(last(&events), Event::RunFinished(_)),
        "{case}: {}",
        types(&events)
    );
    assert_eq!(text(&events), "Third.", "{case}");
    agent.shutdown().await;

    let agent = self::agent(dir.path(), &model);
    let texts = restated(&agent).await;
    eprintln!("{case}: restated after a restart: {texts:?}");
    assert!(
        texts.iter().any(|t| t == "assistant: Third."),
        "{case}: the answer after the volume had room again was saved: {texts:?}"
    );
    agent.shutdown().await;
}

/// The harness numbers its saved steps anew: the answer it could not save is missing from the
/// history a resumed conversation returns, so every later step comes back one place earlier
/// than when it ran. After a crash (the harness killed, the server gone without a shutdown),
/// the messages sent once the volume had room keep the ids their client sent (the 3-minute
/// soak saw three answered messages lose theirs after `volume-full` then `restart-kill`).
#[tokio::test]
async fn messages_after_an_answer_the_harness_could_not_save_keep_their_ids_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let volume = SmallVolume::mount(dir.path(), 64 << 20);
    let script = Script::new()
        .then(Reply::text(["First."]))
        .then(Reply::text(["Second ", "answer ", "now."]).delay_ms(1_000))
        .then(Reply::text(["Third."]))
        .then(Reply::text(["Fourth."]));
    let model = ScriptedModel::start(script).await.unwrap();
    let agent = agent(dir.path(), &model);
    let mut transcript = vec![user("u1", "one")];
    let first = finish(agent.run(input_of(json!({"messages": transcript})))).await;
    assert_eq!(text(&first), "First.", "{}", types(&first));
    transcript.push(json!({"id": "a1", "role": "assistant", "content": "First."}));
    transcript.push(user("u2", "two"));
    let run = agent.run(input_of(json!({"messages": transcript})));
    support::eventually(Duration::from_secs(20), "the model has the request", || {
        model.requests().len() == 2
    })
    .await;
    let filler = volume.fill();
    let second = finish(run).await;
    assert_eq!(
        run_error(&second).code.as_deref(),
        Some("STORAGE_FULL"),
        "{}",
        types(&second)
    );
    std::fs::remove_file(filler).unwrap();
    transcript.push(json!({"id": "a2", "role": "assistant", "content": "Second answer now."}));
    for (id, words, answer) in [("u3", "three", "Third."), ("u4", "four", "Fourth.")] {
        transcript.push(user(id, words));
        let events = finish(agent.run(input_of(json!({"messages": transcript})))).await;
        assert!(
            matches!(last(&events), Event::RunFinished(_)),
            "{}",
            types(&events)
        );
        assert_eq!(text(&events), answer);
        transcript.push(json!({"id": format!("a-{id}"), "role": "assistant", "content": answer}));
    }

    support::crash(dir.path(), agent).await;

    let agent = self::agent(dir.path(), &model);
    let stream = agent.connect(input_of(json!({}))).await.unwrap();
    let events = finish(stream).await;
    let users: Vec<String> = snapshot(&events)
        .iter()
        .filter_map(|m| match m {
            agui_types::Message::User(u) => Some(u.id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        users,
        ["u1", "u2", "u3", "u4"],
        "each message under its client's id: {}",
        types(&events)
    );
    assert!(
        restated(&agent)
            .await
            .iter()
            .any(|t| t == "assistant: Fourth."),
        "the answers after the volume had room again were saved"
    );
    agent.shutdown().await;
}
