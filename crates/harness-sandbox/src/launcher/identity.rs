//! Running a sandbox as another host identity than the launcher's: a root host must not run its
//! sandboxes as root (only read-only mounts and Landlock would then keep them off root's files).
//!
//! hakoniwa makes the user namespace from inside its child, which can map only the child's own
//! effective id: a root launcher would map host root. So the outer stage, root, does the part
//! that needs root itself, then hands hakoniwa a process that is already the sandbox's identity:
//!
//! 1. In a mount namespace of its own, it masks the hidden paths (a key file, the configuration:
//!    `/dev/null` or an empty read-only tmpfs over them), then binds every source of the
//!    sandbox's bind mounts, masks included, onto a *stage* in a small tmpfs laid over `/tmp`,
//!    which the identity may enter: the sources themselves may lie below directories it may not
//!    cross (a `0700` save dir, `/root/.cache` for the harness). Each source is opened before
//!    the tmpfs hides `/tmp`, and bound from its descriptor. (Masks made here come locked into
//!    the sandbox: nothing inside can unmount them.)
//! 2. It makes the user namespace and has a helper it started before (`--map-ids`, root in the
//!    host's namespace) write the maps: inside 0 is the identity, nothing else is mapped (host
//!    root least of all), and the namespace belongs to root, not to the identity — whose other
//!    processes on the host, if any, would otherwise hold every capability in it.
//! 3. It takes the identity (inside 0) for good, keeping its capabilities in the namespace.
//!
//! hakoniwa then builds the other namespaces and the view within it, from the stages, on a root
//! in the same tmpfs; the sandbox's PID 1 starts as the namespace's root, with its capabilities.
//! Nothing is left on the host: the tmpfs lives only in these mount namespaces.

use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::fcntl::{OFlag, open};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::{Mode, SFlag, fstat};
use nix::unistd::{Gid, Uid};

use super::Own;
use crate::identity::SandboxIdentity;

/// The stage that writes a user namespace's maps (`--map-ids <pid> <uid> <gid>`).
pub(super) const MAP_IDS_ARG: &str = "--map-ids";

/// Where the outer stage's tmpfs lies (in its own mount namespace only).
const SCRATCH: &str = "/tmp";

/// The sandbox's root, on which hakoniwa builds its view.
pub(super) const ROOT_DIR: &str = "/tmp/root";

/// Where the sources of the sandbox's bind mounts are staged.
const STAGE_DIR: &str = "/tmp/stage";

/// The sources of a sandbox's bind mounts, each given a stage the sandbox's identity can reach,
/// and the paths masked below them.
#[derive(Default)]
pub(super) struct Stages {
    sources: Vec<String>,
    masks: Vec<PathBuf>,
}

impl Stages {
    /// Where hakoniwa binds `source` from: its stage.
    pub(super) fn stage(&mut self, source: &str) -> String {
        let at = self
            .sources
            .iter()
            .position(|s| s == source)
            .unwrap_or_else(|| {
                self.sources.push(source.to_owned());
                self.sources.len() - 1
            });
        format!("{STAGE_DIR}/{at}")
    }

    /// Masks `path` (an existing file or directory) wherever a stage shows it.
    pub(super) fn mask(&mut self, path: &Path) {
        self.masks.push(path.to_owned());
    }
}

/// Makes this process (the outer stage, root) the sandbox's `identity`, inside 0 of a new user
/// namespace it is root of, in a mount namespace where every one of `stages` is bound on its
/// stage (see the module's documentation).
pub(super) fn become_identity(
    own: &Own,
    identity: SandboxIdentity,
    stages: &Stages,
) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "the sandbox can run as uid {} only when its launcher runs as root",
            identity.uid
        ));
    }
    // Root's supplementary groups would follow every process of the sandbox.
    nix::unistd::setgroups(&[]).map_err(|e| format!("cannot drop the groups: {e}"))?;
    // Started while this program is still where it is (the staging tmpfs may hide it).
    let helper = own
        .command(&[
            MAP_IDS_ARG,
            &std::process::id().to_string(),
            &identity.uid.to_string(),
            &identity.gid.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the id-map helper: {e}"))?;
    let mut helper = Helper(helper);
    stage(identity, stages)?;
    enter_user_namespace(&mut helper.0, identity)?;
    let (uid, gid) = (Uid::from_raw(0), Gid::from_raw(0));
    nix::unistd::setresgid(gid, gid, gid)
        .map_err(|e| format!("cannot take the sandbox's group id: {e}"))?;
    nix::unistd::setresuid(uid, uid, uid)
        .map_err(|e| format!("cannot take the sandbox's user id: {e}"))?;
    Ok(())
}

/// Step 1: a mount namespace of this process's own, the tmpfs over `/tmp`, each source bound on
/// its stage.
fn stage(identity: SandboxIdentity, stages: &Stages) -> Result<(), String> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare(CLONE_NEWNS) failed: {e}"))?;
    // Nothing done here reaches the host's mount namespace.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    for path in &stages.masks {
        mask(path)?;
    }
    // Opened while the tmpfs does not hide them yet (some lie below `/tmp`).
    let sources = stages
        .sources
        .iter()
        .map(|source| {
            open(
                Path::new(source),
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| format!("cannot open {source}: {e}"))
        })
        .collect::<Result<Vec<OwnedFd>, String>>()?;
    mount(
        Some("tmpfs"),
        SCRATCH,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(
            format!(
                "size=1m,mode=0700,uid={},gid={}",
                identity.uid, identity.gid
            )
            .as_str(),
        ),
    )
    .map_err(|e| format!("cannot mount the staging tmpfs: {e}"))?;
    std::fs::create_dir(STAGE_DIR).map_err(|e| format!("cannot make {STAGE_DIR}: {e}"))?;
    // Crossed by the identity (the stages themselves are the sources' own inodes once bound).
    std::fs::set_permissions(
        STAGE_DIR,
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .map_err(|e| format!("cannot open {STAGE_DIR} to the sandbox: {e}"))?;
    std::fs::create_dir(ROOT_DIR).map_err(|e| format!("cannot make {ROOT_DIR}: {e}"))?;
    // hakoniwa makes the mount points in the root, as the identity.
    std::os::unix::fs::chown(ROOT_DIR, Some(identity.uid), Some(identity.gid))
        .map_err(|e| format!("cannot give {ROOT_DIR} to the sandbox: {e}"))?;
    for (at, (fd, source)) in sources.iter().zip(&stages.sources).enumerate() {
        let stage = format!("{STAGE_DIR}/{at}");
        let kind = fstat(fd).map_err(|e| format!("cannot stat {source}: {e}"))?;
        if SFlag::from_bits_truncate(kind.st_mode).contains(SFlag::S_IFDIR) {
            std::fs::create_dir(&stage)
        } else {
            std::fs::File::create(&stage).map(drop)
        }
        .map_err(|e| format!("cannot make {stage}: {e}"))?;
        mount(
            Some(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str()),
            stage.as_str(),
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| format!("cannot stage {source}: {e}"))?;
    }
    Ok(())
}

/// The `--map-ids` helper, ended (its stdin closed, then waited for) if this stage gives up.
struct Helper(std::process::Child);

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Hides `path` under `/dev/null` (a file) or an empty tmpfs (a directory), read-only.
fn mask(path: &Path) -> Result<(), String> {
    let fail = |e: nix::Error| format!("cannot mask {}: {e}", path.display());
    let read_only = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if path.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            read_only | MsFlags::MS_RDONLY,
            Some("size=4k,mode=0555"),
        )
        .map_err(fail)
    } else {
        mount(
            Some("/dev/null"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(fail)?;
        mount(
            None::<&str>,
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | read_only,
            None::<&str>,
        )
        .map_err(fail)
    }
}

/// Step 2: a new user namespace, mapped by `helper`, with full capabilities in it.
fn enter_user_namespace(
    helper: &mut std::process::Child,
    identity: SandboxIdentity,
) -> Result<(), String> {
    let mut go = helper
        .stdin
        .take()
        .ok_or("the id-map helper has no stdin")?;
    unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| format!("unshare(CLONE_NEWUSER) failed: {e}"))?;
    let told = go.write_all(b"go\n");
    drop(go);
    let status = helper
        .wait()
        .map_err(|e| format!("the id-map helper: {e}"))?;
    if told.is_err() || !status.success() {
        return Err(format!(
            "could not map uid {} and gid {} into the sandbox ({status})",
            identity.uid, identity.gid
        ));
    }
    Ok(())
}

/// The `--map-ids` stage, root in the host's namespace: once told on stdin (process `pid` has
/// made its user namespace), maps inside 0 to `uid` and `gid` there, and nothing else.
pub(super) fn map_ids(pid: &str, uid: &str, gid: &str) -> Result<u8, String> {
    let pid: u32 = pid.parse().map_err(|_| format!("not a pid: {pid}"))?;
    let uid: u32 = uid.parse().map_err(|_| format!("not a uid: {uid}"))?;
    let gid: u32 = gid.parse().map_err(|_| format!("not a gid: {gid}"))?;
    let mut go = [0u8; 3];
    std::io::stdin()
        .read_exact(&mut go)
        .map_err(|_| "the outer stage did not make its user namespace".to_owned())?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), &text)
            .map_err(|e| format!("cannot write {file} ({}): {e}", text.trim()))
    };
    write("setgroups", "deny".into())?;
    write("gid_map", format!("0 {gid} 1\n"))?;
    write("uid_map", format!("0 {uid} 1\n"))?;
    Ok(0)
}

/// PID 1, first thing: makes its real, effective and saved ids the one id its user namespace
/// maps, should any of them be another (none of the sandbox's processes may keep an id it does
/// not map). Nothing to do where they already are.
pub(super) fn settle() -> Result<(), String> {
    let uid = mapped_id("uid_map")?;
    let gid = mapped_id("gid_map")?;
    let ids = nix::unistd::getresgid().map_err(|e| format!("getresgid: {e}"))?;
    if [ids.real, ids.effective, ids.saved] != [Gid::from_raw(gid); 3] {
        let gid = Gid::from_raw(gid);
        nix::unistd::setresgid(gid, gid, gid)
            .map_err(|e| format!("cannot take the sandbox's group id {gid}: {e}"))?;
    }
    let ids = nix::unistd::getresuid().map_err(|e| format!("getresuid: {e}"))?;
    if [ids.real, ids.effective, ids.saved] != [Uid::from_raw(uid); 3] {
        let uid = Uid::from_raw(uid);
        nix::unistd::setresuid(uid, uid, uid)
            .map_err(|e| format!("cannot take the sandbox's user id {uid}: {e}"))?;
    }
    Ok(())
}

/// The host uid this process runs as, read from its user namespace's map.
pub(super) fn host_uid() -> Option<u32> {
    let me = nix::unistd::geteuid().as_raw();
    let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
    map.lines().find_map(|line| {
        let fields: Vec<u32> = line
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        match fields.as_slice() {
            [inside, outside, count] if (*inside..inside.saturating_add(*count)).contains(&me) => {
                Some(outside + (me - inside))
            }
            _ => None,
        }
    })
}

/// The first id inside a user namespace map of this process (`uid_map` or `gid_map`): the
/// sandbox's, its maps having a single line.
fn mapped_id(file: &str) -> Result<u32, String> {
    let map = std::fs::read_to_string(format!("/proc/self/{file}"))
        .map_err(|e| format!("cannot read /proc/self/{file}: {e}"))?;
    map.split_whitespace()
        .next()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| format!("the user namespace has no {file}"))
}
