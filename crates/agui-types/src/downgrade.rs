//! A 1.1 stream served to a 1.0 consumer (see [`crate::negotiate`]): what AG-UI 1.1 added is
//! removed from each event, a pure transformation.

use crate::events::Event;
use crate::input::Message;

impl Event {
    /// Removes what AG-UI 1.1 added to 1.0 (`encryptedValueType` on messages, tool calls and
    /// `REASONING_ENCRYPTED_VALUE`), for a stream declared as 1.0. Returns true when something
    /// was removed: the downgrade was lossy and the developer should be told.
    pub fn downgrade_to_1_0(&mut self) -> bool {
        match self {
            Event::MessagesSnapshot(snapshot) => {
                let mut lost = false;
                for message in &mut snapshot.messages {
                    lost |= message.downgrade_to_1_0();
                }
                lost
            }
            Event::ReasoningEncryptedValue(e) => e.encrypted_value_type.take().is_some(),
            Event::RunStarted(e) => e.input.as_mut().is_some_and(|input| {
                let mut lost = false;
                for message in &mut input.messages {
                    lost |= message.downgrade_to_1_0();
                }
                lost
            }),
            _ => false,
        }
    }
}

impl Message {
    /// Removes the 1.1 `encryptedValueType` of the message and its tool calls; true when there
    /// was one.
    pub fn downgrade_to_1_0(&mut self) -> bool {
        match self {
            Message::Developer(m) | Message::System(m) => m.encrypted_value_type.take().is_some(),
            Message::User(m) => m.encrypted_value_type.take().is_some(),
            Message::Assistant(m) => {
                let mut lost = m.encrypted_value_type.take().is_some();
                for call in &mut m.tool_calls {
                    lost |= call.encrypted_value_type.take().is_some();
                }
                lost
            }
            Message::Tool(m) => m.encrypted_value_type.take().is_some(),
            Message::Reasoning(m) => m.encrypted_value_type.take().is_some(),
            Message::Activity(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{AssistantMessage, ToolCall};

    #[test]
    fn a_1_0_stream_loses_only_encrypted_value_types() {
        let mut call = ToolCall::new("c1", "f", "{}");
        call.encrypted_value = Some("blob".into());
        call.encrypted_value_type = Some("vendor/x".into());
        let message = Message::Assistant(AssistantMessage {
            id: "a1".into(),
            tool_calls: vec![call],
            ..AssistantMessage::default()
        });
        let mut event = Event::messages_snapshot(vec![message]);
        assert!(event.downgrade_to_1_0());
        let json = event.to_json();
        assert!(json.contains("\"encryptedValue\":\"blob\""), "{json}");
        assert!(!json.contains("encryptedValueType"), "{json}");
        assert!(!event.downgrade_to_1_0(), "nothing left to lose");
    }
}
