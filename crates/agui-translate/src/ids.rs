//! Where the ids of emitted messages, reasoning spans and tool calls come from.

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

/// Makes every id input distinct within the process.
static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

impl IdSource for UuidIds {
    fn next_id(&mut self, _kind: IdKind) -> String {
        // std has no public random generator, but every `RandomState` is keyed from OS
        // randomness (drawn per thread, varied per instance). SipHash of a process-wide counter
        // under such a key gives 128 unpredictable bits, so ids collide with negligible
        // probability, across processes too. This keeps the crate free of `uuid`/`getrandom`,
        // whose wasm dependencies would pull an async crate into the translator's graph.
        let n = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
        let state = RandomState::new();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&state.hash_one((n, 0u8)).to_be_bytes());
        bytes[8..].copy_from_slice(&state.hash_one((n, 1u8)).to_be_bytes());
        bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
        bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
        let mut id = String::with_capacity(36);
        for (i, byte) in bytes.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                id.push('-');
            }
            // Writing to a String cannot fail.
            let _ = write!(id, "{byte:02x}");
        }
        id
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

/// The AG-UI tool call ids used in one scope, and the rule that keeps them unique there: a
/// harness call id is used as the AG-UI id unless it is empty or already used in the scope,
/// else a fresh id is taken.
///
/// This is the only place tool call ids are de-duplicated. A [`Translator`](crate::Translator)
/// has its own record for its turn; a caller that also emits tool calls itself (as
/// `agui-session` does for frontend and server tools) keeps one record per thread and shares
/// it with each turn's translator
/// ([`Translator::sharing_tool_call_ids`](crate::Translator::sharing_tool_call_ids)), so no two
/// calls of the thread get the same id. Clones share the record.
#[derive(Debug, Clone, Default)]
pub struct ToolCallIds(Arc<Mutex<HashSet<String>>>);

impl ToolCallIds {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// The AG-UI id of a call the harness identified as `harness_id` (`None` or empty when it
    /// gave none), recorded as used: `harness_id` if it is free, else the first id of `fresh`
    /// that is (a taken one is retried with a numbered suffix, so even a source that repeats
    /// itself cannot produce a duplicate).
    pub fn assign(&self, harness_id: Option<&str>, mut fresh: impl FnMut() -> String) -> String {
        let mut used = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let id = match harness_id {
            Some(id) if !id.is_empty() && !used.contains(id) => id.to_owned(),
            _ => {
                let mut id = fresh();
                let mut attempt = 0;
                while used.contains(&id) {
                    attempt += 1;
                    id = format!("{}-{attempt}", fresh());
                }
                id
            }
        };
        used.insert(id.clone());
        id
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
    fn a_harness_id_is_used_once_then_fresh_ids_are_taken() {
        let ids = ToolCallIds::new();
        let shared = ids.clone();
        let mut fresh = SequentialIds::new();
        let mut next = || fresh.next_id(IdKind::ToolCall);
        assert_eq!(ids.assign(Some("abc"), &mut next), "abc");
        assert_eq!(
            shared.assign(Some("abc"), &mut next),
            "tool-1",
            "clones share the record"
        );
        assert_eq!(ids.assign(Some(""), &mut next), "tool-2");
        assert_eq!(ids.assign(None, &mut next), "tool-3");
        assert_eq!(ids.assign(None, || "tool-1".to_owned()), "tool-1-1");
    }

    #[test]
    fn uuid_ids_are_fresh_version_4_uuids() {
        let mut ids = UuidIds;
        let all: std::collections::HashSet<String> =
            (0..10_000).map(|_| ids.next_id(IdKind::ToolCall)).collect();
        assert_eq!(all.len(), 10_000);
        for id in all.iter().take(100) {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert!(
                id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
                "{id}"
            );
            assert_eq!(&id[14..15], "4", "{id}");
            assert!("89ab".contains(&id[19..20]), "{id}");
        }
    }
}
