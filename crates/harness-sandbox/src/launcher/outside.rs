//! The outer stage: cgroups, namespaces and the filesystem view, then the sandbox's PID 1.

use std::path::{Path, PathBuf};

use hakoniwa::{Container, MountOptions, Namespace, Stdio};

use super::{INSIDE_ARG, Own, SETUP_FAILED, identity, text};
use crate::probe::{PROBE_ARG, SIMULATE_UNAVAILABLE_ENV};
use crate::roots::{Root, clear_stale_roots};
use crate::spec::Spec;

/// System directories made readable whole (those that exist; symlinks such as a merged-`/usr`
/// `/bin -> usr/bin` are recreated as symlinks).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What of `/etc` is readable: what ordinary programs need to run (users and groups by name,
/// the dynamic linker's cache, certificates, time zone, shell start-up files, the
/// alternatives symlinks of `/usr/bin`) — never the rest, where secrets live (`shadow`, TLS
/// keys under `/etc/ssl/private`, an operator's `/etc/<app>/`).
const ETC_ALLOWED: &[&str] = &[
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/inputrc",
    "/etc/environment",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/lsb-release",
    "/etc/locale.alias",
    "/etc/gitconfig",
    "/etc/python3",
    "/etc/perl",
    "/etc/magic",
];

/// Where the launcher program appears as the sandbox's shell (first in the harness's `PATH`).
pub(super) const SHELL_DIR: &str = "/.agui/bin";

/// The shells the harness may start, each the launcher's shell stage inside.
pub(super) const SHELLS: &[&str] = &["bash", "sh"];

/// Builds the sandbox and runs its PID 1 until the harness exits; returns the exit status.
/// `taken`: how many trailing arguments of this stage's command line are its own.
pub(super) fn run(spec: &Spec, taken: usize) -> Result<u8, String> {
    if let Ok(reason) = std::env::var(SIMULATE_UNAVAILABLE_ENV) {
        return Err(format!(
            "unshare(CLONE_NEWUSER) failed: Operation not permitted (simulated: \
             {SIMULATE_UNAVAILABLE_ENV}={reason})"
        ));
    }
    // What the harness and its commands write (transcripts, workspaces) is readable by the
    // server's user alone, whatever the host's umask.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    for cgroup in &spec.cgroups {
        // Before anything else starts: every process of the sandbox is born inside.
        std::fs::write(cgroup.join("cgroup.procs"), std::process::id().to_string())
            .map_err(|e| format!("cannot join the cgroup {}: {e}", cgroup.display()))?;
    }
    let own = Own::find(taken)?;
    let program = text(&own.program)?;
    let mut sources = Sources(spec.run_as.map(|_| identity::Stages::default()));
    // Removed when this stage returns, after the sandbox.
    let mut root = None;
    let mut container = match spec.run_as {
        // Its user namespace is made by this stage (`identity.rs`), the others within it.
        Some(_) => {
            let mut container = Container::empty();
            container
                .unshare(Namespace::Mount)
                .unshare(Namespace::Pid)
                .procfsmount("/proc")
                .rootdir(identity::ROOT_DIR);
            container
        }
        None => {
            let mut container = Container::new();
            // A root of its own naming, so that a server can tell one a killed launcher left;
            // those earlier launchers left go first.
            let tmp = std::env::temp_dir();
            clear_stale_roots(&tmp);
            container.rootdir(root.insert(Root::make(&tmp)?).path());
            // Inside, the launcher's own identity is 0, the namespace's root: PID 1 keeps its
            // capabilities across `exec` (to bring the loopback up, bind the model's port),
            // whoever the launcher is.
            container.uidmap(0).gidmap(0);
            container
        }
    };
    container
        .unshare(Namespace::Ipc)
        .unshare(Namespace::Uts)
        .unshare(Namespace::Network)
        .hostname("sandbox");
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => {
                container.symlink(text(&target)?, dir);
            }
            Err(_) if path.is_dir() => {
                container.bindmount_ro(&sources.of(dir), dir);
            }
            Err(_) => {}
        }
    }
    for path in readable_etc() {
        match &path {
            Etc::Link { link, target } => {
                container.symlink(text(target)?, text(link)?);
            }
            Etc::Path(path) => {
                container.bindmount_ro(&sources.of(text(path)?), text(path)?);
            }
        }
    }
    container.devfsmount("/dev").mount(
        "tmpfs",
        "/tmp",
        "tmpfs",
        MountOptions::NOSUID | MountOptions::NODEV,
        Some(format!("size={},mode=1777", spec.tmp_bytes.max(4096))),
    );
    for path in spec.read_only.iter().chain([&own.program]) {
        let path = text(path)?;
        container.bindmount_ro(&sources.of(path), path);
    }
    for shell in SHELLS {
        container.bindmount_ro(&sources.of(program), &format!("{SHELL_DIR}/{shell}"));
    }
    for path in &spec.read_write {
        let path = text(path)?;
        container.bindmount_rw(&sources.of(path), path);
    }
    for path in &spec.hidden {
        if let Sources(Some(stages)) = &mut sources {
            // Masked below the stages, before hakoniwa sees them.
            if path.exists() {
                stages.mask(path);
            }
        } else if path.is_dir() {
            container.tmpfsmount(text(path)?);
        } else if path.exists() {
            container.bindmount_ro("/dev/null", text(path)?);
        }
    }
    // The inner stage takes the spec from the control channel (its stdin), where this stage
    // left it; the probe's is its own.
    let stage: &[&str] = if spec.probe {
        &[INSIDE_ARG, PROBE_ARG]
    } else {
        &[INSIDE_ARG]
    };
    let mut command = container.command(program);
    command
        .args(&own.args)
        .args(stage)
        .current_dir(text(&spec.cwd)?)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    for (name, value) in std::env::vars() {
        command.env(&name, &value);
    }
    // The host's temporary directory does not exist in the sandbox; its own /tmp does.
    command.env("TMPDIR", "/tmp");
    if let (Some(identity), Sources(Some(stages))) = (spec.run_as, &sources) {
        identity::become_identity(&own, identity, stages)?;
    }
    let status = command
        .status()
        .map_err(|e| format!("could not start the sandbox: {e}"))?;
    match status.exit_code {
        Some(code) => Ok(u8::try_from(code).unwrap_or(SETUP_FAILED)),
        None if status.code > 128 && status.code < 128 + 65 => {
            // The inner stage was killed by a signal.
            Ok(u8::try_from(status.code).unwrap_or(SETUP_FAILED))
        }
        None => Err(format!("could not set up the sandbox: {}", status.reason)),
    }
}

/// Where hakoniwa binds each source from: the source itself, or, for a sandbox run as another
/// identity, its stage (which that identity can reach).
struct Sources(Option<identity::Stages>);

impl Sources {
    fn of(&mut self, source: &str) -> String {
        match &mut self.0 {
            Some(stages) => stages.stage(source),
            None => source.to_owned(),
        }
    }
}

/// One readable entry of `/etc`.
enum Etc {
    /// A file or directory, bound as it is.
    Path(PathBuf),
    /// A symbolic link, recreated (its target is readable if it lies in the view).
    Link { link: PathBuf, target: PathBuf },
}

/// The entries of [`ETC_ALLOWED`] that exist here, and the targets of those that are links out
/// of the system directories (`/etc/localtime` → `/usr/share/zoneinfo/…` needs nothing more;
/// `/etc/hosts` → `/run/…` has its target bound).
fn readable_etc() -> Vec<Etc> {
    let mut found = Vec::new();
    for entry in ETC_ALLOWED {
        let path = Path::new(entry);
        match std::fs::read_link(path) {
            Ok(target) => {
                found.push(Etc::Link {
                    link: path.to_owned(),
                    target: target.clone(),
                });
                if let Ok(resolved) = std::fs::canonicalize(path)
                    && !SYSTEM_DIRS.iter().any(|dir| resolved.starts_with(dir))
                    && !ETC_ALLOWED
                        .iter()
                        .any(|allowed| resolved == Path::new(allowed))
                    && resolved.is_file()
                {
                    found.push(Etc::Path(resolved));
                }
            }
            Err(_) if path.exists() => found.push(Etc::Path(path.to_owned())),
            Err(_) => {}
        }
    }
    found
}
