//! Sharing harness processes between conversations.
//!
//! Conversations share a process when everything fixed at spawn time matches: the binary, the
//! storage directory and the environment (the partition key). Per-conversation settings (tools,
//! model, workspaces, hooks, policies) travel in each conversation's own config, so isolation
//! survives pooling. A harness process uses ~90 MB; pooling 8 conversations per process is the
//! difference between ~100 MB and ~750 MB for 8 idle threads.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use harness_proto::lh::HarnessConfig;

use crate::callbacks::Callbacks;
use crate::conversation::Conversation;
use crate::discovery::find_binary;
use crate::error::{HarnessError, Result};
use crate::link::ConnectOptions;
use crate::process::{HarnessProcess, ProcessOptions};

/// A spare is wanted while a partition has fewer free slots than this ("near capacity": at
/// most one left), or than one process holds, whichever is smaller — with one conversation per
/// process, one idle process is the spare.
fn spare_below_free_slots(capacity: usize) -> usize {
    2.min(capacity)
}

/// How many times one `open` replaces a process that died under it before giving up (a binary
/// that dies right after its handshake must not make `open` boot processes forever).
const MAX_REPLACEMENTS: usize = 3;

/// Pool tuning.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Conversations per process (at least 1; 1 gives each conversation its own process).
    pub max_conversations_per_process: usize,
    /// How long a process with no conversation is kept before it is stopped.
    pub idle_grace: Duration,
    /// Start one spare process when the live ones have at most one free slot left, so a new
    /// conversation never waits for a harness to boot; while it is needed the spare is not
    /// stopped by `idle_grace`.
    pub prestart_spare: bool,
    /// Connection tuning for every conversation.
    pub connect: ConnectOptions,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_conversations_per_process: 8,
            idle_grace: Duration::from_secs(30),
            prestart_spare: false,
            connect: ConnectOptions::default(),
        }
    }
}

/// Counts, for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Live harness processes.
    pub processes: usize,
    /// Conversations open through the pool.
    pub conversations: usize,
    /// Distinct partition keys in use.
    pub partitions: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PartitionKey {
    binary: PathBuf,
    storage_dir: PathBuf,
    env: BTreeMap<String, String>,
}

struct Slot {
    process: HarnessProcess,
    leases: usize,
    idle_since: Option<Instant>,
}

#[derive(Default)]
struct State {
    partitions: HashMap<PartitionKey, Vec<Slot>>,
    closed: bool,
}

struct PoolInner {
    options: PoolOptions,
    state: Mutex<State>,
    /// One boot at a time per partition, so a burst of new conversations boots one process
    /// and then shares it instead of booting one each.
    boot_locks: Mutex<HashMap<PartitionKey, Arc<tokio::sync::Mutex<()>>>>,
    discovered: Mutex<Option<PathBuf>>,
}

/// A pool of harness processes. Cheap to clone; create it inside a tokio runtime (it starts a
/// reaper task).
#[derive(Clone)]
pub struct HarnessPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for HarnessPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessPool")
            .field("stats", &self.stats())
            .finish()
    }
}

impl HarnessPool {
    /// A new, empty pool.
    pub fn new(options: PoolOptions) -> Result<Self> {
        if options.max_conversations_per_process == 0 {
            return Err(HarnessError::Config(
                "max_conversations_per_process must be at least 1".into(),
            ));
        }
        let inner = Arc::new(PoolInner {
            options,
            state: Mutex::new(State::default()),
            boot_locks: Mutex::new(HashMap::new()),
            discovered: Mutex::new(None),
        });
        tokio::spawn(reap(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The pool's options.
    pub fn options(&self) -> &PoolOptions {
        &self.inner.options
    }

    /// Opens a conversation on a process of the matching partition: the least-loaded live one
    /// with room, else a new one. A failed open never stops a shared process; a process that
    /// died is skipped and replaced.
    pub async fn open(
        &self,
        process: &ProcessOptions,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Conversation> {
        let key = self.key(process)?;
        let mut options = process.clone();
        options.binary = Some(key.binary.clone());
        let mut replaced = 0;
        loop {
            if let Some(slot_process) = self.lease(&key)? {
                let lease = Lease {
                    pool: Arc::downgrade(&self.inner),
                    key: key.clone(),
                    process: slot_process.clone(),
                };
                match Conversation::open_with(
                    &slot_process,
                    config.clone(),
                    callbacks.clone(),
                    self.inner.options.connect.clone(),
                )
                .await
                {
                    Ok(conversation) => {
                        self.maybe_prestart(&key, &options);
                        return Ok(conversation.with_lease(lease));
                    }
                    // The process died under us: try again on another (or a new) one.
                    Err(HarnessError::Closed(_))
                        if slot_process.exit_info().is_some() && replaced < MAX_REPLACEMENTS =>
                    {
                        replaced += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            self.boot(&key, &options, 1).await?;
        }
    }

    /// Stops every process (conversations on them end with [`crate::CloseReason::ClosedByHost`]);
    /// later `open` calls fail with [`HarnessError::PoolClosed`].
    pub async fn shutdown(&self) {
        let processes: Vec<HarnessProcess> = {
            let mut state = self.inner.state.lock().expect("pool lock");
            state.closed = true;
            state
                .partitions
                .drain()
                .flat_map(|(_, slots)| slots.into_iter().map(|s| s.process))
                .collect()
        };
        let stops = processes.iter().map(|p| p.shutdown());
        futures_util::future::join_all(stops).await;
    }

    /// Current counts.
    pub fn stats(&self) -> PoolStats {
        let state = self.inner.state.lock().expect("pool lock");
        let slots = state.partitions.values().flatten();
        PoolStats {
            processes: slots
                .clone()
                .filter(|s| s.process.exit_info().is_none())
                .count(),
            conversations: slots.map(|s| s.leases).sum(),
            partitions: state.partitions.len(),
        }
    }

    fn key(&self, process: &ProcessOptions) -> Result<PartitionKey> {
        let binary = match &process.binary {
            Some(binary) => binary.clone(),
            None => {
                let mut discovered = self.inner.discovered.lock().expect("discovery lock");
                match &*discovered {
                    Some(path) => path.clone(),
                    None => discovered.insert(find_binary(None)?).clone(),
                }
            }
        };
        Ok(PartitionKey {
            binary,
            storage_dir: process.storage_dir.clone(),
            env: process.env.clone(),
        })
    }

    /// Takes a slot on the least-loaded usable process with room.
    fn lease(&self, key: &PartitionKey) -> Result<Option<HarnessProcess>> {
        let mut state = self.inner.state.lock().expect("pool lock");
        if state.closed {
            return Err(HarnessError::PoolClosed);
        }
        let capacity = self.inner.options.max_conversations_per_process;
        let Some(slots) = state.partitions.get_mut(key) else {
            return Ok(None);
        };
        let best = slots
            .iter_mut()
            .filter(|s| s.leases < capacity && s.process.is_usable())
            .min_by_key(|s| s.leases);
        Ok(best.map(|slot| {
            slot.leases += 1;
            slot.idle_since = None;
            slot.process.clone()
        }))
    }

    fn free_slots(&self, key: &PartitionKey) -> usize {
        let capacity = self.inner.options.max_conversations_per_process;
        let state = self.inner.state.lock().expect("pool lock");
        state
            .partitions
            .get(key)
            .into_iter()
            .flatten()
            .filter(|s| s.process.is_usable())
            .map(|s| capacity - s.leases.min(capacity))
            .sum()
    }

    fn boot_lock(&self, key: &PartitionKey) -> Arc<tokio::sync::Mutex<()>> {
        self.inner
            .boot_locks
            .lock()
            .expect("boot locks")
            .entry(key.clone())
            .or_default()
            .clone()
    }

    /// Boots a process for `key` unless it has (another boot made) at least `min_free` free
    /// slots: 1 for a conversation that needs a slot now, [`spare_below_free_slots`] for a spare.
    async fn boot(
        &self,
        key: &PartitionKey,
        options: &ProcessOptions,
        min_free: usize,
    ) -> Result<()> {
        let lock = self.boot_lock(key);
        let _booting = lock.lock().await;
        if self.free_slots(key) >= min_free {
            return Ok(());
        }
        let process = HarnessProcess::spawn(options).await?;
        let mut state = self.inner.state.lock().expect("pool lock");
        if state.closed {
            drop(state);
            tokio::spawn(async move { process.shutdown().await });
            return Err(HarnessError::PoolClosed);
        }
        tracing::info!(
            pid = process.pid(),
            capacity = self.inner.options.max_conversations_per_process,
            "pooled harness started"
        );
        state.partitions.entry(key.clone()).or_default().push(Slot {
            process,
            leases: 0,
            idle_since: Some(Instant::now()),
        });
        Ok(())
    }

    /// Boots a spare in the background when at most one free slot is left.
    fn maybe_prestart(&self, key: &PartitionKey, options: &ProcessOptions) {
        let wanted = spare_below_free_slots(self.inner.options.max_conversations_per_process);
        if !self.inner.options.prestart_spare || self.free_slots(key) >= wanted {
            return;
        }
        let lock = self.boot_lock(key);
        let Ok(guard) = lock.clone().try_lock_owned() else {
            return;
        };
        let pool = self.clone();
        let (key, options) = (key.clone(), options.clone());
        tokio::spawn(async move {
            drop(guard);
            if let Err(e) = pool.boot(&key, &options, wanted).await {
                tracing::warn!(error = %e, "could not start a spare harness");
            }
        });
    }
}

/// A conversation's claim on a slot; released when the conversation is dropped.
struct Lease {
    pool: Weak<PoolInner>,
    key: PartitionKey,
    /// The slot's process, compared by identity (a pid can be reused).
    process: HarnessProcess,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        let mut state = pool.state.lock().expect("pool lock");
        if let Some(slot) = state
            .partitions
            .get_mut(&self.key)
            .into_iter()
            .flatten()
            .find(|s| Arc::ptr_eq(&s.process.inner, &self.process.inner))
        {
            slot.leases = slot.leases.saturating_sub(1);
            if slot.leases == 0 {
                slot.idle_since = Some(Instant::now());
            }
        }
    }
}

/// Which slots of a partition to stop, given each slot's `(leases, idle past the grace)`:
/// the idle ones, except that with `keep_spare`, while the partition has conversations, enough
/// idle processes stay to keep [`spare_below_free_slots`] free slots (the spare would otherwise
/// be stopped after the grace and the next conversation would wait for a boot).
fn idle_to_stop(slots: &[(usize, bool)], capacity: usize, keep_spare: bool) -> Vec<bool> {
    let busy = slots.iter().any(|&(leases, _)| leases > 0);
    let mut free: usize = slots
        .iter()
        .filter(|&&(_, idle)| !idle)
        .map(|&(leases, _)| capacity - leases.min(capacity))
        .sum();
    slots
        .iter()
        .map(|&(_, idle)| {
            if idle && keep_spare && busy && free < spare_below_free_slots(capacity) {
                free += capacity;
                false
            } else {
                idle
            }
        })
        .collect()
}

/// Removes dead processes and stops those idle for longer than the grace period.
async fn reap(pool: Weak<PoolInner>) {
    let period = match pool.upgrade() {
        Some(p) => (p.options.idle_grace / 2).max(Duration::from_millis(100)),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(pool) = pool.upgrade() else { return };
        let grace = pool.options.idle_grace;
        let capacity = pool.options.max_conversations_per_process;
        let keep_spare = pool.options.prestart_spare;
        let mut stopped = Vec::new();
        {
            let mut state = pool.state.lock().expect("pool lock");
            for slots in state.partitions.values_mut() {
                slots.retain(|slot| match slot.process.exit_info() {
                    Some(info) => {
                        if slot.leases > 0 {
                            tracing::error!(%info, conversations = slot.leases, "pooled harness died with live conversations");
                        }
                        false
                    }
                    None => true,
                });
                let usage: Vec<(usize, bool)> = slots
                    .iter()
                    .map(|slot| {
                        let idle = slot.leases == 0
                            && slot.idle_since.is_some_and(|t| t.elapsed() >= grace);
                        (slot.leases, idle)
                    })
                    .collect();
                let mut stop = idle_to_stop(&usage, capacity, keep_spare).into_iter();
                slots.retain(|slot| {
                    let idle = stop.next().unwrap_or(false);
                    if idle {
                        stopped.push(slot.process.clone());
                    }
                    !idle
                });
            }
            state.partitions.retain(|_, slots| !slots.is_empty());
        }
        if !stopped.is_empty() {
            tracing::info!(count = stopped.len(), "stopping idle pooled harnesses");
            for process in stopped {
                tokio::spawn(async move { process.shutdown().await });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_processes_are_stopped_unless_one_is_the_needed_spare() {
        // Without spares every idle process goes.
        assert_eq!(
            idle_to_stop(&[(0, true), (3, false), (0, true)], 4, false),
            [true, false, true]
        );
        // A full process with conversations keeps one idle spare, not two.
        assert_eq!(
            idle_to_stop(&[(4, false), (0, true), (0, true)], 4, true),
            [false, false, true]
        );
        // Two free slots elsewhere: no spare is needed.
        assert_eq!(
            idle_to_stop(&[(2, false), (0, true)], 4, true),
            [false, true]
        );
        // No conversation at all: nothing is kept, spare or not.
        assert_eq!(idle_to_stop(&[(0, true)], 4, true), [true]);
        // One conversation per process: a single idle process is the spare.
        assert_eq!(
            idle_to_stop(&[(1, false), (0, true), (0, true)], 1, true),
            [false, false, true]
        );
        // Not yet idle for the grace period: kept.
        assert_eq!(
            idle_to_stop(&[(1, false), (0, false)], 1, true),
            [false, false]
        );
    }
}
