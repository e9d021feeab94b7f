//! A thread's workspace as the server's file routes reach it ([`ThreadWorkspace`], from
//! `Agent::workspace_as`), and what the server itself puts in a workspace: the operator's
//! template, copied into a new thread's workspace, and the attachments too large to send
//! inline. Every touch of a workspace goes through the door ([`AgentDir`]): the agent may have
//! put a link, a FIFO or a hard link anywhere in it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_sandbox::{AgentDir, DiskUsage, EntryKind, SandboxError};

use crate::owner::Owner;
use crate::places::Place;
use crate::prompt::{Saved, Upload};
use crate::trees::{TreeError, Trees};

/// Where a prompt's uploads are saved in the workspace.
pub(crate) const UPLOADS_DIR: &str = "uploads";

/// How many numbered names an upload tries before giving up (`name-2.ext` … ).
const UPLOAD_NAMES: usize = 1000;

/// A thread's workspace, opened for its owner through the door, with what its disk cap
/// covers: the owner's whole tree (under `sandbox = "thread"`, the thread's), its workspaces
/// and its state together. Got from `Agent::workspace_as`; reached from any replica, without
/// the thread's lease.
pub struct ThreadWorkspace {
    dir: AgentDir,
    tree_roots: Vec<PathBuf>,
    max_bytes: Option<u64>,
    /// To measure the workspace again after a change ([`ThreadWorkspace::changed`]).
    trees: Arc<Trees>,
    place: Place,
}

impl std::fmt::Debug for ThreadWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadWorkspace")
            .field("dir", &self.dir)
            .field("tree_roots", &self.tree_roots)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ThreadWorkspace {
    /// The workspace of the thread at `place`, owned by `owner`, after its tree's marker is
    /// checked and its directories are made. Blocking.
    pub(crate) fn open(
        trees: &Arc<Trees>,
        owner: &Owner,
        thread_id: &str,
        place: &Place,
        max_bytes: Option<u64>,
    ) -> Result<Self, TreeError> {
        let placement = trees.placement(owner, thread_id, place)?;
        Ok(Self {
            dir: trees.open_workspace(&placement)?,
            tree_roots: trees.tree_roots(&place.tree).to_vec(),
            max_bytes,
            trees: trees.clone(),
            place: place.clone(),
        })
    }

    /// Its files changed from outside a turn (an upload, a removal): the thread's listed size
    /// is measured again, in the background.
    pub fn changed(&self) {
        self.trees.measure_slot(&self.place);
    }

    /// The workspace, through the door: what it makes belongs to the sandbox's identity.
    pub fn dir(&self) -> &AgentDir {
        &self.dir
    }

    /// The two roots of the workspace's tree (its workspaces and its state), which the disk
    /// cap measures together.
    pub fn tree_roots(&self) -> &[PathBuf] {
        &self.tree_roots
    }

    /// The disk the tree may take (`workspace_max_bytes`); `None`: no cap.
    pub fn max_bytes(&self) -> Option<u64> {
        self.max_bytes
    }

    /// The disk the tree takes now, measured through the door (links not followed, each inode
    /// once). Blocking; it walks the whole tree.
    pub fn tree_usage(&self) -> Result<DiskUsage, SandboxError> {
        tree_usage(&self.tree_roots)
    }
}

/// The disk the directories `roots` take together. Blocking.
pub(crate) fn tree_usage(roots: &[PathBuf]) -> Result<DiskUsage, SandboxError> {
    let mut total = DiskUsage::default();
    for root in roots {
        let usage = AgentDir::open(root)?.disk_usage()?;
        total.bytes += usage.bytes;
        total.too_deep |= usage.too_deep;
    }
    Ok(total)
}

/// What a template copy did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Copied {
    pub(crate) files: usize,
    pub(crate) dirs: usize,
    /// Links, special files and files with several hard links, left out.
    pub(crate) skipped: usize,
}

/// Copies the operator's `template` directory into `to` (a new thread's workspace): its
/// directories and regular files, each file written under a temporary name and then renamed;
/// links, special files and files with several hard links are skipped. Read through the door
/// too, so nothing in the template is followed. Blocking.
pub(crate) fn copy_template(template: &Path, to: &AgentDir) -> Result<Copied, SandboxError> {
    let from = AgentDir::open(template)?;
    let mut copied = Copied::default();
    for found in from.walk(Path::new(""))? {
        let found = found?;
        match found.entry.kind {
            EntryKind::Dir => {
                to.create_dir_all(&found.rel)?;
                copied.dirs += 1;
            }
            EntryKind::File if found.entry.links == 1 => {
                let (mut source, _) = from.open_file(&found.rel)?;
                let (mut file, temp) = to.create_temp_for(&found.rel)?;
                let written = std::io::copy(&mut source, &mut file)
                    .and_then(|_| file.sync_all())
                    .map_err(|source| SandboxError::Io {
                        action: format!("copy {} from the workspace template", found.rel.display()),
                        source,
                    });
                if let Err(e) = written {
                    temp.discard();
                    return Err(e);
                }
                temp.publish()?;
                copied.files += 1;
            }
            _ => {
                tracing::debug!(path = %found.rel.display(), kind = ?found.entry.kind, "left a link or special file of the workspace template out");
                copied.skipped += 1;
            }
        }
    }
    Ok(copied)
}

/// Saves a prompt's `uploads` in the workspace `dir` under `uploads/`, each under a name of its
/// own (numbered when taken; never one that is there, never through a link), unless the tree
/// (`roots`) would grow past `max_bytes`. One outcome per upload, in order: the path relative
/// to the workspace, or why it was not saved (in words for the model: no host path). Blocking.
pub(crate) fn save_uploads(
    dir: &AgentDir,
    roots: &[PathBuf],
    max_bytes: Option<u64>,
    uploads: &[Upload],
) -> Vec<Saved> {
    let mut room = max_bytes.map(|cap| match tree_usage(roots) {
        Ok(usage) if !usage.too_deep => Ok(cap.saturating_sub(usage.bytes)),
        Ok(_) => Ok(0),
        Err(e) => Err(e),
    });
    uploads
        .iter()
        .map(|upload| {
            let size = upload.data.len() as u64;
            match &mut room {
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "could not measure the workspace for an attachment");
                    return Err("the workspace could not be measured".to_owned());
                }
                Some(Ok(left)) if *left < size => {
                    return Err(format!(
                        "it would take the workspace past its {} MiB limit",
                        max_bytes.unwrap_or_default() >> 20
                    ));
                }
                Some(Ok(left)) => *left -= size,
                None => {}
            }
            save_upload(dir, &upload.name, &upload.data).map_err(|e| {
                tracing::warn!(error = %e, name = %upload.name, "could not save an attachment in the workspace");
                "the workspace's uploads directory could not be written".to_owned()
            })
        })
        .collect()
}

/// Writes `data` as a new file `uploads/<name>` (or `name-2`, `name-3`… when taken); the path
/// relative to the workspace.
fn save_upload(dir: &AgentDir, name: &str, data: &[u8]) -> Result<String, SandboxError> {
    let uploads = dir.create_dir_all(Path::new(UPLOADS_DIR))?;
    for n in 1..=UPLOAD_NAMES {
        let candidate = numbered(name, n);
        let Some(mut file) = uploads.create_new_file(Path::new(&candidate))? else {
            continue;
        };
        let written = file
            .write_all(data)
            .and_then(|()| file.sync_all())
            .map_err(|source| SandboxError::Io {
                action: format!("write {UPLOADS_DIR}/{candidate}"),
                source,
            });
        if let Err(e) = written {
            let _ = uploads.remove_file(Path::new(&candidate));
            return Err(e);
        }
        return Ok(format!("{UPLOADS_DIR}/{candidate}"));
    }
    Err(SandboxError::Io {
        action: format!("find a free name for {UPLOADS_DIR}/{name}"),
        source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    })
}

/// `name` for the first try, then `stem-n.ext`.
fn numbered(name: &str, n: usize) -> String {
    if n == 1 {
        return name.to_owned();
    }
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-{n}.{ext}"),
        _ => format!("{name}-{n}"),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn upload(name: &str, data: &[u8]) -> Upload {
        Upload {
            name: name.to_owned(),
            data: data.to_vec(),
            what: format!("document '{name}'"),
            token: String::new(),
        }
    }

    #[test]
    fn uploads_get_names_of_their_own_and_never_replace_a_file() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("uploads")).unwrap();
        std::fs::write(ws.join("uploads/report.pdf"), "the agent's").unwrap();
        let dir = AgentDir::open(&ws).unwrap();
        let saved = save_uploads(
            &dir,
            std::slice::from_ref(&ws),
            None,
            &[upload("report.pdf", b"one"), upload("report.pdf", b"two")],
        );
        assert_eq!(
            saved,
            [
                Ok("uploads/report-2.pdf".to_owned()),
                Ok("uploads/report-3.pdf".to_owned())
            ]
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("uploads/report.pdf")).unwrap(),
            "the agent's"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("uploads/report-3.pdf")).unwrap(),
            "two"
        );
    }

    #[test]
    fn an_upload_goes_through_no_link_and_not_past_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let (ws, host) = (tmp.path().join("ws"), tmp.path().join("host"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&host).unwrap();
        symlink(&host, ws.join("uploads")).unwrap();
        let dir = AgentDir::open(&ws).unwrap();
        let saved = save_uploads(&dir, std::slice::from_ref(&ws), None, &[upload("a", b"x")]);
        assert!(saved[0].is_err(), "{saved:?}");
        assert_eq!(
            std::fs::read_dir(&host).unwrap().count(),
            0,
            "nothing went through the link"
        );
        std::fs::remove_file(ws.join("uploads")).unwrap();
        let saved = save_uploads(
            &dir,
            std::slice::from_ref(&ws),
            Some(1),
            &[upload("a", b"xx")],
        );
        assert!(
            saved[0].as_ref().is_err_and(|e| e.contains("limit")),
            "{saved:?}"
        );
        assert!(!ws.join("uploads/a").exists());
    }

    #[test]
    fn a_template_copies_its_files_and_directories_and_leaves_links_and_fifos_out() {
        let tmp = tempfile::tempdir().unwrap();
        let (template, ws) = (tmp.path().join("template"), tmp.path().join("ws"));
        std::fs::create_dir_all(template.join("src/empty")).unwrap();
        std::fs::write(template.join("README.md"), "hello").unwrap();
        std::fs::write(template.join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(tmp.path().join("secret"), "host").unwrap();
        symlink(tmp.path().join("secret"), template.join("link")).unwrap();
        nix::unistd::mkfifo(&template.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let copied = copy_template(&template, &AgentDir::open(&ws).unwrap()).unwrap();
        assert_eq!(
            copied,
            Copied {
                files: 2,
                dirs: 2,
                skipped: 2
            }
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("README.md")).unwrap(),
            "hello"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("src/main.rs")).unwrap(),
            "fn main() {}"
        );
        assert!(ws.join("src/empty").is_dir());
        assert!(!ws.join("link").exists() && ws.join("link").symlink_metadata().is_err());
        assert!(ws.join("fifo").symlink_metadata().is_err());
    }
}
