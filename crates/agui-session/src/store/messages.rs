//! What a thread's record keeps of its user messages: the ids forwarded to the harness, the
//! step that echoed each, their digests, and the turns lost with their server.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// The ids of the user messages a thread already sent to the harness, most recently recorded
/// last: the one record of what was forwarded, kept by the thread's session and persisted in
/// its [`ThreadRecord`].
///
/// Recording an id it holds moves that id to the end; beyond [`ForwardedIds::KEPT`] ids the
/// oldest are dropped. Only the newest few matter: clients resend the transcript, and the scan
/// for the message to send stops at the newest forwarded one. Read from a file, it keeps the
/// last [`ForwardedIds::KEPT`] ids listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub(crate) struct ForwardedIds(VecDeque<String>);

impl ForwardedIds {
    /// How many ids are kept at most.
    pub(crate) const KEPT: usize = 512;

    /// Whether `message_id` was forwarded.
    pub(crate) fn contains(&self, message_id: &str) -> bool {
        self.0.iter().any(|id| id == message_id)
    }

    /// Records `message_id` as forwarded, as the most recent id.
    pub(crate) fn record(&mut self, message_id: impl Into<String>) {
        let message_id = message_id.into();
        self.0.retain(|id| *id != message_id);
        self.0.push_back(message_id);
        while self.0.len() > Self::KEPT {
            self.0.pop_front();
        }
    }

    /// Whether nothing was forwarded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids, oldest first.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// How many ids are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The client's ids of the user messages the harness echoed, by the root step that echoed each:
/// how messages rebuilt from the harness's history keep the ids the client sent. The newest
/// [`ForwardedIds::KEPT`] are kept (older ones get derived ids).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct UserSteps(VecDeque<(u32, String)>);

impl UserSteps {
    /// Records that root step `step` echoed the client's message `message_id`.
    pub(crate) fn insert(&mut self, step: u32, message_id: String) {
        self.0.retain(|(s, _)| *s != step);
        self.0.push_back((step, message_id));
        while self.0.len() > ForwardedIds::KEPT {
            self.0.pop_front();
        }
    }

    /// The client's id of the message root step `step` echoed.
    pub(crate) fn get(&self, step: u32) -> Option<&str> {
        self.0
            .iter()
            .find(|(s, _)| *s == step)
            .map(|(_, id)| id.as_str())
    }

    /// The root step that echoed the client's message `message_id`.
    pub(crate) fn step_of(&self, message_id: &str) -> Option<u32> {
        self.0
            .iter()
            .find(|(_, id)| id == message_id)
            .map(|(s, _)| *s)
    }

    /// Forgets the steps from `step` on (a fork keeps the history before it).
    pub(crate) fn keep_below(&mut self, step: u32) {
        self.0.retain(|(s, _)| *s < step);
    }

    /// Every (step, message id), in the order recorded.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.0.iter().map(|(s, id)| (*s, id.as_str()))
    }

    /// Moves each message to the step `to` gives it, or forgets it (`None`).
    pub(crate) fn renumber(&mut self, mut to: impl FnMut(u32) -> Option<u32>) {
        let entries = std::mem::take(&mut self.0);
        self.0 = entries
            .into_iter()
            .filter_map(|(step, id)| to(step).map(|step| (step, id)))
            .collect();
    }

    /// The newest root step recorded.
    pub(crate) fn newest_step(&self) -> Option<u32> {
        self.0.iter().map(|(s, _)| *s).max()
    }

    /// Forgets everything (the conversation was replaced).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// Short digests of the newest forwarded user messages, by id: of the content the client sent
/// (what an edit is compared with), or of the text the harness echoed (what tells a user step
/// of the harness's history as a message's). Bounded like the forwarded ids (the oldest are
/// dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<(String, String)>", into = "Vec<(String, String)>")]
pub(crate) struct Digests(VecDeque<(String, String)>);

impl Digests {
    /// How many digests are kept at most.
    pub(crate) const KEPT: usize = ForwardedIds::KEPT;

    /// The digest recorded for `message_id`.
    pub(crate) fn get(&self, message_id: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(id, _)| id == message_id)
            .map(|(_, d)| d.as_str())
    }

    /// Records the digest of the message `message_id`, as the most recent.
    pub(crate) fn record(&mut self, message_id: String, digest: String) {
        self.0.retain(|(id, _)| *id != message_id);
        self.0.push_back((message_id, digest));
        while self.0.len() > Self::KEPT {
            self.0.pop_front();
        }
    }

    /// Whether none is recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<(String, String)>> for Digests {
    fn from(pairs: Vec<(String, String)>) -> Self {
        let mut deque: VecDeque<_> = pairs.into();
        while deque.len() > Self::KEPT {
            deque.pop_front();
        }
        Self(deque)
    }
}

impl From<Digests> for Vec<(String, String)> {
    fn from(digests: Digests) -> Self {
        digests.0.into()
    }
}

/// The root user steps whose turns were lost (a server died with the turn in flight), newest
/// last: the messages those turns left in the history are marked interrupted when it is
/// rebuilt. The newest [`ForwardedIds::KEPT`] are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct LostTurns(VecDeque<u32>);

impl LostTurns {
    /// Records that the turn root step `step` started was lost.
    pub(crate) fn insert(&mut self, step: u32) {
        if !self.contains(step) {
            self.0.push_back(step);
        }
        while self.0.len() > ForwardedIds::KEPT {
            self.0.pop_front();
        }
    }

    /// Forgets the steps from `step` on (a fork keeps the history before it).
    pub(crate) fn keep_below(&mut self, step: u32) {
        self.0.retain(|s| *s < step);
    }

    /// Moves each lost turn to the step `to` gives it, or forgets it (`None`).
    pub(crate) fn renumber(&mut self, mut to: impl FnMut(u32) -> Option<u32>) {
        let steps = std::mem::take(&mut self.0);
        self.0 = steps.into_iter().filter_map(&mut to).collect();
    }

    /// Whether the turn root step `step` started was lost.
    pub(crate) fn contains(&self, step: u32) -> bool {
        self.0.contains(&step)
    }

    /// Whether no turn was lost.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Forgets everything (the conversation was replaced).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

impl<S: Into<String>> FromIterator<S> for ForwardedIds {
    /// The ids recorded in order.
    fn from_iter<I: IntoIterator<Item = S>>(ids: I) -> Self {
        let mut forwarded = Self::default();
        for id in ids {
            forwarded.record(id);
        }
        forwarded
    }
}

impl From<Vec<String>> for ForwardedIds {
    fn from(ids: Vec<String>) -> Self {
        ids.into_iter().collect()
    }
}

impl From<ForwardedIds> for Vec<String> {
    fn from(ids: ForwardedIds) -> Self {
        ids.0.into()
    }
}
