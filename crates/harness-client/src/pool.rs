//! Sharing harness processes between conversations.
//!
//! Conversations share a process when everything fixed at spawn time matches: the binary, the
//! storage directory, `HOME`, the environment and the confinement (the partition key).
//! Per-conversation settings (tools, model, workspaces, hooks, policies) travel in each
//! conversation's own config. A harness process uses ~90 MB; pooling 8 conversations per process
//! is the difference between ~100 MB and ~750 MB for 8 idle threads.
//!
//! A confined process ([`ProcessOptions::confinement`]) reaches only the directories it was
//! started with, so partitions never mix confinements: a caller that confines per owner (or per
//! thread) gets processes per owner (or thread). A caller that knows the directories of the
//! next owner or thread before it arrives can boot its process ahead of need
//! ([`HarnessPool::reserve`]).

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use harness_proto::lh::HarnessConfig;

use crate::callbacks::Callbacks;
use crate::conversation::Conversation;
use crate::discovery::SharedDiscovery;
use crate::error::{HarnessError, Result};
use crate::link::ConnectOptions;
use crate::process::{HarnessProcess, ProcessOptions};
use crate::warm_up::WarmUp;
use harness_sandbox::Confinement;

/// A spare is wanted while a partition has fewer free slots than this: half a process, at least
/// two, at most one process (with one conversation per process, one idle process is the spare).
/// Half a process gives the spare time to boot and warm up while new threads keep coming.
fn spare_below_free_slots(capacity: usize) -> usize {
    (capacity / 2).max(2).min(capacity)
}

/// How long after the open that called for a spare it is booted (if still wanted then): a burst
/// of new conversations that the live processes absorb is served without a boot and its warm-up
/// turn competing with it for the CPU (on 2 cores, 32 new threads' first answers came 25 %
/// sooner), while a spare still comes long before a steady stream fills the rest of a process.
const SPARE_DELAY: Duration = Duration::from_secs(1);

/// How long a conversation that left a process goes back to it when it is opened again. The
/// harness lets go of a conversation (checkpoints it, closes its database) a little after its
/// socket closes: opened meanwhile on another process, two processes would hold it, and the
/// second could read it before the first has written its last state.
const RETURN_WINDOW: Duration = Duration::from_secs(10);

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
    /// Start one spare process when the live ones have less than half a process of free slots
    /// left (fewer than two, with two or three slots per process), so a new conversation does
    /// not wait for a harness to boot; while it is needed the spare is not stopped by
    /// `idle_grace`.
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
    home_dir: Option<PathBuf>,
    env: BTreeMap<String, String>,
    confinement: Option<Confinement>,
}

struct Slot {
    process: HarnessProcess,
    /// Conversations (and warm-up turns) on the process: what its capacity bounds.
    leases: usize,
    /// Reservations keeping the process up for a claimant ([`HarnessPool::reserve`]). They take
    /// no conversation slot: the claimant's own open does, so a burst of opens arriving while a
    /// claimant's reservation is still held fills the whole process instead of booting another
    /// beside it.
    reserved: usize,
    idle_since: Option<Instant>,
    /// Conversations that left this process, and when: each goes back to it if opened again
    /// within [`RETURN_WINDOW`].
    left: Vec<(String, Instant)>,
}

impl Slot {
    fn new(process: HarnessProcess, leases: usize, idle_since: Option<Instant>) -> Self {
        Self {
            process,
            leases,
            reserved: 0,
            idle_since,
            left: Vec::new(),
        }
    }

    /// Whether `conversation` left this process within [`RETURN_WINDOW`] (forgetting those
    /// that left earlier).
    fn took_back(&mut self, conversation: &str) -> bool {
        self.left.retain(|(_, at)| at.elapsed() < RETURN_WINDOW);
        let before = self.left.len();
        self.left.retain(|(id, _)| id != conversation);
        self.left.len() < before
    }
}

/// The processes of one partition, and the boots under way for it.
///
/// A burst of new conversations boots as many processes as it needs at once (each boot brings
/// `max_conversations_per_process` slots), never one per conversation and never one after
/// another.
#[derive(Default)]
struct Partition {
    slots: Vec<Slot>,
    /// Processes being started.
    booting: usize,
    /// Opens waiting for a slot.
    waiting: usize,
    /// Boots that failed so far, and the last reason: an open that waited on a boot that
    /// failed gives up with it instead of booting again.
    failures: u64,
    last_failure: String,
    /// How processes started ahead of need are warmed (set by [`HarnessPool::prestart`]).
    warm_up: Option<WarmUp>,
    /// A spare is due once [`SPARE_DELAY`] has passed.
    spare_pending: bool,
}

impl Partition {
    fn in_use(&self) -> bool {
        !self.slots.is_empty() || self.booting > 0 || self.waiting > 0
    }

    fn free_slots(&self, capacity: usize) -> usize {
        self.slots
            .iter()
            .filter(|s| s.process.is_usable())
            .map(|s| capacity - s.leases.min(capacity))
            .sum()
    }
}

#[derive(Default)]
struct State {
    partitions: HashMap<PartitionKey, Partition>,
    closed: bool,
}

struct PoolInner {
    options: PoolOptions,
    state: Mutex<State>,
    /// Woken whenever a boot ends (a new process, or a failure).
    booted: tokio::sync::Notify,
    /// The binary of opens that name none.
    discovery: SharedDiscovery,
}

impl PoolInner {
    /// Whether `partition`'s live processes and the boots under way leave fewer free slots than
    /// [`spare_below_free_slots`].
    fn wants_spare(&self, partition: &Partition) -> bool {
        let capacity = self.options.max_conversations_per_process;
        partition.free_slots(capacity) + partition.booting * capacity
            < spare_below_free_slots(capacity)
    }
}

/// What an open does next.
enum Next {
    /// Use this process (a slot is leased).
    Use(HarnessProcess),
    /// Start a process (counted in `booting`).
    Boot,
    /// Wait for a boot under way; the partition's failure count when the wait began.
    Wait(u64),
}

/// An open counted as waiting for a slot; uncounted when dropped (also when the open is
/// cancelled).
struct Waiting {
    pool: Weak<PoolInner>,
    key: PartitionKey,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade()
            && let Some(partition) = pool.state.lock().partitions.get_mut(&self.key)
        {
            partition.waiting = partition.waiting.saturating_sub(1);
        }
    }
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
        Self::with_discovery(options, SharedDiscovery::new())
    }

    fn with_discovery(options: PoolOptions, discovery: SharedDiscovery) -> Result<Self> {
        if options.max_conversations_per_process == 0 {
            return Err(HarnessError::Config(
                "max_conversations_per_process must be at least 1".into(),
            ));
        }
        let inner = Arc::new(PoolInner {
            options,
            state: Mutex::new(State::default()),
            booted: tokio::sync::Notify::new(),
            discovery,
        });
        tokio::spawn(reap(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The pool's options.
    pub fn options(&self) -> &PoolOptions {
        &self.inner.options
    }

    /// Opens a conversation on a process of the matching partition: the process it left less
    /// than ten seconds ago, if that one still runs (the harness may still hold it then), else
    /// the least-loaded live one with room, else a new one. A failed open never stops a shared process; a process that
    /// died is skipped and replaced. Discovery, when `process` names no binary, runs once per
    /// pool and off the runtime.
    pub async fn open(
        &self,
        process: &ProcessOptions,
        config: HarnessConfig,
        callbacks: Arc<dyn Callbacks>,
    ) -> Result<Conversation> {
        let key = self.key(process).await?;
        let mut options = process.clone();
        options.binary = Some(key.binary.clone());
        let mut replaced = 0;
        let mut waiting = None;
        let returning = config.cascade_id.clone().filter(|id| !id.is_empty());
        loop {
            // Registered before looking, so a boot that ends meanwhile still wakes this open.
            let booted = self.inner.booted.notified();
            tokio::pin!(booted);
            booted.as_mut().enable();
            match self.next(&key, returning.as_deref(), &mut waiting)? {
                Next::Use(slot_process) => {
                    waiting = None;
                    let mut lease = Lease {
                        pool: Arc::downgrade(&self.inner),
                        key: key.clone(),
                        process: slot_process.clone(),
                        conversation: None,
                        takes_slot: true,
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
                            self.maybe_prestart(&key, &options, true);
                            lease.conversation = Some(conversation.id().to_owned());
                            return Ok(conversation.with_lease(lease));
                        }
                        // The process died under us: try again on another (or a new) one.
                        Err(HarnessError::Closed(_))
                            if slot_process.exit_info().is_some()
                                && replaced < MAX_REPLACEMENTS =>
                        {
                            replaced += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
                // Someone waits for this one: no warm-up turn before it serves.
                Next::Boot => self.boot(&key, &options, None).await?,
                Next::Wait(failures) => {
                    booted.await;
                    let state = self.inner.state.lock();
                    if let Some(partition) = state.partitions.get(&key)
                        && partition.failures > failures
                        && partition.free_slots(self.inner.options.max_conversations_per_process)
                            == 0
                    {
                        return Err(HarnessError::BootFailed {
                            reason: partition.last_failure.clone(),
                        });
                    }
                }
            }
        }
    }

    /// Boots a spare process for `process`'s partition now, in the background, unless it has
    /// one or [`PoolOptions::prestart_spare`] is off (or `process` is confined): a host calls
    /// this when it starts, so its first conversations do not wait for a harness to boot. Like
    /// any process with no conversation, the spare stops after `idle_grace` if none comes.
    ///
    /// With `warm_up`, this process and every later spare of the partition run its throwaway
    /// turn once booted (holding a slot meanwhile), so their first conversation does not pay the
    /// harness's first-use costs. A process that opens are waiting for when it boots serves them
    /// at once and is not warmed.
    pub async fn prestart(&self, process: &ProcessOptions, warm_up: Option<WarmUp>) -> Result<()> {
        if !self.inner.options.prestart_spare {
            return Ok(());
        }
        let key = self.key(process).await?;
        let mut options = process.clone();
        options.binary = Some(key.binary.clone());
        if let Some(warm_up) = warm_up {
            let mut state = self.inner.state.lock();
            state.partitions.entry(key.clone()).or_default().warm_up = Some(warm_up);
        }
        self.maybe_prestart(&key, &options, false);
        Ok(())
    }

    /// Boots a process for `process`'s partition now (with `warm_up`, it runs that turn before
    /// it serves) and keeps it up while the returned [`Reservation`] lives (which takes none of
    /// its conversation slots): a process ready for a partition whose first conversation is
    /// about to come (the directories of the next owner or thread, allocated ahead). The
    /// partition's first `open` uses it; drop the reservation once that conversation is open.
    pub async fn reserve(
        &self,
        process: &ProcessOptions,
        warm_up: Option<WarmUp>,
    ) -> Result<Reservation> {
        let key = self.key(process).await?;
        let mut options = process.clone();
        options.binary = Some(key.binary.clone());
        {
            let mut state = self.inner.state.lock();
            if state.closed {
                return Err(HarnessError::PoolClosed);
            }
            let partition = state.partitions.entry(key.clone()).or_default();
            partition.booting += 1;
            if warm_up.is_some() {
                partition.warm_up = warm_up.clone();
            }
        }
        self.boot(&key, &options, warm_up).await?;
        let mut state = self.inner.state.lock();
        let capacity = self.inner.options.max_conversations_per_process;
        let slot = state
            .partitions
            .get_mut(&key)
            .into_iter()
            .flat_map(|p| p.slots.iter_mut())
            .filter(|s| s.leases < capacity && s.process.is_usable())
            .min_by_key(|s| s.leases)
            .ok_or_else(|| HarnessError::BootFailed {
                reason: "the reserved harness stopped right after it started".into(),
            })?;
        slot.reserved += 1;
        slot.idle_since = None;
        Ok(Reservation {
            _lease: Lease {
                pool: Arc::downgrade(&self.inner),
                key,
                process: slot.process.clone(),
                conversation: None,
                takes_slot: false,
            },
        })
    }

    /// Stops every process (conversations on them end with [`crate::CloseReason::ClosedByHost`]);
    /// later `open` calls fail with [`HarnessError::PoolClosed`].
    pub async fn shutdown(&self) {
        let processes: Vec<HarnessProcess> = {
            let mut state = self.inner.state.lock();
            state.closed = true;
            state
                .partitions
                .drain()
                .flat_map(|(_, partition)| partition.slots.into_iter().map(|s| s.process))
                .collect()
        };
        let stops = processes.iter().map(|p| p.shutdown());
        futures_util::future::join_all(stops).await;
    }

    /// Current counts.
    pub fn stats(&self) -> PoolStats {
        let state = self.inner.state.lock();
        let slots = state.partitions.values().flat_map(|p| &p.slots);
        PoolStats {
            processes: slots
                .clone()
                .filter(|s| s.process.exit_info().is_none())
                .count(),
            conversations: slots.map(|s| s.leases).sum(),
            partitions: state.partitions.len(),
        }
    }

    async fn key(&self, process: &ProcessOptions) -> Result<PartitionKey> {
        let binary = match &process.binary {
            Some(binary) => binary.clone(),
            None => self.inner.discovery.binary().await?,
        };
        Ok(PartitionKey {
            binary,
            storage_dir: process.storage_dir.clone(),
            home_dir: process.home_dir.clone(),
            env: process.env.clone(),
            confinement: process.confinement.clone(),
        })
    }

    /// Under the pool lock: leases a slot on the process `returning` (a conversation id) left
    /// within [`RETURN_WINDOW`] if it is still usable, even one over capacity (it may still hold
    /// the conversation), else on the least-loaded usable process with room; or counts the open
    /// as waiting and says whether to boot (the boots under way do not cover every waiting
    /// open) or to wait.
    fn next(
        &self,
        key: &PartitionKey,
        returning: Option<&str>,
        waiting: &mut Option<Waiting>,
    ) -> Result<Next> {
        let mut state = self.inner.state.lock();
        if state.closed {
            return Err(HarnessError::PoolClosed);
        }
        let capacity = self.inner.options.max_conversations_per_process;
        let partition = state.partitions.entry(key.clone()).or_default();
        if let Some(conversation) = returning {
            for slot in &mut partition.slots {
                if slot.took_back(conversation) && slot.process.is_usable() {
                    slot.leases += 1;
                    slot.idle_since = None;
                    return Ok(Next::Use(slot.process.clone()));
                }
            }
        }
        let best = partition
            .slots
            .iter_mut()
            .filter(|s| s.leases < capacity && s.process.is_usable())
            .min_by_key(|s| s.leases);
        if let Some(slot) = best {
            slot.leases += 1;
            slot.idle_since = None;
            return Ok(Next::Use(slot.process.clone()));
        }
        if waiting.is_none() {
            partition.waiting += 1;
            *waiting = Some(Waiting {
                pool: Arc::downgrade(&self.inner),
                key: key.clone(),
            });
        }
        if partition.waiting > partition.booting * capacity {
            partition.booting += 1;
            Ok(Next::Boot)
        } else {
            Ok(Next::Wait(partition.failures))
        }
    }

    /// Starts a process counted in the partition's `booting` and adds it to the partition; with
    /// `warm_up`, and no open waiting, the warm-up turn then runs on it in the background. The
    /// boot runs in its own task, so it completes (and is accounted for) even if the open that
    /// asked for it is cancelled.
    async fn boot(
        &self,
        key: &PartitionKey,
        options: &ProcessOptions,
        warm_up: Option<WarmUp>,
    ) -> Result<()> {
        let inner = self.inner.clone();
        let (key, options) = (key.clone(), options.clone());
        let task = tokio::spawn(async move {
            let booted = HarnessProcess::spawn(&options).await;
            let mut state = inner.state.lock();
            let closed = state.closed;
            let partition = state.partitions.entry(key.clone()).or_default();
            partition.booting = partition.booting.saturating_sub(1);
            let mut warm = None;
            let result = match booted {
                Ok(process) if closed => {
                    tokio::spawn(async move { process.shutdown().await });
                    Err(HarnessError::PoolClosed)
                }
                Ok(process) => {
                    tracing::info!(
                        pid = process.pid(),
                        capacity = inner.options.max_conversations_per_process,
                        "pooled harness started"
                    );
                    // Opens waiting now warm the process up themselves: it serves them at once.
                    // Otherwise the warm-up holds a slot while it runs, and opens that come
                    // meanwhile share the process with it.
                    let warming = warm_up.filter(|_| partition.waiting == 0);
                    partition.slots.push(Slot::new(
                        process.clone(),
                        usize::from(warming.is_some()),
                        warming.is_none().then(Instant::now),
                    ));
                    warm = warming.map(|warm_up| (warm_up, process));
                    Ok(())
                }
                Err(e) => {
                    partition.failures += 1;
                    partition.last_failure = e.to_string();
                    Err(e)
                }
            };
            drop(state);
            inner.booted.notify_waiters();
            if let Some((warm_up, process)) = warm {
                let lease = Lease {
                    pool: Arc::downgrade(&inner),
                    key,
                    process: process.clone(),
                    conversation: None,
                    takes_slot: true,
                };
                let connect = inner.options.connect.clone();
                let pool = Arc::downgrade(&inner);
                tokio::spawn(async move {
                    match warm_up.run(&process, &options, connect).await {
                        Ok(took) => {
                            tracing::debug!(
                                pid = process.pid(),
                                took_ms = took.as_millis() as u64,
                                "harness warmed up"
                            );
                        }
                        // A shutdown stops the process under its warm-up: nothing to report.
                        Err(reason) if pool.upgrade().is_none_or(|p| p.state.lock().closed) => {
                            tracing::debug!(pid = process.pid(), %reason, "warm-up ended by the pool's shutdown");
                        }
                        Err(reason) => {
                            tracing::warn!(pid = process.pid(), %reason, "a harness started ahead of need could not run its warm-up turn; it serves without");
                        }
                    }
                    drop(lease);
                });
            }
            result
        });
        task.await.unwrap_or_else(|e| {
            Err(HarnessError::BootFailed {
                reason: format!("the boot task failed: {e}"),
            })
        })
    }

    /// Boots a spare in the background when the live processes and the boots under way leave
    /// fewer free slots than [`spare_below_free_slots`]: at once, or (`delay`, after an open)
    /// once [`SPARE_DELAY`] has passed, if the spare is still wanted then.
    fn maybe_prestart(&self, key: &PartitionKey, options: &ProcessOptions, delay: bool) {
        if !self.inner.options.prestart_spare {
            return;
        }
        // `Some(warm-up)`: booting now, counted at once; `None`: due after the delay.
        let now = {
            let mut state = self.inner.state.lock();
            let partition = state.partitions.entry(key.clone()).or_default();
            if partition.spare_pending || !self.inner.wants_spare(partition) {
                return;
            }
            if delay {
                partition.spare_pending = true;
                None
            } else {
                partition.booting += 1;
                Some(partition.warm_up.clone())
            }
        };
        let pool = self.clone();
        let (key, options) = (key.clone(), options.clone());
        tokio::spawn(async move {
            let warm_up = if let Some(warm_up) = now {
                warm_up
            } else {
                tokio::time::sleep(SPARE_DELAY).await;
                let mut state = pool.inner.state.lock();
                let closed = state.closed;
                let Some(partition) = state.partitions.get_mut(&key) else {
                    return;
                };
                partition.spare_pending = false;
                if closed || !pool.inner.wants_spare(partition) {
                    return;
                }
                partition.booting += 1;
                partition.warm_up.clone()
            };
            if let Err(e) = pool.boot(&key, &options, warm_up).await {
                tracing::warn!(error = %e, "could not start a spare harness");
            }
        });
    }
}

/// A process kept up for a partition's coming conversation (see [`HarnessPool::reserve`]) until
/// dropped; it takes none of the process's conversation slots.
pub struct Reservation {
    _lease: Lease,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("pid", &self._lease.process.pid())
            .finish()
    }
}

/// A conversation's claim on a slot; released when the conversation is dropped.
struct Lease {
    pool: Weak<PoolInner>,
    key: PartitionKey,
    /// The slot's process, compared by identity (a pid can be reused).
    process: HarnessProcess,
    /// The conversation holding it, once open (a reservation or warm-up holds none).
    conversation: Option<String>,
    /// A conversation's or warm-up's (counted against capacity), or a reservation's (not).
    takes_slot: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        let mut state = pool.state.lock();
        if let Some(slot) = state
            .partitions
            .get_mut(&self.key)
            .into_iter()
            .flat_map(|p| p.slots.iter_mut())
            .find(|s| s.process.same_as(&self.process))
        {
            if self.takes_slot {
                slot.leases = slot.leases.saturating_sub(1);
            } else {
                slot.reserved = slot.reserved.saturating_sub(1);
            }
            if slot.leases == 0 && slot.reserved == 0 {
                slot.idle_since = Some(Instant::now());
            }
            if let Some(conversation) = self.conversation.take() {
                slot.left.retain(|(_, at)| at.elapsed() < RETURN_WINDOW);
                slot.left.push((conversation, Instant::now()));
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
            let mut state = pool.state.lock();
            for partition in state.partitions.values_mut() {
                let slots = &mut partition.slots;
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
            state.partitions.retain(|_, partition| partition.in_use());
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::callbacks::DefaultCallbacks;

    #[tokio::test(flavor = "current_thread")]
    async fn a_slow_discovery_runs_once_and_does_not_stall_the_runtime() {
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticking = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticking.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Ticks counted while the lookup ran: none if it ran on the runtime's only thread.
        let ticks_during = Arc::new(Mutex::new(Vec::new()));
        let (seen, recorded) = (ticks.clone(), ticks_during.clone());
        let discovery = SharedDiscovery::with(move || {
            let before = seen.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(300));
            let during = seen.load(Ordering::SeqCst) - before;
            recorded.lock().push(during);
            Ok(PathBuf::from("/nonexistent/localharness"))
        });
        let pool = HarnessPool::with_discovery(PoolOptions::default(), discovery).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let options = ProcessOptions::new(dir.path().join("save"));
        let opens = (0..4).map(|_| {
            pool.open(
                &options,
                HarnessConfig::default(),
                Arc::new(DefaultCallbacks),
            )
        });
        let results = futures_util::future::join_all(opens).await;
        ticker.abort();
        let during = ticks_during.lock().clone();
        assert_eq!(during.len(), 1, "one lookup for every racing open");
        assert!(
            during[0] >= 3,
            "the runtime stalled during the lookup: {during:?}"
        );
        for result in results {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("/nonexistent/localharness"), "{err}");
        }
    }

    #[test]
    fn a_spare_is_wanted_below_half_a_process_of_free_slots() {
        let by_capacity: Vec<usize> = [1, 2, 3, 4, 8, 16]
            .into_iter()
            .map(spare_below_free_slots)
            .collect();
        assert_eq!(by_capacity, [1, 2, 2, 2, 4, 8]);
    }

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
