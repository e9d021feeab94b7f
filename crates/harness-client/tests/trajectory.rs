//! A conversation forked from the harness's own saved trajectory, cut at a step, with the real
//! harness and the scripted model: what `initial_trajectory` must hold.

mod support;

use std::sync::Arc;

use gemini_script::{Reply, Script};
use harness_client::DefaultCallbacks;
use harness_client::proto::lh::harness_config::SessionContinuationMode;
use harness_client::trajectory::SavedTrajectory;
use support::{Fixture, turn};

/// The texts of the model's last request, `role: text` (the harness's wrappers removed).
fn last_request(fx: &Fixture) -> Vec<String> {
    let requests = fx.model.requests();
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
                    let t = gemini_script::inspect::strip_user_request(t);
                    let t = t.split("<ADDITIONAL_METADATA>").next().unwrap_or(t);
                    format!("{role}: {}", t.trim())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_conversation_starts_from_a_cut_trajectory_and_the_model_sees_only_the_kept_history() {
    let script = Script::new()
        .then(Reply::text(["Answer one."]))
        .then(Reply::text(["Answer two."]))
        .then(Reply::text(["Answer edited."]));
    let fx = Fixture::new(script).await;
    let id = "0123456789abcdef0123456789abcdef";
    let process = fx.spawn().await;
    let config = fx
        .config()
        .conversation_id(id, SessionContinuationMode::CreateOrResume);
    let mut conversation = fx.open(&process, config, Arc::new(DefaultCallbacks)).await;
    turn(&mut conversation, "first question").await;
    turn(&mut conversation, "second question").await;
    // Read while the harness still runs: what is not checkpointed is in the write-ahead log.
    let save = fx.dir.path().join("save");
    let db = std::fs::read(save.join(format!("{id}.db"))).unwrap();
    let wal = std::fs::read(save.join(format!("{id}.db-wal"))).ok();
    let saved = SavedTrajectory::read(&db, wal.as_deref()).unwrap();
    assert_eq!(saved.len(), 4, "two user steps, two answers");
    drop(conversation);

    // Keep the first turn (steps 0 and 1), and ask again.
    let fork = "fedcba9876543210fedcba9876543210";
    let mut config = fx
        .config()
        .conversation_id(fork, SessionContinuationMode::CreateOnly)
        .build()
        .unwrap();
    config.initial_trajectory = Some(saved.cut(2, fork).unwrap());
    let mut forked =
        harness_client::Conversation::open(&process, config, Arc::new(DefaultCallbacks))
            .await
            .unwrap();
    assert_eq!(forked.id(), fork);
    let history: Vec<_> = forked
        .init_info()
        .history
        .iter()
        .map(|s| (s.key.index, s.text.clone()))
        .collect();
    assert_eq!(
        history,
        [(0, "first question".into()), (1, "Answer one.".into())]
    );
    let log = turn(&mut forked, "edited question").await;
    assert_eq!(log.answer(), "Answer edited.");
    assert_eq!(
        last_request(&fx),
        [
            "user: first question",
            "model: Answer one.",
            "user: edited question"
        ]
    );
    drop(forked);
    process.shutdown().await;

    // The fork is a conversation like any other: it resumes with its own history.
    let process = fx.spawn().await;
    let config = fx
        .config()
        .conversation_id(fork, SessionContinuationMode::Resume)
        .build()
        .unwrap();
    let resumed = harness_client::Conversation::open(&process, config, Arc::new(DefaultCallbacks))
        .await
        .unwrap();
    assert_eq!(resumed.init_info().history.len(), 4);
    drop(resumed);
    // The original is untouched.
    let config = fx
        .config()
        .conversation_id(id, SessionContinuationMode::Resume)
        .build()
        .unwrap();
    let original = harness_client::Conversation::open(&process, config, Arc::new(DefaultCallbacks))
        .await
        .unwrap();
    let texts: Vec<_> = original
        .init_info()
        .history
        .iter()
        .map(|s| s.text.clone())
        .collect();
    assert_eq!(
        texts,
        [
            "first question",
            "Answer one.",
            "second question",
            "Answer two."
        ]
    );
    drop(original);
    process.shutdown().await;
}
