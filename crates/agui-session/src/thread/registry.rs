//! The agent's live threads: one task per thread, found by thread id. The agent starts tasks
//! and routes commands to them; a task removes itself when it ends, and hands back the commands
//! that reached it too late (they go to the thread's next task) by message, never by calling up
//! into the agent.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

use super::command::Command;
use super::status::ThreadHandle;

/// A command a task could not serve (it was ending), for the thread's next task.
pub(crate) struct Returned {
    /// The thread it is for.
    pub(crate) thread_id: String,
    /// The command.
    pub(crate) command: Command,
}

/// The live threads of one agent.
pub(crate) struct Registry {
    threads: Mutex<HashMap<String, ThreadHandle>>,
    next_generation: AtomicU64,
    returned: mpsc::UnboundedSender<Returned>,
}

impl Registry {
    /// An empty registry; commands handed back arrive on the receiver, which the agent reads.
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<Returned>) {
        let (returned, returns) = mpsc::unbounded_channel();
        let registry = Self {
            threads: Mutex::new(HashMap::new()),
            next_generation: AtomicU64::new(0),
            returned,
        };
        (registry, returns)
    }

    /// The map, recovered if a holder panicked (a plain map stays consistent between
    /// statements).
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, ThreadHandle>> {
        self.threads.lock()
    }

    /// A number no other task of this agent had.
    pub(crate) fn next_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// Removes a thread's task (only that task, not a newer one of the same thread).
    pub(crate) fn forget(&self, thread_id: &str, generation: u64) {
        let mut threads = self.lock();
        if threads
            .get(thread_id)
            .is_some_and(|h| h.generation == generation)
        {
            threads.remove(thread_id);
        }
    }

    /// Hands a command back for the thread's next task.
    pub(crate) fn hand_back(&self, thread_id: &str, command: Command) {
        let _ = self.returned.send(Returned {
            thread_id: thread_id.to_owned(),
            command,
        });
    }

    /// The idle live thread (not `except`) least recently active: the one to hibernate when a
    /// live slot is needed.
    pub(crate) fn idlest(&self, except: &str) -> Option<ThreadHandle> {
        self.lock()
            .iter()
            .filter(|(id, t)| id.as_str() != except && t.status.is_idle_live())
            .min_by_key(|(_, t)| t.status.last_activity())
            .map(|(_, t)| t.clone())
    }
}
