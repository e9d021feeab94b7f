//! What a thread's record keeps for its list (where it stands, its title) and what its owner
//! may change of it: data and pure rules, below both the thread tasks and the lists.

use serde::{Deserialize, Serialize};

/// The longest title taken from a first user message, in characters.
pub const TITLE_FROM_MESSAGE_CHARS: usize = 80;

/// The longest title an owner may give a thread, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// What a waiting thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// An answer to a question the agent asked.
    Question,
    /// An approval of a tool call.
    Approval,
    /// The result of a tool the client runs (a frontend tool).
    FrontendTool,
}

/// Where a thread stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "waitingFor")]
pub enum ThreadState {
    /// A turn is running.
    Running,
    /// The turn waits for the client.
    Waiting(WaitingFor),
    /// Its conversation is open, nothing running.
    Idle,
    /// No conversation is open for it; the next run resumes it.
    #[default]
    Hibernated,
}

/// What an owner changes of a thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadPatch {
    /// A new title (trimmed; 1 to [`MAX_TITLE_CHARS`] characters, no control characters).
    pub title: Option<String>,
    /// Archive it, or bring it back.
    pub archived: Option<bool>,
    /// Make this branch (an id from [`BranchSummary::id`]) the thread's current one.
    pub branch: Option<String>,
}

/// Why a thread did not switch branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SwitchRefused {
    /// It has no branch with this id.
    NoSuchBranch(String),
    /// It is busy (the message says with what).
    Busy(String),
}

/// One of a thread's branches other than its current one: a conversation it forked from (an
/// edit or a regenerate) or switched away from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSummary {
    /// Its id (what a switch names).
    pub id: String,
    /// The message where the thread left it: the one edited, or whose answer was regenerated;
    /// for a branch left by a switch, where the branch switched to parts from it.
    pub left_at: String,
    /// When the thread left it.
    pub left_when: std::time::SystemTime,
    /// Its messages, when last known.
    pub message_count: u32,
}

/// The title a thread takes from its first user message: its first non-blank line, trimmed,
/// at most [`TITLE_FROM_MESSAGE_CHARS`] characters.
pub(crate) fn title_from(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default()
        .chars()
        .take(TITLE_FROM_MESSAGE_CHARS)
        .collect()
}

/// Unix seconds now.
pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
