//! The disk each tree takes, measured in the background through the door (links not
//! followed, each inode once), read against the disk cap (`workspace_max_bytes`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use harness_sandbox::{AgentDir, DiskUsage};

use super::Trees;
use crate::places::TreeId;

/// The last measurement of each tree, and whether one runs.
#[derive(Default)]
pub(super) struct UsageCache(Arc<Mutex<HashMap<TreeId, Measured>>>);

#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    usage: Option<DiskUsage>,
    measuring: bool,
}

impl Trees {
    /// The disk `tree` used when last measured (workspaces and state; blocks allocated).
    pub(crate) fn usage(&self, tree: &TreeId) -> Option<DiskUsage> {
        self.usage
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tree)
            .and_then(|u| u.usage)
    }

    /// Measures `tree` in the background (once at a time per tree; the result is read with
    /// [`Trees::usage`]).
    pub(crate) fn measure(&self, tree: &TreeId) {
        {
            let mut usage = self.usage.0.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = usage.entry(tree.clone()).or_default();
            if entry.measuring {
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
            let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.insert(
                tree,
                Measured {
                    usage: Some(total),
                    measuring: false,
                },
            );
        });
    }
}
