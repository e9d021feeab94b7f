//! Thread records persisted off the run path.
//!
//! A run hands its thread's record over and goes on: the thread's task never waits for a disk
//! write. The newest record of each thread waits in memory until a background task writes it
//! (records written in a burst are coalesced per thread); reads see a waiting record before the
//! file, so a thread resumed meanwhile gets its newest state. A batch is written in two steps:
//! every record reaches the volume (other replicas and a restarted server read it from then
//! on), then each is flushed to disk. A run's terminal event waits for the first step only
//! ([`RecordWriter::settled`]): once a client is told its turn finished, a replica that takes
//! the thread over, or this server restarted after a kill, reads the record that says so.
//! Shutdown flushes.
//!
//! A record put while its thread's lease was held is dropped unwritten once the lease's end
//! has passed (a replica frozen past it): another replica may own the record by then.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{ThreadRecord, ThreadStore};

/// The newest unwritten record of one thread.
struct Waiting {
    version: u64,
    record: ThreadRecord,
    /// The end of the thread's lease when the record was put (none: no lease is needed):
    /// after it the record is not this server's to write.
    valid_until: Option<Instant>,
    /// The oldest version put for the thread that no write has tried yet: versions before it
    /// are settled (written, or failed and reported), even while a newer record waits.
    unsettled_from: u64,
}

impl Waiting {
    /// Whether the thread's lease ended before `now`: the record is no longer ours to write.
    fn lease_ended(&self, now: Instant) -> bool {
        self.valid_until.is_some_and(|end| end <= now)
    }
}

type WaitingRecords = Arc<Mutex<HashMap<String, Waiting>>>;

/// The write-behind front of a [`ThreadStore`].
pub(crate) struct RecordWriter {
    store: Arc<ThreadStore>,
    /// The newest unwritten record of each thread.
    waiting: WaitingRecords,
    next_version: Mutex<u64>,
    wake: Arc<Notify>,
    /// Held while records are written, so a flush waits for a write in progress.
    writing: tokio::sync::Mutex<()>,
    /// Counts the writes and removals done, for those who follow the store's changes and
    /// those who wait for a record to settle.
    written: Arc<tokio::sync::watch::Sender<u64>>,
    /// The save dir's volume was full at the last write to it (a record's or a lease's): what a
    /// turn does now could not be kept.
    full: AtomicBool,
}

impl RecordWriter {
    /// A writer for `store`, with its background task (call inside a tokio runtime; the task
    /// ends when the writer is dropped).
    pub(crate) fn start(store: ThreadStore) -> Arc<Self> {
        let writer = Arc::new(Self {
            store: Arc::new(store),
            waiting: Arc::new(Mutex::new(HashMap::new())),
            next_version: Mutex::new(0),
            wake: Arc::new(Notify::new()),
            writing: tokio::sync::Mutex::new(()),
            written: Arc::new(tokio::sync::watch::channel(0).0),
            full: AtomicBool::new(false),
        });
        tokio::spawn(write_behind(Arc::downgrade(&writer), writer.wake.clone()));
        writer
    }

    /// Queues `record` as the thread's newest (replacing one still waiting), to be written
    /// only before `valid_until` (the end of the thread's lease, if it needs one). Returns its
    /// version, for [`RecordWriter::settled`].
    pub(crate) fn put(
        &self,
        thread_id: &str,
        record: ThreadRecord,
        valid_until: Option<Instant>,
    ) -> u64 {
        let version = {
            let mut next = lock(&self.next_version);
            *next += 1;
            *next
        };
        let mut waiting = lock(&self.waiting);
        let unsettled_from = waiting
            .get(thread_id)
            .map_or(version, |older| older.unsettled_from);
        waiting.insert(
            thread_id.to_owned(),
            Waiting {
                version,
                record,
                valid_until,
                unsettled_from,
            },
        );
        drop(waiting);
        self.wake.notify_one();
        version
    }

    /// Resolves once the thread's record of `version` (or a newer one) is on the volume, or its
    /// write failed (and was reported), or it was dropped with the thread's lease; `None` when
    /// that is so already.
    pub(crate) fn settled(
        &self,
        thread_id: &str,
        version: u64,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        // Subscribed before the check, so a write between the two is not missed.
        let mut written = self.written.subscribe();
        let is_settled = {
            let waiting = self.waiting.clone();
            let thread_id = thread_id.to_owned();
            move || {
                lock(&waiting)
                    .get(&thread_id)
                    .is_none_or(|w| w.unsettled_from > version)
            }
        };
        if is_settled() {
            return None;
        }
        Some(async move {
            while !is_settled() {
                if written.changed().await.is_err() {
                    return;
                }
            }
        })
    }

    /// The thread's newest record: one still waiting, else the file's.
    pub(crate) async fn get(&self, thread_id: &str) -> Option<ThreadRecord> {
        if let Some(waiting) = lock(&self.waiting).get(thread_id) {
            return Some(waiting.record.clone());
        }
        let store = self.store.clone();
        let id = thread_id.to_owned();
        match tokio::task::spawn_blocking(move || store.get(&id)).await {
            Ok(record) => record,
            Err(e) => {
                tracing::warn!(thread_id, error = %e, "reading the thread record failed; starting the thread over");
                None
            }
        }
    }

    /// Writes every waiting record now, and makes them durable.
    pub(crate) async fn flush(&self) {
        let _writing = self.writing.lock().await;
        let now = Instant::now();
        let (batch, expired) = {
            let mut waiting = lock(&self.waiting);
            let expired: Vec<String> = waiting
                .iter()
                .filter(|(_, w)| w.lease_ended(now))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &expired {
                waiting.remove(id);
            }
            let batch: Vec<(String, u64, ThreadRecord)> = waiting
                .iter()
                .map(|(id, w)| (id.clone(), w.version, w.record.clone()))
                .collect();
            (batch, expired)
        };
        for thread_id in &expired {
            tracing::warn!(
                thread_id,
                "the thread's lease ended before its record was written (this server was paused?): the record is dropped, another replica may own the thread now"
            );
        }
        if !expired.is_empty() {
            self.written.send_modify(|n| *n += 1);
        }
        if batch.is_empty() {
            return;
        }
        let (store, waiting, written) = (
            self.store.clone(),
            self.waiting.clone(),
            self.written.clone(),
        );
        let found_full =
            tokio::task::spawn_blocking(move || write_batch(&store, &waiting, &written, batch))
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "persisting thread records failed");
                    false
                });
        // A write that passes says little of the room left (a few bytes freed elsewhere let a
        // small one through): only `storage_full` clears the mark.
        if found_full {
            self.saw_storage(true);
        }
    }

    /// What a write to the save dir's volume found: full (a record's write here, a lease's in
    /// the thread's task), or room ([`RecordWriter::storage_full`]'s reading of its free space).
    pub(crate) fn saw_storage(&self, full: bool) {
        if self.full.swap(full, Ordering::SeqCst) != full {
            if full {
                tracing::error!(
                    "the save dir's volume is full: runs are refused until it has room"
                );
            } else {
                tracing::info!("the save dir's volume has room again");
            }
        }
    }

    /// Whether the save dir's volume is full: after a write failed for want of room, its free
    /// space is read (off the async threads) to tell whether it has room again.
    pub(crate) async fn storage_full(&self) -> bool {
        if !self.full.load(Ordering::SeqCst) {
            return false;
        }
        let store = self.store.clone();
        let room = tokio::task::spawn_blocking(move || store.has_room())
            .await
            .unwrap_or(false);
        self.saw_storage(!room);
        !room
    }

    /// Changes whenever records were written or removed.
    pub(crate) fn written(&self) -> tokio::sync::watch::Receiver<u64> {
        self.written.subscribe()
    }

    /// Every thread's newest record: those still waiting, else the files' (written by this
    /// server or by another sharing the store).
    pub(crate) async fn scan(&self) -> Vec<(String, ThreadRecord)> {
        // What waits is read before the files too: a record written (and no longer waiting)
        // while the files are read may have been read before it reached them.
        let waiting_before = self.waiting_records();
        let store = self.store.clone();
        let mut records: HashMap<String, ThreadRecord> =
            tokio::task::spawn_blocking(move || store.scan())
                .await
                .unwrap_or_default()
                .into_iter()
                .collect();
        records.extend(waiting_before);
        records.extend(self.waiting_records());
        records.into_iter().collect()
    }

    fn waiting_records(&self) -> Vec<(String, ThreadRecord)> {
        lock(&self.waiting)
            .iter()
            .map(|(id, waiting)| (id.clone(), waiting.record.clone()))
            .collect()
    }

    /// Whether `identity` may use `thread_id` (see [`ThreadStore::admit`]), off the async
    /// threads.
    pub(crate) async fn admit(
        &self,
        thread_id: &str,
        identity: &str,
        max: usize,
    ) -> std::io::Result<super::owners::Admission> {
        let (store, id, who) = (
            self.store.clone(),
            thread_id.to_owned(),
            identity.to_owned(),
        );
        tokio::task::spawn_blocking(move || store.admit(&id, &who, max))
            .await
            .map_err(std::io::Error::other)?
    }

    /// Frees `thread_id` when `identity` claimed it and it has no record (see
    /// [`ThreadStore::release_unrecorded`]).
    pub(crate) async fn release_unrecorded(&self, thread_id: &str, identity: &str) -> bool {
        let (store, id, who) = (
            self.store.clone(),
            thread_id.to_owned(),
            identity.to_owned(),
        );
        tokio::task::spawn_blocking(move || store.release_unrecorded(&id, &who))
            .await
            .unwrap_or(false)
    }

    /// Moves the claims an earlier version kept in `legacy` beside the records (blocking).
    pub(crate) fn adopt_legacy_claims(&self, legacy: &std::path::Path) -> std::io::Result<usize> {
        self.store.adopt_legacy_claims(legacy)
    }

    /// Drops expired records (blocking I/O, off the async threads); returns them.
    pub(crate) async fn sweep(&self) -> Vec<(String, ThreadRecord)> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.sweep())
            .await
            .unwrap_or_default()
    }

    /// Forgets a thread now: its waiting record and its files.
    pub(crate) async fn remove(&self, thread_id: &str) {
        let _writing = self.writing.lock().await;
        lock(&self.waiting).remove(thread_id);
        let (store, id) = (self.store.clone(), thread_id.to_owned());
        match tokio::task::spawn_blocking(move || store.remove(&id)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(thread_id, error = %e, "could not remove the thread record")
            }
            Err(e) => tracing::warn!(thread_id, error = %e, "could not remove the thread record"),
        }
        self.written.send_modify(|n| *n += 1);
    }

    /// How many threads are remembered (written or waiting).
    pub(crate) fn len(&self) -> usize {
        let waiting = lock(&self.waiting);
        let new = waiting.keys().filter(|id| !self.store.knows(id)).count();
        self.store.len() + new
    }
}

impl Drop for RecordWriter {
    /// Writes what still waits (an agent dropped without a shutdown) and ends the task.
    fn drop(&mut self) {
        let now = Instant::now();
        for (id, waiting) in lock(&self.waiting).drain() {
            if waiting.lease_ended(now) {
                continue;
            }
            if let Err(e) = self.store.put(&id, &waiting.record) {
                tracing::warn!(thread_id = %id, error = %e, "could not persist the thread record");
            }
        }
        self.wake.notify_one();
    }
}

/// Writes `batch` (thread, version, record) to the volume, settles what was written in
/// `waiting` and tells `written`, then flushes what was written to disk. Returns whether a
/// write found the volume full, for [`RecordWriter::saw_storage`].
fn write_batch(
    store: &ThreadStore,
    waiting: &WaitingRecords,
    written: &tokio::sync::watch::Sender<u64>,
    batch: Vec<(String, u64, ThreadRecord)>,
) -> bool {
    let mut found_full = false;
    let mut tried = Vec::with_capacity(batch.len());
    let mut unsynced = Vec::with_capacity(batch.len());
    for (id, version, record) in batch {
        let ok = match store.put_unsynced(&id, &record) {
            Ok(written) => {
                unsynced.push(written);
                true
            }
            Err(e) => {
                tracing::warn!(thread_id = %id, error = %e, "could not persist the thread record");
                found_full |= e.is_storage_full();
                false
            }
        };
        tried.push((id, version, ok));
    }
    {
        let mut waiting = lock(waiting);
        for (id, version, ok) in tried {
            let Some(entry) = waiting.get_mut(&id) else {
                continue;
            };
            // A newer record that arrived during the write stays for the next round, as does
            // one whose write failed.
            if ok && entry.version == version {
                waiting.remove(&id);
            } else {
                entry.unsettled_from = entry.unsettled_from.max(version + 1);
            }
        }
    }
    written.send_modify(|n| *n += 1);
    if let Err(e) = store.sync(unsynced) {
        tracing::warn!(error = %e, "could not make the thread records durable");
        found_full |= e.is_storage_full();
    }
    found_full
}

/// Writes waiting records whenever some arrive; ends once the writer is gone.
async fn write_behind(writer: Weak<RecordWriter>, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let Some(writer) = writer.upgrade() else {
            return;
        };
        writer.flush().await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    mutex.lock()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreLimits;

    fn record(conversation_id: &str) -> ThreadRecord {
        ThreadRecord {
            conversation_id: conversation_id.into(),
            forwarded: ["m1"].into_iter().collect(),
            pending_frontend_tools: Vec::new(),
            workspace: "/ws".into(),
            updated_at: 0,
            ..ThreadRecord::default()
        }
    }

    fn store(dir: &std::path::Path) -> ThreadStore {
        ThreadStore::open(dir, StoreLimits::default()).unwrap()
    }

    #[tokio::test]
    async fn a_waiting_record_is_read_before_the_file_and_a_flush_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let writer = RecordWriter::start(store(dir.path()));
        writer.put("t", record("old"), None);
        writer.flush().await;
        writer.put("t", record("new"), None);
        assert_eq!(writer.get("t").await.unwrap().conversation_id, "new");
        writer.flush().await;
        assert!(
            lock(&writer.waiting).is_empty(),
            "nothing waits after a flush"
        );
        assert_eq!(
            store(dir.path()).get("t").unwrap().conversation_id,
            "new",
            "the file holds the newest record"
        );
    }

    #[tokio::test]
    async fn the_background_task_writes_what_was_put() {
        let dir = tempfile::tempdir().unwrap();
        let writer = RecordWriter::start(store(dir.path()));
        writer.put("t", record("c"), None);
        for _ in 0..200 {
            if lock(&writer.waiting).is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(lock(&writer.waiting).is_empty(), "written without a flush");
        assert_eq!(store(dir.path()).get("t").unwrap().conversation_id, "c");
    }

    /// A volume found full stays so until its free space says otherwise: a small write that
    /// passes meanwhile (a few bytes freed elsewhere) does not clear the mark (the replica soak
    /// saw runs let through that way whose answers the harness could not save).
    #[tokio::test]
    async fn a_write_that_passes_does_not_clear_a_full_volume_and_the_free_space_does() {
        let dir = tempfile::tempdir().unwrap();
        let writer = RecordWriter::start(store(dir.path()));
        writer.saw_storage(true);
        writer.put("t", record("written"), None);
        writer.flush().await;
        assert!(
            store(dir.path()).get("t").is_some(),
            "the record was written"
        );
        assert!(
            writer.full.load(Ordering::SeqCst),
            "a write that passed cleared the mark"
        );
        assert!(
            !writer.storage_full().await,
            "the free space clears it (the temporary directory has room)"
        );
    }

    /// A writer without its background task: records are written only by a flush or the drop.
    fn idle_writer(dir: &std::path::Path) -> RecordWriter {
        RecordWriter {
            store: Arc::new(store(dir)),
            waiting: Arc::new(Mutex::new(HashMap::new())),
            next_version: Mutex::new(0),
            wake: Arc::new(Notify::new()),
            writing: tokio::sync::Mutex::new(()),
            written: Arc::new(tokio::sync::watch::channel(0).0),
            full: AtomicBool::new(false),
        }
    }

    #[tokio::test]
    async fn dropping_the_writer_writes_what_still_waits() {
        let dir = tempfile::tempdir().unwrap();
        let writer = idle_writer(dir.path());
        writer.put("t", record("dropped"), None);
        assert!(store(dir.path()).get("t").is_none(), "not written yet");
        drop(writer);
        assert_eq!(
            store(dir.path()).get("t").unwrap().conversation_id,
            "dropped"
        );
    }

    /// What a run's terminal event waits for: its record on the volume, where another replica
    /// (or this server restarted after a kill) reads it; a newer record put meanwhile does not
    /// settle an older version until it is written itself.
    #[tokio::test]
    async fn a_version_settles_when_a_write_puts_it_or_a_newer_one_on_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let writer = idle_writer(dir.path());
        let first = writer.put("t", record("first"), None);
        let waits = writer.settled("t", first).expect("not written yet");
        let second = writer.put("t", record("second"), None);
        assert!(
            writer.settled("t", first).is_some(),
            "coalesced, not written"
        );
        let waiter = tokio::spawn(waits);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "settled before any write");
        writer.flush().await;
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("the write settles the waiter")
            .unwrap();
        assert!(writer.settled("t", second).is_none());
        assert_eq!(
            store(dir.path()).get("t").unwrap().conversation_id,
            "second",
            "another reader of the volume sees the newest record"
        );
        assert!(writer.settled("other", 1).is_none(), "nothing waits for it");
    }

    /// A replica frozen past its lease must not write, once thawed, over the record the
    /// replica that took the thread over keeps now.
    #[tokio::test]
    async fn a_record_whose_lease_ended_before_its_write_is_dropped_and_settles() {
        let dir = tempfile::tempdir().unwrap();
        let ours = store(dir.path());
        ours.put("t", &record("the new holder's")).unwrap();
        let writer = idle_writer(dir.path());
        let ended = Instant::now() - std::time::Duration::from_millis(1);
        let stale = writer.put("t", record("stale"), Some(ended));
        let live = writer.put(
            "u",
            record("live"),
            Some(Instant::now() + std::time::Duration::from_secs(60)),
        );
        writer.flush().await;
        assert_eq!(
            store(dir.path()).get("t").unwrap().conversation_id,
            "the new holder's",
            "the stale record was written"
        );
        assert!(
            writer.settled("t", stale).is_none(),
            "a dropped record settles"
        );
        assert_eq!(store(dir.path()).get("u").unwrap().conversation_id, "live");
        assert!(writer.settled("u", live).is_none());
        writer.put("t", record("stale again"), Some(ended));
        drop(writer);
        assert_eq!(
            store(dir.path()).get("t").unwrap().conversation_id,
            "the new holder's",
            "the drop wrote a stale record"
        );
    }

    /// A failed write settles its version (the failure was reported) and keeps the record for
    /// the next round.
    #[tokio::test]
    async fn a_failed_write_settles_its_version_and_keeps_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let writer = idle_writer(dir.path());
        let version = writer.put("t", record("kept"), None);
        // The store's directory gone: the write fails, even for root.
        let moved = dir.path().with_extension("away");
        std::fs::rename(dir.path(), &moved).unwrap();
        writer.flush().await;
        std::fs::rename(&moved, dir.path()).unwrap();
        assert!(writer.settled("t", version).is_none(), "a failure settles");
        assert_eq!(writer.get("t").await.unwrap().conversation_id, "kept");
        writer.flush().await;
        assert_eq!(store(dir.path()).get("t").unwrap().conversation_id, "kept");
    }
}
