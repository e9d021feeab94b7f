//! A thread's harness conversation, as a state that cannot be wrong: a turn exists only inside
//! an open conversation, an open conversation holds one of the agent's live slots (given back
//! when it is dropped), and a conversation being opened is a child task the thread's task
//! watches, never a wait inside it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::background_tasks::BackgroundTasks;
use crate::backend::ConversationHandle;
use crate::contract::Contract;
use crate::error::RunFailure;
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
    /// No connection: never opened, or hibernated. The next run opens (or resumes) it.
    Closed,
    /// Being opened by a child task (waiting for a spare, a live slot, a boot, the init).
    Opening(Opening),
    /// A connection to the harness, and the turn in flight on it.
    Open(Box<OpenConversation>),
    /// Its harness process died (`why`); the next run opens it on a new one.
    Lost { why: String },
    /// Closed from the thread's side, its connection still being closed by a child task (a
    /// hibernation or a rebuild does not hold the loop while the harness answers); the next
    /// opening waits for it first, so the conversation is never open twice.
    Closing(JoinHandle<()>),
}

/// A conversation being opened: the child task doing it, and the client tools it is opened
/// with.
pub(crate) struct Opening {
    pub(crate) stage: OpeningStage,
    pub(crate) contract: Contract,
    /// The close of the conversation's previous connection, which the boot waits for.
    pub(crate) after: Option<JoinHandle<()>>,
}

/// What the child opening a conversation waits for.
pub(crate) enum OpeningStage {
    /// A spare harness being booted for the thread's new tree (claiming it beats booting a
    /// second process beside it). Holds nothing: aborted, nothing happened.
    Spare(JoinHandle<()>),
    /// A live slot (idle threads are asked to hibernate to free one). Aborted, it holds
    /// nothing.
    Slot(JoinHandle<Result<LiveSlot, RunFailure>>),
    /// The harness, with the slot taken: its boot (or a pooled process) and the conversation's
    /// init.
    Boot {
        boot: JoinHandle<Result<Box<dyn ConversationHandle>, BootFailure>>,
        slot: LiveSlot,
    },
    /// The open conversation whose connection the harness closed, being re-attached: the
    /// child gives it back with how many steps its history has, or why it could not.
    Reattach(JoinHandle<Reattached>),
}

/// What the child re-attaching a conversation gives back.
pub(crate) type Reattached = (Box<OpenConversation>, Result<usize, String>);

/// Why the child could not open the conversation.
pub(crate) enum BootFailure {
    /// The harness does not have the conversation it was asked to resume (`why`).
    Lost(String),
    /// Anything else, as the runs waiting for it report it.
    Failed(RunFailure),
}

/// Whether an open conversation's connection is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Events flow.
    Attached,
    /// The harness closed the connection (a model error does); it is re-attached on the next
    /// run.
    Down,
}

/// An open conversation.
pub(crate) struct OpenConversation {
    pub(crate) handle: Box<dyn ConversationHandle>,
    /// The client tools it was opened with.
    pub(crate) contract: Contract,
    pub(crate) link: Link,
    /// The turn in flight (sent and not yet ended), spanning runs.
    pub(crate) turn: Option<Turn>,
    /// The last turn ended with tasks still running in the harness (a command left running in
    /// the background): the harness starts a turn of its own when they end, so the
    /// conversation stays connected (not hibernated, not handed over) until the root is idle
    /// or its process runs none of them any more.
    pub(crate) background_tasks: BackgroundTasks,
    _slot: LiveSlot,
}

/// How the thread lets go of its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LetGo {
    /// Close the connection; the harness keeps (and checkpoints) the conversation.
    Close,
    /// Close it and, when the thread has a harness process of its own, stop that process too:
    /// the thread goes to another replica (or away), and no harness of this one may keep it.
    HandOver { own_process: bool },
}

impl Conversation {
    /// An open, attached conversation holding `slot`.
    pub(crate) fn open(
        handle: Box<dyn ConversationHandle>,
        contract: Contract,
        slot: LiveSlot,
    ) -> Self {
        Self::Open(Box::new(OpenConversation {
            handle,
            contract,
            link: Link::Attached,
            turn: None,
            background_tasks: BackgroundTasks::default(),
            _slot: slot,
        }))
    }

    /// The open conversation.
    pub(crate) fn as_open(&mut self) -> Option<&mut OpenConversation> {
        match self {
            Self::Open(open) => Some(open),
            _ => None,
        }
    }

    /// The open conversation, to read.
    pub(crate) fn as_open_ref(&self) -> Option<&OpenConversation> {
        match self {
            Self::Open(open) => Some(open),
            _ => None,
        }
    }

    /// Whether a conversation is open.
    pub(crate) fn is_open(&self) -> bool {
        matches!(self, Self::Open(_))
    }

    /// Whether a conversation is open with its events flowing.
    pub(crate) fn is_attached(&self) -> bool {
        matches!(self, Self::Open(open) if open.link == Link::Attached)
    }

    /// The turn in flight.
    pub(crate) fn turn(&self) -> Option<&Turn> {
        match self {
            Self::Open(open) => open.turn.as_ref(),
            _ => None,
        }
    }

    /// Whether the harness runs tasks of the last turn in the background (see
    /// [`OpenConversation::background_tasks`]).
    pub(crate) fn runs_background_tasks(&self) -> bool {
        matches!(self, Self::Open(open) if open.background_tasks.running())
    }

    /// The turn in flight, to feed.
    pub(crate) fn turn_mut(&mut self) -> Option<&mut Turn> {
        self.as_open().and_then(|o| o.turn.as_mut())
    }

    /// Lets the conversation go, as `how` says: the one way a connection is closed or a child
    /// opening one abandoned (its conversation, once open, is let go the same way).
    pub(crate) async fn let_go(&mut self, how: LetGo) {
        match std::mem::replace(self, Self::Closed) {
            Self::Open(open) => close(open.handle, how).await,
            Self::Opening(opening) => abandon(opening.stage, how),
            Self::Closing(closing) => {
                // A hand-over must find the conversation closed.
                let _ = closing.await;
            }
            Self::Closed | Self::Lost { .. } => {}
        }
    }

    /// Closes the open connection in a child task, the loop going on at once; its live slot
    /// is freed when the close is done. The next opening waits for it ([`Conversation::Closing`]).
    pub(crate) fn close_in_background(&mut self) {
        match std::mem::replace(self, Self::Closed) {
            Self::Open(open) => {
                let OpenConversation { handle, _slot, .. } = *open;
                let closing = async move {
                    close(handle, LetGo::Close).await;
                    drop(_slot);
                };
                *self = Self::Closing(tokio::spawn(tracing::Instrument::in_current_span(closing)));
            }
            other => *self = other,
        }
    }

    /// The close in flight, if any, for the next opening to wait for.
    pub(crate) fn take_closing(&mut self) -> Option<JoinHandle<()>> {
        match std::mem::replace(self, Self::Closed) {
            Self::Closing(closing) => Some(closing),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Abandons the child opening the conversation, if one is at it (see [`Conversation::let_go`]).
    pub(crate) fn abandon_opening(&mut self, how: LetGo) {
        if matches!(self, Self::Opening(_))
            && let Self::Opening(opening) = std::mem::replace(self, Self::Closed)
        {
            abandon(opening.stage, how);
        }
    }

    /// Drops the connection without closing it (it is already gone); `lost` says why the
    /// harness process is gone, if it is.
    pub(crate) fn forget(&mut self, lost: Option<String>) {
        *self = match lost {
            Some(why) => Self::Lost { why },
            None => Self::Closed,
        };
    }
}

async fn close(handle: Box<dyn ConversationHandle>, how: LetGo) {
    match how {
        LetGo::HandOver { own_process: true } => handle.close_and_stop_process().await,
        LetGo::Close | LetGo::HandOver { .. } => handle.close().await,
    }
}

/// Abandons a child opening a conversation: a spare wait is dropped (it holds nothing); a boot
/// runs on in the background and what it opens is let go at once, so a stop or a shutdown
/// never waits for it and the pool is never left with a half-started process.
fn abandon(stage: OpeningStage, how: LetGo) {
    match stage {
        OpeningStage::Spare(wait) => wait.abort(),
        OpeningStage::Slot(slot) => slot.abort(),
        OpeningStage::Reattach(reattach) => {
            tokio::spawn(async move {
                if let Ok((open, _)) = reattach.await {
                    close(open.handle, how).await;
                }
            });
        }
        OpeningStage::Boot { boot, .. } => {
            tokio::spawn(async move {
                if let Ok(Ok(handle)) = boot.await {
                    tracing::debug!("closing a conversation opened for a run that was stopped");
                    close(handle, how).await;
                }
            });
        }
    }
}
