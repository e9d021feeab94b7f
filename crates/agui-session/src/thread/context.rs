//! What a thread's task works with: the agent's settings, tools and backend, where threads work
//! and are recorded, the lease keeper, the live-slot budget and the registry. The agent builds
//! it once and shares it with every task; nothing in it calls back into the agent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness_client::WarmUp;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::command::Command;
use super::conversation::{LiveSlot, LiveSlots};
use super::registry::{Registry, Returned};
use crate::backend::Backend;
use crate::error::{RunErrorCode, RunFailure};
use crate::lease::{LeaseDenied, ThreadLeases};
use crate::options::AgentOptions;
use crate::places::Isolation;
use crate::store::RecordWriter;
use crate::tools::ToolRegistry;
use crate::trees::Trees;

/// How long a run waits for an idle thread to give up its live slot before it fails with
/// `SESSION_LIMIT`.
const SLOT_WAIT: Duration = Duration::from_secs(2);

/// What every thread task of one agent shares.
pub(crate) struct ThreadContext {
    pub(crate) options: AgentOptions,
    pub(crate) backend: Backend,
    pub(crate) tools: ToolRegistry,
    /// Where threads work (see `trees`).
    pub(crate) trees: Arc<Trees>,
    pub(crate) records: Arc<RecordWriter>,
    /// Who may drive which thread, when replicas share the save dir.
    pub(crate) leases: Option<Arc<dyn ThreadLeases>>,
    pub(crate) slots: Arc<LiveSlots>,
    pub(crate) registry: Registry,
    /// The throwaway turn of processes started ahead of need.
    pub(crate) warm_up: Option<WarmUp>,
    /// Conversations opened ahead of new threads.
    pub(crate) spare_conversations: crate::spare_conversations::SpareConversations,
    closing: AtomicBool,
}

impl ThreadContext {
    /// The context of an agent with these parts, and the receiver of the commands its tasks
    /// hand back (the agent delivers them to the threads' next tasks).
    pub(crate) fn new(
        options: AgentOptions,
        backend: Backend,
        tools: ToolRegistry,
        trees: Arc<Trees>,
        records: Arc<RecordWriter>,
        leases: Option<Arc<dyn ThreadLeases>>,
        warm_up: Option<WarmUp>,
    ) -> (Self, mpsc::UnboundedReceiver<Returned>) {
        let (registry, returns) = Registry::new();
        let spare_conversations = crate::spare_conversations::SpareConversations::new(
            &options,
            trees.clone(),
            backend.clone(),
            tools.clone(),
        );
        let ctx = Self {
            slots: LiveSlots::new(options.max_sessions),
            options,
            backend,
            tools,
            trees,
            records,
            leases,
            registry,
            warm_up,
            spare_conversations,
            closing: AtomicBool::new(false),
        };
        (ctx, returns)
    }

    /// Whether the agent is shutting down.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Marks the agent as shutting down: no task serves a new run from now on.
    pub(crate) fn start_closing(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Whether each thread has harness processes of its own (which go with it when it is handed
    /// over to another replica).
    pub(crate) fn own_processes(&self) -> bool {
        self.backend.0.isolation() == Isolation::Thread
    }

    /// Whether spares are kept: for every new thread, or for new owners when there may be
    /// several.
    pub(crate) fn wants_spares(&self) -> bool {
        match self.trees.isolation() {
            Isolation::Shared => false,
            Isolation::Thread => true,
            Isolation::Owner => self.options.several_owners,
        }
    }

    /// How many spares to keep (the agent's `max_spare_harnesses` and arrival window).
    pub(crate) fn spare_stock(&self) -> crate::trees::Stock {
        crate::trees::Stock {
            max: self.options.max_spare_harnesses,
            window: self.options.spare_arrival_window,
        }
    }

    /// Refills the spares after a new place, when new owners or threads may come.
    pub(crate) fn refill_spares(&self) {
        if self.wants_spares() && !self.is_closing() {
            tokio::spawn(crate::trees::refill_spares(
                self.trees.clone(),
                self.backend.clone(),
                self.warm_up.clone(),
                self.spare_stock(),
            ));
        }
    }

    /// Takes a slot for one more open conversation, asking idle threads (least recently
    /// active first) to hibernate when none is free. Cancel-safe: dropped, it holds nothing.
    pub(crate) async fn reserve_live(&self, except: &str) -> Result<LiveSlot, RunFailure> {
        let deadline = Instant::now() + SLOT_WAIT;
        loop {
            if let Some(slot) = self.slots.try_take() {
                return Ok(slot);
            }
            let candidate = self.registry.idlest(except);
            let Some(candidate) = candidate.filter(|_| Instant::now() < deadline) else {
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
                .unwrap_or_else(|e| Err(LeaseDenied::task_failed(&e))),
        )
    }

    /// Asks the holder of `thread_id`'s lease to hand the thread over (off the async threads).
    pub(crate) async fn want_lease(&self, thread_id: &str) {
        let Some(leases) = self.leases.clone() else {
            return;
        };
        let id = thread_id.to_owned();
        let _ = tokio::task::spawn_blocking(move || leases.want(&id)).await;
    }

    /// Whether another replica asked for `thread_id` (off the async threads).
    pub(crate) async fn lease_wanted(&self, thread_id: &str) -> bool {
        let Some(leases) = self.leases.clone() else {
            return false;
        };
        let id = thread_id.to_owned();
        tokio::task::spawn_blocking(move || leases.wanted(&id))
            .await
            .unwrap_or(false)
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
}
