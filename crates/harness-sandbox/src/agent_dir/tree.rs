//! The two operations on a whole tree below a directory, each a bounded depth-first walk that
//! follows no link: how much disk it takes, and giving it to the sandbox's identity.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};

use rustix::fs::{AtFlags, FileType};

use super::{AgentDir, DiskUsage, MAX_DEPTH, blocks};
use crate::Result;

/// What a walk does after visiting an entry.
enum Next {
    /// Goes into it, if it is a directory it can open (without following a link).
    Descend,
    /// Goes on with its siblings.
    Skip,
}

impl AgentDir {
    /// The disk this directory and everything below it take: allocated blocks, each inode
    /// once, links not followed, down to a bounded depth (see [`DiskUsage::too_deep`]).
    pub fn disk_usage(&self) -> Result<DiskUsage> {
        let own = rustix::fs::fstat(&self.fd).map_err(|e| self.io_error(e, "", "stat"))?;
        let mut usage = DiskUsage {
            bytes: blocks(&own),
            too_deep: false,
        };
        let mut seen = HashSet::new();
        self.visit_below(|dir, name, depth| {
            let Ok(stat) = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
                return Ok(Next::Skip);
            };
            let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
            if stat.st_nlink > 1 && !is_dir && !seen.insert((stat.st_dev, stat.st_ino)) {
                return Ok(Next::Skip);
            }
            usage.bytes += blocks(&stat);
            if !is_dir {
                return Ok(Next::Skip);
            }
            if depth >= MAX_DEPTH {
                usage.too_deep = true;
                return Ok(Next::Skip);
            }
            Ok(Next::Descend)
        })?;
        Ok(usage)
    }

    /// Gives this directory and everything below it to the identity it creates entries for
    /// (links are given, never followed), down to the same depth as [`AgentDir::disk_usage`]:
    /// for a tree an earlier version made as the host's user. Nothing to do without an
    /// identity.
    pub fn give_all(&self) -> Result<()> {
        if self.owner.is_none() {
            return Ok(());
        }
        self.chown_self()?;
        self.visit_below(|dir, name, depth| {
            dir.chown_at(name)?;
            Ok(if depth >= MAX_DEPTH {
                Next::Skip
            } else {
                Next::Descend
            })
        })
    }

    /// Visits every entry below this directory depth first (`depth` 1 for its own entries),
    /// going into the directories `visit` asks for; an entry that vanished or cannot be opened
    /// as a directory is passed over, an error of `visit` ends the walk.
    fn visit_below(
        &self,
        mut visit: impl FnMut(&AgentDir, &OsStr, usize) -> Result<Next>,
    ) -> Result<()> {
        // Each level: a directory and the names left to look at in it.
        let mut stack: Vec<(AgentDir, Vec<OsString>)> = vec![(self.dup()?, self.names()?)];
        loop {
            let depth = stack.len();
            let Some((dir, pending)) = stack.last_mut() else {
                return Ok(());
            };
            let Some(name) = pending.pop() else {
                stack.pop();
                continue;
            };
            if matches!(visit(dir, &name, depth)?, Next::Skip) {
                continue;
            }
            let Ok(child) = dir.child_dir(&name) else {
                continue;
            };
            let Ok(names) = child.names() else { continue };
            stack.push((child, names));
        }
    }
}
