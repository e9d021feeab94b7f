//! Bringing a thread's files into its place: from the layout before places existed
//! (`<workspace_root>/<hash>`, `<save_dir>/t/<hash>/{save,app,home}` or the agent's shared
//! storage), or from its earlier owner's tree (a thread of the local owner taken by an
//! identity). Everything moves by rename, so nothing is copied and nothing is left behind in a
//! tree another owner may see.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::places::Placement;

/// The legacy per-thread directories, under `<save_dir>/t/`.
const LEGACY_THREADS_DIR: &str = "t";

/// Where a thread's files are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sources {
    /// Its workspace.
    pub(crate) workspace: PathBuf,
    /// Its app data dir (transcripts, artifacts).
    pub(crate) app_data_dir: PathBuf,
    /// Where its conversation database may be.
    pub(crate) storage_dirs: Vec<PathBuf>,
}

impl Sources {
    /// The files of a thread recorded with `workspace` before places existed.
    pub(crate) fn legacy(save_dir: &Path, workspace: &Path) -> Self {
        let name = workspace
            .file_name()
            .map(|n| n.to_owned())
            .unwrap_or_default();
        let own = save_dir.join(LEGACY_THREADS_DIR).join(name);
        Self {
            workspace: workspace.to_owned(),
            app_data_dir: own.join("app"),
            storage_dirs: vec![own.join("save"), save_dir.to_owned()],
        }
    }

    /// The files of a thread placed at `placement`.
    pub(crate) fn placed(placement: &Placement) -> Self {
        Self {
            workspace: placement.workspace.clone(),
            app_data_dir: placement.app_data_dir.clone(),
            storage_dirs: vec![placement.process.storage_dir.clone()],
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
    let target = &to.process.storage_dir;
    if target.join(&database).exists() {
        return Ok(());
    }
    if let Some(dir) = from
        .storage_dirs
        .iter()
        .find(|dir| *dir != target && dir.join(&database).exists())
    {
        for suffix in ["", "-wal", "-shm"] {
            let name = format!("{database}{suffix}");
            if dir.join(&name).exists() {
                fs::rename(dir.join(&name), target.join(&name))?;
            }
        }
        tracing::info!(from = %dir.display(), to = %target.display(), %conversation_id, "moved the conversation database into the thread's place");
    }
    Ok(())
}

/// Moves `from` to `to` when `from` is a directory and `to` is missing or empty.
fn replace_dir(from: &Path, to: &Path) -> io::Result<()> {
    if from == to || !fs::symlink_metadata(from).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    match fs::remove_dir(to) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // Not empty: the place is already in use; what was elsewhere stays there.
        Err(_) => {
            tracing::warn!(from = %from.display(), to = %to.display(), "the thread's new place is not empty; its earlier files were left where they are");
            return Ok(());
        }
    }
    fs::rename(from, to)
}

#[cfg(test)]
mod tests {
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
            workspace: root.join("w/t/1"),
            app_data_dir: root.join("o/t/app/1"),
        };
        for dir in [
            &placement.workspace,
            &placement.app_data_dir,
            &placement.process.storage_dir,
        ] {
            fs::create_dir_all(dir).unwrap();
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
            fs::read_to_string(to.workspace.join("notes.md")).unwrap(),
            "mine"
        );
        assert!(to.app_data_dir.join("brain/c0ffee").is_dir());
        assert_eq!(
            fs::read_to_string(to.process.storage_dir.join("c0ffee.db")).unwrap(),
            "db"
        );
        assert!(to.process.storage_dir.join("c0ffee.db-wal").exists());
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
        assert!(to.process.storage_dir.join("c0ffee.db").exists());
        move_into(&sources, &to, "fresh").unwrap();
        move_into(&sources, &to, "../escape").unwrap();
    }

    #[test]
    fn a_place_in_use_keeps_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let to = placement(dir.path());
        fs::write(to.workspace.join("theirs"), "x").unwrap();
        let old = dir.path().join("old");
        fs::create_dir_all(&old).unwrap();
        fs::write(old.join("mine"), "y").unwrap();
        let from = Sources {
            workspace: old.clone(),
            app_data_dir: dir.path().join("none"),
            storage_dirs: Vec::new(),
        };
        move_into(&from, &to, "c").unwrap();
        assert!(to.workspace.join("theirs").exists() && old.join("mine").exists());
    }
}
