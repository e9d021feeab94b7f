//! The harness stage: the spec from the descriptor PID 1 passed, the harness's restrictions on
//! this process, the commands' rules in its environment, then `exec` of the harness itself.

use std::os::fd::{AsFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;

use super::outside::SHELL_DIR;
use super::rules::{self, COMMAND_RULES_ENV, CommandRules};
use crate::spec::{EGRESS_PORT, Spec};

/// The spec in descriptor `fd` (the decimal number PID 1 passed), which is closed: the harness
/// inherits nothing of it.
pub(super) fn spec(fd: &str) -> Result<Spec, String> {
    let fd: RawFd = fd
        .parse()
        .ok()
        .filter(|fd| *fd > 2)
        .ok_or_else(|| format!("not a spec descriptor: {fd}"))?;
    #[allow(unsafe_code)]
    // SAFETY: PID 1 started this stage with the spec's memfd open at `fd` (without
    // close-on-exec) and named it here; nothing else in this fresh process refers to it, so it
    // is open and this stage owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Spec::from_fd(fd.as_fd())
}

pub(super) fn run(spec: &Spec) -> Result<u8, String> {
    let commands =
        serde_json::to_string(&CommandRules::for_spec(spec)).map_err(|e| e.to_string())?;
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let mut command = std::process::Command::new(&spec.program);
    command
        .env(COMMAND_RULES_ENV, commands)
        // The harness finds `bash` on its PATH: the shell stage, first.
        .env("PATH", format!("{SHELL_DIR}:{path}"))
        .env("SHELL", format!("{SHELL_DIR}/bash"));
    if spec.services {
        let proxy = format!("http://127.0.0.1:{EGRESS_PORT}");
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            command.env(name, &proxy);
        }
        for name in ["NO_PROXY", "no_proxy"] {
            command.env(name, "localhost,127.0.0.1");
        }
    }
    rules::harness_domain(spec)?;
    rules::install_seccomp()?;
    // Only returns on failure.
    let error = command.exec();
    Err(format!(
        "could not start {}: {error}",
        spec.program.display()
    ))
}
