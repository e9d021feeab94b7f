//! What the agent sees of a thread without asking its task, and its handle on the task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::mpsc;

use super::command::Command;

/// What the agent can see of a thread without asking its task (for stats and for choosing
/// which idle thread to hibernate).
#[derive(Debug)]
pub(crate) struct ThreadStatus {
    created: Instant,
    /// Milliseconds since `created` of the last activity.
    last_activity: AtomicU64,
    parked: AtomicBool,
    /// Open conversation, no turn, no run, nothing parked: can be hibernated at once.
    idle_live: AtomicBool,
}

impl ThreadStatus {
    pub(super) fn new() -> Self {
        Self {
            created: Instant::now(),
            last_activity: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            idle_live: AtomicBool::new(false),
        }
    }

    pub(super) fn touch(&self) {
        let ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_activity.store(ms, Ordering::Relaxed);
    }

    /// Says whether something waits for the client and whether the thread could hibernate at
    /// once.
    pub(super) fn publish(&self, parked: bool, idle_live: bool) {
        self.parked.store(parked, Ordering::Relaxed);
        self.idle_live.store(idle_live, Ordering::Relaxed);
    }

    /// When the thread was last active.
    pub(crate) fn last_activity(&self) -> Instant {
        self.created + std::time::Duration::from_millis(self.last_activity.load(Ordering::Relaxed))
    }

    /// Whether something waits for the client.
    pub(crate) fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Relaxed)
    }

    /// Whether the thread could hibernate at once.
    pub(crate) fn is_idle_live(&self) -> bool {
        self.idle_live.load(Ordering::Relaxed)
    }
}

/// The agent's handle on a thread's task.
#[derive(Clone)]
pub(crate) struct ThreadHandle {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) status: Arc<ThreadStatus>,
    /// Tells this task apart from a later one of the same thread in the registry.
    pub(crate) generation: u64,
}
