//! The harness's own record of a conversation, cut at a step: what a fork starts from.
//!
//! The harness keeps each conversation in `<storage_dir>/<conversation id>.db` (SQLite in WAL
//! mode: a `-wal` file beside it holds what was not checkpointed yet). A new conversation
//! starts from a given history with `HarnessConfig.initial_trajectory`: a zstd frame holding a
//! serialized cortex `Trajectory`, whose fields are (found by experiment with 0.1.22, see
//! `tests/trajectory.rs`): 1 `trajectory_id`, 2 `steps` (each step's stored payload, in
//! order, from step 0), 4 `trajectory_type`, 6 `cascade_id` (must be set, and is the new
//! conversation's id), 7 `metadata`, 8 `source`. Generator and executor metadata (per model
//! call) are left out: they describe calls of the cut-off steps, and the harness does without.
//! The kept steps keep their indices in the new conversation.
//!
//! The database is the agent's to write, so it is read from a private copy (the caller reads
//! the files through the sandbox's door), with SQLite's defensive settings, and nothing read
//! from it is trusted beyond being bytes passed back to the harness.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Why a trajectory could not be read or cut.
#[derive(Debug, thiserror::Error)]
pub enum TrajectoryError {
    /// The saved conversation could not be read.
    #[error("the harness's record of the conversation could not be read: {0}")]
    Unreadable(String),
    /// The cut asks for steps the conversation does not have.
    #[error("the conversation has {have} steps, fewer than the {wanted} to keep")]
    TooShort {
        /// Steps the record holds.
        have: u32,
        /// Steps asked for.
        wanted: u32,
    },
}

/// A conversation's saved trajectory, read from a private copy of its database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedTrajectory {
    trajectory_type: Option<i64>,
    source: Option<i64>,
    steps: Vec<Vec<u8>>,
    metadata: Option<Vec<u8>>,
}

impl SavedTrajectory {
    /// Reads the database `db` (with its write-ahead log `wal`, if any): both are copied
    /// into a private directory first.
    pub fn read(db: &[u8], wal: Option<&[u8]>) -> Result<Self, TrajectoryError> {
        let unreadable = |e: &dyn std::fmt::Display| TrajectoryError::Unreadable(e.to_string());
        let dir = tempfile::tempdir().map_err(|e| unreadable(&e))?;
        let path = dir.path().join("t.db");
        std::fs::write(&path, db).map_err(|e| unreadable(&e))?;
        if let Some(wal) = wal {
            std::fs::write(dir.path().join("t.db-wal"), wal).map_err(|e| unreadable(&e))?;
        }
        Self::read_file(&path).map_err(|e| unreadable(&e))
    }

    fn read_file(path: &Path) -> rusqlite::Result<Self> {
        let db = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // A file someone else wrote: no schema-defined functions, no writes through it.
        db.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        db.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA,
            false,
        )?;
        let (trajectory_type, source) = db.query_row(
            "SELECT trajectory_type, source FROM trajectory_meta LIMIT 1",
            [],
            |row| Ok((row.get::<_, Option<i64>>(0)?, row.get::<_, Option<i64>>(1)?)),
        )?;
        let mut steps = Vec::new();
        let mut query = db.prepare("SELECT idx, step_payload FROM steps ORDER BY idx")?;
        let mut rows = query.query([])?;
        while let Some(row) = rows.next()? {
            let idx: i64 = row.get(0)?;
            if usize::try_from(idx).ok() != Some(steps.len()) {
                // A gap: what follows cannot be placed; keep the unbroken start.
                break;
            }
            steps.push(row.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default());
        }
        let metadata = db
            .query_row(
                "SELECT data FROM trajectory_metadata_blob LIMIT 1",
                [],
                |row| row.get::<_, Option<Vec<u8>>>(0),
            )
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        Ok(Self {
            trajectory_type,
            source,
            steps,
            metadata,
        })
    }

    /// How many steps the conversation has.
    pub fn len(&self) -> u32 {
        u32::try_from(self.steps.len()).unwrap_or(u32::MAX)
    }

    /// Whether it has no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The `initial_trajectory` of a new conversation `conversation_id` holding the first
    /// `keep` steps.
    pub fn cut(&self, keep: u32, conversation_id: &str) -> Result<Vec<u8>, TrajectoryError> {
        if keep > self.len() {
            return Err(TrajectoryError::TooShort {
                have: self.len(),
                wanted: keep,
            });
        }
        let mut out = Vec::new();
        bytes_field(&mut out, 1, conversation_id.as_bytes());
        bytes_field(&mut out, 6, conversation_id.as_bytes());
        if let Some(kind) = self.trajectory_type.filter(|k| *k != 0) {
            varint_field(&mut out, 4, kind);
        }
        if let Some(source) = self.source.filter(|s| *s != 0) {
            varint_field(&mut out, 8, source);
        }
        for step in self.steps.iter().take(keep as usize) {
            bytes_field(&mut out, 2, step);
        }
        if let Some(metadata) = self.metadata.as_deref().filter(|m| !m.is_empty()) {
            bytes_field(&mut out, 7, metadata);
        }
        Ok(zstd_stored(&out))
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, data: &[u8]) {
    varint(out, field << 3 | 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn varint_field(out: &mut Vec<u8>, field: u64, value: i64) {
    varint(out, field << 3);
    // Protobuf encodes a negative int64 as its two's complement.
    varint(out, value as u64);
}

/// `data` in a zstd frame of stored (raw) blocks (RFC 8878): what the harness decompresses,
/// with no compressor needed. Single segment, content size given, no checksum.
pub(crate) fn zstd_stored(data: &[u8]) -> Vec<u8> {
    const MAX_BLOCK: usize = 128 * 1024;
    let mut out = Vec::with_capacity(data.len() + 16 + data.len() / MAX_BLOCK * 3);
    out.extend_from_slice(&0xFD2F_B528_u32.to_le_bytes());
    // Frame header descriptor: an 8-byte content size, single segment.
    out.push(0b1110_0000);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    let mut chunks = data.chunks(MAX_BLOCK).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0]);
        return out;
    }
    while let Some(chunk) = chunks.next() {
        let last = u32::from(chunks.peek().is_none());
        // Last-block bit, block type 0 (raw), size.
        let header = last | (chunk.len() as u32) << 3;
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_zstd_frame_holds_the_data_in_raw_blocks() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let frame = zstd_stored(&data);
        assert_eq!(&frame[..4], &[0x28, 0xB5, 0x2F, 0xFD]);
        // Header (4 + 1 + 8), three blocks of 3-byte headers.
        assert_eq!(frame.len(), 13 + data.len() + 9);
        let first = u32::from_le_bytes([frame[13], frame[14], frame[15], 0]);
        assert_eq!(first & 1, 0, "not last");
        assert_eq!(first >> 3, 128 * 1024);
        assert_eq!(
            zstd_stored(&[]),
            [
                0x28, 0xB5, 0x2F, 0xFD, 0xE0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0
            ]
        );
    }

    #[test]
    fn a_cut_keeps_the_first_steps_under_the_new_id() {
        let saved = SavedTrajectory {
            trajectory_type: Some(4),
            source: None,
            steps: vec![vec![1], vec![2], vec![3]],
            metadata: Some(vec![9]),
        };
        let cut = saved.cut(2, "ab").unwrap();
        let body = &cut[16..];
        assert_eq!(
            body,
            [
                0x0a, 2, b'a', b'b', 0x32, 2, b'a', b'b', 0x20, 4, 0x12, 1, 1, 0x12, 1, 2, 0x3a, 1,
                9
            ]
        );
        assert!(matches!(
            saved.cut(4, "ab"),
            Err(TrajectoryError::TooShort { have: 3, wanted: 4 })
        ));
    }
}
