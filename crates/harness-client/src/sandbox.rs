//! Confining a harness process, so that everything its agent runs — commands and the built-in
//! file tools alike — reaches only the directories it is given.
//!
//! A confined harness runs in its own user, mount, PID, IPC and UTS namespaces (set up with the
//! `hakoniwa` crate): the given directories are bound read-write, the system directories
//! (`/usr`, `/etc`, `/bin`, `/lib*`, `/sbin`) and the harness binary read-only, `/tmp` is a
//! private tmpfs, `/proc` shows only the sandbox's processes and `/dev` holds only the usual
//! character devices and a private `devpts`. The network is shared. On top, Landlock (where the
//! kernel has it) mirrors the mounts, limits TCP connections to a port allow-list and forbids
//! signals and abstract Unix sockets outside the sandbox, and every capability is dropped.
//!
//! The namespaces are set up by a **launcher**, a fresh single-threaded process started for each
//! harness — never in a `pre_exec` hook of the host's multi-threaded runtime. Any program that
//! hands its arguments to [`launcher_main`] can be the launcher (`agui-antigravity` does, as
//! `agui-antigravity __sandbox-exec …`). Inside, the launcher is PID 1: it starts the harness,
//! reaps orphaned commands and exits with the harness, which kills everything left in the
//! sandbox. [`probe`] tells what this machine supports.

mod encoder;
mod launch;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{HarnessError, Result};

pub use launch::launcher_main;

use encoder::WEBM_ENCODER_DIR;
pub(crate) use encoder::keep_out as keep_webm_encoder_out;

/// Setting this variable (to any text, the reason given) in the environment of a probe makes
/// the launcher fail as on a machine without user namespaces: for testing the fallback.
pub const SIMULATE_UNAVAILABLE_ENV: &str = "AGUI_SANDBOX_SIMULATE_UNAVAILABLE";

/// The argument that makes [`launcher_main`] run its self-test instead of a harness.
const PROBE_ARG: &str = "--probe";

/// How long the probe may take (a sandbox starts in a few milliseconds).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// A program that acts as the launcher: started as `program args… <spec>`, it must call
/// [`launcher_main`] with the arguments after `args` (and, inside the sandbox, is started
/// again the same way).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the spec (e.g. `__sandbox-exec`).
    pub args: Vec<String>,
}

impl Launcher {
    /// `program args…`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    fn command(&self, last: impl Into<OsString>) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).arg(last.into());
        command
    }
}

/// How to confine a harness process (see the module documentation). Part of
/// [`crate::ProcessOptions`]: a process is started with it fixed, so confined processes are
/// never shared between different confinements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Confinement {
    /// The program that sets the sandbox up.
    pub launcher: Launcher,
    /// Directories the harness may read and write (a thread's workspace and app data dir). The
    /// process's storage directory and `HOME` are added when it starts.
    pub read_write: Vec<PathBuf>,
    /// Extra paths it may read (the harness binary is added when it starts).
    pub read_only: Vec<PathBuf>,
    /// Paths inside readable directories that it must not see (e.g. a configuration file under
    /// `/etc`): masked with an empty file or directory.
    pub hidden: Vec<PathBuf>,
    /// TCP ports the harness and its commands may connect to (any host); `None` allows every
    /// port. Needs Landlock network rules (Linux 6.7); elsewhere every port stays open.
    pub tcp_connect: Option<BTreeSet<u16>>,
    /// Let the harness install the webm encoder it embeds (used only to record browser
    /// sessions) under `HOME`. Off: `HOME/.gemini/antigravity/bin` is made an empty file, masked
    /// read-only inside the sandbox, so the harness skips the install — a confined process
    /// usually has a `HOME` of its own (one per thread), where the encoder would take 16.8 MB of
    /// disk and the first turn of every process would spend ~30 ms writing or comparing it.
    pub webm_encoder: bool,
}

impl Confinement {
    /// A confinement started by `launcher` with nothing granted yet.
    pub fn new(launcher: Launcher) -> Self {
        Self {
            launcher,
            read_write: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            tcp_connect: None,
            webm_encoder: false,
        }
    }

    /// The launcher command that starts `binary` confined, working in `storage_dir` with
    /// `home` as `HOME` (both writable). Every path must be absolute.
    pub(crate) fn command(
        &self,
        binary: &Path,
        storage_dir: &Path,
        home: &Path,
    ) -> Result<tokio::process::Command> {
        let mut read_write = self.read_write.clone();
        read_write.extend([storage_dir.to_owned(), home.to_owned()]);
        let mut read_only = self.read_only.clone();
        read_only.push(binary.to_owned());
        let mut hidden = self.hidden.clone();
        let encoder_dir = home.join(WEBM_ENCODER_DIR);
        if !self.webm_encoder
            && std::fs::symlink_metadata(&encoder_dir).is_ok_and(|m| m.file_type().is_file())
        {
            // Masked: the agent cannot turn it back into a directory the harness installs into.
            hidden.push(encoder_dir);
        }
        let spec = Spec {
            program: binary.to_owned(),
            cwd: storage_dir.to_owned(),
            read_write,
            read_only,
            hidden,
            tcp_connect: self.tcp_connect.clone(),
            probe: false,
        };
        spec.check().map_err(HarnessError::Config)?;
        let json = serde_json::to_string(&spec)
            .map_err(|e| HarnessError::Config(format!("the sandbox spec: {e}")))?;
        Ok(self.launcher.command(json).into())
    }
}

/// What the launcher is told: the harness, where it works, what it may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Spec {
    program: PathBuf,
    cwd: PathBuf,
    read_write: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    tcp_connect: Option<BTreeSet<u16>>,
    /// The launcher's self-test: report what took effect instead of starting `program`.
    #[serde(default)]
    probe: bool,
}

impl Spec {
    /// Every path absolute and valid UTF-8 (the mount helpers take text).
    fn check(&self) -> Result<(), String> {
        let paths = [&self.program, &self.cwd]
            .into_iter()
            .chain(&self.read_write)
            .chain(&self.read_only)
            .chain(&self.hidden);
        for path in paths {
            if !path.is_absolute() || path.to_str().is_none() {
                return Err(format!(
                    "sandbox paths must be absolute and valid UTF-8: {}",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

/// What this machine can confine, as the probe found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSupport {
    /// Harness processes can be confined (namespaces work through the launcher).
    pub available: bool,
    /// The Landlock ABI the kernel offers (0: none); 4 and later filter TCP connections, 6 and
    /// later scope signals and abstract sockets.
    pub landlock_abi: u8,
    /// TCP connections can be limited to an allow-list (Landlock ABI 4).
    pub tcp_filter: bool,
    /// Why confinement is unavailable, or what is missing from it.
    pub reason: Option<String>,
    /// The one setting or install that makes it available (or complete).
    pub fix: Option<String>,
}

/// What the launcher's self-test writes to stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProbeReport {
    /// The sandbox's first process was PID 1 of a new PID namespace.
    pid_namespace: bool,
    /// The Landlock ABI offered by the kernel (0: none).
    landlock_abi: u8,
    /// Whether the Landlock rules took effect: `fully`, `partially` or `not`.
    landlock: String,
    /// Every capability was dropped.
    capabilities_dropped: bool,
}

/// Finds out whether `launcher` can confine harness processes on this machine: starts it on its
/// self-test (a sandbox like a harness's, with the same mounts and Landlock rules, that reports
/// what took effect). Never fails: an unusable launcher or kernel is reported with the reason
/// and the fix.
pub async fn probe(launcher: &Launcher) -> SandboxSupport {
    let launcher = launcher.clone();
    match crate::blocking::off_runtime(move || probe_blocking(&launcher)).await {
        Some(support) => support,
        None => unavailable(
            "the runtime shut down during the sandbox probe".into(),
            None,
        ),
    }
}

fn probe_blocking(launcher: &Launcher) -> SandboxSupport {
    let child = launcher
        .command(PROBE_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) => {
            return unavailable(
                format!(
                    "the sandbox launcher {} could not be started: {e}",
                    launcher.program.display()
                ),
                Some(
                    "serve with the agui-antigravity binary (its own sandbox launcher), or give \
                     an embedding program a launcher"
                        .into(),
                ),
            );
        }
    };
    let pid = child.id();
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let output = match wait.recv_timeout(PROBE_TIMEOUT) {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return unavailable(format!("the sandbox probe failed: {e}"), None),
        Err(_) => {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return unavailable(
                format!("the sandbox probe did not finish within {PROBE_TIMEOUT:?}"),
                None,
            );
        }
    };
    let report: Option<ProbeReport> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok());
    match report {
        Some(report) if output.status.success() => support_from(&report),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            let why = if stderr.is_empty() {
                format!("the sandbox probe failed ({})", output.status)
            } else {
                stderr
            };
            unavailable(
                format!("harness processes cannot be confined on this machine: {why}"),
                Some(namespace_fix()),
            )
        }
    }
}

fn support_from(report: &ProbeReport) -> SandboxSupport {
    if !report.pid_namespace || !report.capabilities_dropped {
        return unavailable(
            format!("the sandbox did not take effect as expected: {report:?}"),
            None,
        );
    }
    let tcp_filter = report.landlock_abi >= 4 && report.landlock != "not";
    let (reason, fix) = if tcp_filter {
        (None, None)
    } else {
        (
            Some(format!(
                "Landlock ABI {} cannot limit TCP connections: commands can reach every local \
                 port, the server's included",
                report.landlock_abi
            )),
            Some("run Linux 6.7 or later with Landlock enabled (`lsm=…,landlock`)".into()),
        )
    };
    SandboxSupport {
        available: true,
        landlock_abi: report.landlock_abi,
        tcp_filter,
        reason,
        fix,
    }
}

fn unavailable(reason: String, fix: Option<String>) -> SandboxSupport {
    SandboxSupport {
        available: false,
        landlock_abi: 0,
        tcp_filter: false,
        reason: Some(reason),
        fix,
    }
}

/// The setting that enables unprivileged user namespaces here, read from the knobs that
/// commonly disable them.
fn namespace_fix() -> String {
    let knob = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|v| v.trim().to_owned())
    };
    if knob("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        "allow user namespaces: `sysctl -w user.max_user_namespaces=10000`".into()
    } else if knob("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        "allow unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1`".into()
    } else if knob("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
    {
        "allow unprivileged user namespaces: `sysctl -w \
         kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile granting \
         `userns` to agui-antigravity)"
            .into()
    } else {
        "allow unshare(CLONE_NEWUSER) for agui-antigravity (in a container: a seccomp profile \
         that permits it, e.g. Docker's `--security-opt seccomp=unconfined`)"
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_grants_the_storage_dir_home_and_binary_and_refuses_relative_paths() {
        let mut confinement = Confinement::new(Launcher::new("/bin/launcher", ["__sandbox-exec"]));
        confinement.read_write.push("/w/abc".into());
        confinement.tcp_connect = Some([443, 8080].into());
        let command = confinement
            .command(
                Path::new("/opt/localharness"),
                Path::new("/s/t/abc/save"),
                Path::new("/s/t/abc/home"),
            )
            .unwrap();
        let args: Vec<String> = command
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], "__sandbox-exec");
        let spec: Spec = serde_json::from_str(&args[1]).unwrap();
        assert_eq!(spec.cwd, Path::new("/s/t/abc/save"));
        assert_eq!(
            spec.read_write,
            [
                PathBuf::from("/w/abc"),
                "/s/t/abc/save".into(),
                "/s/t/abc/home".into()
            ]
        );
        assert_eq!(spec.read_only, [PathBuf::from("/opt/localharness")]);
        assert_eq!(spec.tcp_connect, Some([443, 8080].into()));
        confinement.read_write.push("relative/dir".into());
        let err = confinement
            .command(Path::new("/h"), Path::new("/s"), Path::new("/home"))
            .unwrap_err();
        assert!(err.to_string().contains("relative/dir"), "{err}");
    }

    #[test]
    fn the_encoders_place_in_home_is_masked_unless_the_encoder_is_wanted() {
        let home = tempfile::tempdir().unwrap();
        keep_webm_encoder_out(home.path()).unwrap();
        let mut confinement = Confinement::new(Launcher::new("/bin/launcher", ["x"]));
        let hidden = |confinement: &Confinement| {
            let command = confinement
                .command(Path::new("/opt/localharness"), Path::new("/s"), home.path())
                .unwrap();
            let spec = command.as_std().get_args().nth(1).unwrap().to_owned();
            serde_json::from_str::<Spec>(spec.to_str().unwrap())
                .unwrap()
                .hidden
        };
        assert_eq!(hidden(&confinement), [home.path().join(WEBM_ENCODER_DIR)]);
        confinement.webm_encoder = true;
        assert!(hidden(&confinement).is_empty());
    }

    #[test]
    fn a_probe_without_tcp_rules_is_available_but_says_what_is_missing() {
        let report = |abi: u8| ProbeReport {
            pid_namespace: true,
            landlock_abi: abi,
            landlock: if abi == 0 { "not" } else { "fully" }.into(),
            capabilities_dropped: true,
        };
        let full = support_from(&report(7));
        assert!(full.available && full.tcp_filter && full.reason.is_none());
        let old = support_from(&report(3));
        assert!(old.available && !old.tcp_filter);
        assert!(old.reason.unwrap().contains("every local port"));
        let broken = support_from(&ProbeReport {
            pid_namespace: false,
            ..report(7)
        });
        assert!(!broken.available);
    }
}
