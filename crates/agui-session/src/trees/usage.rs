//! The disk each tree takes, measured in the background through the door (links not
//! followed, each inode once), read against the disk cap (`workspace_max_bytes`).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_sandbox::{AgentDir, DiskUsage};

use super::Trees;
use crate::places::{Place, TreeId};

/// The last measurement of each tree, and whether one runs.
#[derive(Default)]
pub(super) struct UsageCache(Arc<Mutex<HashMap<TreeId, Measured>>>);

/// The last measurement of each thread's workspace (its place), and the places waiting for
/// one (measured one after another by a single background job).
#[derive(Default)]
pub(super) struct SlotUsage(Arc<Mutex<SlotUsageState>>);

#[derive(Default)]
struct SlotUsageState {
    bytes: HashMap<Place, u64>,
    queued: Vec<Place>,
    measuring: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    usage: Option<DiskUsage>,
    measuring: bool,
    /// When the last measurement ended.
    at: Option<Instant>,
}

/// A tree measured this recently is not walked again when a turn starts: every new turn of an
/// owner's threads asked for a walk of the owner's whole tree (each thread's workspace and
/// state), so a burst of turns walked it back to back, a cost that grew with the threads. The
/// cap's own watcher of each process walks it as often as the headroom needs regardless.
const FRESH_FOR: Duration = Duration::from_secs(1);

impl Trees {
    /// The disk `tree` used when last measured (workspaces and state; blocks allocated).
    pub(crate) fn usage(&self, tree: &TreeId) -> Option<DiskUsage> {
        self.usage.0.lock().get(tree).and_then(|u| u.usage)
    }

    /// Measures `tree` in the background (once at a time per tree; the result is read with
    /// [`Trees::usage`]).
    pub(crate) fn measure(&self, tree: &TreeId) {
        {
            let mut usage = self.usage.0.lock();
            let entry = usage.entry(tree.clone()).or_default();
            if entry.measuring || entry.at.is_some_and(|at| at.elapsed() < FRESH_FOR) {
                return;
            }
            entry.measuring = true;
        }
        let dirs = [self.workspaces_dir(tree), self.state_dir(tree)];
        let (cache, tree) = (self.usage.0.clone(), tree.clone());
        tokio::task::spawn_blocking(move || {
            let mut total = DiskUsage::default();
            for dir in &dirs {
                match AgentDir::open(dir).and_then(|dir| dir.disk_usage()) {
                    Ok(usage) => {
                        total.bytes += usage.bytes;
                        total.too_deep |= usage.too_deep;
                    }
                    Err(e) => {
                        tracing::debug!(dir = %dir.display(), error = %e, "could not measure a tree")
                    }
                }
            }
            let mut cache = cache.lock();
            cache.insert(
                tree,
                Measured {
                    usage: Some(total),
                    measuring: false,
                    at: Some(Instant::now()),
                },
            );
        });
    }

    /// The disk `place`'s workspace took when last measured; 0, and measured soon in the
    /// background, when never.
    pub(crate) fn slot_usage(&self, place: &Place) -> u64 {
        let known = {
            let state = self.slot_usage.0.lock();
            state.bytes.get(place).copied()
        };
        match known {
            Some(bytes) => bytes,
            None => {
                self.measure_slot(place);
                0
            }
        }
    }

    /// Measures `place`'s workspace in the background (after a turn, an upload, a delete).
    pub(crate) fn measure_slot(&self, place: &Place) {
        let start = {
            let mut state = self.slot_usage.0.lock();
            if !state.queued.contains(place) {
                state.queued.push(place.clone());
            }
            !std::mem::replace(&mut state.measuring, true)
        };
        if !start {
            return;
        }
        let (cache, root) = (self.slot_usage.0.clone(), self.workspace_root.clone());
        tokio::task::spawn_blocking(move || {
            loop {
                let next = {
                    let mut state = cache.lock();
                    let next = state.queued.pop();
                    if next.is_none() {
                        state.measuring = false;
                    }
                    next
                };
                let Some(place) = next else { return };
                let bytes = AgentDir::open(&root.join(place.tree.as_str()))
                    .and_then(|tree| tree.dir(std::path::Path::new(&place.slot)))
                    .and_then(|workspace| workspace.disk_usage())
                    .map_or(0, |usage| usage.bytes);
                cache.lock().bytes.insert(place, bytes);
            }
        });
    }
}
