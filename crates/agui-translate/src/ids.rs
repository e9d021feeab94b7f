//! Where the ids of emitted messages, reasoning spans and tool calls come from.

use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use harness_proto::step::StepKey;

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
    /// An activity message (`ACTIVITY_SNAPSHOT`).
    Activity,
}

/// A source of fresh ids.
///
/// Every id returned must be new for the turn: the AG-UI client rejects a message or tool call
/// that reuses an id still open. Each id is asked for on behalf of the step that produces the
/// entity, so a source may derive ids from steps ([`StepIds`]: the same steps give the same
/// ids, whether translated live or from a resumed conversation's history) or ignore them
/// ([`UuidIds`], [`SequentialIds`]).
pub trait IdSource: Send {
    /// A fresh id for an entity of `kind` produced by the step `step`.
    fn next_id(&mut self, kind: IdKind, step: &StepKey) -> String;
}

impl<T: IdSource + ?Sized> IdSource for Box<T> {
    fn next_id(&mut self, kind: IdKind, step: &StepKey) -> String {
        (**self).next_id(kind, step)
    }
}

/// Random UUIDv4 ids: the production source.
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidIds;

/// Makes every id input distinct within the process.
static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

impl IdSource for UuidIds {
    fn next_id(&mut self, _kind: IdKind, _step: &StepKey) -> String {
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

/// Counter-based ids (`text-1`, `reasoning-1`, `tool-1`, `result-1`, `activity-1`, one counter
/// per kind):
/// deterministic, for tests and snapshots.
#[derive(Debug, Clone, Default)]
pub struct SequentialIds {
    prefix: String,
    counters: [u64; 5],
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
            counters: [0; 5],
        }
    }
}

impl IdSource for SequentialIds {
    fn next_id(&mut self, kind: IdKind, _step: &StepKey) -> String {
        let (slot, name) = match kind {
            IdKind::TextMessage => (0, "text"),
            IdKind::Reasoning => (1, "reasoning"),
            IdKind::ToolCall => (2, "tool"),
            IdKind::ToolResult => (3, "result"),
            IdKind::Activity => (4, "activity"),
        };
        self.counters[slot] += 1;
        format!("{}{name}-{}", self.prefix, self.counters[slot])
    }
}

/// Ids derived from the step that produces each entity, scoped by a conversation:
/// `<conversation prefix>-<trajectory>-<step index>-<kind>[<n>]`, the trajectory being `r` for
/// the root agent (whose trajectory id is the conversation id) and the first 8 characters of a
/// subagent's; `n` counts further entities of one kind from one step (a step's text split by a
/// run boundary). The same steps therefore get the same ids when they are translated live and
/// when they are rebuilt from a resumed conversation's history, so a client's messages keep
/// their ids across a reconnect.
#[derive(Debug, Clone, Default)]
pub struct StepIds {
    conversation: String,
    prefix: String,
    issued: HashMap<(StepKey, IdKind), u32>,
}

impl StepIds {
    /// Ids for the steps of conversation `conversation_id`.
    pub fn new(conversation_id: impl Into<String>) -> Self {
        let conversation: String = conversation_id.into();
        let prefix: String = conversation.chars().take(8).collect();
        Self {
            conversation,
            prefix,
            issued: HashMap::new(),
        }
    }
}

impl IdSource for StepIds {
    fn next_id(&mut self, kind: IdKind, step: &StepKey) -> String {
        let n = self.issued.entry((step.clone(), kind)).or_insert(0);
        let count = *n;
        *n += 1;
        let trajectory: String = if step.trajectory_id == self.conversation {
            "r".to_owned()
        } else {
            step.trajectory_id.chars().take(8).collect()
        };
        let kind = match kind {
            IdKind::TextMessage => "t",
            IdKind::Reasoning => "r",
            IdKind::ToolCall => "c",
            IdKind::ToolResult => "o",
            IdKind::Activity => "a",
        };
        let mut id = format!("{}-{trajectory}-{}-{kind}", self.prefix, step.index);
        if count > 0 {
            let _ = write!(id, "{count}");
        }
        id
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
        let mut used = self.0.lock();
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
    fn step_ids_name_the_step_and_repeat_for_the_same_steps() {
        let root = StepKey::new("0123456789abcdef0123456789abcdef", 12);
        let sub = StepKey::new("fedcba9876543210fedcba9876543210", 3);
        let mut live = StepIds::new("0123456789abcdef0123456789abcdef");
        assert_eq!(live.next_id(IdKind::TextMessage, &root), "01234567-r-12-t");
        assert_eq!(live.next_id(IdKind::TextMessage, &root), "01234567-r-12-t1");
        assert_eq!(live.next_id(IdKind::ToolResult, &root), "01234567-r-12-o");
        assert_eq!(
            live.next_id(IdKind::Reasoning, &sub),
            "01234567-fedcba98-3-r"
        );
        let mut rebuilt = StepIds::new("0123456789abcdef0123456789abcdef");
        assert_eq!(
            rebuilt.next_id(IdKind::TextMessage, &root),
            "01234567-r-12-t"
        );
    }

    #[test]
    fn sequential_ids_count_per_kind() {
        let key = StepKey::default();
        let mut ids = SequentialIds::with_prefix("t2.");
        assert_eq!(ids.next_id(IdKind::TextMessage, &key), "t2.text-1");
        assert_eq!(ids.next_id(IdKind::TextMessage, &key), "t2.text-2");
        assert_eq!(ids.next_id(IdKind::ToolCall, &key), "t2.tool-1");
        assert_eq!(ids.next_id(IdKind::Reasoning, &key), "t2.reasoning-1");
        assert_eq!(ids.next_id(IdKind::ToolResult, &key), "t2.result-1");
    }

    #[test]
    fn a_harness_id_is_used_once_then_fresh_ids_are_taken() {
        let ids = ToolCallIds::new();
        let shared = ids.clone();
        let mut fresh = SequentialIds::new();
        let key = StepKey::default();
        let mut next = || fresh.next_id(IdKind::ToolCall, &key);
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
        let key = StepKey::default();
        let mut ids = UuidIds;
        let all: std::collections::HashSet<String> = (0..10_000)
            .map(|_| ids.next_id(IdKind::ToolCall, &key))
            .collect();
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
