//! The one door through which a host touches a directory an agent can write: workspaces, a
//! confined harness's `HOME`, storage and app data. Whatever the agent planted there — a
//! symbolic link at any component, a FIFO, a device, a hard link to a file elsewhere — the host
//! neither follows it nor blocks on it.
//!
//! An [`AgentDir`] is a directory opened at a root the host trusts (a path no agent can rename
//! or replace: a tree's root, which is a mount point inside the sandbox, under directories only
//! the host writes). Everything below it is reached component by component from that
//! descriptor with `O_NOFOLLOW`, so a link at any component is refused rather than followed,
//! and a directory swapped for a link between two calls is refused too (each step is relative
//! to the descriptor of the step before, never to a path). `openat2`'s `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS` gives the same guarantee in one call, but needs Linux 5.6 and a second
//! code path where it is missing; the paths here are a few components deep, so the walk costs
//! a handful of system calls and works on every kernel the host runs on.
//!
//! Reads open with `O_NONBLOCK` (a FIFO does not block the open) and refuse anything but a
//! regular file with a single link (a hard link may lead to a file outside the tree). Removal
//! unlinks links and special files as entries, never what they point to, and bounds the
//! descriptors it holds however deep the tree. Directories the host makes are `0700`, files
//! `0600`, owned by the sandbox's identity when it has one of its own.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, RenameFlags};

use crate::identity::SandboxIdentity;
use crate::{Result, SandboxError};

mod tree;
mod walk;

pub use walk::{Walk, WalkEntry};

/// How deep a walk or a removal holds directory descriptors; deeper, a removal moves the
/// subtree up (into the directory being removed) and a measurement reports the tree as too
/// deep to measure.
const MAX_DEPTH: usize = 128;

/// How many times a removal reads a directory again that filled up while it was emptied (a
/// writer still running in it) before it gives up.
const MAX_REFILLS: usize = 64;

/// How long after its start a removal reads directories again that filled up while they were
/// emptied. A count alone does not bound the work: each read again brings what the writer made
/// meanwhile, and a writer faster than the removal makes every list longer than the last (a
/// test's writer filled 46 GB of files while one removal went on). After it, what was read is
/// removed and the removal ends, reporting the directory not empty if a writer refilled it.
const REFILL_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether a removal may read a directory again after `refills` reads again: fewer than
/// [`MAX_REFILLS`], and before `until` (its start plus [`REFILL_WINDOW`]).
fn may_refill(refills: usize, until: std::time::Instant) -> bool {
    refills < MAX_REFILLS && std::time::Instant::now() < until
}

/// Why the door refused an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A path that is absolute, empty where a name is needed, or has `.`/`..` components.
    BadPath,
    /// A component is a symbolic link.
    Symlink,
    /// A component that must be a directory is something else.
    NotADirectory,
    /// Not a regular file (a FIFO, a socket, a device, a directory).
    NotARegularFile,
    /// A regular file with more than one link: its other name may be outside the tree.
    HardLinked,
    /// Larger than the caller allows.
    TooLarge,
}

impl Refusal {
    fn describe(self) -> &'static str {
        match self {
            Self::BadPath => "not a plain relative path",
            Self::Symlink => "a symbolic link",
            Self::NotADirectory => "not a directory",
            Self::NotARegularFile => "not a regular file",
            Self::HardLinked => "a file with several hard links",
            Self::TooLarge => "too large",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// What an entry is, as the door saw it (links are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (reported, never followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name in its directory.
    pub name: OsString,
    /// What it is.
    pub kind: EntryKind,
    /// Its length in bytes.
    pub len: u64,
    /// The disk it takes (allocated blocks).
    pub disk_bytes: u64,
    /// When its content last changed.
    pub modified: SystemTime,
    /// How many names it has.
    pub links: u64,
}

/// The disk a tree takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskUsage {
    /// Allocated bytes of every entry (each inode once).
    pub bytes: u64,
    /// A directory chain deeper than the walk follows: what lies below was not counted, and a
    /// caller enforcing a cap should treat the tree as over it.
    pub too_deep: bool,
}

/// A directory an agent can write, opened beneath a root the host trusts.
#[derive(Debug)]
pub struct AgentDir {
    fd: OwnedFd,
    /// Where it is, for messages only (never opened by this path again).
    shown: PathBuf,
    owner: Option<SandboxIdentity>,
}

impl AgentDir {
    /// Opens `root`, a directory the caller trusts up to and including its last component (no
    /// agent can rename or replace it). Only its last component is checked: not a link.
    pub fn open(root: &Path) -> Result<Self> {
        let fd = rustix::fs::open(root, dir_flags(), Mode::empty())
            .map_err(|e| refused_or(e, root, "open"))?;
        Ok(Self {
            fd,
            shown: root.to_owned(),
            owner: None,
        })
    }

    /// Creates `root` (and its missing parents, which the caller trusts as it trusts `root`)
    /// readable by the host only, then opens it.
    pub fn create(root: &Path, owner: Option<SandboxIdentity>) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(SandboxError::io(format!("create {}", root.display())))?;
        let dir = Self::open(root)?.owned_by(owner);
        dir.chown_self()?;
        Ok(dir)
    }

    /// `dir` through the door: below the longest of `roots` (directories the caller trusts,
    /// such as a sandbox's granted directories) that holds it, every component below the root
    /// checked; made where missing when `create` (what stands in the way and is not a directory
    /// is moved aside). A `dir` under none of `roots` is the caller's own and is opened (or
    /// made) as named. What it makes (and what the returned directory makes) is `owner`'s.
    pub fn below(
        roots: &[PathBuf],
        dir: &Path,
        create: bool,
        owner: Option<SandboxIdentity>,
    ) -> Result<Self> {
        let root = roots
            .iter()
            .filter(|root| dir.starts_with(root))
            .max_by_key(|root| root.as_os_str().len());
        match root {
            Some(root) => {
                let rel = dir.strip_prefix(root).unwrap_or(Path::new(""));
                let root = Self::open(root)?.owned_by(owner);
                match (rel.as_os_str().is_empty(), create) {
                    (true, _) => Ok(root),
                    (false, true) => root.ensure_dir_all(rel),
                    (false, false) => root.dir(rel),
                }
            }
            None if create => Self::create(dir, owner),
            None => Self::open(dir).map(|dir| dir.owned_by(owner)),
        }
    }

    /// What the host creates below this directory is owned by `owner` (a sandbox's own
    /// identity); `None` leaves it the host's.
    #[must_use]
    pub fn owned_by(mut self, owner: Option<SandboxIdentity>) -> Self {
        self.owner = owner;
        self
    }

    /// Where this directory is (for messages).
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// The directory at `rel` below this one; every component must be a real directory.
    pub fn dir(&self, rel: &Path) -> Result<AgentDir> {
        let names = components(rel)?;
        let mut current = self.dup()?;
        for name in names {
            current = current.child_dir(name)?;
        }
        Ok(current)
    }

    /// The directory at `rel`, created where missing (`0700`, owned as this directory says).
    /// A component that exists and is not a directory is refused.
    pub fn create_dir_all(&self, rel: &Path) -> Result<AgentDir> {
        self.make_dirs(rel, false)
    }

    /// The directory at `rel`, created where missing; a component that is not a directory (a
    /// link, a file the agent put there) is moved aside to `<name>.set-aside-<random>` and a
    /// directory made in its place. For directories the host itself lays out.
    pub fn ensure_dir_all(&self, rel: &Path) -> Result<AgentDir> {
        self.make_dirs(rel, true)
    }

    /// Creates the directory `rel` (its parent must exist); `Ok(false)` when something of that
    /// name already exists (never followed).
    pub fn create_dir(&self, rel: &Path) -> Result<bool> {
        let (parent, name) = self.parent_of(rel)?;
        match rustix::fs::mkdirat(&parent.fd, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => {
                parent.chown_at(name)?;
                Ok(true)
            }
            Err(rustix::io::Errno::EXIST) => Ok(false),
            Err(e) => Err(parent.io_error(e, name, "create the directory")),
        }
    }

    /// What is at `rel` (a link is reported as a link).
    pub fn stat(&self, rel: &Path) -> Result<Entry> {
        if rel.as_os_str().is_empty() {
            let stat = rustix::fs::fstat(&self.fd).map_err(|e| self.io_error(e, "", "stat"))?;
            return Ok(entry(OsString::new(), &stat));
        }
        let (parent, name) = self.parent_of(rel)?;
        let stat = rustix::fs::statat(&parent.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| parent.io_error(e, name, "stat"))?;
        Ok(entry(name.to_owned(), &stat))
    }

    /// The entries of the directory at `rel` (links reported, not followed), by name.
    pub fn entries(&self, rel: &Path) -> Result<Vec<Entry>> {
        let dir = self.dir(rel)?;
        let mut entries = Vec::new();
        for name in dir.names()? {
            match rustix::fs::statat(&dir.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => entries.push(entry(name, &stat)),
                // Removed meanwhile.
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(dir.io_error(e, &name, "stat")),
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Opens the regular file at `rel` for reading: refused when it is a link, a FIFO, a
    /// socket, a device or a file with several links. Never blocks on what it opens.
    pub fn open_file(&self, rel: &Path) -> Result<(File, Entry)> {
        let (parent, name) = self.parent_of(rel)?;
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&parent.fd, name, flags, Mode::empty())
            .map_err(|e| parent.refused_or(e, name, "open"))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| parent.io_error(e, name, "stat"))?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::RegularFile {
            return Err(parent.refused(name, Refusal::NotARegularFile));
        }
        if stat.st_nlink != 1 {
            return Err(parent.refused(name, Refusal::HardLinked));
        }
        // Regular files ignore O_NONBLOCK; cleared all the same, for whoever reads it next.
        let _ = rustix::fs::fcntl_setfl(&fd, OFlags::empty());
        Ok((File::from(fd), entry(name.to_owned(), &stat)))
    }

    /// The content of the regular file at `rel`, at most `max` bytes (larger is refused).
    pub fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>> {
        let (file, entry) = self.open_file(rel)?;
        if entry.len > max {
            return Err(self.refused_path(rel, Refusal::TooLarge));
        }
        let mut data = Vec::with_capacity(usize::try_from(entry.len).unwrap_or(0));
        file.take(max + 1)
            .read_to_end(&mut data)
            .map_err(SandboxError::io(format!(
                "read {}",
                self.shown.join(rel).display()
            )))?;
        if data.len() as u64 > max {
            return Err(self.refused_path(rel, Refusal::TooLarge));
        }
        Ok(data)
    }

    /// Writes `data` to `rel` as a new file renamed over whatever had that name (a link there
    /// is replaced, never followed): readers see the old content or the new, never a part.
    pub fn write(&self, rel: &Path, data: &[u8]) -> Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        let (mut file, temp) = parent.create_temp(name)?;
        let written =
            file.write_all(data)
                .and_then(|()| file.sync_all())
                .map_err(SandboxError::io(format!(
                    "write {}",
                    parent.shown.join(name).display()
                )));
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&parent.fd, &temp, &parent.fd, name)
                .map_err(|e| parent.io_error(e, name, "replace"))
        });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(&parent.fd, &temp, AtFlags::empty());
        }
        renamed
    }

    /// Creates the file `rel` (`0600`) if nothing has that name; `Ok(None)` when something
    /// does (never followed, never truncated).
    pub fn create_new_file(&self, rel: &Path) -> Result<Option<File>> {
        let (parent, name) = self.parent_of(rel)?;
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(&parent.fd, name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => {
                parent.chown_at(name)?;
                Ok(Some(File::from(fd)))
            }
            Err(rustix::io::Errno::EXIST) => Ok(None),
            Err(e) => Err(parent.refused_or(e, name, "create")),
        }
    }

    /// A new, empty file in the directory at `rel`'s parent, under a hidden temporary name,
    /// for the caller to fill and then [`AgentDir::publish`] as `rel`.
    pub fn create_temp_for(&self, rel: &Path) -> Result<(File, TempName)> {
        let (parent, name) = self.parent_of(rel)?;
        let (file, temp) = parent.create_temp(name)?;
        Ok((
            file,
            TempName {
                parent,
                temp,
                name: name.to_owned(),
            },
        ))
    }

    /// Moves `rel` (a file, a directory, a link — whatever it is) to `to_rel` below `to`,
    /// replacing an empty directory or a file there; on the same file system only.
    pub fn rename_to(&self, rel: &Path, to: &AgentDir, to_rel: &Path) -> Result<()> {
        let (from_parent, from_name) = self.parent_of(rel)?;
        let (to_parent, to_name) = to.parent_of(to_rel)?;
        rustix::fs::renameat(&from_parent.fd, from_name, &to_parent.fd, to_name).map_err(|e| {
            SandboxError::Io {
                action: format!(
                    "move {} to {}",
                    from_parent.shown.join(from_name).display(),
                    to_parent.shown.join(to_name).display()
                ),
                source: e.into(),
            }
        })
    }

    /// Removes whatever is at `rel`: a file, link or special file is unlinked, a directory
    /// emptied and removed, nothing followed. `Ok(false)` when nothing was there.
    pub fn remove(&self, rel: &Path) -> Result<bool> {
        let (parent, name) = self.parent_of(rel)?;
        parent.remove_entry(name)
    }

    /// Removes the file (or link, or special file) at `rel`, never a directory. `Ok(false)`
    /// when nothing was there.
    pub fn remove_file(&self, rel: &Path) -> Result<bool> {
        let (parent, name) = self.parent_of(rel)?;
        match rustix::fs::unlinkat(&parent.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(rustix::io::Errno::ISDIR) => Err(parent.refused(name, Refusal::NotARegularFile)),
            Err(e) => Err(parent.io_error(e, name, "remove")),
        }
    }

    /// Removes the empty directory at `rel`. `Ok(false)` when nothing was there.
    pub fn remove_empty_dir(&self, rel: &Path) -> Result<bool> {
        let (parent, name) = self.parent_of(rel)?;
        match rustix::fs::unlinkat(&parent.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(rustix::io::Errno::NOTDIR) => Err(parent.refused(name, Refusal::NotADirectory)),
            Err(e) => Err(parent.io_error(e, name, "remove")),
        }
    }

    /// Whether this directory belongs to the identity it creates entries for (always, when it
    /// has none).
    pub fn is_owned_as_asked(&self) -> Result<bool> {
        let Some(owner) = self.owner else {
            return Ok(true);
        };
        let stat = rustix::fs::fstat(&self.fd).map_err(|e| self.io_error(e, "", "stat"))?;
        Ok(stat.st_uid == owner.uid && stat.st_gid == owner.gid)
    }

    fn make_dirs(&self, rel: &Path, repair: bool) -> Result<AgentDir> {
        let names = components(rel)?;
        let mut current = self.dup()?;
        for name in names {
            current = match current.child_dir(name) {
                Ok(dir) => dir,
                Err(SandboxError::Io { source, .. })
                    if source.kind() == io::ErrorKind::NotFound =>
                {
                    current.create_dir(Path::new(name))?;
                    current.child_dir(name)?
                }
                Err(SandboxError::Refused { .. }) if repair => {
                    current.set_aside(name)?;
                    current.create_dir(Path::new(name))?;
                    current.child_dir(name)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(current)
    }

    /// Moves the entry `name` out of the way, under a name nobody chose.
    fn set_aside(&self, name: &OsStr) -> Result<()> {
        let mut aside = name.to_owned();
        aside.push(format!(".set-aside-{}", random_suffix()?));
        tracing::warn!(
            path = %self.shown.join(name).display(),
            aside = %aside.to_string_lossy(),
            "something that is not a directory stood where the host keeps one: moved aside"
        );
        rustix::fs::renameat_with(&self.fd, name, &self.fd, &aside, RenameFlags::NOREPLACE)
            .map_err(|e| self.io_error(e, name, "move aside"))
    }

    /// The parent directory of `rel` and its last name.
    fn parent_of<'a>(&self, rel: &'a Path) -> Result<(AgentDir, &'a OsStr)> {
        let names = components(rel)?;
        let Some((last, parents)) = names.split_last() else {
            return Err(self.refused_path(rel, Refusal::BadPath));
        };
        let mut parent = self.dup()?;
        for name in parents {
            parent = parent.child_dir(name)?;
        }
        Ok((parent, last))
    }

    fn child_dir(&self, name: &OsStr) -> Result<AgentDir> {
        let opened = match rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty()) {
            // A directory the agent made unreadable (it owns it): made the host's again.
            Err(rustix::io::Errno::ACCESS) => {
                let _ = rustix::fs::chmodat(
                    &self.fd,
                    name,
                    Mode::from_raw_mode(0o700),
                    AtFlags::empty(),
                );
                rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty())
            }
            other => other,
        };
        let fd = opened.map_err(|e| self.refused_or(e, name, "open"))?;
        Ok(AgentDir {
            fd,
            shown: self.shown.join(name),
            owner: self.owner,
        })
    }

    fn dup(&self) -> Result<AgentDir> {
        let fd = self
            .fd
            .try_clone()
            .map_err(SandboxError::io(format!("open {}", self.shown.display())))?;
        Ok(AgentDir {
            fd,
            shown: self.shown.clone(),
            owner: self.owner,
        })
    }

    /// The names in this directory (not `.` and `..`).
    fn names(&self) -> Result<Vec<OsString>> {
        let dir = Dir::read_from(&self.fd).map_err(|e| self.io_error(e, "", "list"))?;
        let mut names = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| self.io_error(e, "", "list"))?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_owned());
            }
        }
        Ok(names)
    }

    fn create_temp(&self, name: &OsStr) -> Result<(File, OsString)> {
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(".{}.part", random_suffix()?));
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, &temp, flags, Mode::from_raw_mode(0o600))
            .map_err(|e| self.io_error(e, &temp, "create"))?;
        if let Some(owner) = self.owner {
            rustix::fs::fchown(&fd, Some(uid(owner.uid)), Some(gid(owner.gid)))
                .map_err(|e| self.io_error(e, &temp, "give to the sandbox's user"))?;
        }
        Ok((File::from(fd), temp))
    }

    fn chown_self(&self) -> Result<()> {
        if let Some(owner) = self.owner {
            rustix::fs::fchown(&self.fd, Some(uid(owner.uid)), Some(gid(owner.gid)))
                .map_err(|e| self.io_error(e, "", "give to the sandbox's user"))?;
        }
        Ok(())
    }

    fn chown_at(&self, name: &OsStr) -> Result<()> {
        if let Some(owner) = self.owner {
            rustix::fs::chownat(
                &self.fd,
                name,
                Some(uid(owner.uid)),
                Some(gid(owner.gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| self.io_error(e, name, "give to the sandbox's user"))?;
        }
        Ok(())
    }

    /// Removes the entry `name` of this directory, whatever it is, following nothing.
    fn remove_entry(&self, name: &OsStr) -> Result<bool> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::NOENT) => return Ok(false),
            // A directory (EISDIR on Linux), or one the agent left unwritable.
            Err(rustix::io::Errno::ISDIR | rustix::io::Errno::PERM) => {}
            Err(e) => return Err(self.io_error(e, name, "remove")),
        }
        let top = match self.child_dir(name) {
            Ok(top) => top,
            // Replaced by a file or a link meanwhile: an entry like any other.
            Err(SandboxError::Refused { .. }) => {
                return match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
                    Ok(()) => Ok(true),
                    Err(rustix::io::Errno::NOENT) => Ok(false),
                    Err(e) => Err(self.io_error(e, name, "remove")),
                };
            }
            Err(SandboxError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let refill_until = std::time::Instant::now() + REFILL_WINDOW;
        top.empty(refill_until)?;
        let mut refills = 0;
        loop {
            match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
                Ok(()) => return Ok(true),
                Err(rustix::io::Errno::NOENT) => return Ok(true),
                Err(rustix::io::Errno::NOTEMPTY) if may_refill(refills, refill_until) => {
                    refills += 1;
                    top.empty(refill_until)?;
                }
                Err(e) => return Err(self.io_error(e, name, "remove")),
            }
        }
    }

    /// Removes everything below this directory, reading a directory again that filled up
    /// meanwhile only until `refill_until`. Descriptors are held for at most [`MAX_DEPTH`]
    /// levels: a deeper directory is moved up into this one and emptied from there, so no depth
    /// exhausts them.
    fn empty(&self, refill_until: std::time::Instant) -> Result<()> {
        /// One directory being emptied.
        struct Level {
            dir: AgentDir,
            /// Its name in the level above (unused for the first).
            name: OsString,
            pending: Vec<OsString>,
            refills: usize,
        }
        let mut stack = vec![Level {
            dir: self.dup()?,
            name: OsString::new(),
            pending: self.writable_names()?,
            refills: 0,
        }];
        loop {
            let depth = stack.len();
            let Some(level) = stack.last_mut() else {
                break;
            };
            let Some(name) = level.pending.pop() else {
                // Emptied: read it again in case a writer added to it, then go up.
                if may_refill(level.refills, refill_until) {
                    let again = level.dir.writable_names()?;
                    if !again.is_empty() {
                        level.refills += 1;
                        level.pending = again;
                        continue;
                    }
                }
                let done = stack.pop().expect("a level is on the stack");
                if let Some(parent) = stack.last() {
                    match rustix::fs::unlinkat(&parent.dir.fd, &done.name, AtFlags::REMOVEDIR) {
                        // Filled again past the limit: the caller's last removal reports it.
                        Ok(()) | Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTEMPTY) => {}
                        Err(e) => return Err(parent.dir.io_error(e, &done.name, "remove")),
                    }
                }
                continue;
            };
            let dir = &level.dir;
            match rustix::fs::unlinkat(&dir.fd, name.as_os_str(), AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => continue,
                Err(rustix::io::Errno::ISDIR | rustix::io::Errno::PERM) => {}
                Err(e) => return Err(dir.io_error(e, &name, "remove")),
            }
            if depth >= MAX_DEPTH {
                // Too deep to hold another descriptor: moved up to the first level, emptied
                // from there later.
                let mut moved = OsString::from(".deep-");
                moved.push(random_suffix()?);
                let (first, rest) = stack.split_at_mut(1);
                let here = &rest.last().expect("deeper than one level").dir;
                rustix::fs::renameat(&here.fd, &name, &first[0].dir.fd, &moved)
                    .map_err(|e| here.io_error(e, &name, "move up"))?;
                first[0].pending.push(moved);
                continue;
            }
            let child = match dir.child_dir(&name) {
                Ok(child) => child,
                Err(SandboxError::Refused { .. }) => {
                    // A link or file swapped in: unlinked as an entry.
                    let _ = rustix::fs::unlinkat(&dir.fd, name.as_os_str(), AtFlags::empty());
                    continue;
                }
                Err(SandboxError::Io { source, .. })
                    if source.kind() == io::ErrorKind::NotFound =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            let pending = child.writable_names()?;
            stack.push(Level {
                dir: child,
                name,
                pending,
                refills: 0,
            });
        }
        Ok(())
    }

    /// The names in this directory, after making sure the host may remove them (a directory
    /// the agent made read-only is the host's to change back).
    fn writable_names(&self) -> Result<Vec<OsString>> {
        let stat = rustix::fs::fstat(&self.fd).map_err(|e| self.io_error(e, "", "stat"))?;
        if stat.st_mode & 0o700 != 0o700 {
            let _ = rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(0o700));
        }
        self.names()
    }

    fn io_error(
        &self,
        e: rustix::io::Errno,
        name: impl AsRef<OsStr>,
        action: &str,
    ) -> SandboxError {
        SandboxError::Io {
            action: format!("{action} {}", self.shown.join(name.as_ref()).display()),
            source: e.into(),
        }
    }

    fn refused(&self, name: impl AsRef<OsStr>, why: Refusal) -> SandboxError {
        SandboxError::Refused {
            path: self.shown.join(name.as_ref()),
            why,
        }
    }

    fn refused_path(&self, rel: &Path, why: Refusal) -> SandboxError {
        SandboxError::Refused {
            path: self.shown.join(rel),
            why,
        }
    }

    /// An open's error: a link or a non-directory where a directory was wanted is a refusal.
    fn refused_or(&self, e: rustix::io::Errno, name: &OsStr, action: &str) -> SandboxError {
        match e {
            rustix::io::Errno::LOOP => self.refused(name, Refusal::Symlink),
            // `O_DIRECTORY` answers a link with ENOTDIR: told apart for the message.
            rustix::io::Errno::NOTDIR => {
                let is_link = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
                let why = if is_link {
                    Refusal::Symlink
                } else {
                    Refusal::NotADirectory
                };
                self.refused(name, why)
            }
            e => self.io_error(e, name, action),
        }
    }
}

impl AsFd for AgentDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A file made by [`AgentDir::create_temp_for`], not yet under its name.
#[derive(Debug)]
pub struct TempName {
    parent: AgentDir,
    temp: OsString,
    name: OsString,
}

impl TempName {
    /// Renames the file to its name, replacing what had it (a link is replaced, not followed;
    /// a directory is not replaced).
    pub fn publish(self) -> Result<()> {
        let renamed =
            rustix::fs::renameat(&self.parent.fd, &self.temp, &self.parent.fd, &self.name).map_err(
                |e| match e {
                    rustix::io::Errno::ISDIR => {
                        self.parent.refused(&self.name, Refusal::NotARegularFile)
                    }
                    e => self.parent.io_error(e, &self.name, "replace"),
                },
            );
        if renamed.is_err() {
            self.discard();
        }
        renamed
    }

    /// Removes the file.
    pub fn discard(&self) {
        let _ = rustix::fs::unlinkat(&self.parent.fd, &self.temp, AtFlags::empty());
    }
}

/// A `Path`'s components, each a plain name (not `.`, `..`, a root or a prefix).
fn components(rel: &Path) -> Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(SandboxError::Refused {
                path: rel.to_owned(),
                why: Refusal::BadPath,
            }),
        })
        .collect()
}

fn refused_or(e: rustix::io::Errno, path: &Path, action: &str) -> SandboxError {
    match e {
        rustix::io::Errno::LOOP => SandboxError::Refused {
            path: path.to_owned(),
            why: Refusal::Symlink,
        },
        rustix::io::Errno::NOTDIR => SandboxError::Refused {
            path: path.to_owned(),
            why: Refusal::NotADirectory,
        },
        e => SandboxError::Io {
            action: format!("{action} {}", path.display()),
            source: e.into(),
        },
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn entry(name: OsString, stat: &rustix::fs::Stat) -> Entry {
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    };
    let modified = u64::try_from(stat.st_mtime)
        .ok()
        .map(|secs| {
            SystemTime::UNIX_EPOCH
                + Duration::new(secs, u32::try_from(stat.st_mtime_nsec).unwrap_or(0))
        })
        .unwrap_or(SystemTime::UNIX_EPOCH);
    Entry {
        name,
        kind,
        len: u64::try_from(stat.st_size).unwrap_or(0),
        disk_bytes: blocks(stat),
        modified,
        links: stat.st_nlink,
    }
}

fn blocks(stat: &rustix::fs::Stat) -> u64 {
    u64::try_from(stat.st_blocks).unwrap_or(0) * 512
}

fn uid(raw: u32) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(raw)
}

fn gid(raw: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(raw)
}

/// 64 random bits, in hex: a name no agent can guess ahead.
fn random_suffix() -> Result<String> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(SandboxError::io("read randomness"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests;
