//! Where conversations come from: the real harness (through the process pool) or, in tests, a
//! scripted fake (`testing::FakeHarness`). The traits speak the harness's protocol types, so
//! they stay inside the crate; embedders pick a source through the opaque [`Backend`].

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use harness_client::{
    Callbacks, Canceller, Conversation, ConversationEvent, HarnessError, HarnessPool, InitInfo,
    ProcessOptions, WarmUp,
};
use harness_proto::lh::{HarnessConfig, UserInput};

use crate::placement::Placement;

/// Where an agent's conversations come from: harness processes shared through a pool
/// ([`Backend::harness`]) or, with the `testing` feature, `testing::FakeHarness`.
#[derive(Clone)]
pub struct Backend(pub(crate) Arc<dyn ConversationSource>);

impl Backend {
    /// Conversations on `localharness` processes started with `process`, shared through `pool`.
    /// Each thread's storage dir (the agent's `save_dir`, unless confined) and `HOME` replace
    /// `process`'s.
    ///
    /// With [`ProcessOptions::confinement`] set, every thread gets a process of its own,
    /// confined to the thread's directories: its workspace and app data dir are added to the
    /// confinement's writable directories, and its own storage dir and `HOME` (under
    /// `<save_dir>/t/<thread>/`) are used.
    pub fn harness(pool: HarnessPool, process: ProcessOptions) -> Self {
        Self(Arc::new(HarnessBackend { pool, process }))
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

    /// Whether each thread gets a process of its own (with its own storage dir and `HOME`).
    fn process_per_thread(&self) -> bool {
        false
    }

    /// Live harness processes, for metrics (0 for backends without processes).
    fn processes(&self) -> usize {
        0
    }

    /// Gets ready for the first conversations of an agent saving in `save_dir` (boots a shared
    /// harness process in the background, when the backend shares them and its pool keeps a
    /// spare; with `warm_up`, that process and later spares run its turn before they serve).
    async fn warm_up(&self, _save_dir: &Path, _warm_up: Option<WarmUp>) {}

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
    /// Closes the connection, then stops the conversation's harness process and waits for it
    /// to exit: the thread is handed to another replica, whose harness must be the only one
    /// holding the conversation. Only for a process of its own (see
    /// [`ConversationSource::process_per_thread`]); others just close.
    async fn close_and_stop_process(self: Box<Self>) {
        self.close().await;
    }
}

/// The real source: conversations on pooled `localharness` processes.
struct HarnessBackend {
    pool: HarnessPool,
    process: ProcessOptions,
}

impl HarnessBackend {
    /// How the process of a thread placed at `placement` is started (its pool partition).
    fn process_for(&self, placement: &Placement) -> ProcessOptions {
        let mut process = self.process.clone();
        process.storage_dir = placement.storage_dir.clone();
        if placement.home_dir.is_some() {
            process.home_dir = placement.home_dir.clone();
        }
        if let Some(confinement) = &mut process.confinement {
            confinement
                .read_write
                .extend([placement.workspace.clone(), placement.app_data_dir.clone()]);
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
            .open(&self.process_for(placement), config, callbacks)
            .await?;
        Ok(Box::new(conversation))
    }

    fn process_per_thread(&self) -> bool {
        self.process.confinement.is_some()
    }

    fn processes(&self) -> usize {
        self.pool.stats().processes
    }

    async fn warm_up(&self, save_dir: &Path, warm_up: Option<WarmUp>) {
        if self.process_per_thread() {
            return;
        }
        // Threads sharing a process differ only in what reaches the harness per conversation
        // (workspace, app data dir): any thread's placement names their partition.
        let any_thread = Placement::new(save_dir, Path::new(""), false);
        let process = self.process_for(&any_thread);
        if let Err(e) = self.pool.prestart(&process, warm_up).await {
            tracing::warn!(error = %e, "could not start a harness ahead of the first thread");
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
