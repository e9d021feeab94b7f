//! Where the ids of emitted messages, reasoning spans and tool calls come from.

/// What an id will name; deterministic sources use it to produce readable ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// An assistant text message (`TEXT_MESSAGE_*`).
    TextMessage,
    /// A reasoning span and its single message (`REASONING_*`).
    Reasoning,
    /// A tool call the harness gave no usable id (built-in and MCP tools).
    ToolCall,
    /// The tool message minted by `TOOL_CALL_RESULT`.
    ToolResult,
}

/// A source of fresh ids.
///
/// Every id returned must be new for the turn: the AG-UI client rejects a message or tool call
/// that reuses an id still open. The translator never derives ids from harness data except
/// custom tool call ids, so an injectable source is all snapshot tests need for stable output.
pub trait IdSource: Send {
    /// A fresh id for an entity of `kind`.
    fn next_id(&mut self, kind: IdKind) -> String;
}

impl<T: IdSource + ?Sized> IdSource for Box<T> {
    fn next_id(&mut self, kind: IdKind) -> String {
        (**self).next_id(kind)
    }
}

/// Random UUIDv4 ids: the production source.
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidIds;

impl IdSource for UuidIds {
    fn next_id(&mut self, _kind: IdKind) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

/// Counter-based ids (`text-1`, `reasoning-1`, `tool-1`, `result-1`, one counter per kind):
/// deterministic, for tests and snapshots.
#[derive(Debug, Clone, Default)]
pub struct SequentialIds {
    prefix: String,
    counters: [u64; 4],
}

impl SequentialIds {
    /// Counters starting at 1, with no prefix.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counters starting at 1, each id prefixed with `prefix` (e.g. a turn number, so that
    /// several translators of one thread do not repeat ids).
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            counters: [0; 4],
        }
    }
}

impl IdSource for SequentialIds {
    fn next_id(&mut self, kind: IdKind) -> String {
        let (slot, name) = match kind {
            IdKind::TextMessage => (0, "text"),
            IdKind::Reasoning => (1, "reasoning"),
            IdKind::ToolCall => (2, "tool"),
            IdKind::ToolResult => (3, "result"),
        };
        self.counters[slot] += 1;
        format!("{}{name}-{}", self.prefix, self.counters[slot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_per_kind() {
        let mut ids = SequentialIds::with_prefix("t2.");
        assert_eq!(ids.next_id(IdKind::TextMessage), "t2.text-1");
        assert_eq!(ids.next_id(IdKind::TextMessage), "t2.text-2");
        assert_eq!(ids.next_id(IdKind::ToolCall), "t2.tool-1");
        assert_eq!(ids.next_id(IdKind::Reasoning), "t2.reasoning-1");
        assert_eq!(ids.next_id(IdKind::ToolResult), "t2.result-1");
    }

    #[test]
    fn uuid_ids_are_fresh() {
        let mut ids = UuidIds;
        let a = ids.next_id(IdKind::ToolCall);
        let b = ids.next_id(IdKind::ToolCall);
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
    }
}
