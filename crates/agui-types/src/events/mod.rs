//! AG-UI 1.0 events.
//!
//! [`Event`] is the union of all 31 event types. Each payload struct carries its own fields
//! (camelCase on the wire) plus the [`EventBase`] fields every event allows. Optional fields
//! are omitted when absent, never serialized as `null`.

mod build;
mod legacy;
mod lifecycle;
mod reasoning;
mod state;
mod subagent;
mod text;

pub use lifecycle::*;
pub use reasoning::*;
pub use state::*;
pub use subagent::*;
pub use text::*;

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::event_list::event_list;
pub use crate::event_type::EventType;
use crate::json::{is_none_or_null, locate, strip_position};

pub(crate) use legacy::LegacyThinking;

/// Fields every event may carry (all optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventBase {
    /// When the event was produced, in epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "base_field::timestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub timestamp: Option<i64>,
    /// The provider-native event this one was translated from (never `null`).
    #[serde(default, skip_serializing_if = "is_none_or_null")]
    pub raw_event: Option<Value>,
    /// Extra information; the key `"ag-ui"` is reserved for the protocol.
    #[serde(
        default,
        deserialize_with = "base_field::metadata",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<Map<String, Value>>,
}

/// The base fields are flattened into each payload, where serde loses error locations;
/// these name the field in the error instead.
mod base_field {
    use serde::Deserialize;
    use serde::de::{Deserializer, Error as _};
    use serde_json::{Map, Value};

    use crate::json::located;

    fn named<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        name: &str,
        deserializer: D,
    ) -> Result<T, D::Error> {
        T::deserialize(deserializer)
            .map_err(|error| D::Error::custom(located(name, &error.to_string())))
    }

    pub(super) fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        named("timestamp", d)
    }

    pub(super) fn metadata<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Map<String, Value>>, D::Error> {
        named("metadata", d)
    }
}

impl EventBase {
    /// True when no base field is set.
    pub fn is_empty(&self) -> bool {
        self.timestamp.is_none() && is_none_or_null(&self.raw_event) && self.metadata.is_none()
    }
}

/// Per-payload facts the event-level accessors dispatch to.
pub(crate) trait Payload {
    /// The `subagentRunId` this event is attributed to (its own id for `SUBAGENT_*`).
    fn subagent_run_id(&self) -> Option<&str>;

    /// Sets the attribution; false (and no change) for events that cannot carry one.
    fn set_subagent_run_id(&mut self, _id: Option<String>) -> bool {
        false
    }
}

/// Implements [`Payload`] for payloads with an optional `subagent_run_id` attribution.
macro_rules! attributable {
    ($($payload:ident),* $(,)?) => {
        $(impl $crate::events::Payload for $payload {
            fn subagent_run_id(&self) -> Option<&str> {
                self.subagent_run_id.as_deref()
            }

            fn set_subagent_run_id(&mut self, id: Option<String>) -> bool {
                self.subagent_run_id = id;
                true
            }
        })*
    };
}
pub(crate) use attributable;

macro_rules! define_events {
    ($( $(#[$doc:meta])* $variant:ident($payload:ident) = $wire:literal, )*) => {
        /// One AG-UI 1.0 event.
        ///
        /// Serializes as a JSON object whose `type` names the event (`"TEXT_MESSAGE_START"`)
        /// next to the payload's fields. Deserializing accepts the retired `THINKING_*` types
        /// and maps them to their `REASONING_*` equivalents; unknown types are an
        /// [`Error::UnknownEventType`].
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "type")]
        pub enum Event {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant($payload), )*
        }

        /// Deserializes the payload of a known type straight from the event object (its
        /// `type` key is ignored like any unknown field), keeping error locations that
        /// serde's buffering internally-tagged enums would lose.
        fn payload_from_value(
            event_type: EventType,
            value: Value,
        ) -> std::result::Result<Event, serde_path_to_error::Error<serde_json::Error>> {
            match event_type {
                $( EventType::$variant => serde_path_to_error::deserialize(value).map(Event::$variant), )*
            }
        }

        impl Event {
            /// This event's type.
            pub fn event_type(&self) -> EventType {
                match self { $( Event::$variant(_) => EventType::$variant, )* }
            }

            /// The base fields (`timestamp`, `rawEvent`, `metadata`).
            pub fn base(&self) -> &EventBase {
                match self { $( Event::$variant(e) => &e.base, )* }
            }

            /// Mutable access to the base fields.
            pub fn base_mut(&mut self) -> &mut EventBase {
                match self { $( Event::$variant(e) => &mut e.base, )* }
            }

            /// The subagent invocation this event belongs to: the `subagentRunId` attribution
            /// of content and progress events, the invocation id of `SUBAGENT_*` events, and
            /// `None` for the parent agent and for run-scoped events.
            pub fn subagent_run_id(&self) -> Option<&str> {
                match self { $( Event::$variant(e) => Payload::subagent_run_id(e), )* }
            }

            /// Attributes this event to a subagent invocation (`None`: to the parent).
            ///
            /// Returns false and changes nothing for events that carry no attribution: the
            /// run-scoped `RUN_*` and `MESSAGES_SNAPSHOT`, and `SUBAGENT_*`, whose
            /// `subagentRunId` is the invocation's identity rather than an attribution.
            pub fn set_subagent_run_id(&mut self, id: Option<String>) -> bool {
                match self { $( Event::$variant(e) => Payload::set_subagent_run_id(e, id), )* }
            }
        }

        $(
            impl From<$payload> for Event {
                fn from(event: $payload) -> Self {
                    Event::$variant(event)
                }
            }
        )*
    };
}

event_list!(define_events);

impl Event {
    /// True for `RUN_FINISHED` and `RUN_ERROR`, the events that end a run.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Event::RunFinished(_) | Event::RunError(_))
    }

    /// Sets `timestamp` (epoch milliseconds).
    pub fn with_timestamp(mut self, timestamp_ms: i64) -> Self {
        self.base_mut().timestamp = Some(timestamp_ms);
        self
    }

    /// Sets `rawEvent`, the provider-native event this one was translated from.
    pub fn with_raw_event(mut self, raw_event: Value) -> Self {
        self.base_mut().raw_event = Some(raw_event);
        self
    }

    /// This event attributed to the subagent invocation `id` (see
    /// [`set_subagent_run_id`](Self::set_subagent_run_id) for the events that cannot be).
    pub fn with_subagent_run_id(mut self, id: impl Into<String>) -> Self {
        self.set_subagent_run_id(Some(id.into()));
        self
    }

    /// Sets `metadata`.
    pub fn with_metadata(mut self, metadata: Map<String, Value>) -> Self {
        self.base_mut().metadata = Some(metadata);
        self
    }

    /// The compact JSON object of this event (what an SSE `data:` line carries).
    pub fn to_json(&self) -> String {
        // Serializing into a String cannot fail: every map key is a string, no Serialize impl
        // here raises a custom error, and serde_json writes non-finite floats as `null`.
        serde_json::to_string(self).expect("AG-UI events always serialize to JSON")
    }

    /// Parses one event from its JSON text.
    pub fn from_json(json: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(json)
            .map_err(|error| Error::invalid("event", ".", error.to_string()))?;
        Self::from_value(value)
    }

    /// Converts a JSON value into an event.
    ///
    /// Retired `THINKING_*` events become `REASONING_*`; as a single event cannot say which
    /// span it belongs to, they get the placeholder id [`LEGACY_THINKING_ID`] unless they
    /// carry a `messageId`. The stream decoders in [`crate::sse`] mint one id per legacy span
    /// instead, as the official client does.
    pub fn from_value(value: Value) -> Result<Self> {
        decode_value(value, &mut LegacyThinking::stateless())
    }
}

/// The `messageId` given to retired `THINKING_*` events decoded one at a time.
pub const LEGACY_THINKING_ID: &str = "thinking";

/// Decodes an event value, translating retired event types with `legacy`.
pub(crate) fn decode_value(mut value: Value, legacy: &mut LegacyThinking) -> Result<Event> {
    let Value::Object(map) = &mut value else {
        return Err(Error::invalid("event", ".", "expected a JSON object"));
    };
    let Some(name) = map
        .get("type")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
    else {
        return Err(Error::invalid(
            "event",
            "type",
            "expected a non-empty string",
        ));
    };
    let known = match EventType::from_wire_name(name) {
        Some(known) => known,
        // Only an unknown name is copied: it is reported, or rewritten by `legacy`.
        None => {
            let event_type = name.to_owned();
            if !legacy.upgrade(map, &event_type) {
                return Err(Error::UnknownEventType(event_type));
            }
            let upgraded = map.get("type").and_then(Value::as_str).unwrap_or_default();
            EventType::from_wire_name(upgraded).ok_or(Error::UnknownEventType(event_type))?
        }
    };
    payload_from_value(known, value).map_err(|error| {
        let (path, reason) = locate(&error.path().to_string(), &strip_position(error.inner()));
        Error::invalid("event", path, reason)
    })
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        decode_value(value, &mut LegacyThinking::stateless()).map_err(D::Error::custom)
    }
}
