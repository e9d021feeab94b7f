//! Every record in the store's directory, read fresh: written by this process or by any replica
//! sharing the directory, so a list of threads is the same on every replica. A thread's record
//! is read again only when its slot files changed (their length or modification time), so a
//! scan of a thousand unchanged threads reads their metadata and nothing more.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::MetadataExt as _;

use super::slots::{self, Slot, Stored};
use super::{ThreadRecord, ThreadStore};

/// What a scan saw of each thread's files, and the record it read from them.
#[derive(Default)]
pub(super) struct ScanCache(Mutex<HashMap<String, Cached>>);

/// One thread's files as last seen.
struct Cached {
    /// Each slot's (length, modification time in ns).
    fingerprint: Fingerprint,
    /// Its id and newest record (`None`: not a usable record).
    record: Option<(String, ThreadRecord)>,
}

type Fingerprint = BTreeMap<Slot, (u64, i128)>;

impl ThreadStore {
    /// Every thread's record not past its retention, as the files hold them now, in no
    /// particular order. Blocking: reads the directory (and the records that changed).
    pub(crate) fn scan(&self) -> Vec<(String, ThreadRecord)> {
        let now = self.now();
        let mut seen: HashMap<String, Fingerprint> = HashMap::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((stem, slot)) = name.to_str().and_then(slots::parse_name) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            let modified = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            seen.entry(stem.to_owned())
                .or_default()
                .insert(slot, (meta.len(), modified));
        }
        let mut cache = self.scanned.0.lock();
        cache.retain(|stem, _| seen.contains_key(stem));
        let mut records = Vec::with_capacity(seen.len());
        for (stem, fingerprint) in seen {
            let fresh = cache
                .get(&stem)
                .is_some_and(|cached| cached.fingerprint == fingerprint);
            if !fresh {
                let record = match slots::read_thread(&self.dir, &stem) {
                    Stored::Record {
                        thread_id, record, ..
                    } => Some((thread_id, *record)),
                    _ => None,
                };
                cache.insert(
                    stem.clone(),
                    Cached {
                        fingerprint,
                        record,
                    },
                );
            }
            if let Some((thread_id, record)) = cache.get(&stem).and_then(|c| c.record.as_ref())
                && !self.expired(record.updated_at, now)
            {
                records.push((thread_id.clone(), record.clone()));
            }
        }
        records
    }
}

#[cfg(test)]
mod tests {
    use super::super::StoreLimits;
    use super::*;

    #[test]
    fn a_scan_sees_what_another_store_on_the_directory_wrote_and_rereads_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let ours = ThreadStore::open(dir.path(), StoreLimits::default()).unwrap();
        let theirs = ThreadStore::open(dir.path(), StoreLimits::default()).unwrap();
        let record = |title: &str| ThreadRecord {
            conversation_id: "c".into(),
            title: title.into(),
            ..ThreadRecord::default()
        };
        ours.put("a", &record("first")).unwrap();
        theirs.put("b", &record("other replica's")).unwrap();
        let titles = |store: &ThreadStore| {
            let mut titles: Vec<(String, String)> = store
                .scan()
                .into_iter()
                .map(|(id, r)| (id, r.title))
                .collect();
            titles.sort();
            titles
        };
        assert_eq!(
            titles(&ours),
            [
                ("a".to_owned(), "first".to_owned()),
                ("b".to_owned(), "other replica's".to_owned())
            ]
        );
        theirs.put("a", &record("renamed elsewhere")).unwrap();
        theirs.remove("b").unwrap();
        assert_eq!(
            titles(&ours),
            [("a".to_owned(), "renamed elsewhere".to_owned())]
        );
    }
}
