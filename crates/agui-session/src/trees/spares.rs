//! Spares: unclaimed trees whose harness process the backend has booted and warmed ahead of
//! need, for the next new owner (or, per thread, the next new thread) to claim.

use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Hold, TreeError, Trees, door_error};
use crate::owner::Owner;
use crate::places::{Isolation, ProcessPlace, TreeId};

/// How long a new owner or thread waits for a spare that is booting (a boot takes a few hundred
/// milliseconds; this only bounds a stuck one).
const SPARE_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// An unclaimed tree whose process the backend keeps warm until it is claimed.
pub(super) struct Spare {
    pub(super) tree: TreeId,
    /// The backend's hold on the warm process (dropped once the claimant's conversation is
    /// open, so the process is never idle in between).
    pub(super) hold: Hold,
}

/// The spares of one agent, and the one being booted.
#[derive(Default)]
pub(super) struct Spares {
    ready: Mutex<Vec<Spare>>,
    /// Spares being booted, and a signal when one is ready (or failed).
    preparing: AtomicUsize,
    prepared: tokio::sync::Notify,
}

impl Spares {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Vec<Spare>> {
        self.ready.lock()
    }

    /// A ready spare, taken.
    pub(super) fn take(&self) -> Option<Spare> {
        self.lock().pop()
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

/// Keeps `trees`' spare count at one while the backend can warm one: called at start and after
/// each claim. A tree whose process could not be held is removed.
pub(crate) async fn refill_spares(
    trees: Arc<Trees>,
    backend: crate::backend::Backend,
    warm_up: Option<harness_client::WarmUp>,
) {
    if trees.isolation == Isolation::Shared || trees.spares() > 0 {
        return;
    }
    // One spare at a time.
    if trees
        .spares
        .preparing
        .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    let made = {
        let trees = trees.clone();
        tokio::task::spawn_blocking(move || trees.make_spare_tree()).await
    };
    match made {
        Ok(Ok((tree, place))) => match backend.0.reserve(&place, warm_up).await {
            Some(hold) => {
                tracing::info!(%tree, "a spare harness is ready for the next new owner or thread");
                trees.add_spare(tree, hold);
            }
            None => {
                let trees2 = trees.clone();
                let _ = tokio::task::spawn_blocking(move || trees2.remove_tree(&tree)).await;
            }
        },
        Ok(Err(e)) => tracing::warn!(error = %e, "could not make a spare directory tree"),
        Err(e) => tracing::warn!(error = %e, "could not make a spare directory tree"),
    }
    trees.spares.preparing.fetch_sub(1, Ordering::SeqCst);
    trees.spares.prepared.notify_waiters();
}
