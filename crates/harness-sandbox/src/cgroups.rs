//! A cgroup per confined process, limiting its processes and memory (`pids.max`,
//! `memory.max`), where the machine lets this program make cgroups: a delegated cgroup v2
//! subtree (systemd's `Delegate=yes`), or the v1 `pids` and `memory` hierarchies when it may
//! write them (as root). [`detect`] finds out once; [`Parent::create`] makes one process's
//! cgroup, which the launcher joins before it builds the sandbox, so everything in the sandbox
//! is counted; dropping the [`Cgroup`] kills what is left in it and removes it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where the cgroups are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The prefix of the directory holding one server's process cgroups (its pid follows, so the
/// leftovers of a server that died can be told apart and removed).
const SANDBOXES_PREFIX: &str = "agui-sandboxes-";

/// Where this program makes its processes' cgroups.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Parent {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    /// A delegated v2 directory whose children get the pids and memory controllers.
    V2(PathBuf),
    /// The directories in the v1 `pids` and `memory` hierarchies.
    V1 { pids: PathBuf, memory: PathBuf },
}

/// One process's cgroup, removed (after killing what is left in it) when dropped.
#[derive(Debug)]
pub struct Cgroup {
    dirs: Vec<PathBuf>,
}

impl Parent {
    /// Which cgroup version the limits use, for the log and `/capabilities`.
    pub fn version(&self) -> &'static str {
        match self.kind {
            Kind::V2(_) => "v2",
            Kind::V1 { .. } => "v1",
        }
    }

    /// Makes the cgroup `name` with these limits (`None`: none of that kind).
    pub fn create(&self, name: &str, pids: Option<u64>, memory: Option<u64>) -> io::Result<Cgroup> {
        if name.is_empty() || name.contains(['/', '.']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a cgroup name: {name:?}"),
            ));
        }
        let cgroup = match &self.kind {
            Kind::V2(dir) => {
                let dir = dir.join(name);
                make(&dir)?;
                let cgroup = Cgroup {
                    dirs: vec![dir.clone()],
                };
                if let Some(pids) = pids {
                    fs::write(dir.join("pids.max"), pids.to_string())?;
                }
                if let Some(memory) = memory {
                    fs::write(dir.join("memory.max"), memory.to_string())?;
                    // Swap would let it go past the limit; absent without swap accounting.
                    let _ = fs::write(dir.join("memory.swap.max"), "0");
                }
                cgroup
            }
            Kind::V1 {
                pids: pids_dir,
                memory: memory_dir,
            } => {
                let (p, m) = (pids_dir.join(name), memory_dir.join(name));
                make(&p)?;
                let mut cgroup = Cgroup {
                    dirs: vec![p.clone()],
                };
                make(&m)?;
                cgroup.dirs.push(m.clone());
                if let Some(pids) = pids {
                    fs::write(p.join("pids.max"), pids.to_string())?;
                }
                if let Some(memory) = memory {
                    fs::write(m.join("memory.limit_in_bytes"), memory.to_string())?;
                }
                cgroup
            }
        };
        Ok(cgroup)
    }
}

impl Cgroup {
    /// The directories the launcher joins (one per hierarchy).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            remove(dir);
        }
    }
}

fn make(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // A leftover of the same name (a reused pid): emptied and reused.
            kill_members(dir);
            Ok(())
        }
        other => other,
    }
}

/// Kills whatever is left in `dir`, then removes it (a cgroup with members cannot go).
fn remove(dir: &Path) {
    if fs::remove_dir(dir).is_ok() || !dir.exists() {
        return;
    }
    kill_members(dir);
    for _ in 0..50 {
        if fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    tracing::warn!(cgroup = %dir.display(), "could not remove a sandbox's cgroup (processes left in it)");
}

fn kill_members(dir: &Path) {
    // v2 kills the whole cgroup at once; v1 (or an older v2) one member at a time.
    if fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let members = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in members.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Finds where this program may make its processes' cgroups, and removes what servers that died
/// left there; `Err` says why it may not (the limits are then not applied).
pub fn detect() -> Result<Parent, String> {
    let own = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let root = Path::new(CGROUP_ROOT);
    let own_path = |controller: &str| {
        own.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| path.trim_start_matches('/').to_owned())
        })
    };
    let server = std::process::id();
    let mut reasons = Vec::new();
    // cgroup v2, unified: our own directory, if delegated with both controllers.
    if root.join("cgroup.controllers").exists() {
        let path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/");
        match delegated_v2(&root.join(path.trim_start_matches('/')), server) {
            Ok(dir) => {
                return Ok(Parent {
                    kind: Kind::V2(dir),
                });
            }
            Err(why) => reasons.push(why),
        }
    }
    // cgroup v1 hierarchies (alone, or beside an empty v2 one).
    let v1 = |controller: &str| -> Result<PathBuf, String> {
        let mount = root.join(controller);
        if !mount.join("cgroup.procs").exists() || mount.join("cgroup.controllers").exists() {
            return Err(format!("no cgroup v1 `{controller}` hierarchy"));
        }
        let path = own_path(controller).unwrap_or_default();
        let dir = mount.join(path);
        let ours = dir.join(format!("{SANDBOXES_PREFIX}{server}"));
        remove_leftovers(&dir);
        fs::create_dir_all(&ours)
            .map_err(|e| format!("cannot make a cgroup in {}: {e}", dir.display()))?;
        Ok(ours)
    };
    match (v1("pids"), v1("memory")) {
        (Ok(pids), Ok(memory)) => Ok(Parent {
            kind: Kind::V1 { pids, memory },
        }),
        (pids, memory) => {
            reasons.extend(pids.err());
            reasons.extend(memory.err());
            Err(format!(
                "this program may not make cgroups here ({})",
                reasons.join("; ")
            ))
        }
    }
}

/// The v2 directory for our processes' cgroups under `own` (our own cgroup), once this process
/// has moved into a leaf of its own so that `own` may hand the controllers down.
fn delegated_v2(own: &Path, server: u32) -> Result<PathBuf, String> {
    let controllers = fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    for needed in ["pids", "memory"] {
        if !controllers.split_whitespace().any(|c| c == needed) {
            return Err(format!(
                "the cgroup v2 `{needed}` controller is not delegated to {}",
                own.display()
            ));
        }
    }
    let writable =
        |file: &str| nix::unistd::access(&own.join(file), nix::unistd::AccessFlags::W_OK).is_ok();
    if !writable("cgroup.procs") || !writable("cgroup.subtree_control") {
        return Err(format!(
            "{} is not delegated to this program (systemd: `Delegate=yes`)",
            own.display()
        ));
    }
    remove_leftovers(own);
    let fail = |what: &str, e: io::Error| format!("cannot {what} in {}: {e}", own.display());
    // No process may stay in a cgroup that hands controllers down: move this one to a leaf.
    let leaf = own.join("agui-server");
    if !leaf.exists() {
        fs::create_dir(&leaf).map_err(|e| fail("make the server's leaf cgroup", e))?;
    }
    fs::write(leaf.join("cgroup.procs"), server.to_string())
        .map_err(|e| fail("move the server into its leaf cgroup", e))?;
    fs::write(own.join("cgroup.subtree_control"), "+pids +memory")
        .map_err(|e| fail("enable the pids and memory controllers", e))?;
    let ours = own.join(format!("{SANDBOXES_PREFIX}{server}"));
    if !ours.exists() {
        fs::create_dir(&ours).map_err(|e| fail("make the sandboxes' cgroup", e))?;
    }
    fs::write(ours.join("cgroup.subtree_control"), "+pids +memory")
        .map_err(|e| fail("enable the controllers for the sandboxes", e))?;
    Ok(ours)
}

/// Removes the process cgroups of servers that are no longer running, under `dir`.
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SANDBOXES_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(children) = fs::read_dir(entry.path()) {
            for child in children.flatten() {
                if child.path().is_dir() {
                    remove(&child.path());
                }
            }
        }
        remove(&entry.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_one_directory_is_refused() {
        let parent = Parent {
            kind: Kind::V2(PathBuf::from("/nonexistent")),
        };
        for name in ["", "a/b", "..", "x.y"] {
            assert!(parent.create(name, None, None).is_err(), "{name}");
        }
    }

    #[test]
    fn a_cgroup_is_made_with_its_limits_and_removed_when_dropped() {
        // A plain directory stands in for a hierarchy: the limits are files there too.
        let root = tempfile::tempdir().unwrap();
        let parent = Parent {
            kind: Kind::V1 {
                pids: root.path().join("pids"),
                memory: root.path().join("memory"),
            },
        };
        fs::create_dir_all(root.path().join("pids")).unwrap();
        fs::create_dir_all(root.path().join("memory")).unwrap();
        let cgroup = parent.create("p1", Some(64), Some(1 << 30)).unwrap();
        assert_eq!(
            fs::read_to_string(root.path().join("pids/p1/pids.max")).unwrap(),
            "64"
        );
        assert_eq!(
            fs::read_to_string(root.path().join("memory/p1/memory.limit_in_bytes")).unwrap(),
            (1u64 << 30).to_string()
        );
        assert_eq!(cgroup.dirs().len(), 2);
        // A real cgroup's files vanish with it; here they must go first.
        for dir in cgroup.dirs() {
            for entry in fs::read_dir(dir).unwrap() {
                fs::remove_file(entry.unwrap().path()).unwrap();
            }
        }
        drop(cgroup);
        assert!(!root.path().join("pids/p1").exists());
        assert!(!root.path().join("memory/p1").exists());
    }
}
