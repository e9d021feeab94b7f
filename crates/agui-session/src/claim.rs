//! A claim: a small file that exactly one of several writers creates (thread tasks, replicas
//! sharing a volume), for who owns a thread, which tree is an owner's, which replica holds a
//! lease. One way to make one, with one rule for durability: the content is synced before it
//! is linked into place, and the directory after, so a claim a caller was told it won survives
//! a crash of the machine.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Creates `path` (in an existing directory) holding `content`, readable by the server only,
/// unless a file has that name. The content is written under a name nobody else uses, synced,
/// then hard-linked to `path` — a link never replaces a file, so of two claims exactly one wins
/// also across hosts sharing a network file system — and the directory synced. `Ok(false)`
/// when another file had the name (its content is the winner's to read).
pub fn claim_file(path: &Path, content: &[u8]) -> io::Result<bool> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a claim needs a directory"))?;
    let temp = dir.join(format!(".{}.claim", uuid::Uuid::new_v4().simple()));
    let linked = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(content)?;
        file.sync_all()?;
        fs::hard_link(&temp, path)
    })();
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            fs::File::open(dir)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_many_claims_racing_for_one_name_exactly_one_wins_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thread.owner.json");
        let winners: Vec<bool> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let path = &path;
                    scope.spawn(move || claim_file(path, format!("{i}").as_bytes()).unwrap())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(winners.iter().filter(|w| **w).count(), 1, "{winners:?}");
        let won = winners.iter().position(|w| *w).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), won.to_string());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["thread.owner.json"]);
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
