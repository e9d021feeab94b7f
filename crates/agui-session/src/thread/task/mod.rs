//! The task that owns a live thread, as an actor: its loop only decides.
//!
//! It waits on its mailbox (commands from the agent, requests from the harness side), the
//! open conversation's events, the children it started (taking the lease; opening the
//! conversation: a spare, a live slot, a boot and its init) and its next deadline (hibernation,
//! session and park timeouts, a stalled turn, a halt's grace, a run waiting for a busy thread),
//! and handles one at a time. Nothing it waits on holds the mailbox: every wait that can last is
//! a child task whose outcome comes back into the loop, so a stop, a connect or a shutdown is
//! answered while a thread boots. After each step, [`Task::settle`] ends or advances the run in
//! flight.
//!
//! Runs ([`runs`]), the harness side ([`harness`]), the lease ([`lease`]), opening the
//! conversation ([`opening`], [`placement`]) and the one way a task ends ([`teardown`]) have
//! their own files; the state they share is typed in [`state`].

mod fork;
mod harness;
mod lease;
mod opening;
mod placement;
mod runs;
mod state;
mod teardown;
mod timers;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use harness_client::ConversationEvent;
use harness_proto::lh::UsageMetadata;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::command::Command;
use super::context::ThreadContext;
use super::conversation::{BootFailure, Conversation, Link, OpeningStage};
use super::link::{Request, ThreadLink};
use super::output::{ModelLabel, Output};
use super::parking::Parking;
use super::shared::Shared;
use super::status::{ThreadHandle, ThreadStatus};
use crate::backend::ConversationHandle;
use crate::error::{RunErrorCode, RunFailure};
use crate::store::ThreadRecord;
use state::{
    ActiveRun, DiskWatch, Exit, Flow, Harnessed, Lease, LeaseChild, Moving, Owed, Verdict,
    WaitingConnect, WaitingRun,
};

/// Commands queued for a thread before its task takes them.
const COMMAND_QUEUE: usize = 64;

/// How long a stopped turn may take to stop before its harness process is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How often a running turn's tree is measured against the disk cap.
const DISK_CHECK_EVERY: Duration = Duration::from_secs(5);

/// How often a turn samples the free space of its harness's storage (on the harness's events).
const ROOM_SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Starts the task of `thread_id` (it loads the thread's record itself).
pub(crate) fn spawn(ctx: &Arc<ThreadContext>, thread_id: &str, generation: u64) -> ThreadHandle {
    let (commands_tx, commands) = mpsc::channel(COMMAND_QUEUE);
    let (requests_tx, requests) = mpsc::unbounded_channel();
    let status = Arc::new(ThreadStatus::new());
    let shared = Arc::new(Shared::default());
    let link = ThreadLink::new(thread_id, requests_tx, shared.clone());
    let span = tracing::info_span!(
        "thread",
        thread_id = %thread_id,
        agent = %ctx.options.name
    );
    let task = Task {
        id: thread_id.to_owned(),
        ctx: ctx.clone(),
        status: status.clone(),
        generation,
        link,
        commands,
        requests,
        span: span.clone(),
        conversation: Conversation::Closed,
        record: ThreadRecord {
            conversation_id: uuid::Uuid::new_v4().simple().to_string(),
            ..ThreadRecord::default()
        },
        harnessed: Harnessed::New,
        opened: false,
        fork_from: None,
        moving: None,
        usage: None,
        parking: Parking::default(),
        output: Output::new(
            thread_id.to_owned(),
            shared,
            ctx.options.client_buffer_events,
        ),
        run: None,
        waiting: VecDeque::new(),
        history_waiters: Vec::new(),
        owed: None,
        last_activity: Instant::now(),
        lease: if ctx.leases.is_some() {
            Lease::Missing {
                taking: None,
                queue: Vec::new(),
            }
        } else {
            Lease::NotNeeded
        },
        disk: DiskWatch {
            at_turn_start: None,
            stops_at_turn_start: 0,
            storage_full_at_turn_start: 0,
            saw_no_room: false,
            room_sampled: Instant::now(),
            checked: Instant::now(),
        },
        handed_back: Vec::new(),
    };
    tokio::spawn(task.run().instrument(span));
    ThreadHandle {
        commands: commands_tx,
        status,
        generation,
    }
}

/// One live thread.
pub(super) struct Task {
    id: String,
    ctx: Arc<ThreadContext>,
    status: Arc<ThreadStatus>,
    generation: u64,
    link: ThreadLink,
    commands: mpsc::Receiver<Command>,
    requests: mpsc::UnboundedReceiver<Request>,
    span: tracing::Span,

    conversation: Conversation,
    /// What is persisted of the thread, as one value: loaded from the store, written back
    /// (`persist_as`) and torn down whole. Its `pendingFrontendTools` here are only the calls
    /// an earlier server left pending (the live ones are the parking's, added on write), and
    /// `awaitingEcho` is the message whose echo step is awaited.
    record: ThreadRecord,
    harnessed: Harnessed,
    /// The harness opened the conversation `conversation_id` for this task (so it has it,
    /// even if no message was sent yet).
    opened: bool,
    /// The `initial_trajectory` of the conversation a fork opens next (`fork.rs`).
    fork_from: Option<Vec<u8>>,
    /// The workspace of a thread recorded before places existed, or of an earlier owner's
    /// tree: what is moved into its place when it next opens.
    moving: Option<Moving>,
    /// The conversation's cumulative usage at the last report.
    usage: Option<UsageMetadata>,

    parking: Parking,
    output: Output,
    run: Option<ActiveRun>,
    waiting: VecDeque<WaitingRun>,
    /// Connects waiting for the open that brings the thread's history back.
    history_waiters: Vec<WaitingConnect>,
    owed: Option<Owed>,
    last_activity: Instant,
    lease: Lease,
    /// The disk the thread's tree used when the turn began, and when it was last measured.
    disk: DiskWatch,
    /// Commands taken but left unserved when the task decided to end, for its successor.
    handed_back: Vec<Command>,
}

/// What changed on the conversation's side.
// A change lives for one step of the loop; boxing every harness event to shrink it would add
// an allocation to the hot path.
#[allow(clippy::large_enum_variant)]
enum Change {
    /// The open conversation's next event (`None`: its stream ended).
    Event(Option<ConversationEvent>),
    /// The spare the thread waited for is ready (or the wait gave up).
    SpareReady,
    /// A live slot for the conversation, or why there is none.
    Slot(Result<super::conversation::LiveSlot, RunFailure>),
    /// The child opening the conversation is done.
    Booted(Result<Box<dyn ConversationHandle>, BootFailure>),
    /// The child re-attaching the conversation is done (`None`: it panicked).
    Reattached(Option<super::conversation::Reattached>),
}

impl Task {
    async fn run(mut self) {
        if matches!(self.lease, Lease::NotNeeded) {
            self.load().await;
        }
        let exit = loop {
            // Every line logged while a run drives the thread carries its run id.
            let span = self
                .run
                .as_ref()
                .map_or_else(|| self.span.clone(), |r| r.span.clone());
            if let Flow::Exit(exit) = self.iterate().instrument(span).await {
                break exit;
            }
        };
        let span = self.span.clone();
        self.teardown(exit).instrument(span).await;
    }

    /// Waits for the next thing to happen and handles it.
    async fn iterate(&mut self) -> Flow {
        // Renewed here as well as on its timer: a harness streaming without pause would keep
        // the timer branch below from ever being chosen.
        self.renew_lease(Instant::now());
        if self.lease.is_wanted() && self.may_hand_over() {
            // Ending gives the lease up once the record is on disk; the replica that asked
            // takes it on its next try.
            tracing::info!(
                parked = self.parking.is_parked(),
                "handing the thread over to the replica that asked for it"
            );
            return Flow::Exit(Exit::Idle);
        }
        self.publish_status();
        let deadline = self.next_deadline();
        let watch_client = self
            .run
            .as_ref()
            .is_some_and(|r| self.output.is_attached(&r.run_id));
        let flow = tokio::select! {
            biased;
            command = self.commands.recv() => match command {
                Some(command) => self.command(command).await,
                None => Flow::Exit(Exit::Idle),
            },
            Some(request) = self.requests.recv() => {
                self.request(request);
                Flow::Continue
            }
            change = next_change(&mut self.conversation) => self.conversation_changed(change).await,
            child = self.lease.child_done() => match child {
                LeaseChild::Taken(taken) => self.lease_taken(taken).await,
                LeaseChild::Renewed(renewed) => self.lease_renewed(renewed),
            },
            () = run_client_left(self.run.as_ref().filter(|_| watch_client)) => {
                self.output.prune();
                Flow::Continue
            }
            () = tokio::time::sleep_until(deadline) => self.tick().await,
        };
        if let Flow::Exit(exit) = flow {
            return Flow::Exit(exit);
        }
        self.settle().await;
        Flow::Continue
    }

    /// Takes the thread's record from the store, if it has one.
    async fn load(&mut self) {
        let Some(record) = self.ctx.records.get(&self.id).await else {
            return;
        };
        tracing::info!(conversation_id = %record.conversation_id, "thread returned; resuming its conversation");
        if record.place.is_none() && !record.workspace.as_os_str().is_empty() {
            self.moving = Some(Moving::Legacy(record.workspace.clone()));
        }
        self.harnessed = if record.unsent {
            Harnessed::New
        } else {
            Harnessed::KnownUnread
        };
        let turn_in_flight = record.turn_in_flight;
        self.record = record;
        if turn_in_flight && self.record.pending_frontend_tools.is_empty() {
            // The server that drove the turn stopped (crashed, or a replica died) before it
            // ended. It is not driven again: the model would get the same message twice and
            // its commands would run twice. The next run says so.
            tracing::warn!("the turn in flight when this thread was last served was lost");
            // Its messages in the history are marked: those after its prompt's echo, known now
            // if it was recorded, else once the history is read.
            match (
                &self.record.awaiting_echo,
                self.record.user_steps.newest_step(),
            ) {
                (Some(_), _) => self.record.awaited_turn_lost = true,
                (None, Some(step)) => self.record.lost_turns.insert(step),
                (None, None) => {}
            }
            self.owed = Some(Owed::NextRun(RunFailure::new(
                RunErrorCode::TurnInterrupted,
                "The server that was running this thread's last turn stopped before the turn ended, so the turn was lost. The conversation is kept up to that point; send your message again to continue.",
            )));
        }
    }

    async fn command(&mut self, command: Command) -> Flow {
        self.touch();
        match command {
            Command::Run { .. }
            | Command::Connect { .. }
            | Command::Delete { .. }
            | Command::Update { .. }
            | Command::Place { .. }
                if !self.lease.is_ours() =>
            {
                self.await_lease(command);
            }
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
            Command::Delete { owner, reply } => match self.admit(&owner) {
                Ok(()) => return Flow::Exit(Exit::Deleted { reply }),
                Err(failure) => {
                    tracing::info!(message = %failure.message, "refused to delete the thread");
                    let _ = reply.send(false);
                }
            },
            Command::Update {
                owner,
                patch,
                reply,
            } => {
                let updated = if crate::threads::owned_by(&self.record, &owner) {
                    Some(self.update(patch).await)
                } else {
                    None
                };
                let _ = reply.send(updated);
            }
            Command::Place { owner, reply } => {
                let placed = self.place_for(&owner).await;
                let _ = reply.send(placed);
            }
            Command::Hibernate => return self.hibernate().await,
            Command::Shutdown { done } => return Flow::Exit(Exit::Shutdown { done }),
        }
        Flow::Continue
    }

    /// Closes the conversation of an idle thread to free its live slot; with leases, the task
    /// ends instead (giving its lease up), so another replica may serve the thread next.
    async fn hibernate(&mut self) -> Flow {
        if !self.is_idle_live() {
            return Flow::Continue;
        }
        tracing::info!("hibernating an idle thread to make room");
        if !matches!(self.lease, Lease::NotNeeded) {
            return Flow::Exit(Exit::Idle);
        }
        self.conversation.close_in_background();
        self.persist();
        Flow::Continue
    }

    /// Handles what changed on the conversation's side.
    async fn conversation_changed(&mut self, change: Change) -> Flow {
        match change {
            Change::Event(event) => self.harness_event(event).await,
            Change::SpareReady => self.spare_ready().await,
            Change::Slot(slot) => self.slot_taken(slot).await,
            Change::Booted(booted) => self.booted(booted).await,
            Change::Reattached(reattached) => self.reattached(reattached),
        }
        Flow::Continue
    }

    /// When the turn in flight, not halted yet, counts as stalled. The stall clock does not run
    /// while the turn waits for the client; callers ask that only once this has passed.
    fn stall_deadline(&self) -> Option<Instant> {
        self.conversation
            .turn()
            .filter(|turn| turn.halted_at().is_none())
            .map(|turn| turn.last_progress() + self.ctx.options.turn_stall_timeout)
    }

    /// Hands the thread's record to the store (written behind the run path), if the record is
    /// this task's to write; returns the version put (see [`RecordWriter::settled`]).
    ///
    /// [`RecordWriter::settled`]: crate::store::RecordWriter::settled
    fn persist(&mut self) -> Option<u64> {
        let turn_in_flight = self.conversation.turn().is_some();
        self.persist_as(turn_in_flight)
    }

    /// [`Task::persist`], saying whether a turn is in flight.
    fn persist_as(&mut self, turn_in_flight: bool) -> Option<u64> {
        let valid_until = match &self.lease {
            Lease::NotNeeded => None,
            Lease::Held { valid_until, .. } => Some(*valid_until),
            // Never read (its lease was never taken), or another replica may write it now.
            Lease::Missing { .. } | Lease::Lost => return None,
        };
        if self.record.created_at == 0 {
            self.record.created_at = crate::threads::model::now_unix();
        }
        self.record.state = self.state();
        if !matches!(self.harnessed, Harnessed::KnownUnread) {
            // Until a resumed conversation's history is read, the log is not the thread's.
            self.record.message_count =
                u32::try_from(self.output.log_mut().len()).unwrap_or(u32::MAX);
        }
        let record = ThreadRecord {
            turn_in_flight,
            // Calls an earlier server left pending stay recorded until answered, so their late
            // result is recognised on whichever replica the thread moves to next.
            pending_frontend_tools: self
                .parking
                .pending_tool_calls()
                .into_iter()
                .chain(self.record.pending_frontend_tools.iter().cloned())
                .collect(),
            workspace: self.legacy_workspace(),
            unsent: self.harnessed == Harnessed::New && !self.opened,
            ..self.record.clone()
        };
        Some(self.ctx.records.put(&self.id, record, valid_until))
    }

    /// The workspace of a thread recorded before places existed, until it is moved.
    fn legacy_workspace(&self) -> std::path::PathBuf {
        match &self.moving {
            Some(Moving::Legacy(workspace)) => workspace.clone(),
            _ => std::path::PathBuf::new(),
        }
    }

    fn touch(&mut self) {
        self.last_activity = Instant::now();
        self.record.active_at = crate::threads::model::now_unix();
        self.status.touch();
    }

    /// Where the thread stands, as its list shows it.
    fn state(&mut self) -> crate::threads::model::ThreadState {
        use crate::threads::model::ThreadState;
        if let Some(what) = self.parking.waiting_for() {
            ThreadState::Waiting(what)
        } else if self.conversation.turn().is_some() {
            ThreadState::Running
        } else if self.conversation.is_open() {
            ThreadState::Idle
        } else {
            ThreadState::Hibernated
        }
    }

    fn publish_status(&mut self) {
        let parked = self.parking.is_parked();
        let idle_live = self.is_idle_live();
        self.status.publish(parked, idle_live);
    }

    /// Open conversation, no turn, no run, nothing parked: it can be closed at once.
    fn is_idle_live(&mut self) -> bool {
        self.conversation.is_open()
            && self.conversation.turn().is_none()
            && !self.conversation.runs_background_tasks()
            && self.run.is_none()
            && !self.output.has_subscribers()
            && !self.parking.is_parked()
    }

    /// Whether the thread can go to another replica now: no run, none waiting, nobody
    /// following it, no background task, and either no turn or one that waits only for the
    /// client. A parked thread goes too: the replica that asked is where the proxy sends the
    /// client now, so its answer will arrive there (as a late result; see `teardown`), never
    /// here.
    fn may_hand_over(&mut self) -> bool {
        let idle = self.conversation.turn().is_none() && !self.parking.is_parked();
        self.waiting.is_empty()
            && !self.conversation.runs_background_tasks()
            && !self.is_watched()
            && (idle || (self.parking.is_parked() && self.waits_for_client()))
    }

    /// Whether a client waits on the thread: a run, a subscriber, a connect waiting for its
    /// history. A watched thread never times out.
    fn is_watched(&self) -> bool {
        self.run.is_some()
            || self.output.has_subscribers()
            || !self.history_waiters.is_empty()
            || self.lease.has_waiting_commands()
    }

    /// Whether the turn in flight is being halted.
    fn is_halting(&self) -> bool {
        self.conversation
            .turn()
            .is_some_and(|turn| turn.halted_at().is_some())
    }

    /// Whether the turn waits only for the client (nothing to stall on).
    fn waits_for_client(&mut self) -> bool {
        let blocked = self.parking.blocked();
        match self.conversation.turn() {
            Some(turn) => turn.activity().settled(&blocked),
            None => !blocked.is_empty(),
        }
    }

    /// The runs watching the turn end with `verdict` when it ends. A failure already owed to
    /// them stays (the first one is what went wrong); one owed to the next run is replaced,
    /// since runs watch now.
    fn owe_watchers(&mut self, verdict: Verdict) {
        match &self.owed {
            Some(Owed::Watchers(Verdict::Failed(_))) => {}
            Some(Owed::NextRun(earlier)) => {
                tracing::warn!(
                    code = earlier.code.as_str(),
                    "a failure no run was told of is replaced by the turn's"
                );
                self.owed = Some(Owed::Watchers(verdict));
            }
            _ => self.owed = Some(Owed::Watchers(verdict)),
        }
    }

    /// What the runs watching the turn are owed, taken.
    fn take_watchers_verdict(&mut self) -> Option<Verdict> {
        match self.owed.take() {
            Some(Owed::Watchers(verdict)) => Some(verdict),
            other => {
                self.owed = other;
                None
            }
        }
    }

    /// A turn begins: the tree's use now is its baseline (and is measured afresh), and so
    /// are the process's failed writes.
    fn start_disk_watch(&mut self) {
        self.disk.storage_full_at_turn_start = self.storage_full_writes();
        self.disk.saw_no_room = false;
        let Some(place) = &self.record.place else {
            return;
        };
        if self.ctx.options.workspace_max_bytes.is_none() {
            return;
        }
        self.disk = DiskWatch {
            at_turn_start: self.ctx.trees.usage(&place.tree).map(|u| u.bytes),
            stops_at_turn_start: self.disk_cap_stops(),
            checked: Instant::now(),
            ..self.disk
        };
        self.ctx.trees.measure(&place.tree);
    }

    /// Stops the turn when it grew the thread's tree past the disk cap.
    fn check_disk(&mut self) {
        self.disk.checked = Instant::now();
        let (Some(place), Some(cap)) = (&self.record.place, self.ctx.options.workspace_max_bytes)
        else {
            return;
        };
        let used = self.ctx.trees.usage(&place.tree);
        self.ctx.trees.measure(&place.tree);
        if self.disk_cap_stopped_commands() {
            self.owe_watchers(Verdict::Failed(workspace_full(cap, used.map(|u| u.bytes))));
            self.halt();
            return;
        }
        let Some(measured) = used else { return };
        let used = measured.bytes;
        let baseline = *self.disk.at_turn_start.get_or_insert(used);
        // A chain of directories too deep to measure counts as over the cap.
        if (used > cap || measured.too_deep) && used > baseline {
            tracing::warn!(
                used,
                cap,
                too_deep = measured.too_deep,
                "the turn filled the owner's disk quota; stopping it"
            );
            self.owe_watchers(Verdict::Failed(workspace_full(cap, Some(used))));
            self.halt();
        }
    }

    /// How many times the watcher of the thread's process stopped its commands at the disk cap.
    fn disk_cap_stops(&self) -> u64 {
        self.conversation
            .as_open_ref()
            .map_or(0, |open| open.handle.disk_cap_stops())
    }

    /// How many writes of the thread's process failed for want of room, as its log says.
    fn storage_full_writes(&self) -> u64 {
        self.conversation
            .as_open_ref()
            .map_or(0, |open| open.handle.storage_full_writes())
    }

    /// Whether the turn that just ended may not have been saved by the harness: during it, a
    /// write of its process failed for want of room or its storage's volume was seen with
    /// (almost) no room, or that volume has almost no room now. The harness answers even when
    /// it cannot save (it says nothing to its host, and not always in its log), and the soak
    /// saw a turn lost whose volume filled and emptied again before it ended: the run says so
    /// instead. The volume is sampled on the harness's events, which is when it writes. (The
    /// server's own writes failing is no sign: a lease renewal's failure reported after the
    /// volume had room again failed turns that began after it.)
    pub(super) fn turn_maybe_unsaved(&mut self) -> bool {
        self.disk.room_sampled = Instant::now() - ROOM_SAMPLE_EVERY;
        self.sample_storage_room();
        self.storage_full_writes() > self.disk.storage_full_at_turn_start || self.disk.saw_no_room
    }

    /// During a turn, reads the free space of the harness's storage (one `statvfs`, at most
    /// every [`ROOM_SAMPLE_EVERY`]), noting a volume with (almost) no room.
    pub(super) fn sample_storage_room(&mut self) {
        if self.disk.saw_no_room || self.disk.room_sampled.elapsed() < ROOM_SAMPLE_EVERY {
            return;
        }
        self.disk.room_sampled = Instant::now();
        let dir = self
            .ctx
            .trees
            .storage_root(self.record.place.as_ref().map(|p| &p.tree));
        if crate::store::free_bytes(&dir).is_some_and(|free| free < crate::store::ROOM_FOR_A_SAVE) {
            tracing::warn!("the harness's storage has no room left during a turn");
            self.disk.saw_no_room = true;
        }
    }

    /// Whether the process's watcher stopped commands at the disk cap since the turn began.
    pub(super) fn disk_cap_stopped_commands(&self) -> bool {
        self.ctx.options.workspace_max_bytes.is_some()
            && self.disk_cap_stops() > self.disk.stops_at_turn_start
    }

    /// Asks the harness to stop the turn in flight.
    fn halt(&mut self) {
        let Some(open) = self.conversation.as_open() else {
            return;
        };
        if !(open.handle.canceller())() {
            tracing::warn!("could not send the halt request");
        }
        if let Some(turn) = open.turn.as_mut() {
            turn.halting();
        }
    }

    /// The provider and model runs report their usage under.
    fn model_label(&self) -> ModelLabel {
        let provider = match self.ctx.options.endpoint {
            harness_client::ModelEndpoint::Gemini { .. }
            | harness_client::ModelEndpoint::Vertex { .. } => Some("google".to_owned()),
            harness_client::ModelEndpoint::OpenAiCompatible { .. } => None,
        };
        ModelLabel {
            provider,
            model: self.ctx.options.model.clone(),
        }
    }
}

/// The next change on the conversation's side: an event of the open, attached conversation,
/// or the outcome of the child opening it. Never resolves when there is neither.
async fn next_change(conversation: &mut Conversation) -> Change {
    match conversation {
        Conversation::Open(open) if open.link == Link::Attached => {
            Change::Event(open.handle.next_event().await)
        }
        Conversation::Opening(opening) => match &mut opening.stage {
            OpeningStage::Spare(wait) => {
                let _ = wait.await;
                Change::SpareReady
            }
            OpeningStage::Slot(slot) => Change::Slot(slot.await.unwrap_or_else(|e| {
                Err(RunFailure::new(
                    RunErrorCode::AgentError,
                    "Could not start the Antigravity conversation.",
                )
                .with_detail(e))
            })),
            OpeningStage::Reattach(reattach) => Change::Reattached(reattach.await.ok()),
            OpeningStage::Boot { boot, .. } => Change::Booted(boot.await.unwrap_or_else(|e| {
                Err(BootFailure::Failed(
                    RunFailure::new(
                        RunErrorCode::AgentError,
                        "Could not start the Antigravity conversation.",
                    )
                    .with_detail(e),
                ))
            })),
        },
        _ => std::future::pending().await,
    }
}

/// Resolves when the driving run's client is gone (never when there is none).
async fn run_client_left(run: Option<&ActiveRun>) {
    match run {
        Some(run) if !run.events.is_closed() => run.events.closed().await,
        _ => std::future::pending().await,
    }
}

fn busy() -> RunFailure {
    RunFailure::new(
        RunErrorCode::ThreadBusy,
        "Another run on this thread is still in progress; retry when it has finished.",
    )
}

fn shutting_down() -> RunFailure {
    RunFailure::new(RunErrorCode::Cancelled, "The server is shutting down.")
}

/// What a turn that filled the disk ends with.
/// The failure of a turn the harness may not have saved for want of room.
pub(super) fn turn_unsaved() -> RunFailure {
    RunFailure::new(
        RunErrorCode::StorageFull,
        "The server's storage is full: the agent's answer could not be saved, so it may be missing from the thread's history. Send your message again once there is room.",
    )
}

pub(super) fn workspace_full(cap: u64, used: Option<u64>) -> RunFailure {
    let uses = used.map_or_else(
        || "is past".to_owned(),
        |used| format!("uses {} MiB, more than", used >> 20),
    );
    RunFailure::new(
        RunErrorCode::WorkspaceFull,
        format!(
            "The workspace {uses} the {} MiB it may (workspace_max_mb), so the turn was stopped. Ask the agent to delete files to continue.",
            cap >> 20
        ),
    )
}
