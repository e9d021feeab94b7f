//! The public face of the crate: an [`Agent`] serves AG-UI runs for one agent configuration,
//! with one task per live thread (see `thread`), and connects clients to threads and stops
//! their turns.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use agui_types::{Event, RunAgentInput};
use tokio::sync::{mpsc, oneshot};

use crate::backend::Backend;
use crate::error::SessionError;
use crate::lease::ThreadLeases;
use crate::options::AgentOptions;
use crate::owner::Owner;
use crate::places::Isolation;
use crate::store::owners::Admission;
use crate::store::{RecordWriter, StoreLimits, ThreadStore};
use crate::thread::command::Command;
use crate::thread::context::ThreadContext;
use crate::thread::output::{RunChannel, negotiate};
use crate::thread::registry::Returned;
use crate::thread::status::ThreadHandle;
use crate::threads::model::SwitchRefused;
use crate::threads::{
    ThreadChanges, ThreadPage, ThreadPatch, ThreadQuery, ThreadSummary, ThreadWatch, ThreadsError,
};
use crate::tools::ToolRegistry;
use crate::trees::{Stock, Trees};
use crate::workspace::ThreadWorkspace;

/// How often the thread store drops expired records.
const STORE_SWEEP: Duration = Duration::from_secs(60);

/// Serves AG-UI runs for one agent configuration. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    ctx: Arc<ThreadContext>,
    /// The scan behind [`Agent::watch_threads_as`].
    watch: Arc<ThreadWatch>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.ctx.options.name)
            .field("stats", &self.stats())
            .finish()
    }
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
    /// The thread's workspace could not be reached or made (the message is the client's: it
    /// names no host path, and refers to the logged detail).
    #[error("{0}")]
    Workspace(String),
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
        let records = RecordWriter::start(store);
        let legacy = options
            .save_dir
            .join(crate::store::owners::LEGACY_OWNERS_DIR);
        match records.adopt_legacy_claims(&legacy) {
            Ok(0) => {}
            Ok(moved) => tracing::info!(
                moved,
                "moved the thread owners an earlier version kept beside the thread records"
            ),
            Err(source) => {
                return Err(SessionError::Io {
                    action: format!("move the thread owners of {}", legacy.display()),
                    source,
                });
            }
        }
        let isolation = backend.0.isolation();
        let trees = Arc::new(Trees::open(
            &options.save_dir,
            &options.workspace_root,
            isolation,
            options.replica_id.as_deref().unwrap_or("local"),
            backend.0.sandbox_identity(),
        ));
        let warm_up = (options.warm_up_endpoint.clone())
            .map(|endpoint| crate::contract::warm_up(&options, &tools, endpoint));
        let (ctx, returns) =
            ThreadContext::new(options, backend, tools, trees, records, leases, warm_up);
        let ctx = Arc::new(ctx);
        tokio::spawn(sweep_store(Arc::downgrade(&ctx)));
        tokio::spawn(redeliver(Arc::downgrade(&ctx), returns));
        get_ready(&ctx);
        Ok(Self {
            ctx,
            watch: Arc::new(ThreadWatch::new()),
        })
    }

    /// The agent's configuration.
    pub fn options(&self) -> &AgentOptions {
        &self.ctx.options
    }

    /// The agent's server tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.ctx.tools
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
        let (tx, rx) = mpsc::channel(self.ctx.options.client_buffer_events);
        let version = negotiate(
            input.protocol_version.as_deref(),
            &input.thread_id,
            &input.run_id,
        );
        let events = RunChannel::announce(tx, &input.thread_id, &input.run_id, version);
        let ctx = self.ctx.clone();
        let owner = owner.clone();
        tokio::spawn(async move {
            let thread = input.thread_id.clone();
            send(
                &ctx,
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
        if !knows(&self.ctx, &input.thread_id).await {
            return Err(ThreadError::UnknownThread(input.thread_id));
        }
        let (tx, rx) = mpsc::channel(self.ctx.options.client_buffer_events);
        let thread = input.thread_id.clone();
        send(
            &self.ctx,
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

    /// Stops the thread's turn in flight (or a run whose message waits for the thread's
    /// conversation or lease): the runs end with `RUN_FINISHED` `outcome: cancelled` once the
    /// harness has stopped. `Ok(false)` when there was nothing to stop.
    pub async fn stop(&self, thread_id: &str) -> Result<bool, ThreadError> {
        if !knows(&self.ctx, thread_id).await {
            return Err(ThreadError::UnknownThread(thread_id.to_owned()));
        }
        let Some(handle) = self.ctx.registry.lock().get(thread_id).cloned() else {
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
        if !knows(&self.ctx, thread_id).await {
            // Claimed by its owner, but its first run never wrote a record: its id is freed.
            if let Some(identity) = owner.identity()
                && self
                    .ctx
                    .records
                    .release_unrecorded(thread_id, identity)
                    .await
            {
                return Ok(true);
            }
            return Err(ThreadError::UnknownThread(thread_id.to_owned()));
        }
        let (reply, deleted) = oneshot::channel();
        send(
            &self.ctx,
            thread_id,
            Command::Delete {
                owner: owner.clone(),
                reply,
            },
        )
        .await;
        Ok(deleted.await.unwrap_or(false))
    }

    /// A page of `owner`'s threads, newest activity first, as the store holds them (written by
    /// this server or any replica sharing it).
    pub async fn list_threads_as(
        &self,
        owner: &Owner,
        query: &ThreadQuery,
    ) -> Result<ThreadPage, ThreadsError> {
        let mine: Vec<ThreadSummary> = crate::threads::all_summaries(&self.ctx)
            .await
            .into_iter()
            .filter(|(who, _)| who == owner)
            .map(|(_, summary)| summary)
            .collect();
        crate::threads::page(mine, query)
    }

    /// `owner`'s thread `thread_id`; `None` when it is unknown or someone else's.
    pub async fn thread_as(&self, owner: &Owner, thread_id: &str) -> Option<ThreadSummary> {
        let record = self.ctx.records.get(thread_id).await?;
        crate::threads::owned_by(&record, owner).then(|| self.summary(thread_id, &record))
    }

    /// Changes the title, archiving or current branch of `owner`'s thread `thread_id`;
    /// `Ok(None)` when it is unknown or someone else's. Goes through the thread's task (which alone writes its
    /// record, holding its lease when replicas share the store).
    pub async fn update_thread_as(
        &self,
        owner: &Owner,
        thread_id: &str,
        patch: ThreadPatch,
    ) -> Result<Option<ThreadSummary>, ThreadsError> {
        let patch = crate::threads::check_patch(patch)?;
        if !knows(&self.ctx, thread_id).await {
            return Ok(None);
        }
        let (reply, updated) = oneshot::channel();
        send(
            &self.ctx,
            thread_id,
            Command::Update {
                owner: owner.clone(),
                patch,
                reply,
            },
        )
        .await;
        match updated.await.ok().flatten() {
            None => Ok(None),
            Some(Err(SwitchRefused::NoSuchBranch(id))) => Err(ThreadsError::NoSuchBranch(id)),
            Some(Err(SwitchRefused::Busy(why))) => Err(ThreadsError::CannotSwitch(why)),
            Some(Ok(record)) => Ok(Some(self.summary(thread_id, &record))),
        }
    }

    /// `owner`'s thread changes from now on (made on this server or any replica sharing the
    /// store, the latter within about a second), for live lists. Subscribe before listing, so
    /// that nothing falls between the list and the first change.
    pub fn watch_threads_as(&self, owner: &Owner) -> ThreadChanges {
        self.watch.subscribe(&self.ctx, owner.clone())
    }

    fn summary(&self, thread_id: &str, record: &crate::store::ThreadRecord) -> ThreadSummary {
        let live = self.ctx.registry.lock().contains_key(thread_id);
        let bytes = record
            .place
            .as_ref()
            .map_or(0, |place| self.ctx.trees.slot_usage(place));
        crate::threads::summary(thread_id, record, live, self.ctx.leases.is_some(), bytes)
    }

    /// Whether `owner` may use `thread_id`: it owns it, or nobody does and `owner` claims it
    /// now — unless `owner` holds `max_threads` threads already. The one record of who owns a
    /// thread, kept beside the thread's record (so every replica agrees, and a claim goes with
    /// its thread when the thread is deleted or forgotten past its retention). The local owner
    /// (no identity) owns every thread.
    pub async fn admit_as(
        &self,
        owner: &Owner,
        thread_id: &str,
        max_threads: usize,
    ) -> Result<Admission, SessionError> {
        let Some(identity) = owner.identity() else {
            return Ok(Admission::Yours);
        };
        self.ctx
            .records
            .admit(thread_id, identity, max_threads)
            .await
            .map_err(|source| SessionError::Io {
                action: format!("claim the thread `{thread_id}` for `{owner}`"),
                source,
            })
    }

    /// The workspace of `owner`'s thread `thread_id`, for reading and writing its files from
    /// any replica (without the thread's lease): the thread's record is read afresh, its owner
    /// checked and its directories made through the door. `None` when the thread is someone
    /// else's, or does not exist (or has no workspace yet) and `create` is false. With
    /// `create`, a thread that does not exist is made `owner`'s and placed by its task (which
    /// writes its record, holding its lease), with no conversation opened.
    pub async fn workspace_as(
        &self,
        owner: &Owner,
        thread_id: &str,
        create: bool,
    ) -> Result<Option<ThreadWorkspace>, ThreadError> {
        let record = self.ctx.records.get(thread_id).await;
        let recorded = record.as_ref().and_then(|r| r.owner.clone());
        let place = match (record.and_then(|r| r.place), recorded) {
            (Some(place), Some(recorded)) if recorded == *owner => place,
            // A thread of the local owner passes to the first identity that uses it, its
            // directories with it: its task does that.
            (_, Some(recorded)) if recorded != *owner && !(create && recorded.is_local()) => {
                return Ok(None);
            }
            _ if !create => return Ok(None),
            _ => {
                let (reply, placed) = oneshot::channel();
                let command = Command::Place {
                    owner: owner.clone(),
                    reply,
                };
                send(&self.ctx, thread_id, command).await;
                match placed.await {
                    Ok(Ok(Some(place))) => place,
                    Ok(Ok(None)) => return Ok(None),
                    Ok(Err(failure)) => {
                        return Err(ThreadError::Workspace(failure.published(0).message));
                    }
                    Err(_) => {
                        return Err(ThreadError::Workspace(
                            "The thread could not be prepared; retry.".into(),
                        ));
                    }
                }
            }
        };
        let (trees, owner, id) = (self.ctx.trees.clone(), owner.clone(), thread_id.to_owned());
        let max_bytes = self.ctx.options.workspace_max_bytes;
        let opened = tokio::task::spawn_blocking(move || {
            ThreadWorkspace::open(&trees, &owner, &id, &place, max_bytes)
        })
        .await;
        match opened {
            Ok(Ok(workspace)) => Ok(Some(workspace)),
            Ok(Err(e)) => {
                let failure = crate::error::RunFailure::new(
                    crate::error::RunErrorCode::AgentError,
                    "Could not prepare the thread's directories.",
                )
                .with_detail(e);
                Err(ThreadError::Workspace(failure.published(0).message))
            }
            Err(e) => {
                tracing::error!(thread_id, error = %e, "preparing a thread's workspace failed");
                Err(ThreadError::Workspace(
                    "Could not prepare the thread's directories.".into(),
                ))
            }
        }
    }

    /// Whether the agent knows the thread (live, or remembered in its store).
    pub async fn knows(&self, thread_id: &str) -> bool {
        knows(&self.ctx, thread_id).await
    }

    /// Current counts.
    pub fn stats(&self) -> AgentStats {
        let threads = self.ctx.registry.lock();
        AgentStats {
            sessions: threads.len(),
            live_conversations: self.ctx.slots.live(),
            parked: threads.values().filter(|t| t.status.is_parked()).count(),
            processes: self.ctx.backend.0.processes(),
            spares: self.ctx.trees.spares(),
        }
    }

    /// Ends every thread (parked requests fail, runs in flight end with `RUN_ERROR`,
    /// conversations close so the harness checkpoints them, conversations being opened are
    /// abandoned) within the shutdown deadline, and stops the backend.
    pub async fn shutdown(&self) {
        self.ctx.start_closing();
        let threads: Vec<ThreadHandle> = self.ctx.registry.lock().values().cloned().collect();
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
        if tokio::time::timeout(self.ctx.options.shutdown_deadline, all)
            .await
            .is_err()
        {
            tracing::warn!("some threads did not close within the shutdown deadline");
        }
        self.ctx.spare_conversations.close_all().await;
        self.ctx.trees.drop_spares();
        self.ctx.backend.0.shutdown().await;
        self.ctx.records.flush().await;
    }
}

/// The task of `thread_id`, started when missing.
fn handle(ctx: &Arc<ThreadContext>, thread_id: &str) -> ThreadHandle {
    let mut threads = ctx.registry.lock();
    if let Some(handle) = threads.get(thread_id)
        && !handle.commands.is_closed()
    {
        return handle.clone();
    }
    let generation = ctx.registry.next_generation();
    let handle = crate::thread::task::spawn(ctx, thread_id, generation);
    threads.insert(thread_id.to_owned(), handle.clone());
    handle
}

/// Hands `command` to the thread's task, starting one if the thread has none (or its task ended
/// meanwhile).
async fn send(ctx: &Arc<ThreadContext>, thread_id: &str, mut command: Command) {
    for _ in 0..3 {
        let handle = handle(ctx, thread_id);
        match handle.commands.send(command).await {
            Ok(()) => return,
            Err(mpsc::error::SendError(back)) => {
                ctx.registry.forget(thread_id, handle.generation);
                command = back;
            }
        }
    }
    tracing::error!(thread_id, "could not reach the thread's task");
}

/// Delivers the commands tasks handed back (they reached a task that was ending) to the
/// threads' next tasks.
async fn redeliver(
    ctx: std::sync::Weak<ThreadContext>,
    mut returns: mpsc::UnboundedReceiver<Returned>,
) {
    while let Some(Returned { thread_id, command }) = returns.recv().await {
        let Some(ctx) = ctx.upgrade() else { return };
        send(&ctx, &thread_id, command).await;
    }
}

/// Whether the thread is live or remembered.
async fn knows(ctx: &ThreadContext, thread_id: &str) -> bool {
    ctx.registry.lock().contains_key(thread_id) || ctx.records.get(thread_id).await.is_some()
}

/// Gets the backend ready for the first threads: warms the processes they will use (the shared
/// one; the local owner's when its tree exists), and keeps a spare ready for new owners or
/// threads.
fn get_ready(ctx: &ThreadContext) {
    let (backend, trees, warm_up) = (ctx.backend.clone(), ctx.trees.clone(), ctx.warm_up.clone());
    let wants_spare = ctx.wants_spares();
    let stock = ctx.spare_stock();
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
                crate::trees::refill_spares(
                    trees.clone(),
                    backend.clone(),
                    warm_up.clone(),
                    Stock::ONE,
                )
                .await;
            }
            None => {}
        }
        if wants_spare {
            crate::trees::refill_spares(trees, backend, warm_up, stock).await;
        }
    });
}

/// Drops expired thread records (and their workspaces and directories) at start, then now and
/// then.
async fn sweep_store(ctx: Weak<ThreadContext>) {
    loop {
        let Some(ctx_now) = ctx.upgrade() else { return };
        if ctx_now.is_closing() {
            return;
        }
        let expired = ctx_now.records.sweep().await;
        for (thread_id, record) in expired {
            if ctx_now.registry.lock().contains_key(&thread_id) {
                continue;
            }
            tracing::info!(%thread_id, "removing a thread past its retention, with its files");
            let trees = ctx_now.trees.clone();
            let _ = tokio::task::spawn_blocking(move || trees.remove_thread_files(&record)).await;
        }
        drop(ctx_now);
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
        self.rx.recv().await.map(stamped)
    }

    /// Every event until the end (for tests and batch use).
    pub async fn collect(mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next_event().await {
            events.push(event);
        }
        events
    }
}

impl futures_util::Stream for RunStream {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.rx.poll_recv(cx).map(|event| event.map(stamped))
    }
}

/// `event` with its `timestamp` (milliseconds since the Unix epoch, when it reaches its run's
/// stream), unless it has one: every event a client gets says when it was sent, as AG-UI
/// allows.
fn stamped(mut event: Event) -> Event {
    let base = event.base_mut();
    if base.timestamp.is_none() {
        base.timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok());
    }
    event
}
