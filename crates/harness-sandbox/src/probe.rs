//! What this machine can confine: the launcher's self-test, read by the host.

use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::confinement::Launcher;
use crate::identity::SandboxIdentity;
use crate::spec::ProbeReport;

/// Setting this variable (to any text, the reason given) in the environment of a probe makes
/// the launcher fail as on a machine without user namespaces: for testing the fallback.
pub const SIMULATE_UNAVAILABLE_ENV: &str = "AGUI_SANDBOX_SIMULATE_UNAVAILABLE";

/// The argument that makes the launcher run its self-test instead of a harness.
pub(crate) const PROBE_ARG: &str = "--probe";

/// How long the probe may take (a sandbox starts in a few milliseconds).
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// What this machine can confine, as the probe found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSupport {
    /// Harness processes can be confined (namespaces, a private network and a nested domain
    /// for commands work through the launcher).
    pub available: bool,
    /// The Landlock ABI the kernel offers (0: none); 6 and later also keep signals and abstract
    /// Unix sockets inside the sandbox.
    pub landlock_abi: u8,
    /// The harness's commands cannot trace, read the memory of or signal the harness (a nested
    /// Landlock domain took effect).
    pub commands_isolated: bool,
    /// The seccomp filters took effect.
    pub seccomp: bool,
    /// Why confinement is unavailable, or what is missing from it.
    pub reason: Option<String>,
    /// The one setting or install that makes it available (or complete).
    pub fix: Option<String>,
}

/// Finds out whether `launcher` can confine harness processes on this machine, run as `run_as`
/// (see [`crate::Confinement::run_as`]): starts it on its self-test (a sandbox like a harness's,
/// with the same namespaces, identity and rules, that reports what took effect). Never fails: an
/// unusable launcher or kernel is reported with the reason and the fix.
pub async fn probe(launcher: &Launcher, run_as: Option<SandboxIdentity>) -> SandboxSupport {
    let launcher = launcher.clone();
    match tokio::task::spawn_blocking(move || probe_blocking(&launcher, run_as)).await {
        Ok(support) => support,
        Err(_) => unavailable("the sandbox probe did not complete".into(), None),
    }
}

/// `<uid>:<gid>`, as the probe's command line gives the identity.
#[cfg_attr(not(feature = "launcher"), allow(dead_code))]
pub(crate) fn parse_identity(text: &str) -> Result<SandboxIdentity, String> {
    let parsed = text
        .split_once(':')
        .and_then(|(uid, gid)| Some((uid.parse().ok()?, gid.parse().ok()?)));
    match parsed {
        Some((uid, gid)) => Ok(SandboxIdentity { uid, gid }),
        None => Err(format!("not a <uid>:<gid>: {text}")),
    }
}

fn probe_blocking(launcher: &Launcher, run_as: Option<SandboxIdentity>) -> SandboxSupport {
    let mut command = launcher.std_command(PROBE_ARG);
    if let Some(identity) = run_as {
        command.arg(format!("{}:{}", identity.uid, identity.gid));
    }
    let child = command
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
        Some(report) if output.status.success() => support_from(&report, run_as),
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

pub(crate) fn support_from(
    report: &ProbeReport,
    run_as: Option<SandboxIdentity>,
) -> SandboxSupport {
    if !report.pid_namespace || !report.capabilities_dropped || !report.private_network {
        return unavailable(
            format!("the sandbox did not take effect as expected: {report:?}"),
            None,
        );
    }
    if let Some(identity) = run_as
        && report.host_uid != Some(identity.uid)
    {
        return unavailable(
            format!(
                "the sandbox was to run as host uid {} but ran as {:?}",
                identity.uid, report.host_uid
            ),
            None,
        );
    }
    let landlock = report.landlock_abi > 0 && report.landlock != "not";
    if !landlock || !report.nested_domain {
        return unavailable(
            format!(
                "Landlock (ABI {}, rules {}) cannot keep the harness's files and commands apart: \
                 the sandbox would not hold",
                report.landlock_abi, report.landlock
            ),
            Some("run Linux 5.13 or later with Landlock enabled (`lsm=…,landlock`)".into()),
        );
    }
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    if report.landlock_abi < 6 {
        missing.push(format!(
            "Landlock ABI {} does not scope signals and abstract Unix sockets: a command may \
             signal the harness and reach abstract sockets of the sandbox",
            report.landlock_abi
        ));
        fixes.push("run Linux 6.12 or later for Landlock ABI 6");
    }
    if !report.seccomp {
        missing.push("the seccomp filters could not be installed".into());
        fixes.push("allow seccomp filters for agui-antigravity");
    }
    SandboxSupport {
        available: true,
        landlock_abi: report.landlock_abi,
        commands_isolated: report.nested_domain,
        seccomp: report.seccomp,
        reason: (!missing.is_empty()).then(|| missing.join("; ")),
        fix: (!fixes.is_empty()).then(|| fixes.join("; ")),
    }
}

fn unavailable(reason: String, fix: Option<String>) -> SandboxSupport {
    SandboxSupport {
        available: false,
        landlock_abi: 0,
        commands_isolated: false,
        seccomp: false,
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
        "allow unshare(CLONE_NEWUSER) for agui-antigravity (in a container: run it as a \
         non-root user with the seccomp profile deploy/seccomp-agui.json and /proc unmasked, \
         e.g. Docker's `--security-opt seccomp=seccomp-agui.json --security-opt \
         systempaths=unconfined`, plus `apparmor=unconfined` under AppArmor; \
         `seccomp=unconfined` alone is not enough: see deploy/compose.yaml)"
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(abi: u8) -> ProbeReport {
        ProbeReport {
            pid_namespace: true,
            private_network: true,
            landlock_abi: abi,
            landlock: if abi == 0 { "not" } else { "fully" }.into(),
            nested_domain: abi > 0,
            seccomp: true,
            capabilities_dropped: true,
            host_uid: Some(65534),
        }
    }

    #[test]
    fn a_full_probe_is_available_with_nothing_missing() {
        let full = support_from(&report(7), None);
        assert!(full.available && full.commands_isolated && full.reason.is_none());
    }

    #[test]
    fn an_older_landlock_is_available_but_says_what_is_missing() {
        let old = support_from(&report(4), None);
        assert!(old.available);
        assert!(old.reason.unwrap().contains("signal the harness"));
        assert!(old.fix.unwrap().contains("6.12"));
    }

    #[test]
    fn no_landlock_or_no_private_network_is_unavailable() {
        assert!(!support_from(&report(0), None).available);
        let shared_network = ProbeReport {
            private_network: false,
            ..report(7)
        };
        assert!(!support_from(&shared_network, None).available);
    }

    #[test]
    fn a_sandbox_that_did_not_run_as_the_identity_asked_is_unavailable() {
        assert!(support_from(&report(7), Some(SandboxIdentity::same(65534))).available);
        let as_root = ProbeReport {
            host_uid: Some(0),
            ..report(7)
        };
        let support = support_from(&as_root, Some(SandboxIdentity::same(65534)));
        assert!(!support.available);
        assert!(support.reason.unwrap().contains("uid 65534"));
        assert_eq!(
            parse_identity("1000:100"),
            Ok(SandboxIdentity {
                uid: 1000,
                gid: 100
            })
        );
        assert!(parse_identity("1000").is_err());
    }
}
