//! Turns with a subagent against the real harness and the scripted model: where the turn ends.

mod support;

use std::sync::Arc;
use std::time::Duration;

use gemini_script::{Matcher, Reply, Script};
use harness_client::{
    BuiltinTool, ConversationEvent, DefaultCallbacks, StepSource, StepTarget, TrajectoryStatus,
};
use serde_json::json;
use support::{Fixture, turn};

/// How long the test watches for anything of a turn arriving after the turn's end.
const AFTERMATH: Duration = Duration::from_millis(400);

/// The subagent answers at once and the parent's own reply to the invocation is slow, so the
/// subagent goes idle while its parent still runs: the order in which the harness can report
/// the root idle and then wake it again for the subagent's message (the message not taken in
/// yet, or taken in with a wake-up still scheduled). Every turn must end only once the model has
/// answered after the message, and nothing of the turn may arrive after its end.
#[tokio::test]
async fn a_subagent_finishing_before_its_parent_s_reply_ends_inside_the_turn() {
    // The parent's reply is delayed by a different amount in each turn, around the time the
    // subagent takes, so that turns see each order: the idle message taken in by the slow
    // request itself, or shown after the slow reply and answered in a reply of its own. The
    // stray wake-up after that second order is a race inside the harness (seen in about one such
    // turn in ten under load, rarely on an idle machine); the unit tests of `turn_end` replay the
    // recorded orders deterministically.
    const DELAYS_MS: [u64; 12] = [0, 0, 0, 2, 5, 10, 20, 30, 50, 80, 150, 300];
    let mut script = Script::new().then(
        Reply::call(
            "invoke_subagent",
            json!({"Subagents": [{"TypeName": "research", "Role": "Helper", "Prompt": "SUB-QUICK say hi"}]}),
        )
        .when(Matcher::user_text().system_message(false).user_text_contains("delegate"))
        .forever(),
    );
    for delay in DELAYS_MS {
        script = script.then(
            Reply::text(["Delegated."])
                .delay_ms(delay)
                .when(Matcher::function_response_to("invoke_subagent"))
                .times(1),
        );
    }
    let script = script
        .then(
            Reply::text(["The subagent says hi."])
                .when(
                    Matcher::user_text()
                        .system_message(true)
                        .user_text_contains("has gone idle"),
                )
                .forever(),
        )
        .then(
            Reply::text(["result from the helper"])
                .when(
                    Matcher::user_text()
                        .system_message(true)
                        .user_text_contains("SUB-QUICK"),
                )
                .forever(),
        )
        // A wake-up with nothing new to say still gets an answer.
        .default_reply(Reply::text(["Nothing new."]));
    let fx = Fixture::new(script).await;
    let process = fx.spawn().await;
    let mut conversation = fx
        .open(
            &process,
            fx.config().builtin_tools([BuiltinTool::Subagents]),
            Arc::new(DefaultCallbacks),
        )
        .await;
    let root = conversation.id().to_owned();
    for n in 0..DELAYS_MS.len() {
        let log = turn(&mut conversation, &format!("delegate, please ({n})")).await;
        let end = log.end.as_ref().expect("the turn ends");
        assert!(end.error.is_none() && !end.cancelled, "turn {n}: {end:?}");
        // The root took the subagent's idle message in and the model answered after it — in a
        // reply of its own, or in the slow reply when the message arrived before that request.
        let root_steps: Vec<_> = log
            .final_steps()
            .into_iter()
            .filter(|s| s.key.trajectory_id == root)
            .collect();
        let message = root_steps
            .iter()
            .find(|s| s.source == StepSource::System && s.text.contains("has gone idle"))
            .unwrap_or_else(|| panic!("turn {n}: the root shows the subagent's idle message"));
        assert!(
            root_steps.iter().any(|s| s.key.index > message.key.index
                && s.source == StepSource::Model
                && s.target == StepTarget::User),
            "turn {n}: the model answered after the idle message, within the turn: {:?}",
            root_steps
                .iter()
                .map(|s| (s.key.index, s.text.as_str()))
                .collect::<Vec<_>>()
        );
        let subagent_idle = log.events.iter().any(|e| {
            matches!(e, ConversationEvent::Trajectory(t)
                if t.trajectory_id != root && t.status == TrajectoryStatus::Idle)
        });
        assert!(
            subagent_idle,
            "turn {n}: the subagent went idle within the turn"
        );

        // Nothing of this turn comes after its end: no event, no model call.
        let requests = fx.model.request_count();
        if let Ok(event) = tokio::time::timeout(AFTERMATH, conversation.next_event()).await {
            panic!("turn {n}: {event:?} arrived after the turn ended");
        }
        assert_eq!(
            fx.model.request_count(),
            requests,
            "turn {n}: a model call after the end"
        );
    }
    process.shutdown().await;
}
