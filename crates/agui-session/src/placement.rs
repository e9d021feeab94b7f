//! Where a thread's agent works and keeps its state: its workspace, the harness's conversation
//! storage, its app data dir and `HOME` — decided here, in one place, and handed to the backend,
//! which starts (or picks) the harness process accordingly.
//!
//! Every thread has its own app data dir, `<save_dir>/t/<slot>/app` (the harness keeps the
//! conversation's transcript and artifacts there, and its file tools may read it). When the
//! backend gives each thread a process of its own (a confined one, which reaches only the
//! thread's directories), the storage dir and `HOME` are the thread's too (`…/save`, `…/home`);
//! otherwise they are the agent's, shared by the threads of a process. `<slot>` is the name of
//! the thread's workspace directory (a hash of the thread id), so the layout follows the
//! workspace a thread's record keeps.

use std::path::{Path, PathBuf};

/// Per-thread directories live under `<save_dir>/t/` (short paths: the harness shows them to the
/// model).
const THREADS_DIR: &str = "t";

/// One thread's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The agent's workspace (read-write).
    pub(crate) workspace: PathBuf,
    /// The harness's `storage_directory` (`<conversation id>.db`).
    pub(crate) storage_dir: PathBuf,
    /// The harness's `appDataDir`.
    pub(crate) app_data_dir: PathBuf,
    /// The harness's `HOME`; `None` keeps the backend's default.
    pub(crate) home_dir: Option<PathBuf>,
}

impl Placement {
    /// The directories of the thread working in `workspace`, for an agent saving in `save_dir`;
    /// `own_process`: the backend starts a process for this thread alone.
    pub(crate) fn new(save_dir: &Path, workspace: &Path, own_process: bool) -> Self {
        let own = thread_dir(save_dir, workspace);
        Self {
            workspace: workspace.to_owned(),
            storage_dir: if own_process {
                own.join("save")
            } else {
                save_dir.to_owned()
            },
            app_data_dir: own.join("app"),
            home_dir: own_process.then(|| own.join("home")),
        }
    }

    /// Creates the directories and brings the conversation's files here from where the other
    /// layout keeps them (the agent's shared storage and app dirs, or the thread's own), so a
    /// thread keeps its history when the sandbox is switched on or off. A database that cannot
    /// be moved is an error: the harness would otherwise start the conversation afresh.
    pub(crate) fn prepare(&self, save_dir: &Path, conversation_id: &str) -> std::io::Result<()> {
        for dir in [&self.workspace, &self.storage_dir, &self.app_data_dir]
            .into_iter()
            .chain(&self.home_dir)
        {
            std::fs::create_dir_all(dir)?;
        }
        if conversation_id.is_empty() || conversation_id.contains(['/', '\\', '.']) {
            return Ok(());
        }
        let database = format!("{conversation_id}.db");
        if !self.storage_dir.join(&database).exists() {
            let own = thread_dir(save_dir, &self.workspace).join("save");
            let elsewhere = [save_dir.to_owned(), own]
                .into_iter()
                .find(|dir| *dir != self.storage_dir && dir.join(&database).exists());
            if let Some(from) = elsewhere {
                for suffix in ["", "-wal", "-shm"] {
                    let name = format!("{database}{suffix}");
                    if from.join(&name).exists() {
                        std::fs::rename(from.join(&name), self.storage_dir.join(&name))?;
                    }
                }
                tracing::info!(from = %from.display(), to = %self.storage_dir.display(), %conversation_id, "moved the conversation database to the thread's storage dir");
            }
        }
        let brain = |app: &Path| app.join("brain").join(conversation_id);
        let shared = brain(&save_dir.join("app"));
        if shared.is_dir() && !brain(&self.app_data_dir).exists() {
            std::fs::create_dir_all(self.app_data_dir.join("brain"))?;
            std::fs::rename(&shared, brain(&self.app_data_dir))?;
        }
        Ok(())
    }
}

/// The app data dir of the thread working in `workspace` (the same whatever the process).
pub(crate) fn app_data_dir(save_dir: &Path, workspace: &Path) -> PathBuf {
    thread_dir(save_dir, workspace).join("app")
}

/// `<save_dir>/t/<workspace directory name>` (a hash of the path when the name is unusual).
fn thread_dir(save_dir: &Path, workspace: &Path) -> PathBuf {
    let slot = workspace
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| {
            !name.is_empty()
                && !name.starts_with('.')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        .map(str::to_owned)
        .unwrap_or_else(|| crate::sha256_hex(workspace.as_os_str().as_encoded_bytes(), 5));
    save_dir.join(THREADS_DIR).join(slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_with_its_own_process_gets_its_own_storage_and_home() {
        let shared = Placement::new(Path::new("/s"), Path::new("/w/ab12"), false);
        assert_eq!(shared.storage_dir, Path::new("/s"));
        assert_eq!(shared.app_data_dir, Path::new("/s/t/ab12/app"));
        assert_eq!(shared.home_dir, None);
        let own = Placement::new(Path::new("/s"), Path::new("/w/ab12"), true);
        assert_eq!(own.storage_dir, Path::new("/s/t/ab12/save"));
        assert_eq!(own.app_data_dir, shared.app_data_dir);
        assert_eq!(own.home_dir.as_deref(), Some(Path::new("/s/t/ab12/home")));
        let odd = Placement::new(Path::new("/s"), Path::new("/w/.."), true);
        assert!(odd.storage_dir.starts_with("/s/t/"), "{odd:?}");
        assert_ne!(odd.storage_dir, Path::new("/s/t/../save"));
    }

    #[test]
    fn a_conversation_follows_its_thread_between_layouts() {
        let dir = tempfile::tempdir().unwrap();
        let save = dir.path().join("save");
        let workspace = dir.path().join("w").join("ab12");
        std::fs::create_dir_all(save.join("app/brain/c0ffee")).unwrap();
        std::fs::write(save.join("c0ffee.db"), "db").unwrap();
        std::fs::write(save.join("c0ffee.db-wal"), "wal").unwrap();
        std::fs::write(save.join("app/brain/c0ffee/task.md"), "task").unwrap();
        let own = Placement::new(&save, &workspace, true);
        own.prepare(&save, "c0ffee").unwrap();
        assert_eq!(
            std::fs::read_to_string(own.storage_dir.join("c0ffee.db")).unwrap(),
            "db"
        );
        assert!(own.storage_dir.join("c0ffee.db-wal").exists());
        assert!(!save.join("c0ffee.db").exists());
        assert!(own.app_data_dir.join("brain/c0ffee/task.md").exists());
        assert!(workspace.is_dir() && own.home_dir.unwrap().is_dir());
        // And back, when the sandbox is switched off.
        let shared = Placement::new(&save, &workspace, false);
        shared.prepare(&save, "c0ffee").unwrap();
        assert!(save.join("c0ffee.db").exists());
        assert!(save.join("c0ffee.db-wal").exists());
        // A fresh conversation moves nothing.
        shared.prepare(&save, "fresh").unwrap();
    }
}
