//! The webm encoder the harness embeds (16.8 MB, used only to record browser sessions): on a
//! conversation's first turn the harness writes it to `HOME/.gemini/antigravity/bin/` when it
//! is missing, or reads it back whole to compare when it is there — about 30 ms of that turn
//! either way, measured. When that directory cannot be created (a file has its name), the
//! harness skips the install and works on. A confined process usually has a `HOME` of its own,
//! one per owner or thread, so by default ([`crate::Confinement::webm_encoder`] off) the encoder is kept
//! out of it.

use std::path::Path;

use crate::agent_dir::{AgentDir, EntryKind};
use crate::{Result, SandboxError};

/// Where, under `HOME`, the harness installs the encoder.
pub const WEBM_ENCODER_DIR: &str = ".gemini/antigravity/bin";

/// The encoder's file name in that directory.
const WEBM_ENCODER: &str = "webm_encoder";

/// Makes `home/.gemini/antigravity/bin` an empty file, so the harness cannot install the
/// encoder there, first removing an encoder an earlier process installed (the directory goes
/// when it held nothing else; one holding anything else is left as it is). The agent may have
/// shaped its `HOME` in an earlier life: everything goes through the door, and a path with a
/// link is left alone (a confined harness then writes wherever the link leads inside its own
/// sandbox, which costs only disk).
pub fn keep_out(home: &AgentDir) -> Result<()> {
    let parts: Vec<&str> = WEBM_ENCODER_DIR.split('/').collect();
    let (last, parents) = parts.split_last().expect("a non-empty path");
    let mut dir = String::new();
    for part in parents {
        if !dir.is_empty() {
            dir.push('/');
        }
        dir.push_str(part);
        match kind(home, &dir)? {
            Some(EntryKind::Dir) => {}
            Some(_) => return Ok(()),
            None => {
                home.create_dir(Path::new(&dir))?;
            }
        }
    }
    let bin = format!("{dir}/{last}");
    if let Some(found) = kind(home, &bin)? {
        if found != EntryKind::Dir {
            return Ok(());
        }
        let entries = home.entries(Path::new(&bin))?;
        match entries.as_slice() {
            [] => {}
            [only] if only.name == WEBM_ENCODER && only.kind == EntryKind::File => {
                home.remove_file(&Path::new(&bin).join(WEBM_ENCODER))?;
            }
            _ => return Ok(()),
        }
        home.remove_empty_dir(Path::new(&bin))?;
    }
    // Never through a link planted meanwhile, never over what appeared meanwhile.
    home.create_new_file(Path::new(&bin))?;
    Ok(())
}

/// What is at `rel` below `home`, links not followed; `None` when nothing is.
fn kind(home: &AgentDir, rel: &str) -> Result<Option<EntryKind>> {
    match home.stat(Path::new(rel)) {
        Ok(entry) => Ok(Some(entry.kind)),
        Err(SandboxError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether the encoder's place under `home` is the empty file [`keep_out`] made (the launcher
/// then masks it, so the agent cannot turn it back into a directory).
pub(crate) fn is_kept_out(home: &AgentDir) -> bool {
    matches!(kind(home, WEBM_ENCODER_DIR), Ok(Some(EntryKind::File)))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn bin(home: &Path) -> std::path::PathBuf {
        home.join(WEBM_ENCODER_DIR)
    }

    #[test]
    fn a_new_home_gets_an_empty_file_where_the_encoder_would_go() {
        let home = tempfile::tempdir().unwrap();
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        let meta = fs::symlink_metadata(bin(home.path())).unwrap();
        assert!(meta.file_type().is_file() && meta.len() == 0);
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        assert!(bin(home.path()).is_file(), "a second call changes nothing");
    }

    #[test]
    fn an_installed_encoder_is_removed() {
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(bin(home.path())).unwrap();
        fs::write(bin(home.path()).join(WEBM_ENCODER), b"\x7fELF...").unwrap();
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        assert!(bin(home.path()).is_file());
    }

    #[test]
    fn a_directory_holding_anything_else_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(bin(home.path())).unwrap();
        fs::write(bin(home.path()).join(WEBM_ENCODER), b"encoder").unwrap();
        fs::write(bin(home.path()).join("tool"), b"the agent's").unwrap();
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        assert!(bin(home.path()).join(WEBM_ENCODER).is_file());
        assert!(bin(home.path()).join("tool").is_file());
    }

    #[test]
    fn symbolic_links_are_never_followed() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("antigravity/bin");
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join(WEBM_ENCODER), b"someone else's").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), home.path().join(".gemini")).unwrap();
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        assert!(
            target.join(WEBM_ENCODER).is_file(),
            "the link's target is untouched"
        );

        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(home.path().join(".gemini/antigravity")).unwrap();
        std::os::unix::fs::symlink(&target, bin(home.path())).unwrap();
        keep_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        assert!(
            target.join(WEBM_ENCODER).is_file(),
            "the link's target is untouched"
        );
        assert!(
            fs::symlink_metadata(bin(home.path()))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}
