//! The two operations on a whole tree below a directory, each a bounded depth-first walk that
//! follows no link: how much disk it takes, and giving it to the sandbox's identity.

use std::collections::HashSet;
use std::ffi::OsString;

use rustix::fs::{AtFlags, FileType};

use super::{AgentDir, DiskUsage, MAX_DEPTH, blocks};
use crate::Result;

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
        // Each level: a directory and the names left to look at in it.
        let mut stack: Vec<(AgentDir, Vec<OsString>)> = vec![(self.dup()?, self.names()?)];
        loop {
            let depth = stack.len();
            let Some((dir, pending)) = stack.last_mut() else {
                break;
            };
            let Some(name) = pending.pop() else {
                stack.pop();
                continue;
            };
            let Ok(stat) = rustix::fs::statat(&dir.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            if stat.st_nlink > 1
                && FileType::from_raw_mode(stat.st_mode) != FileType::Directory
                && !seen.insert((stat.st_dev, stat.st_ino))
            {
                continue;
            }
            usage.bytes += blocks(&stat);
            if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
                continue;
            }
            if depth >= MAX_DEPTH {
                usage.too_deep = true;
                continue;
            }
            let Ok(child) = dir.child_dir(&name) else {
                continue;
            };
            let Ok(names) = child.names() else { continue };
            stack.push((child, names));
        }
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
        let mut stack: Vec<(AgentDir, Vec<OsString>)> = vec![(self.dup()?, self.names()?)];
        loop {
            let depth = stack.len();
            let Some((dir, pending)) = stack.last_mut() else {
                break;
            };
            let Some(name) = pending.pop() else {
                stack.pop();
                continue;
            };
            dir.chown_at(&name)?;
            if depth >= MAX_DEPTH {
                continue;
            }
            let Ok(child) = dir.child_dir(&name) else {
                continue;
            };
            let Ok(names) = child.names() else { continue };
            stack.push((child, names));
        }
        Ok(())
    }
}
