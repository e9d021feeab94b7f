//! Spares: unclaimed trees whose harness process the backend has booted and warmed ahead of
//! need, for the next new owner (or, per thread, the next new thread) to claim.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

use super::{Hold, TreeError, Trees, door_error};
use crate::owner::Owner;
use crate::places::{Isolation, ProcessPlace, TreeId};

/// How long a new owner or thread waits for a spare that is booting (a boot takes a few hundred
/// milliseconds; this only bounds a stuck one).
const SPARE_WAIT: Duration = Duration::from_secs(20);

/// How many spares an agent keeps: one, and one more for each new tree (a new owner's, or in
/// `thread` mode a new thread's) made within `window`, at most `max`; spares beyond what the
/// arrivals still call for stop once the arrivals age out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stock {
    pub(crate) max: usize,
    pub(crate) window: Duration,
}

impl Stock {
    /// One spare, whatever comes (the stock without identities: the local owner's first tree).
    pub(crate) const ONE: Stock = Stock {
        max: 1,
        window: Duration::ZERO,
    };
}

/// An unclaimed tree whose process the backend keeps warm until it is claimed.
pub(super) struct Spare {
    pub(super) tree: TreeId,
    /// The backend's hold on the warm process (dropped once the claimant's conversation is
    /// open, so the process is never idle in between).
    pub(super) hold: Hold,
}

/// The spares of one agent, the one being booted, and the recent arrivals that size the stock.
#[derive(Default)]
pub(super) struct Spares {
    ready: Mutex<Vec<Spare>>,
    /// Spares being booted, and a signal when one is ready (or failed).
    preparing: AtomicUsize,
    prepared: tokio::sync::Notify,
    /// When new trees were asked for, oldest first (none older than the stock's window once
    /// read), whether a spare was ready for them or not.
    arrivals: Mutex<VecDeque<Instant>>,
    /// Whether a task will stop the spares the arrivals no longer call for.
    trimming: AtomicBool,
}

impl Spares {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Vec<Spare>> {
        self.ready.lock()
    }

    /// A ready spare, taken.
    pub(super) fn take(&self) -> Option<Spare> {
        self.lock().pop()
    }

    /// A new tree is asked for: it counts towards the stock for the stock's window.
    pub(super) fn arrived(&self) {
        self.arrivals.lock().push_back(Instant::now());
    }

    /// How many spares to keep now (see [`Stock`]; at least 1).
    fn wanted(&self, stock: Stock) -> usize {
        let mut arrivals = self.arrivals.lock();
        let now = Instant::now();
        while arrivals
            .front()
            .is_some_and(|at| now.duration_since(*at) >= stock.window)
        {
            arrivals.pop_front();
        }
        (1 + arrivals.len()).min(stock.max).max(1)
    }

    /// A spare back (its claim failed, or another replica won the owner).
    pub(super) fn give_back(&self, spare: Spare) {
        self.lock().push(spare);
        self.prepared.notify_waiters();
    }
}

impl Trees {
    /// Whether a new place for `owner` should first wait for a spare being booted: it needs a
    /// new tree, none is ready and one is coming (claiming it soon beats booting a second
    /// process beside it).
    pub(crate) fn should_await_spare(&self, owner: &Owner) -> bool {
        (self.isolation == Isolation::Thread || self.existing_tree(owner).is_none())
            && self.spares() == 0
            && self.spares.preparing.load(Ordering::SeqCst) > 0
    }

    /// Waits for a spare being booted, if one is and none is ready (bounded: a stuck boot
    /// does not hold a thread for long). Holds nothing: it can be dropped at any point.
    pub(crate) async fn await_spare(&self) {
        let deadline = tokio::time::Instant::now() + SPARE_WAIT;
        loop {
            let ready = self.spares.prepared.notified();
            if self.spares() > 0 || self.spares.preparing.load(Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, ready).await.is_err() {
                return;
            }
        }
    }

    /// Makes a new, unclaimed tree and its process place, for a spare. Blocking.
    pub(crate) fn make_spare_tree(&self) -> Result<(TreeId, ProcessPlace), TreeError> {
        let tree = self.make_tree(&self.unclaimed_marker())?;
        let place = self.process_place(&tree);
        if self.isolation != Isolation::Shared {
            let state = self.open_root(&self.state_dir(&tree))?;
            for dir in ["save", "home"] {
                state
                    .ensure_dir_all(Path::new(dir))
                    .map_err(door_error("make a spare's directories"))?;
            }
        }
        Ok((tree, place))
    }

    /// Adds a spare tree whose process the backend keeps warm (`hold`).
    pub(crate) fn add_spare(&self, tree: TreeId, hold: Hold) {
        self.spares.give_back(Spare { tree, hold });
    }

    /// How many spares are ready.
    pub(crate) fn spares(&self) -> usize {
        self.spares.lock().len()
    }

    /// Drops the spares (their processes stop with the backend). Blocking.
    pub(crate) fn drop_spares(&self) {
        let spares = std::mem::take(&mut *self.spares.lock());
        for spare in spares {
            drop(spare.hold);
            self.remove_tree(&spare.tree);
        }
    }
}

/// Keeps `trees`' stock of spares at what recent arrivals call for ([`Stock`]) while the
/// backend can warm them: called at start and after each new place. Spares boot one at a time,
/// so a stock being rebuilt never takes more than one core from the turns. A tree whose process
/// could not be held is removed, and the refill stops there until the next new place.
pub(crate) async fn refill_spares(
    trees: Arc<Trees>,
    backend: crate::backend::Backend,
    warm_up: Option<harness_client::WarmUp>,
    stock: Stock,
) {
    if trees.isolation == Isolation::Shared {
        return;
    }
    while trees.spares() < trees.spares.wanted(stock) {
        // One spare at a time: a refill already booting goes on to the count wanted then.
        if trees
            .spares
            .preparing
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return;
        }
        let ready = boot_spare(&trees, &backend, warm_up.clone()).await;
        trees.spares.preparing.fetch_sub(1, Ordering::SeqCst);
        trees.spares.prepared.notify_waiters();
        if !ready {
            return;
        }
    }
    if trees.spares() > 1 {
        trim_later(Arc::downgrade(&trees), stock);
    }
}

/// Boots one spare; whether it is ready.
async fn boot_spare(
    trees: &Arc<Trees>,
    backend: &crate::backend::Backend,
    warm_up: Option<harness_client::WarmUp>,
) -> bool {
    let made = {
        let trees = trees.clone();
        tokio::task::spawn_blocking(move || trees.make_spare_tree()).await
    };
    match made {
        Ok(Ok((tree, place))) => match backend.0.reserve(&place, warm_up).await {
            Some(hold) => {
                tracing::info!(%tree, "a spare harness is ready for the next new owner or thread");
                trees.add_spare(tree, hold);
                return true;
            }
            None => {
                let trees = trees.clone();
                let _ = tokio::task::spawn_blocking(move || trees.remove_tree(&tree)).await;
            }
        },
        Ok(Err(e)) => tracing::warn!(error = %e, "could not make a spare directory tree"),
        Err(e) => tracing::warn!(error = %e, "could not make a spare directory tree"),
    }
    false
}

/// Once arrivals age out, stops the spares beyond what the remaining ones call for (their
/// memory goes back); one task at a time, holding the trees only weakly (a closed agent drops
/// its spares itself).
fn trim_later(trees: Weak<Trees>, stock: Stock) {
    let Some(strong) = trees.upgrade() else {
        return;
    };
    if strong.spares.trimming.swap(true, Ordering::SeqCst) {
        return;
    }
    drop(strong);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(stock.window).await;
            let Some(trees) = trees.upgrade() else { return };
            let surplus: Vec<Spare> = {
                let wanted = trees.spares.wanted(stock);
                let mut ready = trees.spares.lock();
                let surplus = ready.len().saturating_sub(wanted);
                ready.drain(..surplus).collect()
            };
            if !surplus.is_empty() {
                tracing::info!(
                    stopped = surplus.len(),
                    "spare harnesses stopped: fewer new owners or threads came lately"
                );
                let trees2 = trees.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    for spare in surplus {
                        drop(spare.hold);
                        trees2.remove_tree(&spare.tree);
                    }
                })
                .await;
            }
            if trees.spares() <= 1 {
                trees.spares.trimming.store(false, Ordering::SeqCst);
                // A refill that raised the stock meanwhile saw the flag set: look again.
                if trees.spares() > 1 {
                    trim_later(Arc::downgrade(&trees), stock);
                }
                return;
            }
        }
    });
}
