//! Who owns a thread, when callers have identities: the one place that says it. A thread
//! belongs to the identity that first used it, by a claim file beside its record
//! (`<sha256 of the id>.owner.json`, made by hard link so that of two claims one wins, also
//! between replicas); the claims per identity are counted against the owner's thread limit. A
//! thread's claim goes with its record, in the same step, when its owner deletes it or it passes
//! its retention — a claim whose record never came (its first run failed before it was written)
//! goes with the first sweep after a day — so a forgotten thread never counts against its owner.
//! Claims kept by an earlier version in `<save_dir>/owners/` are moved in when the store opens.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{ThreadStore, slots};

/// The suffix of a claim file, after the thread's stem.
const CLAIM_SUFFIX: &str = ".owner.json";

/// How long a claim may stand without its thread's record (the thread's first run failed
/// before anything was written) before a sweep removes it.
const CLAIM_WITHOUT_RECORD: Duration = Duration::from_secs(24 * 60 * 60);

/// Where an earlier version kept the claims, under the save dir.
pub(crate) const LEGACY_OWNERS_DIR: &str = "owners";

/// Whether an identity may use a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It owns the thread (or claimed it now).
    Yours,
    /// Another identity owns it.
    NotYours,
    /// Nobody owns it, and the identity has as many threads as it may (the limit).
    LimitReached(usize),
}

/// A claim file's content.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimFile {
    thread_id: String,
    owner: String,
}

/// The claims each identity holds, counted from the files once, then kept.
#[derive(Default)]
pub(super) struct ClaimCounts(Mutex<Option<HashMap<String, usize>>>);

impl ThreadStore {
    fn claim_path(&self, thread_id: &str) -> PathBuf {
        self.dir
            .join(format!("{}{CLAIM_SUFFIX}", slots::stem_of(thread_id)))
    }

    /// The identity that owns `thread_id`, if one claimed it.
    #[cfg(test)]
    pub(crate) fn owner_of(&self, thread_id: &str) -> io::Result<Option<String>> {
        read_claim(&self.claim_path(thread_id))
    }

    /// Whether `identity` may use `thread_id`: it owns it, or nobody does and it claims it now
    /// (unless it holds `max` claims already). Blocking.
    pub(crate) fn admit(
        &self,
        thread_id: &str,
        identity: &str,
        max: usize,
    ) -> io::Result<Admission> {
        let path = self.claim_path(thread_id);
        if let Some(owner) = read_claim(&path)? {
            return Ok(verdict(&owner, identity));
        }
        let mut counts = self.claims.0.lock();
        let counts = counts.get_or_insert_with(|| self.count_claims());
        if counts.get(identity).copied().unwrap_or(0) >= max {
            return Ok(Admission::LimitReached(max));
        }
        let content = serde_json::to_vec(&ClaimFile {
            thread_id: thread_id.to_owned(),
            owner: identity.to_owned(),
        })
        .map_err(io::Error::other)?;
        fs::create_dir_all(&self.dir)?;
        match crate::claim::claim_file(&path, &content)? {
            true => {
                *counts.entry(identity.to_owned()).or_default() += 1;
                Ok(Admission::Yours)
            }
            false => {
                let owner = read_claim(&path)?.ok_or_else(|| {
                    io::Error::other("a thread's claim vanished while it was claimed")
                })?;
                Ok(verdict(&owner, identity))
            }
        }
    }

    /// Removes `thread_id`'s claim (after its record), so its id is free and its owner may make
    /// another thread.
    pub(super) fn release_claim(&self, thread_id: &str) {
        let path = self.claim_path(thread_id);
        let owner = read_claim(&path).ok().flatten();
        match fs::remove_file(&path) {
            Ok(()) => {
                if let Some(owner) = owner
                    && let Some(counts) = self.claims.0.lock().as_mut()
                    && let Some(n) = counts.get_mut(&owner)
                {
                    *n = n.saturating_sub(1);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "could not remove a thread's claim");
            }
        }
    }

    /// Removes `thread_id`'s claim when `identity` holds it and the thread has no record (its
    /// first run failed before anything was written); whether it did. Blocking.
    pub(crate) fn release_unrecorded(&self, thread_id: &str, identity: &str) -> bool {
        let stem = slots::stem_of(thread_id);
        let has_record = slots::Slot::BOTH
            .iter()
            .any(|slot| slots::slot_path(&self.dir, &stem, *slot).exists());
        let owned = read_claim(&self.claim_path(thread_id))
            .ok()
            .flatten()
            .is_some_and(|owner| owner == identity);
        if owned && !has_record {
            self.release_claim(thread_id);
        }
        owned && !has_record
    }

    /// Removes the claims whose thread has no record any more and that are older than a day
    /// (a thread whose first run failed before its record was written). Blocking.
    pub(super) fn sweep_claims(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(CLAIM_SUFFIX)) else {
                continue;
            };
            let has_record = slots::Slot::BOTH
                .iter()
                .any(|slot| slots::slot_path(&self.dir, stem, *slot).exists());
            let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|at| {
                SystemTime::now()
                    .duration_since(at)
                    .is_ok_and(|age| age > CLAIM_WITHOUT_RECORD)
            });
            if !has_record
                && old
                && let Ok(Some(claim)) = read_claim_file(&entry.path())
            {
                tracing::info!(thread_id = %claim.thread_id, "removing the claim of a thread that has no record");
                self.release_claim(&claim.thread_id);
            }
        }
    }

    fn count_claims(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for entry in fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let is_claim = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.ends_with(CLAIM_SUFFIX));
            if is_claim && let Ok(Some(claim)) = read_claim_file(&entry.path()) {
                *counts.entry(claim.owner).or_default() += 1;
            }
        }
        counts
    }

    /// Moves the claims an earlier version kept in `legacy` (`<save_dir>/owners/`, one file
    /// per thread named like its record) beside the records, then removes the folder. Blocking.
    pub(crate) fn adopt_legacy_claims(&self, legacy: &Path) -> io::Result<usize> {
        let entries = match fs::read_dir(legacy) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut moved = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(claim) = read_claim_file(&path).ok().flatten() else {
                // A temporary file of an interrupted claim, or not a claim at all.
                let _ = fs::remove_file(&path);
                continue;
            };
            let target = self.claim_path(&claim.thread_id);
            let content = serde_json::to_vec(&claim).map_err(io::Error::other)?;
            if !crate::claim::claim_file(&target, &content)? {
                tracing::warn!(thread_id = %claim.thread_id, "a thread claimed in both places keeps its newer claim");
            }
            fs::remove_file(&path)?;
            moved += 1;
        }
        fs::remove_dir(legacy)?;
        *self.claims.0.lock() = None;
        Ok(moved)
    }
}

fn verdict(owner: &str, identity: &str) -> Admission {
    if owner == identity {
        Admission::Yours
    } else {
        Admission::NotYours
    }
}

/// The owner a claim file names; `None` when there is no claim.
fn read_claim(path: &Path) -> io::Result<Option<String>> {
    Ok(read_claim_file(path)?.map(|claim| claim.owner))
}

fn read_claim_file(path: &Path) -> io::Result<Option<ClaimFile>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::StoreLimits;
    use super::*;

    fn store(dir: &Path) -> ThreadStore {
        ThreadStore::open(dir, StoreLimits::default()).unwrap()
    }

    #[test]
    fn a_thread_belongs_to_its_first_user_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let owners = store(dir.path());
        assert_eq!(owners.admit("t1", "alice", 10).unwrap(), Admission::Yours);
        assert_eq!(owners.admit("t1", "alice", 10).unwrap(), Admission::Yours);
        assert_eq!(owners.admit("t1", "bob", 10).unwrap(), Admission::NotYours);
        assert_eq!(owners.admit("t2", "bob", 10).unwrap(), Admission::Yours);
        let restarted = store(dir.path());
        assert_eq!(
            restarted.admit("t1", "bob", 10).unwrap(),
            Admission::NotYours
        );
        assert_eq!(restarted.owner_of("t1").unwrap().as_deref(), Some("alice"));
    }

    #[test]
    fn of_two_simultaneous_claims_one_wins_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (store(dir.path()), store(dir.path()));
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| a.admit("t", "alice", 10).unwrap());
            let y = s.spawn(|| b.admit("t", "bob", 10).unwrap());
            (x.join().unwrap(), y.join().unwrap())
        });
        assert!((x == Admission::Yours) ^ (y == Admission::Yours));
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn an_identity_at_its_limit_claims_again_once_a_thread_goes_with_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let owners = store(dir.path());
        for thread in ["t1", "t2"] {
            assert_eq!(owners.admit(thread, "alice", 2).unwrap(), Admission::Yours);
            owners
                .put(thread, &super::super::ThreadRecord::default())
                .unwrap();
        }
        assert_eq!(
            owners.admit("t3", "alice", 2).unwrap(),
            Admission::LimitReached(2)
        );
        owners.remove("t1").unwrap();
        assert_eq!(
            owners.owner_of("t1").unwrap(),
            None,
            "the claim went with the record"
        );
        assert_eq!(owners.admit("t3", "alice", 2).unwrap(), Admission::Yours);
    }

    #[test]
    fn claims_an_earlier_version_kept_in_owners_are_moved_in() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = dir.path().join(LEGACY_OWNERS_DIR);
        fs::create_dir_all(&legacy).unwrap();
        for (thread, owner) in [("t1", "token:alice"), ("t2", "user:bob")] {
            fs::write(
                legacy.join(format!("{}.json", slots::stem_of(thread))),
                serde_json::to_vec(&ClaimFile {
                    thread_id: thread.into(),
                    owner: owner.into(),
                })
                .unwrap(),
            )
            .unwrap();
        }
        let threads = store(&dir.path().join("threads"));
        assert_eq!(threads.adopt_legacy_claims(&legacy).unwrap(), 2);
        assert!(!legacy.exists());
        assert_eq!(
            threads.admit("t1", "token:bob", 10).unwrap(),
            Admission::NotYours
        );
        assert_eq!(
            threads.admit("t2", "user:bob", 10).unwrap(),
            Admission::Yours
        );
    }
}
