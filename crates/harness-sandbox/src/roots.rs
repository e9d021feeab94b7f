//! The sandboxes' root directories in the host's temporary directory.
//!
//! A sandbox's view is built on an empty root directory that only holds its mount points (empty
//! directories and files) and the symlinks of a merged `/usr`. The launcher makes it (named
//! `agui-sandbox-<pid>-<start time>-<n>`, so its owner is known) and removes it when the sandbox
//! ends; a launcher killed by SIGKILL cannot, so a server starting up, and every launcher before
//! it makes its own, clears the roots whose launcher is gone ([`clear_stale_roots`]), and the
//! `hakoniwa-*` roots earlier versions left.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The name of a root this crate's launcher makes starts with it.
pub const ROOT_PREFIX: &str = "agui-sandbox-";

/// The prefix of the roots hakoniwa made itself (before the launcher named its own).
const LEGACY_PREFIX: &str = "hakoniwa-";

/// A legacy root younger than this may be one a launcher is still building.
const LEGACY_MIN_AGE: Duration = Duration::from_secs(120);

/// How deep a root's mount points may lie (`/etc/ssl/certs` is 3 levels down).
const MAX_DEPTH: usize = 16;

/// A sandbox's root directory, made by its launcher and removed when the launcher drops it.
#[cfg(feature = "launcher")]
pub(crate) struct Root(PathBuf);

#[cfg(feature = "launcher")]
impl Root {
    /// Makes an empty root (mode 0700) in `tmp`, named after this process.
    pub(crate) fn make(tmp: &Path) -> Result<Self, String> {
        let pid = std::process::id();
        let start = start_time(pid).ok_or("cannot read this process's start time")?;
        let n = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = tmp.join(format!("{ROOT_PREFIX}{pid}-{start}-{n:x}"));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| format!("cannot make the sandbox root {}: {e}", path.display()))?;
        Ok(Self(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

#[cfg(feature = "launcher")]
impl Drop for Root {
    fn drop(&mut self) {
        if let Err(why) = remove_skeleton(&self.0, &rooted_processes()) {
            eprintln!("sandbox: the root {} is left: {why}", self.0.display());
        }
    }
}

/// What [`clear_stale_roots`] did.
#[derive(Debug, Default)]
pub struct ClearedRoots {
    /// The roots removed.
    pub removed: Vec<PathBuf>,
    /// Roots of dead launchers left in place, and why.
    pub kept: Vec<(PathBuf, String)>,
}

/// Removes the sandbox roots in `tmp` that their launcher left when it was killed: those of this
/// crate's naming whose launcher process is gone, and `hakoniwa-*` ones older than two minutes
/// that hold the launcher's shell directory. Either only when no process has it as its root
/// directory, and only while it holds nothing but empty directories, empty files and symlinks
/// on `tmp`'s filesystem, of this process's user (a symlink is never followed).
pub fn clear_stale_roots(tmp: &Path) -> ClearedRoots {
    let mut cleared = ClearedRoots::default();
    let Ok(entries) = fs::read_dir(tmp) else {
        return cleared;
    };
    // Read only when there is a candidate: a launcher calls this at every start.
    let mut rooted = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        let stale = if let Some((pid, start)) = owner(name) {
            start_time(pid) != Some(start)
        } else if name.starts_with(LEGACY_PREFIX) {
            fs::symlink_metadata(path.join(".agui/bin")).is_ok_and(|m| m.is_dir())
                && fs::symlink_metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= LEGACY_MIN_AGE))
        } else {
            false
        };
        if !stale {
            continue;
        }
        match remove_skeleton(&path, rooted.get_or_insert_with(rooted_processes)) {
            Ok(()) => cleared.removed.push(path),
            Err(why) => cleared.kept.push((path, why)),
        }
    }
    cleared
}

/// The launcher's pid and start time in a root's name.
fn owner(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.strip_prefix(ROOT_PREFIX)?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next().filter(|n| !n.is_empty())?;
    Some((pid, start))
}

/// A process's start time (clock ticks after boot), which tells it from a later one of its pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; the name (field 2) may hold spaces and parentheses, so count after its end.
    stat.get(stat.rfind(')')? + 2..)?
        .split(' ')
        .nth(19)?
        .parse()
        .ok()
}

/// The root directories (device, inode) of every process this one can see.
fn rooted_processes() -> Vec<(u64, u64)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| fs::metadata(e.path().join("root")).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Removes `dir` if it is what a sandbox's root is once its sandbox is gone; otherwise removes
/// nothing and says why. The roots are 0700 of this user, so only it (or root) could change
/// one between the check and the removal, and the removal follows no link either (a symlink is
/// unlinked, a directory removed only once empty).
fn remove_skeleton(dir: &Path, rooted: &[(u64, u64)]) -> Result<(), String> {
    let top = fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !top.is_dir() {
        return Err("not a directory".into());
    }
    if top.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!("it belongs to uid {}", top.uid()));
    }
    if rooted.contains(&(top.dev(), top.ino())) {
        return Err("a process has it as its root directory".into());
    }
    let mut found = Vec::new();
    survey(dir, top.dev(), 0, &mut found)?;
    // Children before their parents.
    for (path, is_dir) in found.iter().rev() {
        let removed = if *is_dir {
            fs::remove_dir(path)
        } else {
            fs::remove_file(path)
        };
        removed.map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Lists `path` and what it holds (parents first), or says what a sandbox's root does not hold.
fn survey(
    path: &Path,
    dev: u64,
    depth: usize,
    found: &mut Vec<(PathBuf, bool)>,
) -> Result<(), String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        found.push((path.to_owned(), false));
        return Ok(());
    }
    if meta.dev() != dev {
        return Err(format!("{} is on another filesystem", path.display()));
    }
    if kind.is_file() {
        if meta.len() != 0 {
            return Err(format!("{} is a file that is not empty", path.display()));
        }
        found.push((path.to_owned(), false));
        return Ok(());
    }
    if !kind.is_dir() {
        return Err(format!(
            "{} is neither a directory, a file nor a symlink",
            path.display()
        ));
    }
    if depth > MAX_DEPTH {
        return Err(format!("{} lies deeper than a mount point", path.display()));
    }
    found.push((path.to_owned(), true));
    for entry in fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", path.display()))?;
        survey(&entry.path(), dev, depth + 1, found)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root of a dead launcher (a pid that cannot run: above the kernel's limit).
    fn dead_root(tmp: &Path, n: u32) -> PathBuf {
        let root = tmp.join(format!("{ROOT_PREFIX}4294967{n}-1-a"));
        fs::create_dir_all(root.join("etc/ssl/certs")).unwrap();
        fs::create_dir_all(root.join(".agui/bin")).unwrap();
        fs::write(root.join("etc/hosts"), "").unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        root
    }

    #[cfg(feature = "launcher")]
    #[test]
    fn a_dead_launcher_s_skeleton_root_is_removed_and_a_live_one_s_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = dead_root(tmp.path(), 1);
        let live = Root::make(tmp.path()).unwrap();
        fs::create_dir(live.path().join("usr")).unwrap();
        let cleared = clear_stale_roots(tmp.path());
        assert_eq!(cleared.removed, vec![dead.clone()], "{cleared:?}");
        assert!(!dead.exists());
        assert!(live.path().join("usr").is_dir());
        let path = live.path().to_owned();
        drop(live);
        assert!(!path.exists(), "the launcher removes its own root");
    }

    #[test]
    fn a_root_holding_data_a_link_to_elsewhere_or_another_name_is_never_touched() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("precious"), "data").unwrap();
        let with_data = dead_root(tmp.path(), 2);
        fs::write(with_data.join("etc/notes"), "written by the agent").unwrap();
        let with_link = dead_root(tmp.path(), 3);
        // A link is unlinked, never followed: what it points at stays.
        std::os::unix::fs::symlink(outside.path(), with_link.join("etc/escape")).unwrap();
        let as_link = tmp.path().join(format!("{ROOT_PREFIX}42949674-1-b"));
        std::os::unix::fs::symlink(outside.path(), &as_link).unwrap();
        let other = tmp.path().join("someone-else-4294967-1-a");
        fs::create_dir(&other).unwrap();
        let fresh_legacy = tmp.path().join("hakoniwa-abc");
        fs::create_dir_all(fresh_legacy.join(".agui/bin")).unwrap();
        let cleared = clear_stale_roots(tmp.path());
        assert_eq!(cleared.removed, vec![with_link.clone()], "{cleared:?}");
        assert!(fs::read_to_string(with_data.join("etc/notes")).is_ok());
        assert_eq!(
            fs::read_to_string(outside.path().join("precious")).unwrap(),
            "data"
        );
        assert!(as_link.symlink_metadata().is_ok() && other.is_dir() && fresh_legacy.is_dir());
        let kept: Vec<_> = cleared.kept.iter().map(|(p, _)| p.clone()).collect();
        assert!(
            kept.contains(&with_data) && kept.contains(&as_link),
            "{cleared:?}"
        );
    }

    #[test]
    fn names_tell_the_launcher_that_made_the_root() {
        assert_eq!(owner("agui-sandbox-12-345-ff"), Some((12, 345)));
        assert_eq!(owner("agui-sandbox-12-345-"), None);
        assert_eq!(owner("agui-sandbox-x-345-ff"), None);
        assert_eq!(owner("hakoniwa-12-345-ff"), None);
        assert!(start_time(std::process::id()).is_some());
    }
}
