//! A streaming walk of a directory through the door: every entry below it, one at a time, in
//! name order within each directory, links and special files reported and never followed, with
//! a bounded number of descriptors however deep or wide the tree (for archives of a workspace,
//! and copies out of a directory the host trusts).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;

use super::{AgentDir, Entry, EntryKind, MAX_DEPTH, entry};
use crate::{Result, SandboxError};

/// One entry met by a [`Walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkEntry {
    /// Where it is, relative to the directory walked.
    pub rel: PathBuf,
    /// What it is (its `name` is the last component of `rel`).
    pub entry: Entry,
}

/// The entries below a directory, depth first: a directory comes before what it holds. Made by
/// [`AgentDir::walk`].
#[derive(Debug)]
pub struct Walk {
    /// The directories being read, outermost first: each with its path and the names left.
    stack: Vec<Level>,
    too_deep: bool,
}

#[derive(Debug)]
struct Level {
    dir: AgentDir,
    rel: PathBuf,
    /// Names left to look at, in reverse order (the next is last).
    pending: Vec<OsString>,
}

impl AgentDir {
    /// Walks the directory at `rel` and everything below it (see [`Walk`]). A directory deeper
    /// than the door follows is reported but not entered ([`Walk::too_deep`]); one replaced by
    /// a link between its listing and its opening is reported and not entered either.
    pub fn walk(&self, rel: &Path) -> Result<Walk> {
        let dir = self.dir(rel)?;
        let pending = sorted_names(&dir)?;
        Ok(Walk {
            stack: vec![Level {
                dir,
                rel: PathBuf::new(),
                pending,
            }],
            too_deep: false,
        })
    }
}

impl Walk {
    /// Whether a directory was too deep to enter: what it holds was not walked.
    pub fn too_deep(&self) -> bool {
        self.too_deep
    }
}

impl Iterator for Walk {
    type Item = Result<WalkEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let depth = self.stack.len();
            let level = self.stack.last_mut()?;
            let Some(name) = level.pending.pop() else {
                self.stack.pop();
                continue;
            };
            let stat = match rustix::fs::statat(&level.dir.fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Removed since it was listed.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Some(Err(level.dir.io_error(e, &name, "stat"))),
            };
            let found = WalkEntry {
                rel: level.rel.join(&name),
                entry: entry(name.clone(), &stat),
            };
            if found.entry.kind != EntryKind::Dir {
                return Some(Ok(found));
            }
            if depth >= MAX_DEPTH {
                self.too_deep = true;
                return Some(Ok(found));
            }
            let child = match level.dir.child_dir(&name) {
                Ok(child) => child,
                // Swapped for a link or a file, or removed, since the stat: not entered.
                Err(SandboxError::Refused { .. }) => return Some(Ok(found)),
                Err(SandboxError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    return Some(Ok(found));
                }
                Err(e) => return Some(Err(e)),
            };
            let pending = match sorted_names(&child) {
                Ok(pending) => pending,
                Err(e) => return Some(Err(e)),
            };
            self.stack.push(Level {
                dir: child,
                rel: found.rel.clone(),
                pending,
            });
            return Some(Ok(found));
        }
    }
}

/// The names in `dir`, in reverse name order (popped from the end, they come in order).
fn sorted_names(dir: &AgentDir) -> Result<Vec<OsString>> {
    let mut names = dir.names()?;
    names.sort_by(|a, b| b.cmp(a));
    Ok(names)
}

#[cfg(test)]
mod tests;
