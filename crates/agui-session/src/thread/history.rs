//! A thread's messages rebuilt from the harness's own record of the conversation: the history
//! it returns when a conversation is resumed (the final snapshot of every root step). This is
//! how a thread's messages survive hibernation and a server restart without the server
//! keeping a transcript of its own.
//!
//! Steps are translated exactly as they were live, with ids derived from the steps, so the
//! messages get the ids a client that watched the turns already holds; user messages get the
//! ids the client sent (remembered per step), or a derived one. What the harness does not keep
//! is not rebuilt: subagents' steps, and the text of answered questions.

use agui_translate::{StepIds, ToolCallIds, Translator, TranslatorOptions};
use agui_types::{Content, Message, MessageLog, UserMessage};
use harness_proto::step::{Step, StepSource, StepStatus};

use crate::store::UserSteps;

/// The messages of a conversation's history, translated with `options` (the live turns'
/// options, with the silent tools suppressed); `user_ids` maps root user steps to the client's
/// message ids.
pub(crate) fn rebuild(
    conversation_id: &str,
    history: &[Step],
    options: TranslatorOptions,
    user_ids: &UserSteps,
) -> MessageLog {
    let mut translator = Translator::new(options, Box::new(StepIds::new(conversation_id)))
        .sharing_tool_call_ids(ToolCallIds::new());
    let mut log = MessageLog::new();
    for step in history {
        let root = step.key.trajectory_id == conversation_id;
        if root && step.source == StepSource::User {
            if step.text.is_empty() {
                continue;
            }
            let id = user_ids.get(step.key.index).map_or_else(
                || format!("{}-u", step_prefix(conversation_id, step.key.index)),
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
    log
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
        let history = vec![
            step(conversation, 0, StepSource::User, "hello"),
            step(conversation, 1, StepSource::Model, "Hi there."),
            step(conversation, 2, StepSource::User, "and you?"),
            step(conversation, 3, StepSource::Model, "Fine."),
        ];
        let mut users = UserSteps::default();
        users.insert(0, "client-m1".into());
        let log = rebuild(conversation, &history, TranslatorOptions::default(), &users);
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
}
