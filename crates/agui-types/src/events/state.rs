//! State, messages snapshot, activity and escape-hatch (`RAW`, `CUSTOM`) events.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EventBase, Payload, attributable};
use crate::input::Message;

/// `STATE_SNAPSHOT`: replaces the client's shared state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateSnapshot {
    /// The new state (any JSON, even `null`).
    pub snapshot: Value,
    /// Subagent attribution (provenance only; state is run-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `STATE_DELTA`: an RFC 6902 JSON Patch against the state the client holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateDelta {
    /// The patch (an empty patch is a valid no-op).
    pub delta: Vec<PatchOperation>,
    /// Subagent attribution (provenance only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// One RFC 6902 operation; `path` and `from` are RFC 6901 JSON Pointers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOperation {
    /// Insert `value` at `path`.
    Add {
        /// Target pointer.
        path: String,
        /// The value (may be `null`).
        value: Value,
    },
    /// Remove the value at `path`.
    Remove {
        /// Target pointer.
        path: String,
    },
    /// Replace the value at `path`.
    Replace {
        /// Target pointer.
        path: String,
        /// The value (may be `null`).
        value: Value,
    },
    /// Move the value at `from` to `path`.
    Move {
        /// Source pointer.
        from: String,
        /// Target pointer.
        path: String,
    },
    /// Copy the value at `from` to `path`.
    Copy {
        /// Source pointer.
        from: String,
        /// Target pointer.
        path: String,
    },
    /// Assert the value at `path` equals `value`.
    Test {
        /// Target pointer.
        path: String,
        /// The expected value.
        value: Value,
    },
}

/// `MESSAGES_SNAPSHOT`: the full conversation the agent owns, in order (messages missing
/// from it are deleted by the client).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessagesSnapshot {
    /// Every message.
    pub messages: Vec<Message>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `ACTIVITY_SNAPSHOT`: creates or overwrites a `role: "activity"` message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivitySnapshot {
    /// Id of the activity message.
    pub message_id: String,
    /// Open kind string, e.g. `plan`.
    pub activity_type: String,
    /// The activity's content.
    pub content: Map<String, Value>,
    /// `false` leaves an existing message alone; absent means overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `ACTIVITY_DELTA`: a JSON Patch against an activity message's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityDelta {
    /// Id of the activity message.
    pub message_id: String,
    /// Its activity kind.
    pub activity_type: String,
    /// The patch.
    pub patch: Vec<PatchOperation>,
    /// Subagent attribution (must match the snapshot's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `RAW`: a provider-native event passed through.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Raw {
    /// The native event (any JSON; must be present).
    pub event: Value,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

/// `CUSTOM`: an application-defined event (the protocol's extension point).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Custom {
    /// Event name; namespace it, e.g. `acme:ping`.
    pub name: String,
    /// Payload (any JSON, `null` allowed).
    pub value: Value,
    /// Subagent attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    /// Base event fields.
    #[serde(flatten)]
    pub base: EventBase,
}

attributable!(
    StateSnapshot,
    StateDelta,
    ActivitySnapshot,
    ActivityDelta,
    Raw,
    Custom
);

impl Payload for MessagesSnapshot {
    fn subagent_run_id(&self) -> Option<&str> {
        None
    }
}
