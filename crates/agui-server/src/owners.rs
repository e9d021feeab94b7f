//! Thread ownership: when callers have identities (`auth_tokens`, `user_header`), a thread
//! belongs to the identity that first used it, and other identities are told it does not
//! exist. Owners are kept in `<save_dir>/owners/`, one small JSON file per thread named by the
//! SHA-256 of its id, written once (a claim is a hard link, which never replaces an owner), so
//! they survive restarts and two claims of a new thread cannot both win.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The folder of the owner files, under an agent's save dir.
pub(crate) const OWNERS_DIR: &str = "owners";

/// Owners kept in memory at most; past it, the cache starts over (the files stay).
const CACHED: usize = 10_000;

/// The owners of one agent's threads.
#[derive(Debug)]
pub(crate) struct ThreadOwners {
    dir: PathBuf,
    known: Mutex<HashMap<String, String>>,
    /// Threads one identity may claim at most.
    max_threads: usize,
    /// Threads claimed by each identity, counted from the files at the first claim.
    counts: Mutex<Option<HashMap<String, usize>>>,
}

/// Whether an identity may use a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// It owns the thread (or claimed it now).
    Yours,
    /// Another identity owns it.
    NotYours,
    /// Nobody owns it, and the identity has as many threads as it may.
    LimitReached(usize),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRecord {
    thread_id: String,
    owner: String,
}

impl ThreadOwners {
    /// Owners kept in `dir` (created on the first claim); an identity may claim
    /// `max_threads` threads.
    pub(crate) fn new(dir: impl Into<PathBuf>, max_threads: usize) -> Self {
        Self {
            dir: dir.into(),
            known: Mutex::new(HashMap::new()),
            max_threads,
            counts: Mutex::new(None),
        }
    }

    /// Whether `identity` may use `thread_id`: it owns it, or nobody does and it now claims
    /// it (unless it has as many threads as it may). Fails only when the owner cannot be read
    /// or recorded.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        thread_id: &str,
        identity: &str,
    ) -> std::io::Result<Admission> {
        if let Some(owner) = self.cached(thread_id) {
            return Ok(if owner == identity {
                Admission::Yours
            } else {
                Admission::NotYours
            });
        }
        let owners = self.clone();
        let (thread, claimant) = (thread_id.to_owned(), identity.to_owned());
        let owner = tokio::task::spawn_blocking(move || owners.owner_or_claim(&thread, &claimant))
            .await
            .map_err(std::io::Error::other)??;
        let Some(owner) = owner else {
            return Ok(Admission::LimitReached(self.max_threads));
        };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= CACHED {
            known.clear();
        }
        known.insert(thread_id.to_owned(), owner.clone());
        Ok(if owner == identity {
            Admission::Yours
        } else {
            Admission::NotYours
        })
    }

    /// Forgets the owner of a deleted thread: its id is free again, and its owner may make
    /// another thread.
    pub(crate) async fn forget(self: &Arc<Self>, thread_id: &str) {
        let owner = self
            .known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread_id);
        let path = self.dir.join(file_name(thread_id));
        let owners = self.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let owner = owner.or_else(|| read_owner(&path).ok().flatten());
            if std::fs::remove_file(&path).is_ok()
                && let Some(owner) = owner
                && let Some(counts) = owners
                    .counts
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_mut()
                && let Some(n) = counts.get_mut(&owner)
            {
                *n = n.saturating_sub(1);
            }
        })
        .await;
    }

    /// Counts the threads of each identity from the files, once.
    fn count_threads(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if let Ok(Some(owner)) = read_owner(&entry.path()) {
                *counts.entry(owner).or_default() += 1;
            }
        }
        counts
    }

    fn cached(&self, thread_id: &str) -> Option<String> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.get(thread_id).cloned()
    }

    /// The thread's owner, which is `claimant` if it had none; `None` when it had none and the
    /// claimant has as many threads as it may.
    fn owner_or_claim(&self, thread_id: &str, claimant: &str) -> std::io::Result<Option<String>> {
        let path = self.dir.join(file_name(thread_id));
        if let Some(owner) = read_owner(&path)? {
            return Ok(Some(owner));
        }
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let counts = counts.get_or_insert_with(|| self.count_threads());
        if counts.get(claimant).copied().unwrap_or(0) >= self.max_threads {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.dir)?;
        let record = serde_json::to_vec(&OwnerRecord {
            thread_id: thread_id.to_owned(),
            owner: claimant.to_owned(),
        })?;
        let temp = self
            .dir
            .join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        let written = (|| {
            let mut file = std::fs::File::create_new(&temp)?;
            file.write_all(&record)?;
            file.sync_all()?;
            // A link never replaces an existing file: of two claims, one wins.
            std::fs::hard_link(&temp, &path)
        })();
        let _ = std::fs::remove_file(&temp);
        match written {
            Ok(()) => {
                if let Ok(dir) = std::fs::File::open(&self.dir) {
                    let _ = dir.sync_all();
                }
                *counts.entry(claimant.to_owned()).or_default() += 1;
                Ok(Some(claimant.to_owned()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_owner(&path)?
                .map(Some)
                .ok_or_else(|| std::io::Error::other("an owner record vanished while claimed")),
            Err(e) => Err(e),
        }
    }
}

/// The owner recorded at `path`, if any.
fn read_owner(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let record: OwnerRecord = serde_json::from_slice(&bytes)?;
            Ok(Some(record.owner))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// A thread's file: the SHA-256 of its id, so any id makes a safe name of fixed length.
pub(crate) fn file_name(thread_id: &str) -> String {
    let digest = Sha256::digest(thread_id.as_bytes());
    format!("{}.json", hex::encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_thread_belongs_to_its_first_user_also_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let owners = Arc::new(ThreadOwners::new(dir.path().join("owners"), 10));
        let yours = Admission::Yours;
        assert_eq!(owners.admit("t1", "alice").await.unwrap(), yours, "claimed");
        assert_eq!(owners.admit("t1", "alice").await.unwrap(), yours, "owned");
        assert_eq!(
            owners.admit("t1", "bob").await.unwrap(),
            Admission::NotYours
        );
        assert_eq!(owners.admit("t2", "bob").await.unwrap(), yours);
        let restarted = Arc::new(ThreadOwners::new(dir.path().join("owners"), 10));
        assert_eq!(
            restarted.admit("t1", "bob").await.unwrap(),
            Admission::NotYours
        );
        assert_eq!(restarted.admit("t1", "alice").await.unwrap(), yours);
        assert_eq!(restarted.admit("t2", "bob").await.unwrap(), yours);
    }

    #[tokio::test]
    async fn of_two_simultaneous_claims_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = Arc::new(ThreadOwners::new(dir.path(), 10));
        let b = Arc::new(ThreadOwners::new(dir.path(), 10));
        let (x, y) = tokio::join!(a.admit("t", "alice"), b.admit("t", "bob"));
        assert!(
            (x.unwrap() == Admission::Yours) ^ (y.unwrap() == Admission::Yours),
            "exactly one identity owns the thread"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [file_name("t")], "no temporary file is left");
    }

    #[tokio::test]
    async fn an_identity_at_its_thread_limit_cannot_claim_more_until_one_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let owners = Arc::new(ThreadOwners::new(dir.path(), 2));
        for thread in ["t1", "t2"] {
            assert_eq!(
                owners.admit(thread, "alice").await.unwrap(),
                Admission::Yours
            );
        }
        assert_eq!(
            owners.admit("t3", "alice").await.unwrap(),
            Admission::LimitReached(2)
        );
        assert_eq!(
            owners.admit("t1", "alice").await.unwrap(),
            Admission::Yours,
            "old ones still work"
        );
        assert_eq!(
            owners.admit("t3", "bob").await.unwrap(),
            Admission::Yours,
            "others are not limited"
        );
        // Counted from the files after a restart too.
        let restarted = Arc::new(ThreadOwners::new(dir.path(), 2));
        assert_eq!(
            restarted.admit("t4", "alice").await.unwrap(),
            Admission::LimitReached(2)
        );
        restarted.forget("t1").await;
        assert_eq!(
            restarted.admit("t4", "alice").await.unwrap(),
            Admission::Yours
        );
    }
}
