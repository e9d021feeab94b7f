//! One WebSocket to the harness per conversation, in four parts: [`connect`] opens the socket and
//! initializes the conversation (explaining a refused init from the harness's stderr);
//! [`socket`] runs the reader and writer tasks that turn frames into [`ConversationEvent`]s and
//! end the link with a [`CloseReason`]; [`dispatch`] runs the harness's requests through the
//! host's [`crate::Callbacks`] so every one is answered; [`convert`] translates those requests
//! and answers between the protocol's and this crate's types.
//!
//! This module holds what the parts share: the connection options, the init answer, and the
//! handles a [`crate::Conversation`] keeps.

mod connect;
mod convert;
mod dispatch;
mod socket;

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use harness_proto::lh::{self, InputEvent};
use harness_proto::step::Step;
use tokio::sync::{mpsc, oneshot};

use crate::events::{CloseReason, ConversationEvent};
use crate::turn_end::TurnTracker;

pub(crate) use connect::open;

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDirection {
    /// Host → harness (`InitializeConversationEvent`, `InputEvent`).
    ToHarness,
    /// Harness → host (`OutputEvent`).
    FromHarness,
}

/// Sees every WebSocket text frame of a conversation, e.g. to record fixtures or debug.
pub type FrameTap = Arc<dyn Fn(FrameDirection, &str) + Send + Sync>;

/// Connection tuning. Defaults follow the Python SDK, with larger message limits.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Connection attempts (with 0.1 s · 2ⁿ backoff) before giving up.
    pub connect_attempts: u32,
    /// How long the harness may take to answer the init frame.
    pub init_timeout: Duration,
    /// Largest accepted message (a resume's history arrives in one frame).
    pub max_message_size: usize,
    /// How long to keep retrying an init the harness drops because the conversation id is still
    /// attached to a socket that was just closed (it releases it asynchronously).
    pub reattach_window: Duration,
    /// Called with every frame sent or received.
    pub tap: Option<FrameTap>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("connect_attempts", &self.connect_attempts)
            .field("init_timeout", &self.init_timeout)
            .field("max_message_size", &self.max_message_size)
            .field("reattach_window", &self.reattach_window)
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            connect_attempts: 5,
            init_timeout: Duration::from_secs(60),
            max_message_size: 512 << 20,
            reattach_window: Duration::from_secs(3),
            tap: None,
        }
    }
}

/// What the harness said when the conversation was initialized.
#[derive(Debug, Clone, PartialEq)]
pub struct InitInfo {
    /// The conversation (cascade) id; also the root trajectory id.
    pub conversation_id: String,
    /// On resume: the final snapshot of every earlier step (not replayed as step events).
    pub history: Vec<Step>,
    /// On resume: the usage so far.
    pub cumulative_usage: Option<lh::UsageMetadata>,
    /// Whether the harness's sandbox is available.
    pub sandbox_available: bool,
}

/// A frame for the writer task; the optional sender learns whether it reached the socket.
pub(crate) enum Outbound {
    Event(
        InputEvent,
        Option<oneshot::Sender<std::result::Result<(), String>>>,
    ),
    Close,
}

/// The live halves of one connection.
pub(crate) struct Link {
    pub(crate) outbound: mpsc::UnboundedSender<Outbound>,
    pub(crate) events: mpsc::UnboundedReceiver<ConversationEvent>,
    pub(crate) closed: Arc<Mutex<Option<CloseReason>>>,
    pub(crate) tracker: Arc<Mutex<TurnTracker>>,
    pub(crate) reader: tokio::task::JoinHandle<()>,
}

/// Every frame, whichever way and whichever part handles it, is traced and shown to the tap.
fn observe(tap: Option<&FrameTap>, direction: FrameDirection, text: &str) {
    match direction {
        FrameDirection::ToHarness => tracing::trace!(frame = %text, "to harness"),
        FrameDirection::FromHarness => tracing::trace!(frame = %text, "from harness"),
    }
    if let Some(tap) = tap {
        tap(direction, text);
    }
}
