//! The launcher program's stages. Each is a fresh execution of the launcher program (never a
//! fork of a multi-threaded host), and none carries the spec on its command line (which any
//! process can read in `/proc/<pid>/cmdline`): it comes in a sealed memfd.
//!
//! 1. `--run` — outside (`outside.rs`): peeks at the spec, the control channel's first message
//!    (left there for stage 2), joins the process's cgroups, builds the namespaces and the
//!    filesystem view with `hakoniwa`, and starts stage 2 as their first process.
//! 2. `--inside` — the sandbox's PID 1 (`init.rs`): takes the spec from the control channel,
//!    brings the loopback up, opens the service listeners and hands them to the host, drops
//!    every capability, starts stage 3 with the spec's memfd, relays its stdio over the control
//!    channel, connects to it for the host, stops the commands or measures what they hold
//!    unlinked when the host asks (`procs.rs`), reaps orphans and exits with it.
//! 3. `--harness <fd>` (`harness.rs`): reads the spec from descriptor `fd` and closes it,
//!    Landlock and seccomp for the harness, then `exec` of the harness itself.
//! 4. The shell (`shell.rs`): the harness starts its commands with `bash -c …`; inside the
//!    sandbox `bash` and `sh` are this program, which puts the command in a nested, stricter
//!    Landlock domain and a seccomp filter, then `exec`s the real shell.
//!
//! `--probe [<uid>:<gid>]` runs stages 1 and 2 (`--inside --probe`) as a self-test on a spec of
//! its own, as that identity, that reports what took effect. `--map-ids` (`identity.rs`) helps
//! stage 1 run a sandbox as another identity than its own.

mod harness;
mod identity;
mod init;
mod netdev;
mod outside;
mod procs;
mod rules;
mod shell;

use std::ffi::OsString;
use std::process::ExitCode;

use crate::probe::PROBE_ARG;
use crate::spec::{RUN_ARG, Spec};

/// The launcher's exit status when the sandbox could not be set up (as `env` and container
/// runtimes use it).
const SETUP_FAILED: u8 = 125;

/// What the outer stage passes the inner one.
const INSIDE_ARG: &str = "--inside";

/// What the inner stage passes the harness stage before the spec's descriptor.
const HARNESS_ARG: &str = "--harness";

/// The control channel: the host's socket pair end, the outer and inner stages' stdin.
const CONTROL: std::os::fd::RawFd = 0;

/// What the probe passes its nested-domain check before the pid it tries to trace.
const PROBE_COMMAND_ARG: &str = "--probe-command";

/// Call first thing in `main`, before any thread starts, with the argument that marks a
/// launcher invocation (e.g. `__sandbox-exec`, the [`crate::Launcher`]'s last argument before
/// its own). When this program was started as a stage of the launcher — with `marker` as its
/// first argument, or as the sandbox's shell — runs that stage and returns its exit code (return
/// it from `main`); otherwise returns `None`.
pub fn run_if_launcher(marker: &str) -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let (argv0, rest) = args.split_first()?;
    if let Some(code) = shell::run_if_shell(argv0, rest) {
        return Some(code);
    }
    match rest.split_first() {
        Some((first, stage)) if first == marker => Some(launcher_main(stage.iter().cloned())),
        _ => None,
    }
}

/// The launcher's entry point; `args` are what follows the launcher's own arguments (see
/// [`crate::Launcher`]): `--run` to run a harness confined (the spec comes first on the control
/// channel, its stdin), `--probe` for the self-test that [`crate::probe`] reads, or (in the
/// sandbox) a later stage. Returns the harness's exit status
/// (`128 + n` for signal `n`), or 125 with the reason on stderr when the sandbox could not be set
/// up.
///
/// Call it before the program starts any thread: the outer stage forks to build the
/// namespaces.
pub fn launcher_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let result = match args.as_slice() {
        [PROBE_ARG] => outside::run(&Spec::probe(None), 1),
        [PROBE_ARG, identity] => crate::probe::parse_identity(identity)
            .and_then(|identity| outside::run(&Spec::probe(Some(identity)), 2)),
        [RUN_ARG] => Spec::receive(CONTROL, true).and_then(|(spec, fd)| {
            // The inner stage takes its own copy from the channel.
            drop(fd);
            outside::run(&spec, 1)
        }),
        [identity::MAP_IDS_ARG, pid, uid, gid] => identity::map_ids(pid, uid, gid),
        [INSIDE_ARG, PROBE_ARG] => init::probe(),
        [INSIDE_ARG] => Spec::receive(CONTROL, false).and_then(|(spec, fd)| init::run(&spec, fd)),
        [HARNESS_ARG, fd] => harness::spec(fd).and_then(|spec| harness::run(&spec)),
        [PROBE_COMMAND_ARG, pid] => Ok(init::probe_command(pid)),
        _ => {
            Err("usage: <launcher> --run (the spec on stdin, the control channel) | --probe".into())
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("sandbox: {e}");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

/// This program, as the later stages start it: the same executable and the arguments it was
/// started with before its stage's own.
struct Own {
    program: std::path::PathBuf,
    /// The launcher's arguments before the stage's (e.g. `__sandbox-exec`).
    args: Vec<String>,
}

impl Own {
    /// `taken`: how many trailing arguments belong to the current stage.
    fn find(taken: usize) -> Result<Self, String> {
        let program = std::env::current_exe()
            .map_err(|e| format!("cannot find the launcher's own executable: {e}"))?;
        let mut args: Vec<String> = std::env::args().skip(1).collect();
        args.truncate(args.len().saturating_sub(taken));
        Ok(Self { program, args })
    }

    fn command(&self, stage: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).args(stage);
        command
    }
}

fn text(path: &std::path::Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("not valid UTF-8: {}", path.display()))
}
