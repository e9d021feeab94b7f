//! Thread leases on the shared volume, for several replicas sharing one save dir
//! (`replica_id` set): agui-session's [`ThreadLeases`], kept as files.
//!
//! `<save_dir>/leases/<sha256 of the thread id>.json` names the replica driving the thread (its
//! `replica_id` and a random id of this run of it, its incarnation) and when the lease expires
//! (wall-clock milliseconds: replicas on several hosts must keep their clocks in step, to well
//! under the lease's lifetime). Every change is a whole new file: a free lease is taken with a
//! hard link (which never replaces a file, so of two takers one wins); the holder renews its
//! own by rename; an expired lease — or one left by an earlier incarnation of this same
//! replica, which cannot be alive — is replaced by rename under a short takeover lock
//! (`<hash>.takeover`, created exclusively), re-read under the lock so two takers cannot both
//! win. Releasing removes the file, if it is still ours.
//!
//! A replica waiting for a lease another one holds asks for the thread: `<hash>.wanted` names
//! it and when it last asked (rewritten on every try). The holder reads it when it renews and
//! hands an idle thread over; a request older than a lease's lifetime is forgotten (its asker
//! gave up), and the asker removes it once it holds the lease.

use sha2::Digest as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agui_session::{LeaseDenied, ThreadLeases};
use serde::{Deserialize, Serialize};

/// Wall-clock milliseconds since the Unix epoch.
type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// One replica's leases in one agent's save dir.
pub(crate) struct FileLeases {
    dir: PathBuf,
    replica: String,
    incarnation: String,
    /// When this incarnation started (clock milliseconds): an earlier one of the same replica
    /// is dead.
    started_ms: u64,
    ttl: Duration,
    clock: Clock,
}

impl std::fmt::Debug for FileLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLeases")
            .field("dir", &self.dir)
            .field("replica", &self.replica)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// A lease file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseRecord {
    thread_id: String,
    replica: String,
    incarnation: String,
    #[serde(default)]
    started_ms: u64,
    expires_at_ms: u64,
}

/// A `.wanted` file: which replica asked for the thread, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WantedRecord {
    replica: String,
    asked_at_ms: u64,
}

impl FileLeases {
    /// Leases of `replica` in `dir`, lasting `ttl` unless renewed.
    pub(crate) fn new(dir: impl Into<PathBuf>, replica: &str, ttl: Duration) -> Self {
        Self::with_clock(dir, replica, ttl, Arc::new(unix_millis))
    }

    fn with_clock(dir: impl Into<PathBuf>, replica: &str, ttl: Duration, clock: Clock) -> Self {
        Self {
            dir: dir.into(),
            replica: replica.to_owned(),
            incarnation: uuid::Uuid::new_v4().simple().to_string(),
            started_ms: clock(),
            ttl,
            clock,
        }
    }

    fn path_of(&self, thread_id: &str) -> PathBuf {
        let digest = sha2::Sha256::digest(thread_id.as_bytes());
        self.dir.join(format!("{}.json", hex::encode(digest)))
    }

    fn wanted_path_of(&self, thread_id: &str) -> PathBuf {
        self.path_of(thread_id).with_extension("wanted")
    }

    /// The replica that asked for `thread_id` within a lease's lifetime, if any.
    fn asker(&self, thread_id: &str) -> Option<String> {
        let bytes = std::fs::read(self.wanted_path_of(thread_id)).ok()?;
        let record: WantedRecord = serde_json::from_slice(&bytes).ok()?;
        let fresh = record.asked_at_ms + millis(self.ttl) > (self.clock)();
        fresh.then_some(record.replica)
    }

    /// Forgets this replica's own request for `thread_id` (it holds the lease now).
    fn forget_own_request(&self, thread_id: &str) {
        if self.asker(thread_id).as_deref() == Some(self.replica.as_str()) {
            let _ = std::fs::remove_file(self.wanted_path_of(thread_id));
        }
    }

    fn ours(&self, record: &LeaseRecord) -> bool {
        record.replica == self.replica && record.incarnation == self.incarnation
    }

    /// A lease that nobody can be using: expired, or left by an earlier run of this replica.
    fn stale(&self, record: &LeaseRecord, now: u64) -> bool {
        record.expires_at_ms <= now
            || (record.replica == self.replica && record.started_ms < self.started_ms)
    }

    fn fresh_record(&self, thread_id: &str) -> LeaseRecord {
        LeaseRecord {
            thread_id: thread_id.to_owned(),
            replica: self.replica.clone(),
            incarnation: self.incarnation.clone(),
            started_ms: self.started_ms,
            expires_at_ms: (self.clock)() + millis(self.ttl),
        }
    }

    fn try_acquire(&self, thread_id: &str) -> std::io::Result<Result<Duration, LeaseDenied>> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path_of(thread_id);
        let held = |record: &LeaseRecord, now: u64| LeaseDenied::Held {
            holder: record.replica.clone(),
            retry_after: Duration::from_millis(record.expires_at_ms.saturating_sub(now)),
        };
        let now = (self.clock)();
        match read(&path)? {
            None => {
                let record = serde_json::to_vec(&self.fresh_record(thread_id))?;
                if agui_session::claim_file(&path, &record)? {
                    self.forget_own_request(thread_id);
                    Ok(Ok(self.ttl))
                } else {
                    // Another replica took it between our read and our claim.
                    Ok(Err(match read(&path)? {
                        Some(record) => held(&record, now),
                        None => LeaseDenied::Contended,
                    }))
                }
            }
            Some(record) if self.ours(&record) => {
                self.replace(&path, &self.fresh_record(thread_id))?;
                Ok(Ok(self.ttl))
            }
            Some(record) if !self.stale(&record, now) => Ok(Err(held(&record, now))),
            Some(record) => self.take_over(thread_id, &path, &record),
        }
    }

    /// Replaces a stale lease, under the takeover lock.
    fn take_over(
        &self,
        thread_id: &str,
        path: &Path,
        stale: &LeaseRecord,
    ) -> std::io::Result<Result<Duration, LeaseDenied>> {
        let lock = path.with_extension("takeover");
        match std::fs::File::create_new(&lock) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // A taker that died holding the lock leaves it: it is stale after a lifetime.
                let age = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok());
                if age.is_some_and(|age| age > self.ttl) {
                    let _ = std::fs::remove_file(&lock);
                }
                return Ok(Err(LeaseDenied::Held {
                    holder: stale.replica.clone(),
                    retry_after: Duration::from_secs(1),
                }));
            }
            Err(e) => return Err(e),
        }
        let result = (|| {
            if read(path)?.as_ref() != Some(stale) {
                // Someone took it meanwhile: ask again.
                return self.try_acquire_once_more(thread_id);
            }
            tracing::info!(thread_id, previous = %stale.replica, "taking over a stale thread lease");
            self.replace(path, &self.fresh_record(thread_id))?;
            self.forget_own_request(thread_id);
            Ok(Ok(self.ttl))
        })();
        let _ = std::fs::remove_file(&lock);
        result
    }

    fn try_acquire_once_more(
        &self,
        thread_id: &str,
    ) -> std::io::Result<Result<Duration, LeaseDenied>> {
        let now = (self.clock)();
        Ok(match read(&self.path_of(thread_id))? {
            Some(record) if self.ours(&record) => Ok(self.ttl),
            Some(record) => Err(LeaseDenied::Held {
                holder: record.replica.clone(),
                retry_after: Duration::from_millis(record.expires_at_ms.saturating_sub(now))
                    .max(Duration::from_secs(1)),
            }),
            None => Err(LeaseDenied::Contended),
        })
    }

    fn replace(&self, path: &Path, record: &LeaseRecord) -> std::io::Result<()> {
        let temp = self.write_temp(record)?;
        std::fs::rename(&temp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
    }

    fn write_temp(&self, record: &impl Serialize) -> std::io::Result<PathBuf> {
        let temp = self
            .dir
            .join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        let mut file = std::fs::File::create_new(&temp)?;
        let written = serde_json::to_vec(record)
            .map_err(std::io::Error::from)
            .and_then(|bytes| file.write_all(&bytes))
            // On a network file system the next holder reads it from another host.
            .and_then(|()| file.sync_all());
        match written {
            Ok(()) => Ok(temp),
            Err(e) => {
                // A full volume fails the write after the file was made: it goes, or every
                // renewal while the volume is full leaves one behind.
                let _ = std::fs::remove_file(&temp);
                Err(e)
            }
        }
    }
}

impl ThreadLeases for FileLeases {
    fn acquire(&self, thread_id: &str) -> Result<Duration, LeaseDenied> {
        self.try_acquire(thread_id)
            .unwrap_or_else(|e| Err(LeaseDenied::store_failed(&e)))
    }

    fn release(&self, thread_id: &str) {
        let path = self.path_of(thread_id);
        match read(&path) {
            Ok(Some(record)) if self.ours(&record) => {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(thread_id, error = %e, "could not give a thread lease up; it expires by itself");
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(thread_id, error = %e, "could not read a thread lease to give it up")
            }
        }
    }

    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    fn want(&self, thread_id: &str) {
        let record = WantedRecord {
            replica: self.replica.clone(),
            asked_at_ms: (self.clock)(),
        };
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| self.write_temp(&record))
            .and_then(|temp| {
                std::fs::rename(&temp, self.wanted_path_of(thread_id)).inspect_err(|_| {
                    let _ = std::fs::remove_file(&temp);
                })
            });
        if let Err(e) = written {
            // The thread then moves when its holder hibernates it, as without asking.
            tracing::warn!(thread_id, error = %e, "could not ask for a thread another replica holds");
        }
    }

    fn wanted(&self, thread_id: &str) -> bool {
        self.asker(thread_id)
            .is_some_and(|replica| replica != self.replica)
    }
}

/// The lease at `path`, if any. An unreadable file (which atomic writes never leave) counts as
/// expired, so a damaged volume cannot pin a thread forever.
fn read(path: &Path) -> std::io::Result<Option<LeaseRecord>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "unreadable thread lease; treating it as expired");
            LeaseRecord {
                thread_id: String::new(),
                replica: String::new(),
                incarnation: String::new(),
                started_ms: 0,
                expires_at_ms: 0,
            }
        }))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

#[cfg(test)]
#[path = "leases/tests.rs"]
mod tests;
