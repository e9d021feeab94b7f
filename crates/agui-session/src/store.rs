//! The persistent thread map: what a restarted server needs to continue a thread.
//!
//! A thread's conversation id and forwarded message ids must outlive the process: kept only in
//! memory, a restart would start every thread over and send its last message again.
//! [`ThreadStore`] keeps one small JSON file per thread under the agent's save dir, bounded by
//! count (least recently updated evicted first) and age.
//!
//! - File names are the SHA-256 of the thread id: ids are client input and never become a
//!   path. The id is stored inside the file and checked on read.
//! - Writes are atomic (temp file, fsync, rename, fsync of the directory), so a crash leaves the
//!   old record or the new one, never a torn file.
//! - A file that cannot be read or parsed is renamed to `<name>.corrupt` with a warning; it
//!   never fails [`ThreadStore::open`] and never panics.
//! - The I/O is synchronous std I/O on tiny files, under one mutex. Sessions reach it through
//!   `RecordWriter`, which writes behind the run path (a put is one small write and two
//!   fsyncs, never awaited by a run).
//! - One store per directory: two processes sharing a directory are not coordinated.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::SessionError;

#[cfg(test)]
mod tests;
mod writer;

pub(crate) use writer::RecordWriter;

/// The version of the file format written by this build.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Files larger than this are not records (ours are a few KiB at most).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

const RECORD_EXTENSION: &str = "json";
const TEMP_SUFFIX: &str = ".tmp";
const CORRUPT_SUFFIX: &str = ".corrupt";

/// Bounds of a [`ThreadStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreLimits {
    /// Most threads remembered (at least 1); beyond it the least recently updated go first.
    pub(crate) max_threads: usize,
    /// A record not updated for longer than this is dropped (at open, on sweep, on read).
    pub(crate) ttl: Duration,
}

impl Default for StoreLimits {
    /// 10 000 threads, 30 days.
    fn default() -> Self {
        Self {
            max_threads: 10_000,
            ttl: Duration::from_secs(30 * 24 * 60 * 60),
        }
    }
}

/// The ids of the user messages a thread already sent to the harness, most recently recorded
/// last: the one record of what was forwarded, kept by the thread's session and persisted in
/// its [`ThreadRecord`].
///
/// Recording an id it holds moves that id to the end; beyond [`ForwardedIds::KEPT`] ids the
/// oldest are dropped. Only the newest few matter: clients resend the transcript, and the scan
/// for the message to send stops at the newest forwarded one. Read from a file, it keeps the
/// last [`ForwardedIds::KEPT`] ids listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub(crate) struct ForwardedIds(VecDeque<String>);

impl ForwardedIds {
    /// How many ids are kept at most.
    pub(crate) const KEPT: usize = 512;

    /// Whether `message_id` was forwarded.
    pub(crate) fn contains(&self, message_id: &str) -> bool {
        self.0.iter().any(|id| id == message_id)
    }

    /// Records `message_id` as forwarded, as the most recent id.
    pub(crate) fn record(&mut self, message_id: impl Into<String>) {
        let message_id = message_id.into();
        self.0.retain(|id| *id != message_id);
        self.0.push_back(message_id);
        while self.0.len() > Self::KEPT {
            self.0.pop_front();
        }
    }

    /// Whether nothing was forwarded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids, oldest first.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// How many ids are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The client's ids of the user messages the harness echoed, by the root step that echoed each:
/// how messages rebuilt from the harness's history keep the ids the client sent. The newest
/// [`ForwardedIds::KEPT`] are kept (older ones get derived ids).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct UserSteps(VecDeque<(u32, String)>);

impl UserSteps {
    /// Records that root step `step` echoed the client's message `message_id`.
    pub(crate) fn insert(&mut self, step: u32, message_id: String) {
        self.0.retain(|(s, _)| *s != step);
        self.0.push_back((step, message_id));
        while self.0.len() > ForwardedIds::KEPT {
            self.0.pop_front();
        }
    }

    /// The client's id of the message root step `step` echoed.
    pub(crate) fn get(&self, step: u32) -> Option<&str> {
        self.0
            .iter()
            .find(|(s, _)| *s == step)
            .map(|(_, id)| id.as_str())
    }

    /// Forgets everything (the conversation was replaced).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

impl<S: Into<String>> FromIterator<S> for ForwardedIds {
    /// The ids recorded in order.
    fn from_iter<I: IntoIterator<Item = S>>(ids: I) -> Self {
        let mut forwarded = Self::default();
        for id in ids {
            forwarded.record(id);
        }
        forwarded
    }
}

impl From<Vec<String>> for ForwardedIds {
    fn from(ids: Vec<String>) -> Self {
        ids.into_iter().collect()
    }
}

impl From<ForwardedIds> for Vec<String> {
    fn from(ids: ForwardedIds) -> Self {
        ids.0.into()
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
    /// Frontend tool calls awaiting a `ToolMessage`.
    #[serde(default)]
    pub(crate) pending_frontend_tools: Vec<PendingTool>,
    /// The client's ids of the user messages, by the step that echoed each.
    #[serde(default)]
    pub(crate) user_steps: UserSteps,
    /// The thread's workspace directory.
    #[serde(default)]
    pub(crate) workspace: PathBuf,
    /// A turn was in flight when the record was written (cleared when it ends): found set
    /// when the thread is next served, the server that drove it stopped without ending it.
    #[serde(default)]
    pub(crate) turn_in_flight: bool,
    /// When the record was last written (Unix seconds); set by [`ThreadStore::put`].
    #[serde(default)]
    pub(crate) updated_at: u64,
}

/// The file as written: the format version and thread id around the record.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordFile {
    version: u32,
    thread_id: String,
    record: ThreadRecord,
}

/// A durable, bounded map from thread id to [`ThreadRecord`].
pub(crate) struct ThreadStore {
    dir: PathBuf,
    limits: StoreLimits,
    clock: Box<dyn Fn() -> u64 + Send + Sync>,
    index: Mutex<Index>,
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
    /// Loads the index of every record; drops expired records, evicts the oldest beyond
    /// `max_threads`, moves unreadable files aside and removes temp files left by a crash.
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
        let limits = StoreLimits {
            max_threads: limits.max_threads.max(1),
            ..limits
        };
        fs::create_dir_all(dir).map_err(io_error("create the thread store directory", dir))?;
        let store = Self {
            dir: dir.to_owned(),
            limits,
            clock: Box::new(clock),
            index: Mutex::new(Index::default()),
        };
        let now = store.now();
        let mut loaded = Vec::new();
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
                // Left by a write interrupted before its rename: never a committed record.
                if let Err(error) = fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), %error, "Could not remove a leftover temp file of the thread store.");
                }
                continue;
            }
            if !is_record_name(name) {
                continue;
            }
            match read_record(&path) {
                Ok(Read::Record { thread_id, record }) => {
                    if record_file_name(&thread_id) != name {
                        move_aside(&path, "its name does not match the thread id it holds");
                    } else if store.expired(record.updated_at, now) {
                        remove_quietly(&path, "expired");
                    } else {
                        loaded.push((record.updated_at, thread_id));
                    }
                }
                Ok(Read::NewerVersion(version)) => {
                    tracing::warn!(path = %path.display(), version, "Ignoring a thread record written by a newer version of the server.");
                }
                Err(Unreadable::Missing) => {}
                Err(Unreadable::Corrupt(reason)) => move_aside(&path, &reason),
            }
        }
        // Oldest first, so sequence numbers follow update order.
        loaded.sort();
        let mut index = store.lock();
        for (updated_at, thread_id) in loaded {
            index.touch(thread_id, updated_at);
        }
        store.evict_over_limit(&mut index);
        drop(index);
        Ok(store)
    }

    /// The directory holding the records.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The record of a thread, if one is remembered and not expired. A record that turns out
    /// unreadable is moved aside (logged) and reads as absent.
    pub(crate) fn get(&self, thread_id: &str) -> Option<ThreadRecord> {
        let now = self.now();
        let mut index = self.lock();
        let path = self.path_of(thread_id);
        let Some(updated_at) = index.updated_at(thread_id) else {
            // Not written nor seen by this process: another server sharing the directory (a
            // replica) may have written it since the index was loaded.
            return self.adopt(&mut index, thread_id, &path, now);
        };
        if self.expired(updated_at, now) {
            index.remove(thread_id);
            remove_quietly(&path, "expired");
            return None;
        }
        match read_record(&path) {
            Ok(Read::Record {
                thread_id: stored,
                record,
            }) if stored == thread_id => return Some(record),
            Ok(Read::Record { .. }) => {
                move_aside(&path, "it holds a different thread id");
            }
            Ok(Read::NewerVersion(version)) => {
                tracing::warn!(path = %path.display(), version, "Ignoring a thread record written by a newer version of the server.");
            }
            Err(Unreadable::Missing) => {
                tracing::warn!(path = %path.display(), "A thread record disappeared from the store.");
            }
            Err(Unreadable::Corrupt(reason)) => move_aside(&path, &reason),
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
        path: &Path,
        now: u64,
    ) -> Option<ThreadRecord> {
        match read_record(path) {
            Ok(Read::Record {
                thread_id: stored,
                record,
            }) if stored == thread_id && !self.expired(record.updated_at, now) => {
                index.touch(thread_id.to_owned(), record.updated_at);
                Some(record)
            }
            _ => None,
        }
    }

    /// Saves a thread's record, replacing any previous one.
    ///
    /// `updated_at` is set to now. When this makes more than `max_threads` records, the least
    /// recently updated ones are dropped.
    pub(crate) fn put(&self, thread_id: &str, record: &ThreadRecord) -> Result<(), SessionError> {
        let now = self.now();
        let mut record = record.clone();
        record.updated_at = now;
        let path = self.path_of(thread_id);
        let file = RecordFile {
            version: FORMAT_VERSION,
            thread_id: thread_id.to_owned(),
            record,
        };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|source| SessionError::RecordEncode {
                path: path.clone(),
                source,
            })?;
        // The lock covers the write so the index and the files agree on who wrote last.
        let mut index = self.lock();
        write_atomically(&self.dir, &path, &bytes)?;
        index.touch(thread_id.to_owned(), now);
        self.evict_over_limit(&mut index);
        Ok(())
    }

    /// Forgets a thread. Returns whether it was remembered.
    #[cfg(test)]
    pub(crate) fn remove(&self, thread_id: &str) -> Result<bool, SessionError> {
        let mut index = self.lock();
        let known = index.remove(thread_id);
        let path = self.path_of(thread_id);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(known),
            Err(source) => Err(store_io("remove the thread record", &path, source)),
        }
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

    /// Drops the records older than the TTL; returns how many were dropped.
    pub(crate) fn sweep(&self) -> usize {
        let now = self.now();
        let mut index = self.lock();
        let mut dropped = 0;
        while let Some((updated_at, thread_id)) = index.oldest() {
            if !self.expired(updated_at, now) {
                break;
            }
            index.remove(&thread_id);
            let path = self.path_of(&thread_id);
            // Another process sharing the directory may have written it since.
            if let Ok(Read::Record { record, .. }) = read_record(&path)
                && !self.expired(record.updated_at, now)
            {
                index.touch(thread_id, record.updated_at);
                continue;
            }
            remove_quietly(&path, "expired");
            dropped += 1;
        }
        dropped
    }

    fn now(&self) -> u64 {
        (self.clock)()
    }

    fn lock(&self) -> MutexGuard<'_, Index> {
        // The index is consistent between statements, so a panic elsewhere cannot leave it
        // half-updated: keep serving rather than propagate the poison.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expired(&self, updated_at: u64, now: u64) -> bool {
        now.saturating_sub(updated_at) > self.limits.ttl.as_secs()
    }

    fn path_of(&self, thread_id: &str) -> PathBuf {
        self.dir.join(record_file_name(thread_id))
    }

    fn evict_over_limit(&self, index: &mut Index) {
        while index.by_thread.len() > self.limits.max_threads {
            let Some((_, thread_id)) = index.oldest() else {
                break;
            };
            index.remove(&thread_id);
            remove_quietly(&self.path_of(&thread_id), "evicted");
        }
    }
}

/// Thread id → last update, and the same ordered by age for eviction and sweeping.
#[derive(Debug, Default)]
struct Index {
    by_thread: HashMap<String, (u64, u64)>,
    /// (updated_at, sequence) → thread id; the sequence orders updates within one second.
    by_age: BTreeMap<(u64, u64), String>,
    next_seq: u64,
}

impl Index {
    fn touch(&mut self, thread_id: String, updated_at: u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.by_thread.insert(thread_id.clone(), (updated_at, seq)) {
            self.by_age.remove(&old);
        }
        self.by_age.insert((updated_at, seq), thread_id);
    }

    fn remove(&mut self, thread_id: &str) -> bool {
        match self.by_thread.remove(thread_id) {
            Some(key) => {
                self.by_age.remove(&key);
                true
            }
            None => false,
        }
    }

    fn updated_at(&self, thread_id: &str) -> Option<u64> {
        self.by_thread
            .get(thread_id)
            .map(|&(updated_at, _)| updated_at)
    }

    fn oldest(&self) -> Option<(u64, String)> {
        self.by_age
            .first_key_value()
            .map(|(&(updated_at, _), thread_id)| (updated_at, thread_id.clone()))
    }
}

/// The file name of a thread's record: hex SHA-256 of the id.
fn record_file_name(thread_id: &str) -> String {
    let mut name = crate::sha256_hex(thread_id.as_bytes(), 32);
    name.push('.');
    name.push_str(RECORD_EXTENSION);
    name
}

fn is_record_name(name: &str) -> bool {
    name.strip_suffix(RECORD_EXTENSION)
        .and_then(|stem| stem.strip_suffix('.'))
        .is_some_and(|hash| {
            hash.len() == 64
                && hash
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
        })
}

/// A record file as read.
enum Read {
    Record {
        thread_id: String,
        record: ThreadRecord,
    },
    /// Written by a newer build: left alone.
    NewerVersion(u64),
}

/// Why a record file could not be used.
enum Unreadable {
    /// It is gone.
    Missing,
    /// It cannot be read or parsed (the reason, for the log).
    Corrupt(String),
}

fn read_record(path: &Path) -> Result<Read, Unreadable> {
    let mut bytes = Vec::new();
    let read = File::open(path).and_then(|file| {
        // One byte over the cap tells "too large" apart from "exactly at the cap".
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)
    });
    match read {
        Ok(_) if bytes.len() as u64 > MAX_FILE_BYTES => {
            return Err(Unreadable::Corrupt(format!(
                "it is larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(Unreadable::Missing),
        Err(error) => return Err(Unreadable::Corrupt(format!("it cannot be read: {error}"))),
    }
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|error| Unreadable::Corrupt(format!("it is not valid JSON: {error}")))?;
    let version = value.get("version").and_then(Value::as_u64);
    match version {
        Some(version) if version > u64::from(FORMAT_VERSION) => {
            return Ok(Read::NewerVersion(version));
        }
        Some(_) => {}
        None => {
            return Err(Unreadable::Corrupt("it has no format version".to_owned()));
        }
    }
    let file: RecordFile = serde_json::from_value(value)
        .map_err(|error| Unreadable::Corrupt(format!("it is not a thread record: {error}")))?;
    Ok(Read::Record {
        thread_id: file.thread_id,
        record: file.record,
    })
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let mut temp_name = path.file_name().unwrap_or_default().to_owned();
    temp_name.push(format!(".{}{TEMP_SUFFIX}", std::process::id()));
    let temp = dir.join(temp_name);
    let written = File::create(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        // Flushed before the rename, or a crash could publish an empty file.
        file.sync_all()
    });
    if let Err(source) = written {
        let _ = fs::remove_file(&temp);
        return Err(store_io("write the thread record", &temp, source));
    }
    if let Err(source) = fs::rename(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(store_io("replace the thread record", path, source));
    }
    sync_dir(dir);
    Ok(())
}

/// Makes a rename in `dir` durable. Best effort: not every platform can sync a directory, and
/// the record is already complete on disk.
fn sync_dir(dir: &Path) {
    if let Err(error) = File::open(dir).and_then(|dir| dir.sync_all()) {
        tracing::debug!(dir = %dir.display(), %error, "Could not sync the thread store directory.");
    }
}

/// Renames an unusable record to `<name>.corrupt` so it is kept for inspection but never
/// read again.
fn move_aside(path: &Path, reason: &str) {
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
