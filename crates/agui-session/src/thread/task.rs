//! The task that owns a live thread: its state, its main loop, its timers and its exit.
//!
//! The loop waits on four things and handles one at a time: a command from the agent (a run,
//! a connect, a stop, a hibernation request, shutdown), a request from the harness side (a
//! callback's events or parked request), the next harness event of the open conversation,
//! and the next deadline (hibernation, session and park timeouts, a stalled turn, a run
//! waiting for a busy thread). After each, [`Task::settle`] ends or advances the run in
//! flight: a turn that ended, a turn that can do nothing more without the client, a prompt
//! waiting for the conversation. Runs ([`runs`]) and the harness side ([`harness`]) are in
//! their own files.

mod harness;
mod placement;
mod runs;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agui_translate::{StepFailure, ToolCallIds};
use agui_types::{Event, RunAgentInput};
use harness_client::ConversationEvent;
use harness_proto::lh::UsageMetadata;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::Instrument as _;

use super::conversation::Conversation;
use super::output::{ModelLabel, Output, RunChannel};
use super::parking::Parking;
use super::shared::Shared;
use super::{Command, Request, ThreadHandle, ThreadLink, ThreadStatus};
use crate::agent::AgentInner;
use crate::contract::Contract;
use crate::error::RunFailure;
use crate::lease::LeaseDenied;
use crate::owner::Owner;
use crate::prompt::Prompt;
use crate::store::{ForwardedIds, PendingTool, ThreadRecord, UserSteps};
use crate::trees::Place;

/// What a thread brings into its place when it next opens.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Moving {
    /// Its workspace from before places existed (`<workspace_root>/<hash>`).
    Legacy(PathBuf),
    /// Its place in the tree of its earlier owner (the local owner, before identities).
    From(Place, Owner),
}

/// Commands queued for a thread before its task takes them.
const COMMAND_QUEUE: usize = 64;

/// How long a stopped turn may take to stop before its harness process is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How often a running turn's tree is measured against the disk cap.
const DISK_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Starts the task of `thread_id` (it loads the thread's record itself).
pub(crate) fn spawn(agent: &Arc<AgentInner>, thread_id: &str, generation: u64) -> ThreadHandle {
    let (commands_tx, commands) = mpsc::channel(COMMAND_QUEUE);
    let (requests_tx, requests) = mpsc::unbounded_channel();
    let status = Arc::new(ThreadStatus::new());
    let shared = Arc::new(Shared::default());
    let link = ThreadLink {
        thread_id: Arc::from(thread_id),
        requests: requests_tx,
        shared: shared.clone(),
        tool_call_ids: ToolCallIds::new(),
    };
    let span = tracing::info_span!(
        "thread",
        thread_id = %thread_id,
        agent = %agent.options.name
    );
    let task = Task {
        id: thread_id.to_owned(),
        agent: agent.clone(),
        status: status.clone(),
        generation,
        link,
        commands,
        requests,
        span: span.clone(),
        conversation: Conversation::Closed,
        down: false,
        conversation_id: uuid::Uuid::new_v4().simple().to_string(),
        known: false,
        owner: None,
        place: None,
        moving: None,
        forwarded: ForwardedIds::default(),
        user_steps: UserSteps::default(),
        restart_pending: Vec::new(),
        usage: None,
        harness_lost: None,
        lost: None,
        history_loaded: true,
        parking: Parking::default(),
        output: Output::new(
            thread_id.to_owned(),
            shared,
            agent.options.client_buffer_events,
        ),
        run: None,
        waiting: VecDeque::new(),
        unreported: None,
        last_failure: None,
        pending_echo: None,
        last_activity: Instant::now(),
        last_progress: Instant::now(),
        stopping: None,
        turn_failure: None,
        closing: false,
        shutdown_done: None,
        lease: if agent.leases.is_some() {
            Lease::Missing
        } else {
            Lease::NotNeeded
        },
        disk: DiskWatch {
            at_turn_start: None,
            checked: Instant::now(),
        },
    };
    tokio::spawn(task.run().instrument(span));
    ThreadHandle {
        commands: commands_tx,
        status,
        generation,
    }
}

/// What the loop does after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// The thread's lease, when replicas share the save dir (see `crate::lease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lease {
    /// The agent has no leases: it alone owns its save dir.
    NotNeeded,
    /// Not taken yet (or refused): the thread's record is not read before it is.
    Missing,
    /// Held until `valid_until` unless renewed; renewed from `renew_at`.
    Held {
        renew_at: Instant,
        valid_until: Instant,
    },
    /// Lost to another replica while held: the task writes nothing more and ends.
    Lost,
}

/// The run that drives the thread now (its prompt is the next to send).
struct ActiveRun {
    run_id: String,
    /// The span of its log lines (the thread's, with the run id).
    span: tracing::Span,
    /// Its client's stream, to notice the client leaving while the thread is quiet.
    events: mpsc::Sender<Event>,
    /// The user message to send once no turn is in flight.
    prompt: Option<Prompt>,
    /// Tool messages whose results travel in the prompt (recorded as forwarded with it).
    consumed: Vec<String>,
    /// The client tools the conversation must have.
    contract: Contract,
    /// Neither an answer nor a new message: it only restates what waits.
    bare: bool,
}

/// A run waiting for the thread's current run to end.
struct WaitingRun {
    input: RunAgentInput,
    events: RunChannel,
    deadline: Instant,
}

/// One live thread.
pub(super) struct Task {
    id: String,
    agent: Arc<AgentInner>,
    status: Arc<ThreadStatus>,
    generation: u64,
    link: ThreadLink,
    commands: mpsc::Receiver<Command>,
    requests: mpsc::UnboundedReceiver<Request>,
    span: tracing::Span,

    conversation: Conversation,
    /// The open conversation's connection is gone (it is re-attached on the next run).
    down: bool,
    conversation_id: String,
    /// The harness has this conversation (so it is resumed, never silently recreated).
    known: bool,
    /// Whom the thread belongs to (its first run or connect says, or its record).
    owner: Option<Owner>,
    /// Where it works (allocated when its first conversation opens).
    place: Option<Place>,
    /// The workspace of a thread recorded before places existed, or of an earlier owner's
    /// tree: what is moved into its place when it next opens.
    moving: Option<Moving>,
    forwarded: ForwardedIds,
    user_steps: UserSteps,
    /// Frontend tool calls that were parked when the server last stopped.
    restart_pending: Vec<PendingTool>,
    /// The conversation's cumulative usage at the last report.
    usage: Option<UsageMetadata>,
    /// Why the thread's harness died, for the warning of the next open.
    harness_lost: Option<String>,
    /// The conversation could not be resumed; the next run reports it.
    lost: Option<RunFailure>,
    /// The message log holds the thread's messages (false after a cold start until the
    /// history is rebuilt from the harness).
    history_loaded: bool,

    parking: Parking,
    output: Output,
    run: Option<ActiveRun>,
    waiting: VecDeque<WaitingRun>,
    /// A failure of a turn no run watched, for the next run.
    unreported: Option<RunFailure>,
    /// The last failure a step of the turn reported (gives a turn error its HTTP code).
    last_failure: Option<StepFailure>,
    /// The message id of the prompt whose echo step is awaited.
    pending_echo: Option<String>,
    last_activity: Instant,
    /// The last time the harness sent anything.
    last_progress: Instant,
    /// A stop (or a stall) was requested at this time; the turn is being halted.
    stopping: Option<Instant>,
    /// The failure the runs watching the current turn end with (it failed, or stalled and
    /// was halted).
    turn_failure: Option<RunFailure>,
    closing: bool,
    shutdown_done: Option<oneshot::Sender<()>>,
    lease: Lease,
    /// The disk the thread's tree used when the turn began, and when it was last measured.
    disk: DiskWatch,
}

/// A running turn's tree measured against the disk cap (`workspace_max_bytes`): a turn that
/// grows it past the cap is stopped; one that shrinks it (cleaning up) is not.
#[derive(Debug, Clone, Copy)]
struct DiskWatch {
    at_turn_start: Option<u64>,
    checked: Instant,
}

impl Task {
    async fn run(mut self) {
        if self.lease == Lease::NotNeeded {
            self.load().await;
        }
        loop {
            // Every line logged while a run drives the thread carries its run id.
            let span = self
                .run
                .as_ref()
                .map_or_else(|| self.span.clone(), |r| r.span.clone());
            if self.iterate().instrument(span).await == Flow::Exit {
                break;
            }
        }
        self.exit().await;
    }

    /// Waits for the next thing to happen and handles it.
    async fn iterate(&mut self) -> Flow {
        {
            // Renewed here as well as on its timer: a harness streaming without pause would
            // keep the timer branch below from ever being chosen.
            if self.renew_lease(Instant::now()).await == Flow::Exit {
                return Flow::Exit;
            }
            self.publish_status();
            let deadline = self.next_deadline();
            let poll_harness = self.conversation.is_open() && !self.down;
            let watch_client = self
                .run
                .as_ref()
                .is_some_and(|r| self.output.is_attached(&r.run_id));
            let flow = tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => Flow::Exit,
                },
                Some(request) = self.requests.recv() => {
                    self.request(request);
                    Flow::Continue
                }
                event = next_event(&mut self.conversation), if poll_harness => {
                    self.harness_event(event).await;
                    Flow::Continue
                }
                () = run_client_left(self.run.as_ref().filter(|_| watch_client)) => {
                    self.output.prune();
                    Flow::Continue
                }
                () = tokio::time::sleep_until(deadline) => self.tick().await,
            };
            if flow == Flow::Exit {
                return Flow::Exit;
            }
            self.settle().await;
            Flow::Continue
        }
    }

    /// Takes the thread's record from the store, if it has one.
    async fn load(&mut self) {
        let Some(record) = self.agent.records.get(&self.id).await else {
            return;
        };
        tracing::info!(conversation_id = %record.conversation_id, "thread returned; resuming its conversation");
        self.conversation_id = record.conversation_id;
        self.owner = record.owner;
        match record.place {
            Some(place) => self.place = Some(place),
            None if !record.workspace.as_os_str().is_empty() => {
                self.moving = Some(Moving::Legacy(record.workspace));
            }
            None => {}
        }
        self.known = true;
        self.forwarded = record.forwarded;
        self.user_steps = record.user_steps;
        self.restart_pending = record.pending_frontend_tools;
        self.history_loaded = false;
        if record.turn_in_flight && self.restart_pending.is_empty() {
            // The server that drove the turn stopped (crashed, or a replica died) before it
            // ended. It is not driven again: the model would get the same message twice and
            // its commands would run twice. The next run says so.
            tracing::warn!("the turn in flight when this thread was last served was lost");
            self.unreported = Some(RunFailure::new(
                crate::RunErrorCode::TurnInterrupted,
                "The server that was running this thread's last turn stopped before the turn ended, so the turn was lost. The conversation is kept up to that point; send your message again to continue.",
            ));
        }
    }

    /// Takes the thread's lease if the agent has leases and the task does not hold it yet,
    /// then reads the thread's record (which the previous holder wrote before letting go).
    /// A lease held elsewhere is waited for as a busy thread is (`busy_thread_wait`): a dead
    /// replica's lease expires within its lifetime, so its threads' next runs only take longer.
    pub(super) async fn ensure_lease(&mut self) -> Result<(), RunFailure> {
        if self.lease != Lease::Missing {
            return Ok(());
        }
        let wait = match self.agent.options.concurrent_runs {
            crate::options::ConcurrentRuns::Wait(limit) => limit,
            crate::options::ConcurrentRuns::Refuse => Duration::ZERO,
        };
        let deadline = Instant::now() + wait;
        loop {
            match self.agent.acquire_lease(&self.id).await {
                None => return Ok(()),
                Some(Ok(valid_for)) => {
                    tracing::info!(
                        valid_for_secs = valid_for.as_secs(),
                        "took the thread's lease"
                    );
                    self.lease = self.held_for(valid_for);
                    self.load().await;
                    return Ok(());
                }
                Some(Err(denied)) => {
                    let pause = match &denied {
                        LeaseDenied::Held { retry_after, .. } => {
                            (*retry_after).clamp(Duration::from_millis(100), Duration::from_secs(1))
                        }
                        LeaseDenied::Unavailable(_) => Duration::from_secs(1),
                    };
                    if Instant::now() + pause > deadline {
                        tracing::info!(%denied, "the thread's lease is not ours");
                        return Err(elsewhere(&denied));
                    }
                    tracing::debug!(%denied, "waiting for the thread's lease");
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// A lease just granted for `valid_for`.
    fn held_for(&self, valid_for: Duration) -> Lease {
        let now = Instant::now();
        let every = self
            .agent
            .leases
            .as_ref()
            .map_or(valid_for / 3, |l| l.renew_every());
        Lease::Held {
            renew_at: now + every.min(valid_for / 2),
            valid_until: now + valid_for,
        }
    }

    /// Renews the lease when it is due; `Exit` when it was lost.
    async fn renew_lease(&mut self, now: Instant) -> Flow {
        let Lease::Held {
            renew_at,
            valid_until,
        } = self.lease
        else {
            return Flow::Continue;
        };
        if now < renew_at {
            return Flow::Continue;
        }
        match self.agent.acquire_lease(&self.id).await {
            None => Flow::Continue,
            Some(Ok(valid_for)) => {
                self.lease = self.held_for(valid_for);
                Flow::Continue
            }
            Some(Err(LeaseDenied::Unavailable(why))) if Instant::now() < valid_until => {
                tracing::warn!(%why, "could not renew the thread's lease; retrying");
                self.lease = Lease::Held {
                    renew_at: Instant::now() + Duration::from_secs(1),
                    valid_until,
                };
                Flow::Continue
            }
            Some(Err(denied)) => {
                self.lose_lease(&denied).await;
                Flow::Exit
            }
        }
    }

    /// The lease is gone (expired while it could not be renewed, or taken): another replica
    /// may drive the thread now, so this task stops at once and writes nothing more.
    async fn lose_lease(&mut self, denied: &LeaseDenied) {
        tracing::error!(%denied, "lost the thread's lease; stopping the thread here");
        self.lease = Lease::Lost;
        self.closing = true;
        let failure = RunFailure::new(
            crate::RunErrorCode::LeaseLost,
            "This server lost the right to run this thread (another replica may have taken it over), so the turn was stopped. Send your message again.",
        )
        .with_detail(denied);
        self.finish(Err(failure.clone())).await;
        self.parking.close_all();
        for waiting in std::mem::take(&mut self.waiting) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
        // Its harness must not go on with a conversation another replica now drives.
        let own_process = self.agent.backend.0.isolation() == crate::Isolation::Thread;
        self.conversation.hand_over(own_process).await;
    }

    async fn command(&mut self, command: Command) -> Flow {
        self.touch();
        match command {
            Command::Run {
                input,
                events,
                owner,
            } => self.start_run(input, events, owner).await,
            Command::Connect {
                input,
                events,
                owner,
            } => self.connect(input, events, owner).await,
            Command::Stop { reply } => {
                let stopped = self.stop();
                let _ = reply.send(stopped);
            }
            Command::Delete { owner, reply } => {
                let deleted = self.delete(&owner).await;
                let _ = reply.send(deleted);
                if deleted {
                    return Flow::Exit;
                }
            }
            Command::Hibernate => {
                if self.is_idle_live() {
                    tracing::info!("hibernating an idle thread to make room");
                    if self.lease != Lease::NotNeeded {
                        // With leases, a hibernated thread gives its lease up and its task
                        // ends (closing the conversation): another replica may serve it next.
                        return Flow::Exit;
                    }
                    self.conversation.close().await;
                    self.down = false;
                }
            }
            Command::Shutdown { done } => {
                self.shutdown_done = Some(done);
                self.shut_down().await;
                return Flow::Exit;
            }
        }
        Flow::Continue
    }

    /// Deletes the thread if it is `owner`'s: its runs end `cancelled`, what is parked is
    /// released, its conversation closes (its own process stops), then its record and files
    /// go. The task ends after.
    async fn delete(&mut self, owner: &Owner) -> bool {
        if let Err(failure) = self.admit(owner).await {
            tracing::info!(message = %failure.message, "refused to delete the thread");
            return false;
        }
        self.closing = true;
        let failure = RunFailure::new(crate::RunErrorCode::Cancelled, "The thread was deleted.");
        self.finish(Err(failure.clone())).await;
        self.parking.close_all();
        for waiting in std::mem::take(&mut self.waiting) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
        let own_process = self.agent.backend.0.isolation() == crate::Isolation::Thread;
        self.conversation.hand_over(own_process).await;
        let record = ThreadRecord {
            conversation_id: self.conversation_id.clone(),
            owner: self.owner.clone(),
            place: self.place.clone(),
            workspace: match &self.moving {
                Some(Moving::Legacy(workspace)) => workspace.clone(),
                _ => PathBuf::new(),
            },
            ..ThreadRecord::default()
        };
        self.agent.records.remove(&self.id).await;
        let trees = self.agent.trees.clone();
        let _ = tokio::task::spawn_blocking(move || trees.remove_thread_files(&record)).await;
        tracing::info!("the thread was deleted with its files");
        true
    }

    /// Ends everything for a server shutdown: parked requests fail, runs end with
    /// `RUN_ERROR`, the conversation closes so the harness checkpoints it.
    async fn shut_down(&mut self) {
        self.closing = true;
        let failure = RunFailure::new(
            crate::RunErrorCode::Cancelled,
            "The server is shutting down; the turn was interrupted.",
        );
        // Ends the runs and persists the thread with what the client still owes, so a result
        // arriving after a restart is not lost; only then are the parked requests released.
        self.finish(Err(failure.clone())).await;
        let released = self.parking.close_all();
        for waiting in std::mem::take(&mut self.waiting) {
            self.reject(&waiting.input, waiting.events, failure.clone());
        }
        if matches!(self.lease, Lease::Held { .. }) {
            // The lease is given up next: the harness goes first.
            let own_process = self.agent.backend.0.isolation() == crate::Isolation::Thread;
            self.conversation.hand_over(own_process).await;
        } else {
            self.conversation.close().await;
        }
        tracing::info!(released, "thread closed for shutdown");
    }

    /// The next deadline of the thread's timers.
    fn next_deadline(&self) -> Instant {
        let options = &self.agent.options;
        let far = Instant::now() + Duration::from_secs(24 * 60 * 60);
        let mut deadline = far;
        let mut at = |t: Instant| deadline = deadline.min(t);
        for waiting in &self.waiting {
            at(waiting.deadline);
        }
        if let Some(since) = self.stopping {
            at(since + STOP_GRACE);
        }
        if let Lease::Held { renew_at, .. } = self.lease {
            at(renew_at);
        }
        let turn = self.conversation.turn().is_some();
        let parked = self.status.is_parked();
        if turn && self.stopping.is_none() {
            at(self.last_progress + options.turn_stall_timeout);
            if options.workspace_max_bytes.is_some() {
                at(self.disk.checked + DISK_CHECK_EVERY);
            }
        }
        if self.run.is_none() && !self.output.has_subscribers() {
            if turn || parked {
                at(self.last_activity + options.parked_timeout);
            } else {
                at(self.last_activity + options.session_timeout);
                if self.conversation.is_open() {
                    at(self.last_activity + options.hibernate_after);
                }
            }
        }
        deadline
    }

    async fn tick(&mut self) -> Flow {
        let now = Instant::now();
        if self.renew_lease(now).await == Flow::Exit {
            return Flow::Exit;
        }
        let options = self.agent.options.clone();
        while let Some(i) = self.waiting.iter().position(|w| w.deadline <= now) {
            let Some(waiting) = self.waiting.remove(i) else {
                break;
            };
            self.reject(&waiting.input, waiting.events, busy());
        }
        if let Some(since) = self.stopping
            && now >= since + STOP_GRACE
            && let Some(open) = self.conversation.as_open()
        {
            tracing::warn!("the harness did not stop the turn in time; killing its process");
            open.handle.kill_process();
            self.stopping = Some(now);
        }
        let turn = self.conversation.turn().is_some();
        if turn && self.stopping.is_none() && now >= self.disk.checked + DISK_CHECK_EVERY {
            self.check_disk();
        }
        if turn
            && self.stopping.is_none()
            && now >= self.last_progress + options.turn_stall_timeout
            && !self.waits_for_client()
        {
            tracing::warn!(
                stalled_secs = options.turn_stall_timeout.as_secs(),
                "the harness made no progress on the turn; halting it"
            );
            self.turn_failure = Some(RunFailure::new(
                crate::RunErrorCode::TurnStalled,
                format!(
                    "The agent made no progress for {} s, so the turn was stopped (turn_stall_timeout_secs). The conversation is kept; send a message to continue.",
                    options.turn_stall_timeout.as_secs()
                ),
            ));
            self.halt();
        }
        if self.run.is_some() || self.output.has_subscribers() {
            return Flow::Continue;
        }
        let idle = now.saturating_duration_since(self.last_activity);
        let parked = self.parking.is_parked();
        if turn || parked {
            if idle >= options.parked_timeout {
                tracing::info!(parked, "giving up on a thread waiting for its client");
                self.parking.close_all();
                self.conversation.close().await;
                return Flow::Exit;
            }
            return Flow::Continue;
        }
        if idle >= options.session_timeout {
            tracing::info!("closing an idle thread");
            return Flow::Exit;
        }
        if idle >= options.hibernate_after && self.lease != Lease::NotNeeded {
            // With leases, hibernating ends the task and gives the lease up.
            tracing::debug!("hibernating an idle thread and giving its lease up");
            return Flow::Exit;
        }
        if idle >= options.hibernate_after && self.conversation.is_open() {
            tracing::debug!("hibernating an idle thread");
            self.conversation.close().await;
            self.down = false;
        }
        Flow::Continue
    }

    /// Persists the thread and leaves the agent's registry.
    async fn exit(mut self) {
        if matches!(self.lease, Lease::Held { .. }) {
            let own_process = self.agent.backend.0.isolation() == crate::Isolation::Thread;
            self.conversation.hand_over(own_process).await;
        } else {
            self.conversation.close().await;
        }
        if !self.closing {
            self.persist();
        }
        if matches!(self.lease, Lease::Held { .. }) {
            self.agent.release_lease(&self.id).await;
            tracing::info!("gave the thread's lease up");
        }
        self.agent.forget_thread(&self.id, self.generation);
        if let Some(done) = self.shutdown_done.take() {
            let _ = done.send(());
        }
        // Commands that reached this task after its loop ended (while it closed down) go to
        // the thread's next task rather than being dropped, which would end their runs with
        // no event at all.
        self.commands.close();
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Run { .. } | Command::Connect { .. } => {
                    Box::pin(self.agent.send(&self.id, command)).await;
                }
                Command::Stop { reply } => {
                    let _ = reply.send(false);
                }
                Command::Delete { .. } => {
                    Box::pin(self.agent.send(&self.id, command)).await;
                }
                Command::Shutdown { done } => {
                    let _ = done.send(());
                }
                Command::Hibernate => {}
            }
        }
        tracing::debug!("thread task ended");
    }

    /// Hands the thread's record to the store (written behind the run path).
    fn persist(&mut self) {
        if self.lease == Lease::Lost {
            // Another replica may be writing this record now.
            return;
        }
        let record = ThreadRecord {
            // A shutdown ends its turn and says so; only a server that stops without one
            // leaves this set, for the next one to report.
            turn_in_flight: self.conversation.turn().is_some() && !self.closing,
            conversation_id: self.conversation_id.clone(),
            forwarded: self.forwarded.clone(),
            pending_frontend_tools: self.parking.pending_tool_calls(),
            user_steps: self.user_steps.clone(),
            owner: self.owner.clone(),
            place: self.place.clone(),
            workspace: match &self.moving {
                Some(Moving::Legacy(workspace)) => workspace.clone(),
                _ => PathBuf::new(),
            },
            ..ThreadRecord::default()
        };
        self.agent.records.put(&self.id, record);
    }

    fn touch(&mut self) {
        self.last_activity = Instant::now();
        self.status.touch();
    }

    fn publish_status(&mut self) {
        let parked = self.parking.is_parked();
        self.status.parked.store(parked, Ordering::Relaxed);
        let idle_live = self.is_idle_live();
        self.status.idle_live.store(idle_live, Ordering::Relaxed);
    }

    /// Open conversation, no turn, no run, nothing parked: it can be closed at once.
    fn is_idle_live(&mut self) -> bool {
        self.conversation.is_open()
            && self.conversation.turn().is_none()
            && self.run.is_none()
            && !self.output.has_subscribers()
            && !self.parking.is_parked()
    }

    /// Whether the turn waits only for the client (nothing to stall on).
    fn waits_for_client(&mut self) -> bool {
        let blocked = self.parking.blocked();
        match self.conversation.turn() {
            Some(turn) => turn.activity().settled(&blocked),
            None => !blocked.is_empty(),
        }
    }

    /// A turn begins: the tree's use now is its baseline (and is measured afresh).
    fn start_disk_watch(&mut self) {
        let Some(place) = &self.place else { return };
        if self.agent.options.workspace_max_bytes.is_none() {
            return;
        }
        self.disk = DiskWatch {
            at_turn_start: self.agent.trees.usage(&place.tree),
            checked: Instant::now(),
        };
        self.agent.trees.measure(&place.tree);
    }

    /// Stops the turn when it grew the thread's tree past the disk cap.
    fn check_disk(&mut self) {
        self.disk.checked = Instant::now();
        let (Some(place), Some(cap)) = (&self.place, self.agent.options.workspace_max_bytes) else {
            return;
        };
        let used = self.agent.trees.usage(&place.tree);
        self.agent.trees.measure(&place.tree);
        let Some(used) = used else { return };
        let baseline = *self.disk.at_turn_start.get_or_insert(used);
        if used > cap && used > baseline {
            tracing::warn!(
                used,
                cap,
                "the turn filled the owner's disk quota; stopping it"
            );
            self.turn_failure = Some(RunFailure::new(
                crate::RunErrorCode::WorkspaceFull,
                format!(
                    "The workspace uses {} MiB, more than the {} MiB it may (workspace_max_mb), so the turn was stopped. Ask the agent to delete files to continue.",
                    used >> 20,
                    cap >> 20
                ),
            ));
            self.halt();
        }
    }

    /// Asks the harness to stop the turn in flight.
    fn halt(&mut self) {
        if let Some(open) = self.conversation.as_open()
            && !(open.handle.canceller())()
        {
            tracing::warn!("could not send the halt request");
        }
        self.stopping = Some(Instant::now());
    }

    /// The provider and model runs report their usage under.
    fn model_label(&self) -> ModelLabel {
        let provider = match self.agent.options.endpoint {
            harness_client::ModelEndpoint::Gemini { .. }
            | harness_client::ModelEndpoint::Vertex { .. } => Some("google".to_owned()),
            harness_client::ModelEndpoint::OpenAiCompatible { .. } => None,
        };
        ModelLabel {
            provider,
            model: self.agent.options.model.clone(),
        }
    }
}

/// The next event of an open conversation (never resolves when there is none).
async fn next_event(conversation: &mut Conversation) -> Option<ConversationEvent> {
    match conversation.as_open() {
        Some(open) => open.handle.next_event().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the driving run's client is gone (never when there is none).
async fn run_client_left(run: Option<&ActiveRun>) {
    match run {
        Some(run) if !run.events.is_closed() => run.events.closed().await,
        _ => std::future::pending().await,
    }
}

/// The failure of a run on a thread whose lease is not ours.
fn elsewhere(denied: &LeaseDenied) -> RunFailure {
    let message = match denied {
        LeaseDenied::Held { retry_after, .. } => format!(
            "Another replica of this server is running this thread; retry in {} s.",
            retry_after.as_secs().max(1)
        ),
        LeaseDenied::Unavailable(_) => {
            "This server could not check which replica runs this thread; retry shortly.".to_owned()
        }
    };
    RunFailure::new(crate::RunErrorCode::ThreadElsewhere, message).with_detail(denied)
}

fn busy() -> RunFailure {
    RunFailure::new(
        crate::RunErrorCode::ThreadBusy,
        "Another run on this thread is still in progress; retry when it has finished.",
    )
}
