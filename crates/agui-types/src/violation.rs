//! What a broken ordering rule reports, apart from the verifier so that the crate's error can
//! carry it without depending on the verifier.

use std::fmt;

use crate::event_type::EventType;

/// Which rule a [`Violation`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The first event must be `RUN_STARTED` (or `RUN_ERROR`).
    FirstEvent,
    /// Only a new `RUN_STARTED` may follow `RUN_FINISHED` or `RUN_ERROR`.
    AfterTerminal,
    /// `RUN_STARTED` while a run is active (runs do not nest).
    RunAlreadyActive,
    /// `RUN_FINISHED` names another thread or run than its `RUN_STARTED`.
    RunIdMismatch,
    /// `RUN_FINISHED` while a step, message, reasoning span, tool call or subagent is open.
    OpenAtRunFinished,
    /// An opener for an id (or step name) that is already open.
    AlreadyOpen,
    /// A continuation or close for an id that is not open.
    NotOpen,
    /// A `subagentRunId` that disagrees with the owner of the entity it continues.
    Attribution,
    /// A subagent lifecycle error (reused id, unknown parent).
    Subagent,
    /// A `*_CHUNK` event the client cannot expand.
    Chunk,
    /// The stream ended inside a run (no `RUN_FINISHED`/`RUN_ERROR`).
    MissingTerminal,
    /// The stream carried no events.
    EmptyStream,
}

/// A broken ordering rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Zero-based index of the offending event; `None` for end-of-stream findings.
    pub index: Option<usize>,
    /// Type of the offending event.
    pub event_type: Option<EventType>,
    /// The rule.
    pub rule: Rule,
    /// What is wrong, naming the ids involved.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.index, self.event_type) {
            (Some(index), Some(ty)) => write!(f, "event #{index} ({ty}): {}", self.message),
            _ => write!(f, "end of stream: {}", self.message),
        }
    }
}

impl std::error::Error for Violation {}
