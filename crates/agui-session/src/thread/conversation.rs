//! A thread's harness conversation, as a state that cannot be wrong: a turn exists only inside
//! an open conversation, and an open conversation holds one of the agent's live slots, given
//! back when it is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

use crate::backend::ConversationHandle;
use crate::contract::Contract;
use crate::turn::Turn;

/// The agent's budget of open conversations (`max_sessions`).
#[derive(Debug)]
pub(crate) struct LiveSlots {
    max: usize,
    live: AtomicUsize,
    freed: Notify,
}

impl LiveSlots {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            live: AtomicUsize::new(0),
            freed: Notify::new(),
        })
    }

    /// Open conversations now.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// The most open conversations allowed.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A slot, if one is free (counted at once, so concurrent takers cannot overshoot).
    pub(crate) fn try_take(self: &Arc<Self>) -> Option<LiveSlot> {
        self.live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| LiveSlot(self.clone()))
    }

    /// Resolves when a slot is given back.
    pub(crate) async fn freed(&self) {
        self.freed.notified().await;
    }
}

/// A claim on one live slot; given back when dropped.
#[derive(Debug)]
pub(crate) struct LiveSlot(Arc<LiveSlots>);

impl Drop for LiveSlot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
        self.0.freed.notify_waiters();
    }
}

/// The thread's conversation.
pub(crate) enum Conversation {
    /// No connection: never opened, hibernated, or closed when its harness went away. The
    /// next run opens (or resumes) it.
    Closed,
    /// A connection to the harness, and the turn in flight on it.
    Open(Box<OpenConversation>),
}

/// An open conversation.
pub(crate) struct OpenConversation {
    pub(crate) handle: Box<dyn ConversationHandle>,
    /// The client tools it was opened with.
    pub(crate) contract: Contract,
    /// The turn in flight (sent and not yet ended), spanning runs.
    pub(crate) turn: Option<Turn>,
    _slot: LiveSlot,
}

impl Conversation {
    /// An open conversation holding `slot`.
    pub(crate) fn open(
        handle: Box<dyn ConversationHandle>,
        contract: Contract,
        slot: LiveSlot,
    ) -> Self {
        Self::Open(Box::new(OpenConversation {
            handle,
            contract,
            turn: None,
            _slot: slot,
        }))
    }

    /// The open conversation.
    pub(crate) fn as_open(&mut self) -> Option<&mut OpenConversation> {
        match self {
            Self::Open(open) => Some(open),
            Self::Closed => None,
        }
    }

    /// Whether a conversation is open.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Self::Open(_))
    }

    /// The turn in flight.
    pub(crate) fn turn(&self) -> Option<&Turn> {
        match self {
            Self::Open(open) => open.turn.as_ref(),
            Self::Closed => None,
        }
    }

    /// The turn in flight, to feed.
    pub(crate) fn turn_mut(&mut self) -> Option<&mut Turn> {
        self.as_open().and_then(|o| o.turn.as_mut())
    }

    /// Closes the connection (the harness keeps and checkpoints the conversation) and gives
    /// the slot back. The turn in flight, if any, is dropped with it.
    pub(crate) async fn close(&mut self) {
        if let Self::Open(open) = std::mem::replace(self, Self::Closed) {
            open.handle.close().await;
        }
    }

    /// Closes the connection and, when the thread has a harness process of its own
    /// (`own_process`), stops that process too: the thread is being handed over to another
    /// replica, and no harness of this one may keep the conversation.
    pub(crate) async fn hand_over(&mut self, own_process: bool) {
        if let Self::Open(open) = std::mem::replace(self, Self::Closed) {
            if own_process {
                open.handle.close_and_stop_process().await;
            } else {
                open.handle.close().await;
            }
        }
    }

    /// Drops the connection without closing it (it is already gone).
    pub(crate) fn forget(&mut self) {
        *self = Self::Closed;
    }
}
