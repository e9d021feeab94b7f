//! A conversation: one WebSocket to a harness process, its events, and its inputs.

use std::sync::Arc;
use std::time::Duration;

use harness_proto::lh::{
    self, HarnessConfig, InputEvent, harness_config::SessionContinuationMode, input_event,
};
use tokio::sync::oneshot;

use crate::callbacks::Callbacks;
use crate::error::{HarnessError, Result};
use crate::events::{CloseReason, ConversationEvent};
use crate::link::{self, ConnectOptions, InitInfo, Link, Outbound};
use crate::process::HarnessProcess;

/// A live Antigravity conversation on a harness process.
///
/// Events (steps, trajectory states, usage, turn ends) are read with
/// [`Conversation::next_event`]; callbacks (host tools, hooks, policies, questions) are answered
/// by the [`Callbacks`] given at open, in background tasks, whether or not anyone reads events.
/// Dropping the conversation closes its socket; the process keeps running for others.
pub struct Conversation {
    id: String,
    process: HarnessProcess,
    config: HarnessConfig,
    callbacks: Arc<dyn Callbacks>,
    options: ConnectOptions,
    link: Link,
    init: InitInfo,
    _lease: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("id", &self.id)
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl Conversation {
    /// Opens a conversation with `config` (see [`crate::ConversationConfig`]).
    pub async fn open(
        process: &HarnessProcess,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Self> {
        Self::open_with(process, config, callbacks, ConnectOptions::default()).await
    }

    /// Like [`Conversation::open`], with explicit connection tuning.
    pub async fn open_with(
        process: &HarnessProcess,
        mut config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
        options: ConnectOptions,
    ) -> Result<Self> {
        let (link, init) = link::open(process, &config, callbacks.clone(), &options).await?;
        // Remember the id: re-attaching after a socket close needs it (the harness mints one
        // when the config has none).
        config.cascade_id = Some(init.conversation_id.clone());
        tracing::info!(conversation_id = %init.conversation_id, pid = process.pid(), resumed_steps = init.history.len(), "conversation open");
        Ok(Self {
            id: init.conversation_id.clone(),
            process: process.clone(),
            config,
            callbacks,
            options,
            link,
            init,
            _lease: None,
        })
    }

    pub(crate) fn with_lease(mut self, lease: impl Send + Sync + 'static) -> Self {
        self._lease = Some(Box::new(lease));
        self
    }

    /// The conversation (cascade) id, also the root trajectory id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the harness answered at init (history and usage when resuming).
    pub fn init_info(&self) -> &InitInfo {
        &self.init
    }

    /// The process this conversation runs on.
    pub fn process(&self) -> &HarnessProcess {
        &self.process
    }

    /// Whether a command its process started still runs ([`HarnessProcess::runs_commands`]):
    /// the harness's `STATE_WAITING_FOR_TASKS` is only as good as this.
    pub async fn runs_commands(&self) -> bool {
        self.process.runs_commands().await
    }

    /// The config the conversation was opened with (its id filled in).
    pub fn config(&self) -> &HarnessConfig {
        &self.config
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.link.closed.lock().clone()
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        self.close_reason().is_none()
    }

    /// The next event; `None` after [`ConversationEvent::Closed`] has been returned.
    ///
    /// Cancel-safe: dropping the future loses nothing, so a caller may race it against other
    /// work and come back later.
    pub async fn next_event(&mut self) -> Option<ConversationEvent> {
        self.link.events.recv().await
    }

    /// An event already received, without waiting.
    pub fn try_next_event(&mut self) -> Option<ConversationEvent> {
        self.link.events.try_recv().ok()
    }

    /// Sends user input, starting a turn (or queueing it behind the running one, which the
    /// harness then runs in the same turn: one turn end for both). Returns once the frame is on
    /// the socket.
    pub async fn send(&self, input: lh::UserInput) -> Result<()> {
        self.link.tracker.lock().input_sent();
        self.send_event(input_event::Event::UserInput(input)).await
    }

    /// Sends a plain text prompt (see [`crate::input::text`]).
    pub async fn send_text(&self, text: &str) -> Result<()> {
        self.send(crate::input::text(text)).await
    }

    /// Asks the harness to stop the running turn (`haltRequest`). The turn then ends with a
    /// normal idle state; [`crate::TurnEnd::halted`] tells that it was cancelled.
    pub async fn cancel(&self) -> Result<()> {
        self.link.tracker.lock().halted();
        self.send_event(input_event::Event::HaltRequest(true)).await
    }

    /// A handle that can cancel the running turn from another task (e.g. a callback enforcing a
    /// budget). It acts on the current connection; after [`Conversation::reconnect`] take a new one.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            outbound: self.link.outbound.clone(),
            tracker: self.link.tracker.clone(),
        }
    }

    /// Injects a system message that starts a turn (`automatedTrigger`).
    pub async fn trigger(&self, text: &str) -> Result<()> {
        self.send_event(input_event::Event::AutomatedTrigger(text.to_owned()))
            .await
    }

    async fn send_event(&self, event: input_event::Event) -> Result<()> {
        let (ack, acked) = oneshot::channel();
        let frame = Outbound::Event(InputEvent { event: Some(event) }, Some(ack));
        let closed =
            || HarnessError::Closed(self.close_reason().unwrap_or(CloseReason::ClosedByHost));
        self.link.outbound.send(frame).map_err(|_| closed())?;
        match acked.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(HarnessError::Closed(
                self.close_reason()
                    .unwrap_or(CloseReason::ConnectionLost(e)),
            )),
            Err(_) => Err(closed()),
        }
    }

    /// Re-attaches to the same conversation on a new socket (`CREATE_OR_RESUME`), e.g. after
    /// the harness closed the socket following a terminal model error. History is kept by the
    /// harness and returned in [`InitInfo::history`]. Events of the old socket are discarded.
    pub async fn reconnect(&mut self) -> Result<&InitInfo> {
        self.close_link().await;
        let mut config = self.config.clone();
        config.session_continuation_mode = Some(SessionContinuationMode::CreateOrResume as i32);
        let (link, init) = link::open(
            &self.process,
            &config,
            self.callbacks.clone(),
            &self.options,
        )
        .await?;
        self.link.reader.abort();
        self.link = link;
        self.init = init;
        tracing::info!(conversation_id = %self.id, resumed_steps = self.init.history.len(), "conversation re-attached");
        Ok(&self.init)
    }

    /// Closes the socket (cancelling a running turn; the harness keeps the conversation) and
    /// waits briefly for the connection to wind down.
    pub async fn close(mut self) {
        self.close_link().await;
    }

    /// Closes the current socket, if open, and waits (bounded) for its reader to finish.
    async fn close_link(&mut self) {
        if self.is_open() {
            let _ = self.link.outbound.send(Outbound::Close);
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.link.reader).await;
        }
    }
}

impl Drop for Conversation {
    fn drop(&mut self) {
        let _ = self.link.outbound.send(Outbound::Close);
    }
}

/// Cancels a conversation's running turn from anywhere (see [`Conversation::canceller`]).
#[derive(Clone)]
pub struct Canceller {
    outbound: tokio::sync::mpsc::UnboundedSender<Outbound>,
    tracker: Arc<parking_lot::Mutex<crate::turn_end::TurnTracker>>,
}

impl std::fmt::Debug for Canceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canceller").finish_non_exhaustive()
    }
}

impl Canceller {
    /// Sends `haltRequest`; false when the connection is already gone.
    pub fn cancel(&self) -> bool {
        self.tracker.lock().halted();
        let halt = InputEvent {
            event: Some(input_event::Event::HaltRequest(true)),
        };
        self.outbound.send(Outbound::Event(halt, None)).is_ok()
    }
}
