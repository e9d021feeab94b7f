//! A thread's branches: the harness conversations it forked from. An edit or a regenerate
//! (`divergence.rs`) starts a new conversation from the old one's history cut at the point;
//! the old one is kept, never lost, as a branch the thread can switch back to.

use serde::{Deserialize, Serialize};

use super::{Digests, LostTurns, UserSteps};

/// How many branches a thread keeps besides its current one; beyond, the oldest is forgotten
/// (its conversation stays in the harness's storage until the thread is deleted).
pub(crate) const KEPT: usize = 32;

/// A conversation of the thread other than its current one, with what rebuilds its messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Branch {
    /// The harness conversation (also the branch's id on the wire).
    pub(crate) conversation_id: String,
    /// The client's ids of its user messages, by step.
    #[serde(default)]
    pub(crate) user_steps: UserSteps,
    /// Its lost turns.
    #[serde(default, skip_serializing_if = "LostTurns::is_empty")]
    pub(crate) lost_turns: LostTurns,
    /// The digests of its sent messages (a message id can hold other content in another
    /// branch).
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    pub(crate) sent: Digests,
    /// The digests of the text the harness echoed for its messages.
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    pub(crate) echoed: Digests,
    /// The message where the thread left it (edited, or whose answer was regenerated).
    #[serde(default)]
    pub(crate) left_at: String,
    /// When the thread left it (Unix seconds).
    #[serde(default)]
    pub(crate) left_when: u64,
    /// Its messages (as `connect` last restated them), for a listing.
    #[serde(default)]
    pub(crate) message_count: u32,
}

/// Adds `branch` as the newest, forgetting the oldest beyond [`KEPT`].
pub(crate) fn keep(branches: &mut Vec<Branch>, branch: Branch) {
    branches.retain(|b| b.conversation_id != branch.conversation_id);
    branches.push(branch);
    if branches.len() > KEPT {
        let extra = branches.len() - KEPT;
        branches.drain(..extra);
    }
}
