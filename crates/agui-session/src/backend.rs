//! Where conversations come from: the real harness (through the process pool) or, in tests, a
//! scripted fake (`testing::FakeHarness`). The traits speak the harness's protocol types, so
//! they stay inside the crate; embedders pick a source through the opaque [`Backend`].

use std::sync::Arc;

use async_trait::async_trait;
use harness_client::sandbox::SandboxIdentity;
use harness_client::{
    Callbacks, Canceller, Conversation, ConversationEvent, HarnessError, HarnessPool, InitInfo,
    ProcessOptions, WarmUp,
};
use harness_proto::lh::{HarnessConfig, UserInput};

use crate::error::SessionError;
use crate::places::{Isolation, Placement, ProcessPlace};

/// Where an agent's conversations come from: harness processes shared through a pool
/// ([`Backend::harness`]) or, with the `testing` feature, `testing::FakeHarness`.
#[derive(Clone)]
pub struct Backend(pub(crate) Arc<dyn ConversationSource>);

impl Backend {
    /// Conversations on `localharness` processes started with `process`, through `pool`:
    /// shared by every thread ([`Isolation::Shared`]) when `process` has no confinement, else
    /// by the threads of one owner ([`Isolation::Owner`]). See [`Backend::harness_isolated`].
    pub fn harness(pool: HarnessPool, process: ProcessOptions) -> Self {
        let isolation = if process.confinement.is_some() {
            Isolation::Owner
        } else {
            Isolation::Shared
        };
        Self(Arc::new(HarnessBackend {
            pool,
            process,
            isolation,
        }))
    }

    /// Conversations on `localharness` processes started with `process`, through `pool`, shared
    /// as `isolation` says. Each process works in its tree's directories (see the crate's
    /// `trees`): with [`Isolation::Owner`] or [`Isolation::Thread`], `process` must be confined
    /// (the tree's directories are added to what its confinement grants, and its storage dir
    /// and `HOME` are the tree's); with [`Isolation::Shared`] it must not be (the agent's
    /// `save_dir` is every process's storage dir).
    pub fn harness_isolated(
        pool: HarnessPool,
        process: ProcessOptions,
        isolation: Isolation,
    ) -> Result<Self, SessionError> {
        let confined = process.confinement.is_some();
        if confined == (isolation == Isolation::Shared) {
            return Err(SessionError::Config(format!(
                "isolation {isolation:?} needs {} confinement in the process options",
                if confined { "no" } else { "a" }
            )));
        }
        Ok(Self(Arc::new(HarnessBackend {
            pool,
            process,
            isolation,
        })))
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("processes", &self.0.processes())
            .finish_non_exhaustive()
    }
}

/// Opens conversations.
#[async_trait]
pub(crate) trait ConversationSource: Send + Sync + 'static {
    /// Opens (or resumes, per `config`'s continuation mode) a conversation whose callbacks are
    /// answered by `callbacks`.
    async fn open(
        &self,
        placement: &Placement,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Box<dyn ConversationHandle>, HarnessError>;

    /// Which threads share processes.
    fn isolation(&self) -> Isolation {
        Isolation::Shared
    }

    /// The host identity confined processes run as, when not the server's own: the directories
    /// they write must be theirs.
    fn sandbox_identity(&self) -> Option<SandboxIdentity> {
        None
    }

    /// Live harness processes, for metrics (0 for backends without processes).
    fn processes(&self) -> usize {
        0
    }

    /// Gets the partition of `place` ready for its first conversations (boots a process in the
    /// background when the pool keeps spares; with `warm_up`, that process and later spares run
    /// its turn before they serve).
    async fn warm_up(&self, _place: &ProcessPlace, _warm_up: Option<WarmUp>) {}

    /// Boots (and warms, with `warm_up`) a process for `place` and keeps it up until the
    /// returned hold is dropped; `None` when the backend keeps no such processes.
    async fn reserve(
        &self,
        _place: &ProcessPlace,
        _warm_up: Option<WarmUp>,
    ) -> Option<Box<dyn Send + Sync>> {
        None
    }

    /// Stops everything the backend started.
    async fn shutdown(&self);
}

/// One open conversation (see [`harness_client::Conversation`] for the semantics).
#[async_trait]
pub(crate) trait ConversationHandle: Send + Sync + 'static {
    /// The conversation id.
    fn id(&self) -> &str;
    /// What the harness said at init (history when resuming).
    fn init_info(&self) -> &InitInfo;
    /// Sends user input.
    async fn send(&mut self, input: UserInput) -> Result<(), HarnessError>;
    /// A handle that cancels the running turn from another task.
    fn canceller(&self) -> Arc<dyn Fn() -> bool + Send + Sync>;
    /// The next event; cancel-safe.
    async fn next_event(&mut self) -> Option<ConversationEvent>;
    /// An event already received, without waiting.
    fn try_next_event(&mut self) -> Option<ConversationEvent>;
    /// Re-attaches to the same conversation on a new connection.
    async fn reconnect(&mut self) -> Result<InitInfo, HarnessError>;
    /// Closes the connection; the harness keeps (and checkpoints) the conversation.
    async fn close(self: Box<Self>);
    /// Kills the conversation's harness process at once (it ignored a halt, or froze); its
    /// connections end with the process's exit.
    fn kill_process(&self);
    /// How many times the disk cap's watcher stopped the commands of its process (0 for a
    /// process with no cap).
    fn disk_cap_stops(&self) -> u64 {
        0
    }
    /// How many writes of its process failed for want of room on the disk, as its log says (0
    /// where unknown).
    fn storage_full_writes(&self) -> u64 {
        0
    }
    /// Whether the harness sends a host call's step, and its reply's, before it calls back for
    /// the call, so a callback that came first means they are still on their way (`localharness`
    /// does).
    fn steps_precede_callbacks(&self) -> bool {
        true
    }
    /// Whether a command its process started still runs (where it cannot tell: `true`, so the
    /// harness's word on its background tasks stands).
    async fn runs_commands(&self) -> bool {
        true
    }
    /// Closes the connection, then stops the conversation's harness process and waits for it
    /// to exit: the thread is handed to another replica, whose harness must be the only one
    /// holding the conversation. Only for a process of its own ([`Isolation::Thread`]); others
    /// just close.
    async fn close_and_stop_process(self: Box<Self>) {
        self.close().await;
    }
}

/// The real source: conversations on pooled `localharness` processes.
struct HarnessBackend {
    pool: HarnessPool,
    process: ProcessOptions,
    isolation: Isolation,
}

impl HarnessBackend {
    /// How the process of `place` is started (its pool partition).
    fn process_for(&self, place: &ProcessPlace) -> ProcessOptions {
        let mut process = self.process.clone();
        process.storage_dir = place.storage_dir.clone();
        if place.home_dir.is_some() {
            process.home_dir = place.home_dir.clone();
        }
        if let Some(confinement) = &mut process.confinement {
            confinement.read_write.extend(place.confine.iter().cloned());
            confinement.label = harness_client::sandbox::ProcessLabel(place.label.clone());
        }
        process
    }
}

#[async_trait]
impl ConversationSource for HarnessBackend {
    async fn open(
        &self,
        placement: &Placement,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Box<dyn ConversationHandle>, HarnessError> {
        let conversation = self
            .pool
            .open(&self.process_for(&placement.process), config, callbacks)
            .await?;
        Ok(Box::new(conversation))
    }

    fn isolation(&self) -> Isolation {
        self.isolation
    }

    fn sandbox_identity(&self) -> Option<SandboxIdentity> {
        self.process.confinement.as_ref().and_then(|c| c.run_as)
    }

    fn processes(&self) -> usize {
        self.pool.stats().processes
    }

    async fn warm_up(&self, place: &ProcessPlace, warm_up: Option<WarmUp>) {
        if let Err(e) = self.pool.prestart(&self.process_for(place), warm_up).await {
            tracing::warn!(error = %e, "could not start a harness ahead of the first thread");
        }
    }

    async fn reserve(
        &self,
        place: &ProcessPlace,
        warm_up: Option<WarmUp>,
    ) -> Option<Box<dyn Send + Sync>> {
        // Processes ahead of need are the operator's choice (`prestart_harness`).
        if !self.pool.options().prestart_spare {
            return None;
        }
        match self.pool.reserve(&self.process_for(place), warm_up).await {
            Ok(reservation) => Some(Box::new(reservation)),
            Err(e) => {
                tracing::warn!(error = %e, "could not start a spare harness");
                None
            }
        }
    }

    async fn shutdown(&self) {
        self.pool.shutdown().await;
    }
}

#[async_trait]
impl ConversationHandle for Conversation {
    fn id(&self) -> &str {
        Conversation::id(self)
    }

    fn init_info(&self) -> &InitInfo {
        Conversation::init_info(self)
    }

    async fn send(&mut self, input: UserInput) -> Result<(), HarnessError> {
        Conversation::send(self, input).await
    }

    fn canceller(&self) -> Arc<dyn Fn() -> bool + Send + Sync> {
        let canceller: Canceller = Conversation::canceller(self);
        Arc::new(move || canceller.cancel())
    }

    async fn next_event(&mut self) -> Option<ConversationEvent> {
        Conversation::next_event(self).await
    }

    fn try_next_event(&mut self) -> Option<ConversationEvent> {
        Conversation::try_next_event(self)
    }

    async fn reconnect(&mut self) -> Result<InitInfo, HarnessError> {
        Conversation::reconnect(self).await.cloned()
    }

    async fn close(self: Box<Self>) {
        Conversation::close(*self).await;
    }

    async fn close_and_stop_process(self: Box<Self>) {
        let process = self.process().clone();
        Conversation::close(*self).await;
        let exit = process.shutdown().await;
        tracing::debug!(%exit, "stopped the thread's harness process before handing the thread over");
    }

    fn disk_cap_stops(&self) -> u64 {
        self.process().disk_cap_stops()
    }

    fn storage_full_writes(&self) -> u64 {
        self.process().storage_full_writes()
    }

    async fn runs_commands(&self) -> bool {
        Conversation::runs_commands(self).await
    }

    fn kill_process(&self) {
        let process = self.process().clone();
        tokio::spawn(async move {
            let exit = process
                .shutdown_with_grace(
                    std::time::Duration::ZERO,
                    std::time::Duration::from_millis(500),
                )
                .await;
            tracing::warn!(%exit, "killed a harness process that did not stop its turn");
        });
    }
}
