//! A thread's record on disk: two slot files, written in turn and in place.
//!
//! Replacing a file by rename gives each write a new inode and frees the old one; under load
//! the filesystem's search for a free inode among the recently freed ones became a quarter of
//! the server's CPU. Two slots written alternately in place keep the guarantee of the rename —
//! a crash leaves the previous record or the new one — because a write never touches the slot
//! that holds the newest record: each slot carries a sequence number and the digest of its
//! record, and a read takes the valid slot with the highest sequence. A torn slot (a crash
//! during its write) fails its digest or its parse and is simply older than the other one.
//!
//! Slot A is `<sha256 of the thread id>.json`, the name of the single file of format version 1
//! (read as sequence 0, without a digest: it was written whole by a rename); slot B is
//! `<sha256>.b.json`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{FORMAT_VERSION, MAX_FILE_BYTES, SINGLE_FILE_VERSION, ThreadRecord};

const SLOT_A_SUFFIX: &str = ".json";
const SLOT_B_SUFFIX: &str = ".b.json";

/// One of a thread's two record files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Slot {
    A,
    B,
}

impl Slot {
    /// Both slots.
    pub(super) const BOTH: [Slot; 2] = [Slot::A, Slot::B];

    /// The slot the next write goes to when this one holds the newest record.
    pub(super) fn other(self) -> Self {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Slot::A => SLOT_A_SUFFIX,
            Slot::B => SLOT_B_SUFFIX,
        }
    }
}

/// Where a thread's newest record is: its slot and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) slot: Slot,
    pub(super) sequence: u64,
}

impl Head {
    /// Where the write after this one goes.
    pub(super) fn next(self) -> Self {
        Self {
            slot: self.slot.other(),
            sequence: self.sequence + 1,
        }
    }

    /// Where a thread's first write goes.
    pub(super) const FIRST: Head = Head {
        slot: Slot::A,
        sequence: 1,
    };
}

/// The stem of a thread's files: the hex SHA-256 of its id (ids are client input and never
/// become a path).
pub(super) fn stem_of(thread_id: &str) -> String {
    crate::hash::sha256_hex(thread_id.as_bytes(), 32)
}

/// The path of one slot of the thread whose files are named `stem`.
pub(super) fn slot_path(dir: &Path, stem: &str, slot: Slot) -> PathBuf {
    dir.join(format!("{stem}{}", slot.suffix()))
}

/// The stem and slot of a record file name, or `None` for any other name.
pub(super) fn parse_name(name: &str) -> Option<(&str, Slot)> {
    let (stem, slot) = if let Some(stem) = name.strip_suffix(SLOT_B_SUFFIX) {
        (stem, Slot::B)
    } else {
        (name.strip_suffix(SLOT_A_SUFFIX)?, Slot::A)
    };
    let is_hash = stem.len() == 64
        && stem
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
    is_hash.then_some((stem, slot))
}

/// The file as written: the format version, thread id, sequence and digest around the record.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlotFile<'a> {
    version: u32,
    thread_id: String,
    /// Higher is newer; absent in the single-file format (read as 0).
    #[serde(default)]
    sequence: u64,
    /// [`digest`] of the thread id, sequence and record as written; absent in the single-file
    /// format (and required in any other).
    #[serde(default)]
    digest: Option<String>,
    #[serde(borrow)]
    record: &'a RawValue,
}

/// Only the version, read before the rest: a newer build's file may have another shape.
#[derive(Deserialize)]
struct VersionProbe {
    version: Option<u64>,
}

/// The bytes of a slot holding `record` as the thread's `sequence`th write.
pub(super) fn encode(
    thread_id: &str,
    sequence: u64,
    record: &ThreadRecord,
) -> serde_json::Result<Vec<u8>> {
    let record = serde_json::to_string_pretty(record)?;
    let record = RawValue::from_string(record)?;
    serde_json::to_vec_pretty(&SlotFile {
        version: FORMAT_VERSION,
        thread_id: thread_id.to_owned(),
        sequence,
        digest: Some(digest(thread_id, sequence, &record)),
        record: &record,
    })
}

/// Writes `bytes` over the slot at `path` (creating it if needed), flushing it to disk when
/// `durable`. Returns the file (to flush later when not `durable`) and whether it was created,
/// so the caller makes its directory entry durable.
pub(super) fn write_slot(path: &Path, bytes: &[u8], durable: bool) -> io::Result<(File, bool)> {
    let (mut file, created) = match OpenOptions::new().write(true).open(path) {
        Ok(file) => (file, false),
        Err(error) if error.kind() == io::ErrorKind::NotFound => (
            OpenOptions::new().write(true).create_new(true).open(path)?,
            true,
        ),
        Err(error) => return Err(error),
    };
    file.seek(SeekFrom::Start(0))?;
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)?;
    if durable {
        file.sync_data()?;
    }
    Ok((file, created))
}

/// What a slot's digest covers: everything that decides which slot is read. A write cut short
/// may leave the new sequence over the old record, or the reverse; neither may pass.
fn digest(thread_id: &str, sequence: u64, record: &RawValue) -> String {
    let mut covered = format!("{sequence}\n{thread_id}\n").into_bytes();
    covered.extend_from_slice(record.get().as_bytes());
    crate::hash::sha256_hex(&covered, 32)
}

/// A slot as read.
pub(super) enum SlotRead {
    Record {
        thread_id: String,
        sequence: u64,
        record: Box<ThreadRecord>,
    },
    /// Written by a newer build: left alone.
    NewerVersion(u64),
}

/// Why a slot cannot be used.
pub(super) enum Unreadable {
    /// It does not exist.
    Missing,
    /// It cannot be read, parsed or verified (the reason, for the log).
    Corrupt(String),
}

/// Reads one slot file.
pub(super) fn read_slot(path: &Path) -> Result<SlotRead, Unreadable> {
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
    let probe: VersionProbe = serde_json::from_slice(&bytes)
        .map_err(|error| Unreadable::Corrupt(format!("it is not valid JSON: {error}")))?;
    match probe.version {
        Some(version) if version > u64::from(FORMAT_VERSION) => {
            return Ok(SlotRead::NewerVersion(version));
        }
        Some(_) => {}
        None => return Err(Unreadable::Corrupt("it has no format version".to_owned())),
    }
    let file: SlotFile<'_> = serde_json::from_slice(&bytes)
        .map_err(|error| Unreadable::Corrupt(format!("it is not a thread record: {error}")))?;
    let sequence = if file.version <= SINGLE_FILE_VERSION {
        // Written whole by a rename: older than any slot.
        0
    } else {
        match &file.digest {
            Some(written) if *written == digest(&file.thread_id, file.sequence, file.record) => {}
            Some(_) => {
                return Err(Unreadable::Corrupt(
                    "it does not match its digest (a write was cut short)".to_owned(),
                ));
            }
            None => return Err(Unreadable::Corrupt("it has no digest".to_owned())),
        }
        file.sequence
    };
    let record: ThreadRecord = serde_json::from_str(file.record.get())
        .map_err(|error| Unreadable::Corrupt(format!("it is not a thread record: {error}")))?;
    Ok(SlotRead::Record {
        thread_id: file.thread_id,
        sequence,
        record: Box::new(record),
    })
}

/// What a thread's two slots hold together.
pub(super) enum Stored {
    /// The newest valid record. A slot that is unusable next to it was a write cut short and
    /// is overwritten by the next one.
    Record {
        head: Head,
        thread_id: String,
        record: Box<ThreadRecord>,
    },
    /// A slot written by a newer build: the thread is left alone.
    NewerVersion(u64),
    /// Neither slot exists.
    Absent,
    /// No slot is usable: each existing one with the reason.
    Corrupt(Vec<(PathBuf, String)>),
}

/// Reads both slots of the thread whose files are named `stem` and picks the newest valid one.
/// A slot holding another thread's id (its name does not match its content) is unusable.
pub(super) fn read_thread(dir: &Path, stem: &str) -> Stored {
    let mut newest: Option<(Head, String, ThreadRecord)> = None;
    let mut newer_version = None;
    let mut corrupt = Vec::new();
    for slot in Slot::BOTH {
        let path = slot_path(dir, stem, slot);
        match read_slot(&path) {
            Ok(SlotRead::Record {
                thread_id,
                sequence,
                record,
            }) => {
                if stem_of(&thread_id) != stem {
                    corrupt.push((
                        path,
                        "its name does not match the thread id it holds".into(),
                    ));
                } else if newest
                    .as_ref()
                    .is_none_or(|(head, ..)| sequence > head.sequence)
                {
                    newest = Some((Head { slot, sequence }, thread_id, *record));
                }
            }
            Ok(SlotRead::NewerVersion(version)) => newer_version = Some(version),
            Err(Unreadable::Missing) => {}
            Err(Unreadable::Corrupt(reason)) => corrupt.push((path, reason)),
        }
    }
    if let Some(version) = newer_version {
        return Stored::NewerVersion(version);
    }
    if let Some((head, thread_id, record)) = newest {
        for (path, reason) in &corrupt {
            tracing::debug!(path = %path.display(), reason, "A thread record slot is unusable; the other slot holds the record.");
        }
        return Stored::Record {
            head,
            thread_id,
            record: Box::new(record),
        };
    }
    if corrupt.is_empty() {
        Stored::Absent
    } else {
        Stored::Corrupt(corrupt)
    }
}
