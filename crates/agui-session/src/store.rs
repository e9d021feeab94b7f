//! The persistent thread map: what a restarted server needs to continue a thread.
//!
//! A thread's conversation id and forwarded message ids must outlive the process: kept only in
//! memory, a restart would start every thread over and send its last message again.
//! [`ThreadStore`] keeps one small JSON file per thread under the agent's save dir until it is
//! older than the retention (no record is ever dropped to make room: one caller making threads
//! must not erase others' — the number of threads is bounded when they are made).
//!
//! - File names are the SHA-256 of the thread id: ids are client input and never become a
//!   path. The id is stored inside the file and checked on read.
//! - Each thread has two slot files written in turn, in place, each with a sequence number and
//!   a digest (`slots`): a crash leaves the old record or the new one, never a torn record, and
//!   a write allocates no inode.
//! - A thread none of whose files can be read or parsed has them renamed to `<name>.corrupt`
//!   with a warning; it never fails [`ThreadStore::open`] and never panics.
//! - The I/O is synchronous std I/O on tiny files, under one mutex. Sessions reach it through
//!   `RecordWriter`, which writes behind the run path: a batch of records is one small write
//!   each, then one fdatasync each; a run's terminal event waits for its thread's write, never
//!   for a flush.
//! - One store per directory: two processes sharing a directory are not coordinated.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::SessionError;
use crate::threads::model::ThreadState;
use slots::{Head, Slot, Stored};

pub(crate) mod branches;
mod messages;
pub(crate) mod owners;
mod rewrite;
mod scan;
mod slots;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use messages::{Digests, ForwardedIds, LostTurns, UserSteps};
pub(crate) use rewrite::{rewrite_owner, stored_owners};
pub(crate) use writer::RecordWriter;

/// The version of the file format written by this build: 2, a slot with a sequence number and
/// a digest (`slots`). Version 1, the single file written by rename, is still read; an older
/// build leaves version 2 alone instead of reading a slot that may not be its thread's newest.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The version of the single-file format, read as a slot holding sequence 0.
const SINGLE_FILE_VERSION: u32 = 1;

/// Files larger than this are not records (ours are a few KiB at most).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Temp files of the earlier format's atomic writes: one left by a crash is removed at open.
const TEMP_SUFFIX: &str = ".tmp";

/// The free space after which a volume found full is taken to have room again: what a turn's
/// records and the harness's own (its conversation database, its logs) take, with a margin.
pub(crate) const ROOM_FOR_A_TURN: u64 = 32 << 20;

/// The free space below which a turn that just ended may not have been saved: the harness's
/// writes of it (a few pages of its database and log) may have met a full volume.
pub(crate) const ROOM_FOR_A_SAVE: u64 = 1 << 20;

/// The bytes free to an unprivileged writer on the volume of `dir` (`None` when unknown).
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    rustix::fs::statvfs(dir)
        .ok()
        .map(|vfs| vfs.f_bavail.saturating_mul(vfs.f_frsize))
}
const CORRUPT_SUFFIX: &str = ".corrupt";

/// Bounds of a [`ThreadStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreLimits {
    /// A record not updated for longer than this is dropped (on sweep; it reads as absent).
    pub(crate) ttl: Duration,
}

impl Default for StoreLimits {
    /// 30 days.
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(30 * 24 * 60 * 60),
        }
    }
}

/// A frontend tool call the thread was parked on when it was saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingTool {
    /// The call id the client's `ToolMessage` will answer.
    pub(crate) tool_call_id: String,
    /// The tool's name.
    pub(crate) name: String,
}

/// What is remembered of one thread.
///
/// Unknown fields are ignored and missing ones take their default, so older and newer builds
/// can read each other's records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadRecord {
    /// The harness conversation to resume.
    pub(crate) conversation_id: String,
    /// Ids of the user messages already sent to the harness.
    #[serde(default)]
    pub(crate) forwarded: ForwardedIds,
    /// The content digests of the forwarded user messages: what an edit is told by.
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    pub(crate) sent: Digests,
    /// The digests of the text the harness echoed for each user message (see
    /// `thread::echo_alignment`): how a history whose steps were renumbered (a step the
    /// harness could not save) still finds each message's step.
    #[serde(default, skip_serializing_if = "Digests::is_empty")]
    pub(crate) echoed: Digests,
    /// Frontend tool calls awaiting a `ToolMessage`.
    #[serde(default)]
    pub(crate) pending_frontend_tools: Vec<PendingTool>,
    /// The client's ids of the user messages, by the step that echoed each.
    #[serde(default)]
    pub(crate) user_steps: UserSteps,
    /// The client's id of the message sent last, while the harness's echo of it is not in
    /// `user_steps` yet: a server that dies mid-turn may have seen the echo without recording
    /// it, so the next server gives that id to the first root user step after the recorded ones
    /// (the step the live server would have given it to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) awaiting_echo: Option<String>,
    /// The turn of `awaiting_echo` was lost (its server stopped with it in flight): the step
    /// that echoed it joins `lost_turns` when the history is read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) awaited_turn_lost: bool,
    /// The root user steps whose turns were lost.
    #[serde(default, skip_serializing_if = "LostTurns::is_empty")]
    pub(crate) lost_turns: LostTurns,
    /// The thread's workspace directory, for a record written before places existed (a newer
    /// record has a `place` instead).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub(crate) workspace: PathBuf,
    /// Whom the thread belongs to.
    #[serde(default)]
    pub(crate) owner: Option<crate::owner::Owner>,
    /// Where the thread works: its tree and slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) place: Option<crate::places::Place>,
    /// A turn was in flight when the record was written (cleared when it ends): found set
    /// when the thread is next served, the server that drove it stopped without ending it.
    #[serde(default)]
    pub(crate) turn_in_flight: bool,
    /// The harness was never sent a message of this thread (it was only placed, for its
    /// files, or its first conversation never opened): the next open creates the
    /// conversation instead of resuming one the harness does not have.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) unsent: bool,
    /// When the record was last written (Unix seconds); set by [`ThreadStore::put`].
    #[serde(default)]
    pub(crate) updated_at: u64,
    /// The thread's title: the first line of its first user message until its owner renames
    /// it; empty before any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) title: String,
    /// When the thread was made (Unix seconds; 0 in a record written before this was kept).
    #[serde(default)]
    pub(crate) created_at: u64,
    /// When something last happened on the thread (Unix seconds): a run, a connect, a turn's
    /// end, a rename.
    #[serde(default)]
    pub(crate) active_at: u64,
    /// Its owner archived it (it leaves the default list).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) archived: bool,
    /// Where the thread stood when the record was written.
    #[serde(default)]
    pub(crate) state: ThreadState,
    /// The messages `connect` restates (when last known).
    #[serde(default)]
    pub(crate) message_count: u32,
    /// The thread's other branches (the conversations it forked from, or switched away from).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) branches: Vec<branches::Branch>,
    /// The run that forked the thread last: the same run sent again (its stream was cut) is
    /// a retry, not another regenerate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) forked_by_run: Option<String>,
}

fn is_empty_path(path: &Path) -> bool {
    path.as_os_str().is_empty()
}

/// A durable, bounded map from thread id to [`ThreadRecord`].
pub(crate) struct ThreadStore {
    dir: PathBuf,
    limits: StoreLimits,
    clock: Box<dyn Fn() -> u64 + Send + Sync>,
    index: Mutex<Index>,
    /// Records a read found expired, for the next sweep to report.
    expired_on_read: Mutex<Vec<(String, ThreadRecord)>>,
    /// What the last [`ThreadStore::scan`] read.
    scanned: scan::ScanCache,
    /// The claims each identity holds (`owners.rs`).
    claims: owners::ClaimCounts,
}

impl fmt::Debug for ThreadStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadStore")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .field("threads", &self.len())
            .finish_non_exhaustive()
    }
}

impl ThreadStore {
    /// Opens (creating it if needed) the store in `dir`, using the system clock.
    ///
    /// Loads the index of every record (expired ones too, for the first sweep to remove with
    /// what belongs to them), moves unreadable files aside and removes temp files left by a
    /// crash.
    /// Fails only when the directory itself cannot be created or listed.
    pub(crate) fn open(dir: &Path, limits: StoreLimits) -> Result<Self, SessionError> {
        Self::open_with_clock(dir, limits, unix_now)
    }

    /// [`ThreadStore::open`] with a clock returning Unix seconds (for tests and simulations).
    pub(crate) fn open_with_clock(
        dir: &Path,
        limits: StoreLimits,
        clock: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Result<Self, SessionError> {
        fs::create_dir_all(dir).map_err(io_error("create the thread store directory", dir))?;
        let store = Self {
            dir: dir.to_owned(),
            limits,
            clock: Box::new(clock),
            index: Mutex::new(Index::default()),
            expired_on_read: Mutex::new(Vec::new()),
            scanned: scan::ScanCache::default(),
            claims: owners::ClaimCounts::default(),
        };
        let mut stems = BTreeSet::new();
        let entries =
            fs::read_dir(dir).map_err(io_error("list the thread store directory", dir))?;
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "Could not list an entry of the thread store.");
                    continue;
                }
            };
            let path = entry.path();
            let Some(name) = path.file_name().and_then(OsStr::to_str) else {
                continue;
            };
            if name.ends_with(TEMP_SUFFIX) {
                // Left by a write of the earlier format interrupted before its rename: never
                // a committed record.
                if let Err(error) = fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), %error, "Could not remove a leftover temp file of the thread store.");
                }
                continue;
            }
            if let Some((stem, _)) = slots::parse_name(name) {
                stems.insert(stem.to_owned());
            }
        }
        let mut loaded = Vec::new();
        for stem in stems {
            match slots::read_thread(dir, &stem) {
                Stored::Record {
                    head,
                    thread_id,
                    record,
                } => loaded.push((record.updated_at, thread_id, head)),
                Stored::NewerVersion(version) => warn_newer_version(dir, &stem, version),
                Stored::Absent => {}
                Stored::Corrupt(unusable) => move_aside(&unusable),
            }
        }
        // Oldest first, so sequence numbers follow update order.
        loaded.sort_by(|(a_at, a_id, _), (b_at, b_id, _)| (a_at, a_id).cmp(&(b_at, b_id)));
        let mut index = store.lock();
        for (updated_at, thread_id, head) in loaded {
            index.touch(thread_id, updated_at, head);
        }
        drop(index);
        Ok(store)
    }

    /// The directory holding the records.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The record of a thread, if one is remembered and not expired. A thread none of whose
    /// files is usable has them moved aside (logged) and reads as absent.
    pub(crate) fn get(&self, thread_id: &str) -> Option<ThreadRecord> {
        let now = self.now();
        let mut index = self.lock();
        let stem = slots::stem_of(thread_id);
        let Some(updated_at) = index.updated_at(thread_id) else {
            // Not written nor seen by this process: another server sharing the directory (a
            // replica) may have written it since the index was loaded.
            return self.adopt(&mut index, thread_id, &stem, now);
        };
        if self.expired(updated_at, now) {
            // Gone for the thread; what belongs to it goes with the next sweep.
            index.remove(thread_id);
            if let Stored::Record { record, .. } = slots::read_thread(&self.dir, &stem) {
                self.lock_expired().push((thread_id.to_owned(), *record));
            }
            remove_thread_files(&self.dir, &stem, "expired");
            self.release_claim(thread_id);
            return None;
        }
        match slots::read_thread(&self.dir, &stem) {
            Stored::Record { head, record, .. } => {
                // Another process sharing the directory may have written since.
                index.set_head(thread_id, head);
                return Some(*record);
            }
            Stored::NewerVersion(version) => warn_newer_version(&self.dir, &stem, version),
            Stored::Absent => {
                tracing::warn!(dir = %self.dir.display(), stem, "A thread record disappeared from the store.");
            }
            Stored::Corrupt(unusable) => move_aside(&unusable),
        }
        index.remove(thread_id);
        None
    }

    /// Reads a record this process has not indexed (written by another process sharing the
    /// directory) and indexes it.
    fn adopt(
        &self,
        index: &mut Index,
        thread_id: &str,
        stem: &str,
        now: u64,
    ) -> Option<ThreadRecord> {
        match slots::read_thread(&self.dir, stem) {
            Stored::Record {
                head,
                thread_id: stored,
                record,
            } if stored == thread_id && !self.expired(record.updated_at, now) => {
                index.touch(thread_id.to_owned(), record.updated_at, head);
                Some(*record)
            }
            _ => None,
        }
    }

    /// Saves a thread's record, replacing any previous one.
    ///
    /// `updated_at` is set to now. The record goes to the slot that does not hold the newest
    /// one. When this makes more than `max_threads` records, the least recently updated ones
    /// are dropped.
    pub(crate) fn put(&self, thread_id: &str, record: &ThreadRecord) -> Result<(), SessionError> {
        let written = self.write(thread_id, record, true)?;
        if written.created {
            sync_dir(&self.dir);
        }
        Ok(())
    }

    /// [`ThreadStore::put`] without the flush to disk: other processes read the record at
    /// once, and it is durable once [`ThreadStore::sync`] flushes what this returns.
    pub(crate) fn put_unsynced(
        &self,
        thread_id: &str,
        record: &ThreadRecord,
    ) -> Result<Unsynced, SessionError> {
        self.write(thread_id, record, false)
    }

    /// Flushes records written by [`ThreadStore::put_unsynced`] to disk (the directory too
    /// when one made a file); every one is tried, the first failure is returned.
    pub(crate) fn sync(&self, written: Vec<Unsynced>) -> Result<(), SessionError> {
        let mut first_failure = None;
        let mut created = false;
        for unsynced in written {
            created |= unsynced.created;
            if let Err(source) = unsynced.file.sync_data() {
                first_failure.get_or_insert(store_io(
                    "flush the thread record",
                    &unsynced.path,
                    source,
                ));
            }
        }
        if created {
            sync_dir(&self.dir);
        }
        first_failure.map_or(Ok(()), Err)
    }

    fn write(
        &self,
        thread_id: &str,
        record: &ThreadRecord,
        durable: bool,
    ) -> Result<Unsynced, SessionError> {
        let now = self.now();
        let mut record = record.clone();
        record.updated_at = now;
        let stem = slots::stem_of(thread_id);
        // The lock covers the write so the index and the files agree on who wrote last.
        let mut index = self.lock();
        let head = match index.head(thread_id) {
            Some(head) => head.next(),
            // Not indexed: files may still exist (a record this process dropped as unreadable,
            // or one of another process), and the newest of them must not be overwritten.
            None => match slots::read_thread(&self.dir, &stem) {
                Stored::Record { head, .. } => head.next(),
                _ => Head::FIRST,
            },
        };
        let path = slots::slot_path(&self.dir, &stem, head.slot);
        let bytes = slots::encode(thread_id, head.sequence, &record).map_err(|source| {
            SessionError::RecordEncode {
                path: path.clone(),
                source,
            }
        })?;
        let (file, created) = slots::write_slot(&path, &bytes, durable)
            .map_err(|source| store_io("write the thread record", &path, source))?;
        index.touch(thread_id.to_owned(), now, head);
        Ok(Unsynced {
            file,
            path,
            created,
        })
    }

    /// Whether the store's volume has room for a turn again ([`ROOM_FOR_A_TURN`] free to an
    /// unprivileged writer), after a write failed for want of it. A small write succeeding says
    /// little: the soak saw one pass while the harness's own writes of the turn still failed.
    pub(crate) fn has_room(&self) -> bool {
        free_bytes(&self.dir).is_some_and(|free| free >= ROOM_FOR_A_TURN)
    }

    /// Forgets a thread. Returns whether it was remembered.
    pub(crate) fn remove(&self, thread_id: &str) -> Result<bool, SessionError> {
        let mut index = self.lock();
        let mut removed = index.remove(thread_id);
        let stem = slots::stem_of(thread_id);
        for slot in Slot::BOTH {
            let path = slots::slot_path(&self.dir, &stem, slot);
            match fs::remove_file(&path) {
                Ok(()) => removed = true,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(store_io("remove the thread record", &path, source)),
            }
        }
        // After the record: a crash between the two leaves a claim without a record, which the
        // sweep removes, never a record without its claim (another identity could take it).
        self.release_claim(thread_id);
        Ok(removed)
    }

    /// Whether the index holds `thread_id`.
    pub(crate) fn knows(&self, thread_id: &str) -> bool {
        self.lock().by_thread.contains_key(thread_id)
    }

    /// The number of threads remembered.
    pub(crate) fn len(&self) -> usize {
        self.lock().by_thread.len()
    }

    /// True when no thread is remembered.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the records older than the TTL; returns them (and those a read found expired
    /// since the last sweep), so what belongs to them can go too.
    pub(crate) fn sweep(&self) -> Vec<(String, ThreadRecord)> {
        let now = self.now();
        let mut dropped = std::mem::take(&mut *self.lock_expired());
        let mut index = self.lock();
        while let Some((updated_at, thread_id)) = index.oldest() {
            if !self.expired(updated_at, now) {
                break;
            }
            index.remove(&thread_id);
            let stem = slots::stem_of(&thread_id);
            // Another process sharing the directory may have written it since.
            let record = match slots::read_thread(&self.dir, &stem) {
                Stored::Record { head, record, .. } if !self.expired(record.updated_at, now) => {
                    index.touch(thread_id, record.updated_at, head);
                    continue;
                }
                Stored::Record { record, .. } => Some(*record),
                _ => None,
            };
            remove_thread_files(&self.dir, &stem, "expired");
            self.release_claim(&thread_id);
            dropped.extend(record.map(|record| (thread_id, record)));
        }
        drop(index);
        self.sweep_claims();
        dropped
    }

    fn now(&self) -> u64 {
        (self.clock)()
    }

    fn lock_expired(&self) -> MutexGuard<'_, Vec<(String, ThreadRecord)>> {
        self.expired_on_read.lock()
    }

    fn lock(&self) -> MutexGuard<'_, Index> {
        // The index is consistent between statements, so a panic elsewhere cannot leave it
        // half-updated: keep serving rather than propagate the poison.
        self.index.lock()
    }

    fn expired(&self, updated_at: u64, now: u64) -> bool {
        now.saturating_sub(updated_at) > self.limits.ttl.as_secs()
    }
}

/// Thread id → last update and newest slot, and the ids ordered by age for eviction and
/// sweeping.
#[derive(Debug, Default)]
struct Index {
    by_thread: HashMap<String, Indexed>,
    /// (updated_at, sequence) → thread id; the sequence orders updates within one second.
    by_age: BTreeMap<(u64, u64), String>,
    next_seq: u64,
}

/// What the index knows of one thread.
#[derive(Debug, Clone, Copy)]
struct Indexed {
    /// Its key in `by_age`.
    age: (u64, u64),
    /// Where its newest record is.
    head: Head,
}

impl Index {
    fn touch(&mut self, thread_id: String, updated_at: u64, head: Head) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let age = (updated_at, seq);
        if let Some(old) = self
            .by_thread
            .insert(thread_id.clone(), Indexed { age, head })
        {
            self.by_age.remove(&old.age);
        }
        self.by_age.insert(age, thread_id);
    }

    /// Moves a thread's head without renewing it.
    fn set_head(&mut self, thread_id: &str, head: Head) {
        if let Some(indexed) = self.by_thread.get_mut(thread_id) {
            indexed.head = head;
        }
    }

    fn remove(&mut self, thread_id: &str) -> bool {
        match self.by_thread.remove(thread_id) {
            Some(indexed) => {
                self.by_age.remove(&indexed.age);
                true
            }
            None => false,
        }
    }

    fn updated_at(&self, thread_id: &str) -> Option<u64> {
        self.by_thread.get(thread_id).map(|indexed| indexed.age.0)
    }

    fn head(&self, thread_id: &str) -> Option<Head> {
        self.by_thread.get(thread_id).map(|indexed| indexed.head)
    }

    fn oldest(&self) -> Option<(u64, String)> {
        self.by_age
            .first_key_value()
            .map(|(&(updated_at, _), thread_id)| (updated_at, thread_id.clone()))
    }
}

/// A record written to the volume (other processes read it) but not yet flushed to disk.
pub(crate) struct Unsynced {
    file: File,
    path: PathBuf,
    created: bool,
}

/// Makes a new file in `dir` durable. Best effort: not every platform can sync a directory, and
/// the record is already complete on disk.
fn sync_dir(dir: &Path) {
    if let Err(error) = File::open(dir).and_then(|dir| dir.sync_all()) {
        tracing::debug!(dir = %dir.display(), %error, "Could not sync the thread store directory.");
    }
}

fn warn_newer_version(dir: &Path, stem: &str, version: u64) {
    tracing::warn!(dir = %dir.display(), stem, version, "Ignoring a thread record written by a newer version of the server.");
}

/// Renames each unusable slot to `<name>.corrupt` so it is kept for inspection but never
/// read again.
fn move_aside(unusable: &[(PathBuf, String)]) {
    for (path, reason) in unusable {
        move_aside_one(path, reason);
    }
}

/// Removes both slots of a thread, logging (not failing) when that is impossible.
fn remove_thread_files(dir: &Path, stem: &str, why: &str) {
    for slot in Slot::BOTH {
        remove_quietly(&slots::slot_path(dir, stem, slot), why);
    }
}

/// Renames an unusable record file to `<name>.corrupt`.
fn move_aside_one(path: &Path, reason: &str) {
    let mut aside = path.as_os_str().to_owned();
    aside.push(CORRUPT_SUFFIX);
    let aside = PathBuf::from(aside);
    match fs::rename(path, &aside) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            moved_to = %aside.display(),
            reason,
            "Moved an unusable thread record aside."
        ),
        Err(error) => {
            tracing::warn!(path = %path.display(), reason, %error, "Could not move an unusable thread record aside; removing it.");
            remove_quietly(path, "unusable");
        }
    }
}

/// Removes a record file, logging (not failing) when that is impossible.
fn remove_quietly(path: &Path, why: &str) {
    match fs::remove_file(path) {
        Ok(()) => tracing::debug!(path = %path.display(), why, "Removed a thread record."),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(path = %path.display(), why, %error, "Could not remove a thread record.");
        }
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SessionError {
    let path = path.to_owned();
    move |source| store_io(action, &path, source)
}

/// A thread-store I/O error naming the file and what was being done.
fn store_io(action: &str, path: &Path, source: io::Error) -> SessionError {
    SessionError::Io {
        action: format!("{action} {}", path.display()),
        source,
    }
}

/// Unix seconds now (0 if the clock is before 1970).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}
