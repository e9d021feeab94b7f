//! Bringing a thread's files into its place: from the layout before places existed
//! (`<workspace_root>/<hash>`, `<save_dir>/t/<hash>/{save,app,home}` or the agent's shared
//! storage), or from its earlier owner's tree (a thread of the local owner taken by an
//! identity). Everything moves by rename, so nothing is copied and nothing is left behind in a
//! tree another owner may see; and through the door, since every source and target lies in a
//! tree a sandbox could write: a link planted on the way is refused, never followed (it
//! would otherwise move a host directory into the new owner's tree).

use std::io;
use std::path::{Path, PathBuf};

use harness_sandbox::{AgentDir, EntryKind, SandboxError};

use crate::places::{Beneath, Placement};

/// The legacy per-thread directories, under `<save_dir>/t/`.
const LEGACY_THREADS_DIR: &str = "t";

/// Where a thread's files are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sources {
    /// Its workspace.
    pub(crate) workspace: Beneath,
    /// Its app data dir (transcripts, artifacts).
    pub(crate) app_data_dir: Beneath,
    /// Where its conversation database may be.
    pub(crate) storage_dirs: Vec<Beneath>,
}

impl Sources {
    /// The files of a thread recorded with `workspace` before places existed (its directories
    /// were the roots of that thread's sandbox then).
    pub(crate) fn legacy(save_dir: &Path, workspace: &Path) -> Self {
        let name = workspace
            .file_name()
            .map(|n| n.to_owned())
            .unwrap_or_default();
        let own = save_dir.join(LEGACY_THREADS_DIR).join(&name);
        Self {
            workspace: Beneath::new(
                workspace.parent().map(Path::to_owned).unwrap_or_default(),
                PathBuf::from(&name),
            ),
            app_data_dir: Beneath::new(&own, "app"),
            storage_dirs: vec![Beneath::new(&own, "save"), Beneath::new(save_dir, "")],
        }
    }

    /// The files of a thread placed at `placement`.
    pub(crate) fn placed(placement: &Placement) -> Self {
        Self {
            workspace: placement.workspace.clone(),
            app_data_dir: placement.app_data_dir.clone(),
            storage_dirs: vec![placement.storage_dir.clone()],
        }
    }
}

/// Moves the thread's files from `from` into `to` (whose directories exist, empty): its
/// workspace and app data dir, and its conversation's database (`<id>.db` and its SQLite
/// companions). A database that cannot be moved is an error: the harness would otherwise start
/// the conversation afresh.
pub(crate) fn move_into(from: &Sources, to: &Placement, conversation_id: &str) -> io::Result<()> {
    replace_dir(&from.workspace, &to.workspace)?;
    replace_dir(&from.app_data_dir, &to.app_data_dir)?;
    if conversation_id.is_empty() || conversation_id.contains(['/', '\\', '.']) {
        return Ok(());
    }
    let database = format!("{conversation_id}.db");
    let target = &to.storage_dir;
    if is_file(target, &database) {
        return Ok(());
    }
    if let Some(dir) = from
        .storage_dirs
        .iter()
        .find(|dir| dir.path() != target.path() && is_file(dir, &database))
    {
        let (source, target_dir) = (open(dir)?, open(target)?);
        for suffix in ["", "-wal", "-shm"] {
            let name = format!("{database}{suffix}");
            if is_file(dir, &name) {
                source
                    .rename_to(Path::new(&name), &target_dir, Path::new(&name))
                    .map_err(door)?;
            }
        }
        tracing::info!(from = %dir.path().display(), to = %target.path().display(), %conversation_id, "moved the conversation database into the thread's place");
    }
    Ok(())
}

/// Moves `from` to `to` when `from` is a directory and `to` is missing or empty.
fn replace_dir(from: &Beneath, to: &Beneath) -> io::Result<()> {
    if from.path() == to.path() || from.rel.as_os_str().is_empty() {
        return Ok(());
    }
    let Ok(source) = AgentDir::open(&from.root) else {
        return Ok(());
    };
    if !source
        .stat(&from.rel)
        .is_ok_and(|e| e.kind == EntryKind::Dir)
    {
        return Ok(());
    }
    let target = AgentDir::open(&to.root).map_err(door)?;
    match target.remove_empty_dir(&to.rel) {
        Ok(_) => {}
        // Not empty: the place is already in use; what was elsewhere stays there.
        Err(_) => {
            tracing::warn!(from = %from.path().display(), to = %to.path().display(), "the thread's new place is not empty; its earlier files were left where they are");
            return Ok(());
        }
    }
    source.rename_to(&from.rel, &target, &to.rel).map_err(door)
}

/// Whether `name` in `dir` is a regular file (links not followed).
fn is_file(dir: &Beneath, name: &str) -> bool {
    AgentDir::open(&dir.root)
        .and_then(|root| root.stat(&dir.rel.join(name)))
        .is_ok_and(|e| e.kind == EntryKind::File)
}

fn open(dir: &Beneath) -> io::Result<AgentDir> {
    AgentDir::open(&dir.root)
        .and_then(|root| {
            if dir.rel.as_os_str().is_empty() {
                Ok(root)
            } else {
                root.dir(&dir.rel)
            }
        })
        .map_err(door)
}

fn door(e: SandboxError) -> io::Error {
    match e {
        SandboxError::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::places::ProcessPlace;

    fn placement(root: &Path) -> Placement {
        let placement = Placement {
            process: ProcessPlace {
                storage_dir: root.join("o/t/save"),
                home_dir: Some(root.join("o/t/home")),
                confine: Vec::new(),
                label: "t".into(),
            },
            workspace: Beneath::new(root.join("w/t"), "1"),
            app_data_dir: Beneath::new(root.join("o/t"), "app/1"),
            storage_dir: Beneath::new(root.join("o/t"), "save"),
        };
        for dir in [
            &placement.workspace,
            &placement.app_data_dir,
            &placement.storage_dir,
        ] {
            fs::create_dir_all(dir.path()).unwrap();
        }
        placement
    }

    #[test]
    fn a_legacy_threads_files_move_into_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let save = dir.path().join("save");
        let old_workspace = dir.path().join("w/ab12cd34ef");
        fs::create_dir_all(&old_workspace).unwrap();
        fs::write(old_workspace.join("notes.md"), "mine").unwrap();
        let own = save.join("t/ab12cd34ef");
        fs::create_dir_all(own.join("save")).unwrap();
        fs::create_dir_all(own.join("app/brain/c0ffee")).unwrap();
        fs::write(own.join("save/c0ffee.db"), "db").unwrap();
        fs::write(own.join("save/c0ffee.db-wal"), "wal").unwrap();
        let to = placement(dir.path());
        move_into(&Sources::legacy(&save, &old_workspace), &to, "c0ffee").unwrap();
        assert_eq!(
            fs::read_to_string(to.workspace.path().join("notes.md")).unwrap(),
            "mine"
        );
        assert!(to.app_data_dir.path().join("brain/c0ffee").is_dir());
        assert_eq!(
            fs::read_to_string(to.storage_dir.path().join("c0ffee.db")).unwrap(),
            "db"
        );
        assert!(to.storage_dir.path().join("c0ffee.db-wal").exists());
        assert!(!old_workspace.exists());
    }

    #[test]
    fn a_shared_storage_database_moves_too_and_a_fresh_conversation_moves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let save = dir.path().join("save");
        fs::create_dir_all(&save).unwrap();
        fs::write(save.join("c0ffee.db"), "db").unwrap();
        let to = placement(dir.path());
        let sources = Sources::legacy(&save, &dir.path().join("w/missing"));
        move_into(&sources, &to, "c0ffee").unwrap();
        assert!(to.storage_dir.path().join("c0ffee.db").exists());
        move_into(&sources, &to, "fresh").unwrap();
        move_into(&sources, &to, "../escape").unwrap();
    }

    #[test]
    fn a_place_in_use_keeps_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let to = placement(dir.path());
        fs::write(to.workspace.path().join("theirs"), "x").unwrap();
        let old = dir.path().join("old");
        fs::create_dir_all(&old).unwrap();
        fs::write(old.join("mine"), "y").unwrap();
        let from = Sources {
            workspace: Beneath::new(dir.path(), "old"),
            app_data_dir: Beneath::new(dir.path(), "none"),
            storage_dirs: Vec::new(),
        };
        move_into(&from, &to, "c").unwrap();
        assert!(to.workspace.path().join("theirs").exists() && old.join("mine").exists());
    }

    /// An earlier owner's sandbox replaced its `app` by a link to a host directory named like
    /// the slot's parent: moving the thread to its new owner must not carry the host
    /// directory into the new owner's tree.
    #[test]
    fn a_link_planted_in_the_earlier_place_is_not_moved_through() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        fs::create_dir_all(host.join("1")).unwrap();
        fs::write(host.join("1/secret"), "host secret").unwrap();
        let old_state = dir.path().join("old/o/t");
        fs::create_dir_all(&old_state).unwrap();
        std::os::unix::fs::symlink(&host, old_state.join("app")).unwrap();
        std::os::unix::fs::symlink(&host, old_state.join("save")).unwrap();
        fs::write(host.join("c.db"), "not theirs").unwrap();
        let from = Sources {
            workspace: Beneath::new(dir.path().join("old/w/t"), "1"),
            app_data_dir: Beneath::new(&old_state, "app/1"),
            storage_dirs: vec![Beneath::new(&old_state, "save")],
        };
        let to = placement(dir.path());
        let _ = move_into(&from, &to, "c");
        assert_eq!(
            fs::read_to_string(host.join("1/secret")).unwrap(),
            "host secret"
        );
        assert!(host.join("c.db").exists());
        assert!(
            fs::read_dir(to.app_data_dir.path())
                .unwrap()
                .next()
                .is_none()
        );
        assert!(!to.storage_dir.path().join("c.db").exists());
    }
}
