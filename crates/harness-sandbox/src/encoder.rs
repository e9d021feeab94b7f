//! The webm encoder the harness embeds (16.8 MB, used only to record browser sessions): on a
//! conversation's first turn the harness writes it to `HOME/.gemini/antigravity/bin/` when it
//! is missing, or reads it back whole to compare when it is there — about 30 ms of that turn
//! either way, measured. When that directory cannot be created (a file has its name), the
//! harness skips the install and works on. A confined process usually has a `HOME` of its own,
//! one per owner or thread, so by default ([`crate::Confinement::webm_encoder`] off) the encoder is kept
//! out of it.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::Path;

/// Where, under `HOME`, the harness installs the encoder.
pub const WEBM_ENCODER_DIR: &str = ".gemini/antigravity/bin";

/// The encoder's file name in that directory.
const WEBM_ENCODER: &str = "webm_encoder";

/// Makes `home/.gemini/antigravity/bin` an empty file, so the harness cannot install the
/// encoder there, first removing an encoder an earlier process installed (the directory goes
/// when it held nothing else; one holding anything else is left as it is). The agent may have
/// shaped its `HOME` in an earlier life: nothing here follows a symbolic link, and a path with
/// one is left alone (a confined harness then writes wherever the link leads inside its own
/// sandbox, which costs only disk).
pub fn keep_out(home: &Path) -> io::Result<()> {
    let mut dir = home.to_owned();
    let parts: Vec<&str> = WEBM_ENCODER_DIR.split('/').collect();
    let (last, parents) = parts.split_last().expect("a non-empty path");
    for part in parents {
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => fs::create_dir(&dir)?,
            Err(e) => return Err(e),
        }
    }
    let bin = dir.join(last);
    match fs::symlink_metadata(&bin) {
        Ok(meta) if meta.file_type().is_dir() => {
            let entries = fs::read_dir(&bin)?
                .map(|entry| entry.map(|e| e.file_name()))
                .collect::<io::Result<Vec<_>>>()?;
            match entries.as_slice() {
                [] => {}
                [only] if only == WEBM_ENCODER => {
                    let encoder = bin.join(WEBM_ENCODER);
                    if fs::symlink_metadata(&encoder)?.file_type().is_file() {
                        fs::remove_file(encoder)?;
                    }
                }
                _ => return Ok(()),
            }
            fs::remove_dir(&bin)?;
        }
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // `create_new`: never through a link planted meanwhile.
    match OpenOptions::new().write(true).create_new(true).open(&bin) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(home: &Path) -> std::path::PathBuf {
        home.join(WEBM_ENCODER_DIR)
    }

    #[test]
    fn a_new_home_gets_an_empty_file_where_the_encoder_would_go() {
        let home = tempfile::tempdir().unwrap();
        keep_out(home.path()).unwrap();
        let meta = fs::symlink_metadata(bin(home.path())).unwrap();
        assert!(meta.file_type().is_file() && meta.len() == 0);
        keep_out(home.path()).unwrap();
        assert!(bin(home.path()).is_file(), "a second call changes nothing");
    }

    #[test]
    fn an_installed_encoder_is_removed() {
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(bin(home.path())).unwrap();
        fs::write(bin(home.path()).join(WEBM_ENCODER), b"\x7fELF...").unwrap();
        keep_out(home.path()).unwrap();
        assert!(bin(home.path()).is_file());
    }

    #[test]
    fn a_directory_holding_anything_else_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(bin(home.path())).unwrap();
        fs::write(bin(home.path()).join(WEBM_ENCODER), b"encoder").unwrap();
        fs::write(bin(home.path()).join("tool"), b"the agent's").unwrap();
        keep_out(home.path()).unwrap();
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
        keep_out(home.path()).unwrap();
        assert!(
            target.join(WEBM_ENCODER).is_file(),
            "the link's target is untouched"
        );

        let home = tempfile::tempdir().unwrap();
        fs::create_dir_all(home.path().join(".gemini/antigravity")).unwrap();
        std::os::unix::fs::symlink(&target, bin(home.path())).unwrap();
        keep_out(home.path()).unwrap();
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
