//! Rewriting the owner a thread's record names, outside a running store: for the identity
//! migration at start (`identity_migration.rs`), before any store is opened on the directory.
//! A rewrite is an ordinary slot write (the slot not holding the newest record, the next
//! sequence), so a crash leaves the old record or the new one; the record's update time is
//! kept, so no thread's retention is renewed by it.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use super::slots::{self, Stored};
use super::{store_io, sync_dir};
use crate::error::SessionError;
use crate::owner::Owner;

/// Each thread recorded in `dir` and the owner its newest record names. Records that cannot be
/// read, or that a newer build wrote, are left out: the store sets them aside or leaves them
/// alone when it opens.
pub(crate) fn stored_owners(dir: &Path) -> Result<Vec<(String, Option<Owner>)>, SessionError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(store_io("list the thread store directory", dir, e)),
    };
    let stems: BTreeSet<String> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            slots::parse_name(&name).map(|(stem, _)| stem.to_owned())
        })
        .collect();
    Ok(stems
        .iter()
        .filter_map(|stem| match slots::read_thread(dir, stem) {
            Stored::Record {
                thread_id, record, ..
            } => Some((thread_id, record.owner)),
            _ => None,
        })
        .collect())
}

/// Makes the newest record of `thread_id` in `dir` name `to` where it names `from`. `Ok(false)`
/// when it does not (rewritten before, or gone): nothing is written then.
pub(crate) fn rewrite_owner(
    dir: &Path,
    thread_id: &str,
    from: &Owner,
    to: &Owner,
) -> Result<bool, SessionError> {
    let stem = slots::stem_of(thread_id);
    let Stored::Record {
        head,
        thread_id: stored,
        mut record,
    } = slots::read_thread(dir, &stem)
    else {
        return Ok(false);
    };
    if stored != thread_id || record.owner.as_ref() != Some(from) {
        return Ok(false);
    }
    record.owner = Some(to.clone());
    let head = head.next();
    let path = slots::slot_path(dir, &stem, head.slot);
    let bytes = slots::encode(thread_id, head.sequence, &record).map_err(|source| {
        SessionError::RecordEncode {
            path: path.clone(),
            source,
        }
    })?;
    if slots::write_slot(&path, &bytes, true)
        .map_err(|source| store_io("write the thread record", &path, source))?
        .1
    {
        sync_dir(dir);
    }
    Ok(true)
}
