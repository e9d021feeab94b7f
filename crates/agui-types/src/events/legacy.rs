//! Inbound translation of the `THINKING_*` events that left the protocol in 1.0.
//!
//! The old events name no ids: a continuation belongs to "the current" thinking span or
//! message. Like the official client's compatibility boundary, a stream decoder mints one id
//! per opener and reuses it for the continuations; a lone event gets a fixed placeholder.

use serde_json::{Map, Value};

use super::LEGACY_THINKING_ID;

/// Id state for translating `THINKING_*` events in one stream.
#[derive(Debug, Default)]
pub(crate) struct LegacyThinking {
    span: Option<String>,
    message: Option<String>,
    minted: u64,
    stateless: bool,
}

impl LegacyThinking {
    /// For one event decoded in isolation: every minted id is [`LEGACY_THINKING_ID`].
    pub(crate) fn stateless() -> Self {
        Self {
            stateless: true,
            ..Self::default()
        }
    }

    /// For a stream: openers mint `thinking-1`, `thinking-2`, …
    pub(crate) fn streaming() -> Self {
        Self::default()
    }

    /// Rewrites a retired event in place as its 1.0 equivalent.
    ///
    /// Returns false (and leaves `map` alone) when `event_type` is not a retired name.
    pub(crate) fn upgrade(&mut self, map: &mut Map<String, Value>, event_type: &str) -> bool {
        let given = map
            .get("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (new_type, id) = match event_type {
            "THINKING_START" => {
                // REASONING_START has no title; the official client drops it too.
                map.remove("title");
                let id = given.unwrap_or_else(|| self.mint());
                self.span = Some(id.clone());
                ("REASONING_START", id)
            }
            "THINKING_END" => {
                let open = self.span.take();
                (
                    "REASONING_END",
                    given.or(open).unwrap_or_else(|| self.mint()),
                )
            }
            "THINKING_TEXT_MESSAGE_START" => {
                let id = given.unwrap_or_else(|| self.mint());
                self.message = Some(id.clone());
                map.insert("role".to_owned(), Value::from("reasoning"));
                ("REASONING_MESSAGE_START", id)
            }
            "THINKING_TEXT_MESSAGE_CONTENT" => {
                let open = self.message.clone();
                (
                    "REASONING_MESSAGE_CONTENT",
                    given.or(open).unwrap_or_else(|| self.mint()),
                )
            }
            "THINKING_TEXT_MESSAGE_END" => {
                let open = self.message.take();
                (
                    "REASONING_MESSAGE_END",
                    given.or(open).unwrap_or_else(|| self.mint()),
                )
            }
            _ => return false,
        };
        map.insert("type".to_owned(), Value::from(new_type));
        map.insert("messageId".to_owned(), Value::from(id));
        true
    }

    fn mint(&mut self) -> String {
        if self.stateless {
            return LEGACY_THINKING_ID.to_owned();
        }
        self.minted += 1;
        format!("thinking-{}", self.minted)
    }
}
