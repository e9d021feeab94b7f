//! Identities stored before they had namespaces, renamed once into the ones callers have now.
//!
//! An identity names a thread's owner in several places under an agent's save dir: each thread's
//! record (`threads/`), each directory tree's marker (`o/<tree>.owner.json`, first moved out of
//! the tree where an earlier version kept it, through the door), each owner's tree
//! claim (`o/by-owner/<sha256 of "owner:" and the identity>.json`, so a renamed owner's claim
//! moves to another name), and the caller's own files (agui-server's `owners/`: JSON objects with
//! an `owner` field). [`migrate_identities`] renames every stored identity by the caller's rule
//! (agui-server: `alice` becomes `token:alice` or `user:alice`); every thread keeps its tree and
//! slot, so its workspace, transcripts and conversation stay where they are.
//!
//! - **Once.** `identities.json` in the save dir records the renaming and that it is done; later
//!   starts read it and do nothing, whatever the configuration says by then.
//! - **One at a time.** The migration holds an exclusive lock (`flock`) on `identities.lock`: of
//!   two replicas starting at once, one migrates while the other waits, then finds it done.
//! - **Crash-safe.** The plan — every file to rewrite, with the identity it held, and the
//!   renaming — is written to `identities.json` before anything changes, and a later start that
//!   finds it unfinished follows that plan (never a new one). Each file is replaced whole (a
//!   record's other slot, or a new file renamed over the old), and only while it still holds the
//!   planned identity, so a file done before a crash is not renamed twice — even where an old
//!   identity has the form of a new one (`user:bob`, stored for a proxy's user literally named
//!   so, beside `bob`). Claims move in two steps: every old claim first goes aside
//!   (`o/by-owner/.staged/`), then each new one is linked into place, so no new claim can land
//!   on an old one's name.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::SessionError;
use crate::owner::Owner;
use crate::places::TreeId;
use crate::trees::TREES_DIR;
use crate::trees::claims::{
    BY_OWNER_DIR, Claims, claim_file_name, make_private_dir, marker_file_name,
};

/// The journal: the plan while the migration runs, the renaming once it is done.
const JOURNAL: &str = "identities.json";

/// The file whose lock admits one migration at a time.
const LOCK: &str = "identities.lock";

/// Where old claims wait, under `o/by-owner/`, while the new ones are linked.
const STAGED: &str = ".staged";

/// The thread records, under the save dir (where `Agent` opens its store).
const THREADS_DIR: &str = "threads";

/// The journal format this build writes.
const FORMAT: u32 = 1;

/// What [`migrate_identities`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdentityMigration {
    /// Each identity stored before namespaces, and what it is now (also when an earlier start
    /// renamed them).
    pub renamed: BTreeMap<String, String>,
    /// Whether this call renamed them (false: an earlier start had, or nothing was stored).
    pub migrated_now: bool,
}

/// Renames every identity stored under `save_dir` by `rename`, once: in thread records, tree
/// markers, tree claims and the thread owners an earlier version kept in `owners/` (moved
/// beside the thread records by the next [`Agent`](crate::Agent)). The local owner (no
/// identity) stays as it is.
///
/// Call it at start, before an [`Agent`](crate::Agent) opens `save_dir`, and with the same
/// `rename` on every replica sharing it. `rename` must give each identity a new one, never
/// itself, and no two the same: the migration refuses otherwise, before it changes anything. It
/// blocks (file I/O, and waiting for another process's migration of the same save dir).
pub fn migrate_identities(
    save_dir: &Path,
    rename: &dyn Fn(&str) -> String,
) -> Result<IdentityMigration, SessionError> {
    let owner_files = &[crate::store::owners::LEGACY_OWNERS_DIR];
    if let Some(journal) = read_journal(save_dir)?
        && journal.state == Progress::Done
    {
        return Ok(IdentityMigration {
            renamed: journal.renamed,
            migrated_now: false,
        });
    }
    make_private_dir(save_dir).map_err(io_error(format!("create {}", save_dir.display())))?;
    let lock_path = save_dir.join(LOCK);
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io_error(format!("open {}", lock_path.display())))?;
    lock.lock()
        .map_err(io_error(format!("lock {}", lock_path.display())))?;
    let journal = match read_journal(save_dir)? {
        Some(journal) if journal.state == Progress::Done => {
            return Ok(IdentityMigration {
                renamed: journal.renamed,
                migrated_now: false,
            });
        }
        Some(journal) => {
            tracing::warn!(save_dir = %save_dir.display(), "an earlier renaming of stored identities stopped half-way; finishing it as planned");
            journal
        }
        None => {
            let journal = plan(save_dir, owner_files, rename)?;
            if journal.renamed.is_empty() {
                write_journal(save_dir, &journal.done())?;
                return Ok(IdentityMigration::default());
            }
            write_journal(save_dir, &journal)?;
            journal
        }
    };
    let renamed = journal.renamed.clone();
    carry_out(save_dir, journal)?;
    tracing::info!(save_dir = %save_dir.display(), renamed = ?renamed, "stored identities renamed into their namespaces");
    drop(lock);
    Ok(IdentityMigration {
        renamed,
        migrated_now: true,
    })
}

/// How far a migration got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Progress {
    /// Planned: nothing changed yet, or old claims partly set aside.
    Planned,
    /// Every old claim is set aside; new claims and rewrites are under way.
    Staged,
    /// Finished.
    Done,
}

/// The journal in `identities.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Journal {
    format: u32,
    state: Progress,
    /// Each stored identity and its new name.
    renamed: BTreeMap<String, String>,
    /// Thread ids, with the owner their records named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    records: Vec<Held>,
    /// Trees, with the owner their markers named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    markers: Vec<Held>,
    /// Claims, with their owner and tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    claims: Vec<HeldClaim>,
    /// The caller's files (paths relative to the save dir), with the owner each named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<Held>,
}

/// A thing (thread, tree, file) and the identity it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    at: String,
    owner: String,
}

/// An old claim: its file name in `o/by-owner/`, its owner and its tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct HeldClaim {
    file: String,
    owner: String,
    tree: String,
}

impl Journal {
    /// The journal once done: the renaming alone.
    fn done(&self) -> Self {
        Self {
            format: FORMAT,
            state: Progress::Done,
            renamed: self.renamed.clone(),
            records: Vec::new(),
            markers: Vec::new(),
            claims: Vec::new(),
            files: Vec::new(),
        }
    }

    /// The new name of `identity`, as planned.
    fn new_name(&self, identity: &str) -> Result<&str, SessionError> {
        self.renamed
            .get(identity)
            .map(String::as_str)
            .ok_or_else(|| invalid(format!("{JOURNAL} plans no new name for `{identity}`")))
    }
}

/// Everything under `save_dir` that names an identity, and each identity's new name.
fn plan(
    save_dir: &Path,
    owner_files: &[&str],
    rename: &dyn Fn(&str) -> String,
) -> Result<Journal, SessionError> {
    let mut journal = Journal {
        format: FORMAT,
        state: Progress::Planned,
        renamed: BTreeMap::new(),
        records: Vec::new(),
        markers: Vec::new(),
        claims: Vec::new(),
        files: Vec::new(),
    };
    for (thread_id, owner) in crate::store::stored_owners(&save_dir.join(THREADS_DIR))? {
        if let Some(identity) = owner.as_ref().and_then(Owner::identity) {
            journal.records.push(Held {
                at: thread_id,
                owner: identity.to_owned(),
            });
        }
    }
    let trees = save_dir.join(TREES_DIR);
    // Markers inside a tree are the tree's sandbox's to rewrite: read only once moved out.
    Claims::new(trees.clone()).move_markers_out();
    for name in entries(&trees)? {
        if TreeId::try_from(name.clone()).is_err() {
            continue;
        }
        let marker = read_object(&trees.join(marker_file_name(&name)));
        if let Some(marker) = marker
            && marker.get("claimed").and_then(Value::as_bool) == Some(true)
            && let Some(owner) = named_owner(&marker)
        {
            journal.markers.push(Held { at: name, owner });
        }
    }
    let by_owner = trees.join(BY_OWNER_DIR);
    for name in entries(&by_owner)? {
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let Some(claim) = read_object(&by_owner.join(&name)) else {
            continue;
        };
        match (
            named_owner(&claim),
            claim.get("tree").and_then(Value::as_str),
        ) {
            (Some(owner), Some(tree)) => journal.claims.push(HeldClaim {
                file: name,
                owner,
                tree: tree.to_owned(),
            }),
            _ => {
                tracing::warn!(file = %by_owner.join(&name).display(), "a tree claim names no owner or tree; left as it is");
            }
        }
    }
    for dir in owner_files {
        for name in entries(&save_dir.join(dir))? {
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            let at = format!("{dir}/{name}");
            if let Some(owner) = read_object(&save_dir.join(&at))
                .as_ref()
                .and_then(named_owner)
            {
                journal.files.push(Held { at, owner });
            }
        }
    }
    let identities: BTreeSet<&str> = (journal.records.iter())
        .chain(&journal.markers)
        .chain(&journal.files)
        .map(|held| held.owner.as_str())
        .chain(journal.claims.iter().map(|claim| claim.owner.as_str()))
        .collect();
    let mut renamed = BTreeMap::new();
    for identity in identities {
        let new = rename(identity);
        if new.is_empty() || new == identity {
            return Err(invalid(format!(
                "the stored identity `{identity}` would be renamed to `{new}`"
            )));
        }
        renamed.insert(identity.to_owned(), new);
    }
    let distinct: BTreeSet<&String> = renamed.values().collect();
    if distinct.len() != renamed.len() {
        return Err(invalid(format!(
            "two stored identities would get the same new name: {renamed:?}"
        )));
    }
    journal.renamed = renamed;
    Ok(journal)
}

/// Follows the plan from where it stands, and marks the migration done.
fn carry_out(save_dir: &Path, mut journal: Journal) -> Result<(), SessionError> {
    if journal.state == Progress::Planned {
        stage_claims(save_dir, &journal)?;
        journal.state = Progress::Staged;
        write_journal(save_dir, &journal)?;
    }
    link_claims(save_dir, &journal)?;
    rewrite_records(save_dir, &journal)?;
    rewrite_files(save_dir, &journal)?;
    let staged = save_dir.join(TREES_DIR).join(BY_OWNER_DIR).join(STAGED);
    match fs::remove_dir_all(&staged) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(format!("remove {}", staged.display()))(e)),
    }
    write_journal(save_dir, &journal.done())
}

/// Sets every old claim aside, so that no new claim lands on an old one's name.
fn stage_claims(save_dir: &Path, journal: &Journal) -> Result<(), SessionError> {
    if journal.claims.is_empty() {
        return Ok(());
    }
    let by_owner = save_dir.join(TREES_DIR).join(BY_OWNER_DIR);
    let staged = by_owner.join(STAGED);
    make_private_dir(&staged).map_err(io_error(format!("create {}", staged.display())))?;
    for claim in &journal.claims {
        let (from, to) = (by_owner.join(&claim.file), staged.join(&claim.file));
        if exists(&to) {
            continue;
        }
        match fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                tracing::warn!(file = %from.display(), "a planned tree claim is gone");
            }
            Err(e) => return Err(io_error(format!("move {}", from.display()))(e)),
        }
    }
    sync_dir(&staged);
    sync_dir(&by_owner);
    Ok(())
}

/// Links each owner's claim under its new name, naming the same tree as before.
fn link_claims(save_dir: &Path, journal: &Journal) -> Result<(), SessionError> {
    let by_owner = save_dir.join(TREES_DIR).join(BY_OWNER_DIR);
    for claim in &journal.claims {
        let new = journal.new_name(&claim.owner)?;
        let target = by_owner.join(claim_file_name(&Owner::named(new)));
        // The old claim as it was (keeping any field this build does not know), renamed.
        let mut content = read_object(&by_owner.join(STAGED).join(&claim.file))
            .unwrap_or_else(|| Map::from_iter([("tree".to_owned(), claim.tree.clone().into())]));
        content.insert("owner".into(), new.into());
        let temp = by_owner.join(format!(".{}.renamed", claim.tree));
        write_synced(&temp, &to_json(&content)?)?;
        // A link never replaces a file: a claim linked before a crash stays as it is.
        let linked = fs::hard_link(&temp, &target);
        let _ = fs::remove_file(&temp);
        match linked {
            Ok(()) => sync_dir(&by_owner),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let existing = read_object(&target);
                let holds = |key: &str| existing.as_ref().and_then(|c| c.get(key)?.as_str());
                if holds("owner") != Some(new) || holds("tree") != Some(claim.tree.as_str()) {
                    return Err(invalid(format!(
                        "{} already claims another tree for `{new}` than the tree {} of `{}`",
                        target.display(),
                        claim.tree,
                        claim.owner
                    )));
                }
            }
            Err(e) => return Err(io_error(format!("claim {}", target.display()))(e)),
        }
    }
    Ok(())
}

/// Renames the owner of each planned thread record.
fn rewrite_records(save_dir: &Path, journal: &Journal) -> Result<(), SessionError> {
    let dir = save_dir.join(THREADS_DIR);
    for held in &journal.records {
        let new = journal.new_name(&held.owner)?;
        crate::store::rewrite_owner(
            &dir,
            &held.at,
            &Owner::named(&held.owner),
            &Owner::named(new),
        )?;
    }
    Ok(())
}

/// Renames the owner of each planned tree marker and caller's file.
fn rewrite_files(save_dir: &Path, journal: &Journal) -> Result<(), SessionError> {
    let trees = save_dir.join(TREES_DIR);
    let markers =
        (journal.markers.iter()).map(|held| (trees.join(marker_file_name(&held.at)), held));
    let files = (journal.files.iter()).map(|held| (save_dir.join(&held.at), held));
    for (path, held) in markers.chain(files) {
        let new = journal.new_name(&held.owner)?;
        let Some(mut content) = read_object(&path) else {
            tracing::warn!(file = %path.display(), "a file planned for renaming its owner is gone");
            continue;
        };
        match content.get("owner").and_then(Value::as_str) {
            Some(owner) if owner == held.owner => {}
            // Renamed before a crash.
            Some(owner) if owner == new => continue,
            _ => {
                tracing::warn!(file = %path.display(), planned = %held.owner, "a file names another owner than planned; left as it is");
                continue;
            }
        }
        content.insert("owner".into(), new.into());
        replace(&path, &to_json(&content)?)?;
    }
    Ok(())
}

/// The names in `dir` (none when it does not exist).
fn entries(dir: &Path) -> Result<Vec<String>, SessionError> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_error(format!("list {}", dir.display()))(e)),
    }
}

/// The JSON object in `path`; `None` when it is missing or not an object (logged).
fn read_object(path: &Path) -> Option<Map<String, Value>> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "could not read a file that may name an owner");
            return None;
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(object)) => Some(object),
        _ => {
            tracing::warn!(file = %path.display(), "a file that may name an owner is not a JSON object");
            None
        }
    }
}

/// The identity an `owner` field names (none for the local owner, `""`).
fn named_owner(object: &Map<String, Value>) -> Option<String> {
    object
        .get("owner")
        .and_then(Value::as_str)
        .filter(|owner| !owner.is_empty())
        .map(str::to_owned)
}

fn read_journal(save_dir: &Path) -> Result<Option<Journal>, SessionError> {
    let path = save_dir.join(JOURNAL);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(format!("read {}", path.display()))(e)),
    };
    let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| {
        invalid(format!(
            "{} is not a journal of identities this build can read: {e}",
            path.display()
        ))
    })?;
    if journal.format > FORMAT {
        return Err(invalid(format!(
            "{} was written by a newer version of the server (format {})",
            path.display(),
            journal.format
        )));
    }
    Ok(Some(journal))
}

fn write_journal(save_dir: &Path, journal: &Journal) -> Result<(), SessionError> {
    let bytes = serde_json::to_vec_pretty(journal)
        .map_err(|e| invalid(format!("could not encode {JOURNAL}: {e}")))?;
    replace(&save_dir.join(JOURNAL), &bytes)
}

fn to_json(object: &Map<String, Value>) -> Result<Vec<u8>, SessionError> {
    serde_json::to_vec(object).map_err(|e| invalid(format!("could not encode a file: {e}")))
}

/// Replaces `path` whole: a complete new file renamed over it, so a crash leaves the old
/// content or the new one. The temporary file's name is fixed, so one a crash left is reused.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.renaming"));
    write_synced(&temp, bytes)?;
    fs::rename(&temp, path).map_err(io_error(format!("replace {}", path.display())))?;
    sync_dir(dir);
    Ok(())
}

/// Writes a file readable by the server only, flushed to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    crate::claim::write_private(path, bytes).map_err(io_error(format!("write {}", path.display())))
}

/// Makes a directory's new entries durable. Best effort: the files themselves are complete.
fn sync_dir(dir: &Path) {
    if let Err(e) = fs::File::open(dir).and_then(|dir| dir.sync_all()) {
        tracing::debug!(dir = %dir.display(), error = %e, "could not sync a directory");
    }
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

fn io_error(action: String) -> impl FnOnce(io::Error) -> SessionError {
    move |source| SessionError::Io { action, source }
}

/// Stored identities that cannot be renamed as asked.
fn invalid(why: String) -> SessionError {
    SessionError::Io {
        action: "rename the stored identities".into(),
        source: io::Error::new(io::ErrorKind::InvalidData, why),
    }
}

#[cfg(test)]
mod tests;
