//! The `type` discriminator of an AG-UI event, apart from the events themselves so that what
//! names an event's type (a rule violation, an error) needs nothing of their payloads.

use serde::{Deserialize, Serialize};

use crate::event_list::event_list;

macro_rules! define_event_type {
    ($( $(#[$doc:meta])* $variant:ident($payload:ident) = $wire:literal, )*) => {
        /// The `type` discriminator of an [`Event`](crate::Event).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum EventType {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant, )*
        }

        impl EventType {
            /// Every 1.0 event type, in protobuf `EventType` order.
            pub const ALL: &'static [EventType] = &[ $( EventType::$variant, )* ];

            /// The wire name, e.g. `"TEXT_MESSAGE_START"`.
            pub const fn as_str(self) -> &'static str {
                match self { $( EventType::$variant => $wire, )* }
            }

            /// Looks up a 1.0 wire name (the retired `THINKING_*` names give `None`).
            pub fn from_wire_name(name: &str) -> Option<Self> {
                match name { $( $wire => Some(EventType::$variant), )* _ => None }
            }
        }

    };
}

event_list!(define_event_type);

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
