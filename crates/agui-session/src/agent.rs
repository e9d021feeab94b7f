//! The public face of the crate: an [`Agent`] serves AG-UI runs for one agent configuration,
//! with one task per live thread (see `thread`), and connects clients to threads and stops
//! their turns.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use agui_types::{Event, RunAgentInput};
use tokio::sync::{mpsc, oneshot};

use crate::backend::{Backend, Isolation};
use crate::error::{RunErrorCode, RunFailure, SessionError};
use crate::lease::{LeaseDenied, ThreadLeases};
use crate::options::AgentOptions;
use crate::owner::Owner;
use crate::store::{RecordWriter, StoreLimits, ThreadStore};
use crate::thread::conversation::LiveSlots;
use crate::thread::{Command, LiveSlot, RunChannel, ThreadHandle, negotiate};
use crate::tools::ToolRegistry;
use crate::trees::Trees;
use harness_client::WarmUp;

/// How long a run waits for an idle thread to give up its live slot before it fails with
/// `SESSION_LIMIT`.
const SLOT_WAIT: Duration = Duration::from_secs(2);

/// How often the thread store drops expired records.
const STORE_SWEEP: Duration = Duration::from_secs(60);

/// Serves AG-UI runs for one agent configuration. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<AgentInner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.inner.options.name)
            .field("stats", &self.stats())
            .finish()
    }
}

pub(crate) struct AgentInner {
    pub(crate) options: AgentOptions,
    pub(crate) backend: Backend,
    pub(crate) tools: ToolRegistry,
    /// Where threads work (see `trees`).
    pub(crate) trees: Arc<Trees>,
    /// The throwaway turn of processes started ahead of need.
    warm_up: Option<WarmUp>,
    pub(crate) records: Arc<RecordWriter>,
    /// Who may drive which thread, when replicas share the save dir.
    pub(crate) leases: Option<Arc<dyn ThreadLeases>>,
    slots: Arc<LiveSlots>,
    threads: Mutex<HashMap<String, ThreadHandle>>,
    next_generation: AtomicU64,
    closing: AtomicBool,
}

/// Counts, for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentStats {
    /// Threads with a live task (open, hibernated or parked).
    pub sessions: usize,
    /// Threads with an open harness conversation.
    pub live_conversations: usize,
    /// Threads waiting for the client (a parked tool, question or approval).
    pub parked: usize,
    /// Harness processes of the backend.
    pub processes: usize,
    /// Harness processes booted ahead for the next new owner or thread, not yet claimed.
    pub spares: usize,
}

/// Why a connect or a stop could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThreadError {
    /// The agent knows no thread with this id.
    #[error("no thread `{0}` is known to this agent")]
    UnknownThread(String),
}

impl Agent {
    /// An agent with `options`, opening conversations through `backend`, with `tools` as its
    /// server tools. Must be called inside a tokio runtime (it starts the store's writer).
    pub fn new(
        options: AgentOptions,
        backend: Backend,
        tools: ToolRegistry,
    ) -> Result<Self, SessionError> {
        Self::build(options, backend, tools, None)
    }

    /// [`Agent::new`] for one of several replicas sharing the save dir: each thread's task
    /// holds the thread's lease from `leases` while it lives (taken before the thread's record
    /// is read, renewed, given up when the thread hibernates or the agent shuts down), and a
    /// run on a thread another replica holds ends with `RUN_ERROR` `THREAD_ELSEWHERE`.
    pub fn with_leases(
        options: AgentOptions,
        backend: Backend,
        tools: ToolRegistry,
        leases: Arc<dyn ThreadLeases>,
    ) -> Result<Self, SessionError> {
        Self::build(options, backend, tools, Some(leases))
    }

    fn build(
        options: AgentOptions,
        backend: Backend,
        tools: ToolRegistry,
        leases: Option<Arc<dyn ThreadLeases>>,
    ) -> Result<Self, SessionError> {
        options.validate()?;
        for dir in [&options.workspace_root, &options.save_dir] {
            std::fs::create_dir_all(dir).map_err(|source| SessionError::Io {
                action: format!("create {}", dir.display()),
                source,
            })?;
        }
        let store = ThreadStore::open(
            &options.save_dir.join("threads"),
            StoreLimits {
                ttl: options.remember_threads_for,
            },
        )?;
        let isolation = backend.0.isolation();
        let trees = Arc::new(Trees::open(
            &options.save_dir,
            &options.workspace_root,
            isolation,
            options.replica_id.as_deref().unwrap_or("local"),
        ));
        let warm_up = (options.warm_up_endpoint.clone())
            .map(|endpoint| crate::warm_up(&options, &tools, endpoint));
        let inner = Arc::new(AgentInner {
            slots: LiveSlots::new(options.max_sessions),
            options,
            backend,
            tools,
            trees,
            warm_up,
            records: RecordWriter::start(store),
            leases,
            threads: Mutex::new(HashMap::new()),
            next_generation: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        });
        tokio::spawn(sweep_store(Arc::downgrade(&inner)));
        inner.get_ready();
        Ok(Self { inner })
    }

    /// The agent's configuration.
    pub fn options(&self) -> &AgentOptions {
        &self.inner.options
    }

    /// The agent's server tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Starts a run of the local owner (a server whose callers have no identities); see
    /// [`Agent::run_as`].
    pub fn run(&self, input: RunAgentInput) -> RunStream {
        self.run_as(&Owner::local(), input)
    }

    /// Starts a run for `owner`: a new thread becomes theirs (it works in their directory tree
    /// and on their harness processes); a thread of someone else's is refused with
    /// `RUN_ERROR`. Its `RUN_STARTED` is on the stream at once; the thread's task serves the
    /// rest: dropping the stream (the client went away) stops delivery, never the harness turn
    /// or a parked request.
    pub fn run_as(&self, owner: &Owner, input: RunAgentInput) -> RunStream {
        let (tx, rx) = mpsc::channel(self.inner.options.client_buffer_events);
        let version = negotiate(
            input.protocol_version.as_deref(),
            &input.thread_id,
            &input.run_id,
        );
        let events = RunChannel::announce(tx, &input.thread_id, &input.run_id, version);
        let inner = self.inner.clone();
        let owner = owner.clone();
        tokio::spawn(async move {
            let thread = input.thread_id.clone();
            inner
                .send(
                    &thread,
                    Command::Run {
                        input,
                        events,
                        owner,
                    },
                )
                .await;
        });
        RunStream { rx }
    }

    /// [`Agent::connect_as`] for the local owner.
    pub async fn connect(&self, input: RunAgentInput) -> Result<RunStream, ThreadError> {
        self.connect_as(&Owner::local(), input).await
    }

    /// Connects `owner` to a thread: a stream restating it (`RUN_STARTED`,
    /// `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT`), then its live turn to the end, or at once
    /// `RUN_FINISHED` (with the interrupt outcome or pending tool calls when something waits for
    /// the client).
    pub async fn connect_as(
        &self,
        owner: &Owner,
        input: RunAgentInput,
    ) -> Result<RunStream, ThreadError> {
        if !self.inner.knows(&input.thread_id).await {
            return Err(ThreadError::UnknownThread(input.thread_id));
        }
        let (tx, rx) = mpsc::channel(self.inner.options.client_buffer_events);
        let thread = input.thread_id.clone();
        self.inner
            .send(
                &thread,
                Command::Connect {
                    input,
                    events: tx,
                    owner: owner.clone(),
                },
            )
            .await;
        Ok(RunStream { rx })
    }

    /// Stops the thread's turn in flight: the runs following it end with `RUN_FINISHED`
    /// `outcome: cancelled` once the harness has stopped. `Ok(false)` when no turn was in
    /// flight.
    pub async fn stop(&self, thread_id: &str) -> Result<bool, ThreadError> {
        if !self.inner.knows(thread_id).await {
            return Err(ThreadError::UnknownThread(thread_id.to_owned()));
        }
        let Some(handle) = self.inner.lock_threads().get(thread_id).cloned() else {
            return Ok(false);
        };
        let (reply, stopped) = oneshot::channel();
        if handle.commands.send(Command::Stop { reply }).await.is_err() {
            return Ok(false);
        }
        Ok(stopped.await.unwrap_or(false))
    }

    /// Deletes a thread of `owner`: stops its turn (its runs end `cancelled`), forgets it and
    /// removes its workspace, transcripts and conversation. `Ok(false)` when it belongs to
    /// someone else.
    pub async fn delete_as(&self, owner: &Owner, thread_id: &str) -> Result<bool, ThreadError> {
        if !self.inner.knows(thread_id).await {
            return Err(ThreadError::UnknownThread(thread_id.to_owned()));
        }
        let (reply, deleted) = oneshot::channel();
        self.inner
            .send(
                thread_id,
                Command::Delete {
                    owner: owner.clone(),
                    reply,
                },
            )
            .await;
        Ok(deleted.await.unwrap_or(false))
    }

    /// Whether the agent knows the thread (live, or remembered in its store).
    pub async fn knows(&self, thread_id: &str) -> bool {
        self.inner.knows(thread_id).await
    }

    /// Current counts.
    pub fn stats(&self) -> AgentStats {
        let threads = self.inner.lock_threads();
        AgentStats {
            sessions: threads.len(),
            live_conversations: self.inner.slots.live(),
            parked: threads.values().filter(|t| t.status.is_parked()).count(),
            processes: self.inner.backend.0.processes(),
            spares: self.inner.trees.spares(),
        }
    }

    /// Ends every thread (parked requests fail, runs in flight end with `RUN_ERROR`,
    /// conversations close so the harness checkpoints them) within the shutdown deadline, and
    /// stops the backend.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let threads: Vec<ThreadHandle> = self.inner.lock_threads().values().cloned().collect();
        let mut done = Vec::new();
        for thread in threads {
            let (tx, rx) = oneshot::channel();
            if thread
                .commands
                .send(Command::Shutdown { done: tx })
                .await
                .is_ok()
            {
                done.push(rx);
            }
        }
        let all = futures_util::future::join_all(done);
        if tokio::time::timeout(self.inner.options.shutdown_deadline, all)
            .await
            .is_err()
        {
            tracing::warn!("some threads did not close within the shutdown deadline");
        }
        self.inner.trees.drop_spares();
        self.inner.backend.0.shutdown().await;
        self.inner.records.flush().await;
    }
}

impl AgentInner {
    pub(crate) fn lock_threads(&self) -> MutexGuard<'_, HashMap<String, ThreadHandle>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task of `thread_id`, started when missing.
    fn handle(self: &Arc<Self>, thread_id: &str) -> ThreadHandle {
        let mut threads = self.lock_threads();
        if let Some(handle) = threads.get(thread_id)
            && !handle.commands.is_closed()
        {
            return handle.clone();
        }
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let handle = crate::thread::spawn(self, thread_id, generation);
        threads.insert(thread_id.to_owned(), handle.clone());
        handle
    }

    /// Hands `command` to the thread's task, starting one if the thread has none (or its task
    /// ended meanwhile).
    pub(crate) async fn send(self: &Arc<Self>, thread_id: &str, mut command: Command) {
        for _ in 0..3 {
            let handle = self.handle(thread_id);
            match handle.commands.send(command).await {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => {
                    self.forget_thread(thread_id, handle.generation);
                    command = back;
                }
            }
        }
        tracing::error!(thread_id, "could not reach the thread's task");
    }

    /// Whether the thread is live or remembered.
    async fn knows(&self, thread_id: &str) -> bool {
        self.lock_threads().contains_key(thread_id) || self.records.get(thread_id).await.is_some()
    }

    /// Removes a thread's task from the registry (only that task, not a newer one).
    pub(crate) fn forget_thread(&self, thread_id: &str, generation: u64) {
        let mut threads = self.lock_threads();
        if threads
            .get(thread_id)
            .is_some_and(|h| h.generation == generation)
        {
            threads.remove(thread_id);
        }
    }

    /// Gets the backend ready for the first threads: warms the processes they will use (the
    /// shared one; the local owner's when its tree exists), and keeps a spare ready for new
    /// owners or threads.
    fn get_ready(self: &Arc<Self>) {
        let (backend, trees, warm_up) = (
            self.backend.clone(),
            self.trees.clone(),
            self.warm_up.clone(),
        );
        let wants_spare = match trees.isolation() {
            Isolation::Shared => false,
            Isolation::Thread => true,
            Isolation::Owner => self.options.several_owners,
        };
        tokio::spawn(async move {
            let warm = match trees.isolation() {
                Isolation::Shared => Some(trees.shared_place()),
                Isolation::Owner => trees
                    .existing_tree(&Owner::local())
                    .map(|tree| trees.process_place(&tree)),
                Isolation::Thread => None,
            };
            match warm {
                Some(place) => backend.0.warm_up(&place, warm_up.clone()).await,
                // The local owner's first thread takes this spare.
                None if !wants_spare => {
                    crate::trees::refill_spares(trees.clone(), backend.clone(), warm_up.clone())
                        .await;
                }
                None => {}
            }
            if wants_spare {
                crate::trees::refill_spares(trees, backend, warm_up).await;
            }
        });
    }

    /// Makes a new spare once one was claimed, when new owners or threads may come.
    pub(crate) fn refill_spares(&self) {
        let wanted = match self.trees.isolation() {
            Isolation::Shared => false,
            Isolation::Thread => true,
            Isolation::Owner => self.options.several_owners,
        };
        if wanted && !self.is_closing() {
            tokio::spawn(crate::trees::refill_spares(
                self.trees.clone(),
                self.backend.clone(),
                self.warm_up.clone(),
            ));
        }
    }

    /// Takes a slot for one more open conversation, asking idle threads (least recently
    /// active first) to hibernate when none is free.
    pub(crate) async fn reserve_live(&self, except: &str) -> Result<LiveSlot, RunFailure> {
        let deadline = tokio::time::Instant::now() + SLOT_WAIT;
        loop {
            if let Some(slot) = self.slots.try_take() {
                return Ok(slot);
            }
            let candidate = self
                .lock_threads()
                .iter()
                .filter(|(id, t)| id.as_str() != except && t.status.is_idle_live())
                .min_by_key(|(_, t)| t.status.last_activity())
                .map(|(_, t)| t.clone());
            let now = tokio::time::Instant::now();
            let Some(candidate) = candidate.filter(|_| now < deadline) else {
                let (live, max) = (self.slots.live(), self.slots.max());
                return Err(RunFailure::new(
                    RunErrorCode::SessionLimit,
                    format!(
                        "Refusing to start a new Antigravity session: {live} of {max} in use (all busy or waiting for users)."
                    ),
                ));
            };
            let freed = self.slots.freed();
            let _ = candidate.commands.try_send(Command::Hibernate);
            let _ = tokio::time::timeout_at(deadline, freed).await;
        }
    }

    /// Takes or renews the lease of `thread_id` (off the async threads); `None` when the agent
    /// has no leases.
    pub(crate) async fn acquire_lease(
        &self,
        thread_id: &str,
    ) -> Option<Result<Duration, LeaseDenied>> {
        let leases = self.leases.clone()?;
        let id = thread_id.to_owned();
        Some(
            tokio::task::spawn_blocking(move || leases.acquire(&id))
                .await
                .unwrap_or_else(|e| Err(LeaseDenied::Unavailable(e.to_string()))),
        )
    }

    /// Gives the lease of `thread_id` up, once what the thread wrote is on disk (the next
    /// holder reads it).
    pub(crate) async fn release_lease(&self, thread_id: &str) {
        let Some(leases) = self.leases.clone() else {
            return;
        };
        self.records.flush().await;
        let id = thread_id.to_owned();
        let _ = tokio::task::spawn_blocking(move || leases.release(&id)).await;
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
}

/// Drops expired thread records (and their workspaces and directories) at start, then now and
/// then.
async fn sweep_store(agent: Weak<AgentInner>) {
    loop {
        let Some(inner) = agent.upgrade() else { return };
        if inner.is_closing() {
            return;
        }
        let expired = inner.records.sweep().await;
        for (thread_id, record) in expired {
            if inner.lock_threads().contains_key(&thread_id) {
                continue;
            }
            tracing::info!(%thread_id, "removing a thread past its retention, with its files");
            let trees = inner.trees.clone();
            let _ = tokio::task::spawn_blocking(move || trees.remove_thread_files(&record)).await;
        }
        drop(inner);
        tokio::time::sleep(STORE_SWEEP).await;
    }
}

/// The events of one run, ending with exactly one terminal event (or cut short when the
/// client fell too far behind).
#[derive(Debug)]
pub struct RunStream {
    rx: mpsc::Receiver<Event>,
}

impl RunStream {
    /// The next event; `None` after the terminal event.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// Every event until the end (for tests and batch use).
    pub async fn collect(mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.rx.recv().await {
            events.push(event);
        }
        events
    }
}

impl futures_util::Stream for RunStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx)
    }
}
