//! A thread's messages rebuilt from the harness's own record of the conversation: the history
//! it returns when a conversation is resumed (the final snapshot of every root step). This is
//! how a thread's messages survive hibernation and a server restart without the server
//! keeping a transcript of its own.
//!
//! Steps are translated exactly as they were live, with ids derived from the steps, so the
//! messages get the ids a client that watched the turns already holds; user messages get the
//! ids the client sent (remembered per step), or a derived one. The message whose echo the
//! server that sent it never recorded (it died mid-turn) goes to the first root user step after
//! the recorded ones, as it would have live. What the harness does not keep is not rebuilt:
//! subagents' steps, and the text of answered questions.

use std::collections::HashSet;

use agui_translate::{StepIds, ToolCallIds, Translator, TranslatorOptions};
use agui_types::{Content, Message, MessageLog, UserMessage};
use harness_proto::step::{Step, StepSource, StepStatus};

use super::echo_alignment::{self, UserStep, echo_digest, record_echo};
use crate::store::{Digests, LostTurns, UserSteps};

/// What the thread's record says of its user steps, which a rebuild completes.
pub(crate) struct Echoes<'a> {
    /// The client's message ids by root user step; gains the step that echoed
    /// `awaiting_echo`.
    pub(crate) user_steps: &'a mut UserSteps,
    /// The root user steps whose turns were lost; gains the lost turn's step.
    pub(crate) lost_turns: &'a mut LostTurns,
    /// The digests of the text echoed for each message; gains `awaiting_echo`'s.
    pub(crate) echoed: &'a mut Digests,
    /// The message sent last, whose echo was not recorded.
    pub(crate) awaiting_echo: Option<String>,
    /// The turn of `awaiting_echo` was lost (its server stopped with the turn in flight).
    pub(crate) awaited_turn_lost: bool,
}

/// The key a lost turn's messages carry in their `metadata`, set to `true`: the reply was cut
/// where the harness last saved it.
pub(crate) const INTERRUPTED: &str = "interrupted";

/// The messages of a conversation's history, translated with `options` (the live turns'
/// options, with the silent tools suppressed), user messages under the client's ids from
/// `echoes`, and the messages of lost turns marked [`INTERRUPTED`].
pub(crate) fn rebuild(
    conversation_id: &str,
    history: &[Step],
    options: TranslatorOptions,
    echoes: Echoes<'_>,
) -> MessageLog {
    let is_user =
        |step: &Step| step.key.trajectory_id == conversation_id && step.source == StepSource::User;
    let user_steps: Vec<UserStep> = history
        .iter()
        .filter(|s| is_user(s))
        .map(|s| UserStep {
            index: s.key.index,
            digest: echo_digest(&s.text),
        })
        .collect();
    let moved = echo_alignment::realign(
        echoes.user_steps,
        echoes.lost_turns,
        echoes.echoed,
        &user_steps,
    );
    if moved > 0 {
        tracing::warn!(
            conversation_id,
            moved,
            "the harness's history numbers this thread's steps otherwise than when they ran (it could not save some of them): its messages were found again by their text"
        );
    }
    let newest_recorded = echoes.user_steps.newest_step();
    let mut awaiting_echo = echoes.awaiting_echo;
    let mut echoed = None;
    for step in history.iter().filter(|s| is_user(s)) {
        let index = step.key.index;
        if echoes.user_steps.get(index).is_none()
            && newest_recorded.is_none_or(|newest| index > newest)
            && let Some(message_id) = awaiting_echo.take()
        {
            record_echo(echoes.echoed, &message_id, &step.text);
            echoes.user_steps.insert(index, message_id);
            echoed = Some(index);
        }
    }
    // A lost prompt the harness never got (no echo) left nothing to mark.
    if echoes.awaited_turn_lost
        && let Some(step) = echoed
    {
        echoes.lost_turns.insert(step);
    }

    let mut translator = Translator::new(options, Box::new(StepIds::new(conversation_id)))
        .sharing_tool_call_ids(ToolCallIds::new());
    let mut log = MessageLog::new();
    // The ids known when the lost turn being read began: what it adds is interrupted.
    let mut lost_since: Option<HashSet<String>> = None;
    let mut interrupted = HashSet::new();
    for step in history {
        if is_user(step) {
            let index = step.key.index;
            if let Some(known) = lost_since.take() {
                interrupted.extend(added(&log, &known));
            }
            if echoes.lost_turns.contains(index) {
                lost_since = Some(log.messages().iter().map(|m| m.id().to_owned()).collect());
            }
            if step.text.is_empty() {
                continue;
            }
            let id = echoes.user_steps.get(index).map_or_else(
                || format!("{}-u", step_prefix(conversation_id, index)),
                str::to_owned,
            );
            log.push(Message::User(UserMessage {
                id,
                content: Content::Text(step.text.clone()),
                ..UserMessage::default()
            }));
            continue;
        }
        // A step the harness kept as still running (a halted tool) is history all the same.
        let mut step = step.clone();
        if step.status == StepStatus::Active || step.status == StepStatus::WaitingForUser {
            step.status = StepStatus::Done;
        }
        for event in translator.step(&step).events {
            log.apply(&event);
        }
    }
    for event in translator.close_turn() {
        log.apply(&event);
    }
    if let Some(known) = lost_since {
        interrupted.extend(added(&log, &known));
    }
    if interrupted.is_empty() {
        return log;
    }
    let messages = log
        .messages()
        .iter()
        .cloned()
        .map(|mut message| {
            if interrupted.contains(message.id()) {
                mark_interrupted(&mut message);
            }
            message
        })
        .collect();
    MessageLog::from_messages(messages)
}

/// The ids of the messages of `log` not in `known`.
fn added(log: &MessageLog, known: &HashSet<String>) -> Vec<String> {
    log.messages()
        .iter()
        .map(|m| m.id().to_owned())
        .filter(|id| !known.contains(id))
        .collect()
}

/// Sets [`INTERRUPTED`] in the metadata of an agent's message (the user's are never part of a
/// lost reply).
fn mark_interrupted(message: &mut Message) {
    let metadata = match message {
        Message::Assistant(m) => &mut m.metadata,
        Message::Tool(m) => &mut m.metadata,
        Message::Reasoning(m) => &mut m.metadata,
        Message::Activity(m) => &mut m.metadata,
        Message::Developer(_) | Message::System(_) | Message::User(_) => return,
    };
    metadata
        .get_or_insert_with(serde_json::Map::new)
        .insert(INTERRUPTED.to_owned(), serde_json::Value::Bool(true));
}

/// The id prefix `StepIds` gives the root steps of a conversation.
fn step_prefix(conversation_id: &str, index: u32) -> String {
    let prefix: String = conversation_id.chars().take(8).collect();
    format!("{prefix}-r-{index}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_proto::step::{StepKey, StepTarget};

    fn echoes<'a>(
        user_steps: &'a mut UserSteps,
        lost_turns: &'a mut LostTurns,
        awaiting_echo: Option<&str>,
        awaited_turn_lost: bool,
    ) -> Echoes<'a> {
        Echoes {
            user_steps,
            lost_turns,
            // What these tests check does not depend on the digests kept.
            echoed: Box::leak(Box::default()),
            awaiting_echo: awaiting_echo.map(str::to_owned),
            awaited_turn_lost,
        }
    }

    fn interrupted(log: &MessageLog) -> Vec<&str> {
        log.messages()
            .iter()
            .filter(|m| {
                serde_json::to_value(m).unwrap()["metadata"][INTERRUPTED] == serde_json::json!(true)
            })
            .map(Message::id)
            .collect()
    }

    fn rebuilt(conversation: &str, history: &[Step], echoes: Echoes<'_>) -> MessageLog {
        rebuild(conversation, history, TranslatorOptions::default(), echoes)
    }

    /// Root steps with `texts`, the user's and the model's in turn.
    fn turns(conversation: &str, texts: &[&str]) -> Vec<Step> {
        (0u32..)
            .zip(texts)
            .map(|(index, text)| {
                let source = if index % 2 == 0 {
                    StepSource::User
                } else {
                    StepSource::Model
                };
                step(conversation, index, source, text)
            })
            .collect()
    }

    fn step(conversation: &str, index: u32, source: StepSource, text: &str) -> Step {
        Step {
            key: StepKey::new(conversation, index),
            status: StepStatus::Done,
            source,
            target: if source == StepSource::User {
                StepTarget::Model
            } else {
                StepTarget::User
            },
            text: text.into(),
            text_delta: text.into(),
            ..Step::default()
        }
    }

    #[test]
    fn a_history_becomes_the_messages_a_client_saw_under_the_same_ids() {
        let conversation = "0123456789abcdef0123456789abcdef";
        let history = turns(conversation, &["hello", "Hi there.", "and you?", "Fine."]);
        let mut users = UserSteps::default();
        users.insert(0, "client-m1".into());
        let log = rebuilt(
            conversation,
            &history,
            echoes(&mut users, &mut LostTurns::default(), None, false),
        );
        let ids: Vec<&str> = log.messages().iter().map(Message::id).collect();
        assert_eq!(
            ids,
            [
                "client-m1",
                "01234567-r-1-t",
                "01234567-r-2-u",
                "01234567-r-3-t"
            ]
        );
        // Live, the same step gets the same id.
        let mut live = Translator::new(
            TranslatorOptions::default(),
            Box::new(StepIds::new(conversation)),
        );
        let events = live.step(&history[1]).events;
        let mut live_log = MessageLog::new();
        for event in &events {
            live_log.apply(event);
        }
        assert_eq!(live_log.messages()[0].id(), "01234567-r-1-t");
    }

    #[test]
    fn the_message_whose_echo_was_not_recorded_gets_the_first_user_step_after_the_recorded_ones() {
        let conversation = "0123456789abcdef0123456789abcdef";
        let history = turns(
            conversation,
            &["hello", "Hi there.", "tell me slowly", "Once upon"],
        );
        let mut users = UserSteps::default();
        users.insert(0, "client-m1".into());
        let log = rebuilt(
            conversation,
            &history,
            echoes(
                &mut users,
                &mut LostTurns::default(),
                Some("client-m2"),
                false,
            ),
        );
        let ids: Vec<&str> = log.messages().iter().map(Message::id).collect();
        assert_eq!(
            ids,
            ["client-m1", "01234567-r-1-t", "client-m2", "01234567-r-3-t"]
        );
        assert_eq!(users.get(2), Some("client-m2"), "the echo is recorded now");

        // A message the harness never got (no user step after the recorded ones) names none.
        let mut users = UserSteps::default();
        users.insert(0, "client-m1".into());
        users.insert(2, "client-m2".into());
        let log = rebuilt(
            conversation,
            &history,
            echoes(
                &mut users,
                &mut LostTurns::default(),
                Some("client-m3"),
                false,
            ),
        );
        assert!(!log.contains("client-m3"));
        assert_eq!(users.newest_step(), Some(2));
    }

    #[test]
    fn the_messages_of_a_lost_turn_are_marked_interrupted_in_every_later_rebuild() {
        let conversation = "0123456789abcdef0123456789abcdef";
        let mut history = turns(
            conversation,
            &["hello", "Hi there.", "tell me slowly", "Once upon"],
        );
        let (mut users, mut lost) = (UserSteps::default(), LostTurns::default());
        users.insert(0, "client-m1".into());
        let log = rebuilt(
            conversation,
            &history,
            echoes(&mut users, &mut lost, Some("client-m2"), true),
        );
        assert_eq!(interrupted(&log), ["01234567-r-3-t"]);
        assert!(lost.contains(2), "the lost turn is recorded by its step");

        // The next turn, and a later rebuild from what was recorded: the mark stays on the
        // lost turn's reply alone.
        history.push(step(conversation, 4, StepSource::User, "and now?"));
        history.push(step(conversation, 5, StepSource::Model, "Now this."));
        users.insert(4, "client-m3".into());
        let log = rebuilt(
            conversation,
            &history,
            echoes(&mut users, &mut lost, None, false),
        );
        let ids: Vec<&str> = log.messages().iter().map(Message::id).collect();
        assert_eq!(
            ids,
            [
                "client-m1",
                "01234567-r-1-t",
                "client-m2",
                "01234567-r-3-t",
                "client-m3",
                "01234567-r-5-t"
            ]
        );
        assert_eq!(interrupted(&log), ["01234567-r-3-t"]);
    }
}
