//! The launcher: sets the sandbox up with `hakoniwa` (outside), then runs as the sandbox's PID 1
//! (inside): applies Landlock, drops every capability, starts the harness and reaps orphans.
//!
//! Both stages are fresh executions of the launcher program, so nothing here runs in a forked
//! copy of a multi-threaded process: `agui-antigravity __sandbox-exec <spec>` builds the
//! namespaces and execs `agui-antigravity __sandbox-exec --inside <spec>` in them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hakoniwa::{Container, Namespace, Stdio};
use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::{Launcher, PROBE_ARG, ProbeReport, SIMULATE_UNAVAILABLE_ENV, Spec};

/// The launcher's exit status when the sandbox could not be set up (as `env` and container
/// runtimes use it).
const SETUP_FAILED: u8 = 125;

/// What the outer stage passes the inner one before the spec.
const INSIDE_ARG: &str = "--inside";

/// System directories made readable (those that exist; symlinks such as a merged-`/usr`
/// `/bin -> usr/bin` are recreated as symlinks).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files under `/etc` that are often symlinks to elsewhere (`/run/systemd/resolve/…`): their
/// targets are made readable too, so name resolution keeps working.
const ETC_LINKS: &[&str] = &["/etc/resolv.conf", "/etc/hosts"];

/// The launcher's entry point; `args` are what follows the launcher's own arguments (see
/// [`Launcher`]): the spec of a harness to run confined, `--probe` for the self-test that
/// [`super::probe`] reads, or (in the sandbox) `--inside <spec>`. Returns the harness's exit
/// status (`128 + n` for signal `n`), or 125 with the reason on stderr when the sandbox could
/// not be set up.
///
/// Call it before the program starts any thread: the outer stage forks to build the
/// namespaces.
pub fn launcher_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let result = match args.as_slice() {
        [PROBE_ARG] => outside(&probe_spec()),
        [INSIDE_ARG, spec] => parse(spec).and_then(|spec| inside(&spec)),
        [spec] => parse(spec).and_then(|spec| outside(&spec)),
        _ => Err("usage: <launcher> <spec JSON> | --probe".into()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("sandbox: {e}");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

fn parse(spec: &str) -> Result<Spec, String> {
    let spec: Spec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    spec.check()?;
    Ok(spec)
}

/// The self-test's spec: a sandbox with nothing granted and every TCP port closed.
fn probe_spec() -> Spec {
    Spec {
        program: PathBuf::from("/"),
        cwd: PathBuf::from("/"),
        read_write: Vec::new(),
        read_only: Vec::new(),
        hidden: Vec::new(),
        tcp_connect: Some(Default::default()),
        probe: true,
    }
}

/// Outer stage: the namespaces and mounts, then the inner stage as their first process.
fn outside(spec: &Spec) -> Result<u8, String> {
    if let Ok(reason) = std::env::var(SIMULATE_UNAVAILABLE_ENV) {
        return Err(format!(
            "unshare(CLONE_NEWUSER) failed: Operation not permitted (simulated: \
             {SIMULATE_UNAVAILABLE_ENV}={reason})"
        ));
    }
    // The inner stage is this program again, started the same way.
    let launcher = Launcher {
        program: std::env::current_exe()
            .map_err(|e| format!("cannot find the launcher's own executable: {e}"))?,
        args: own_args(),
    };
    let program = text(&launcher.program)?;
    let mut container = Container::new();
    container
        .unshare(Namespace::Ipc)
        .unshare(Namespace::Uts)
        .hostname("sandbox");
    for dir in SYSTEM_DIRS {
        let path = Path::new(dir);
        match std::fs::read_link(path) {
            Ok(target) => {
                container.symlink(text(&target)?, dir);
            }
            Err(_) if path.is_dir() => {
                container.bindmount_ro(dir, dir);
            }
            Err(_) => {}
        }
    }
    for path in outside_system_links() {
        container.bindmount_ro(text(&path)?, text(&path)?);
    }
    container.devfsmount("/dev").tmpfsmount("/tmp");
    for path in spec.read_only.iter().chain([&launcher.program]) {
        let path = text(path)?;
        container.bindmount_ro(path, path);
    }
    for path in &spec.read_write {
        let path = text(path)?;
        container.bindmount_rw(path, path);
    }
    for path in &spec.hidden {
        if path.is_dir() {
            container.tmpfsmount(text(path)?);
        } else if path.exists() {
            container.bindmount_ro("/dev/null", text(path)?);
        }
    }
    let inner = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut command = container.command(program);
    command
        .args(&launcher.args)
        .args([INSIDE_ARG, inner.as_str()])
        .current_dir(&spec.cwd)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    for (name, value) in std::env::vars() {
        command.env(&name, &value);
    }
    // The host's temporary directory does not exist in the sandbox; its own /tmp does.
    command.env("TMPDIR", "/tmp");
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

/// The arguments this launcher was started with before its spec (e.g. `__sandbox-exec`), so
/// the inner stage is started the same way.
fn own_args() -> Vec<String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    args.pop();
    args
}

/// Targets of the `/etc` symlinks that point outside the system directories.
fn outside_system_links() -> Vec<PathBuf> {
    ETC_LINKS
        .iter()
        .filter(|link| Path::new(link).is_symlink())
        .filter_map(|link| std::fs::canonicalize(link).ok())
        .filter(|target| !SYSTEM_DIRS.iter().any(|dir| target.starts_with(dir)))
        .collect()
}

fn text(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("not valid UTF-8: {}", path.display()))
}

/// Inner stage, PID 1 of the sandbox: Landlock, no capabilities, then the harness; exits with
/// it (the kernel then kills whatever is left in the PID namespace).
fn inside(spec: &Spec) -> Result<u8, String> {
    let landlock = restrict(spec)?;
    let capabilities_dropped = drop_capabilities()?;
    if spec.probe {
        let report = ProbeReport {
            pid_namespace: std::process::id() == 1,
            landlock_abi: abi_number(&landlock),
            landlock: match landlock.ruleset {
                RulesetStatus::FullyEnforced => "fully",
                RulesetStatus::PartiallyEnforced => "partially",
                RulesetStatus::NotEnforced => "not",
            }
            .into(),
            capabilities_dropped,
        };
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let harness = std::process::Command::new(&spec.program)
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", spec.program.display()))?;
    let harness = Pid::from_raw(i32::try_from(harness.id()).map_err(|e| e.to_string())?);
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == harness => {
                return Ok(u8::try_from(code).unwrap_or(SETUP_FAILED));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == harness => {
                return Ok(128u8.saturating_add(signal as u8));
            }
            // An orphaned command, reaped.
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("waiting for the harness: {e}")),
        }
    }
}

/// Landlock, as far as the kernel supports it: everything visible readable, the granted
/// directories, `/tmp` and `/dev` writable; TCP connections only to the allowed ports; no
/// signals or abstract Unix sockets beyond the sandbox. (The mount namespace is the boundary;
/// this is a second one, and it also forbids remounting.)
fn restrict(spec: &Spec) -> Result<RestrictionStatus, String> {
    let abi = ABI::V6;
    let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?
        .scope(Scope::from_all(abi))
        .map_err(fail)?;
    if spec.tcp_connect.is_some() {
        ruleset = ruleset.handle_access(AccessNet::ConnectTcp).map_err(fail)?;
    }
    let writable: Vec<&Path> = spec
        .read_write
        .iter()
        .map(PathBuf::as_path)
        .chain([Path::new("/tmp"), Path::new("/dev")])
        .collect();
    let mut created = ruleset
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(fail)?;
    for port in spec.tcp_connect.iter().flatten() {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(fail)?;
    }
    created.restrict_self().map_err(fail)
}

/// The Landlock ABI the kernel offers, as a number (0: none).
fn abi_number(status: &RestrictionStatus) -> u8 {
    match status.landlock {
        landlock::LandlockStatus::Available { effective_abi, .. } => {
            // The ABI's name is `V<n>`.
            format!("{effective_abi:?}")
                .trim_start_matches('V')
                .parse()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// Drops every capability (the bounding set too, so the harness gets none on exec); true when
/// none is left.
fn drop_capabilities() -> Result<bool, String> {
    use caps::CapSet;
    let fail = |e: caps::errors::CapsError| format!("dropping capabilities: {e}");
    for set in [
        CapSet::Ambient,
        CapSet::Bounding,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(fail)?;
    }
    let left = [CapSet::Effective, CapSet::Permitted, CapSet::Bounding]
        .into_iter()
        .map(|set| caps::read(None, set).map(|s| s.len()).unwrap_or(1))
        .sum::<usize>();
    Ok(left == 0)
}
