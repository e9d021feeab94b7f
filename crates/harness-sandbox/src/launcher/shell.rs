//! The shell stage: inside the sandbox, `bash` and `sh` on the harness's `PATH` are the launcher
//! program. Started as one of them with the commands' rules in its environment, it puts itself in
//! the commands' nested Landlock domain, installs the seccomp filter and the file-size limit,
//! cleans the environment and `exec`s the real shell with the same arguments — so every command
//! the harness runs, and everything it starts, is out of the harness's reach.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::outside::{SHELL_DIR, SHELLS};
use super::rules::{self, COMMAND_RULES_ENV, CommandRules};

/// The exit status of a command that could not be started confined (as shells use it).
const CANNOT_RUN: u8 = 126;

/// Runs the shell stage when this program was started as the sandbox's shell: `argv0` names one
/// of [`SHELLS`] and the commands' rules are in the environment.
pub(super) fn run_if_shell(argv0: &OsString, args: &[OsString]) -> Option<ExitCode> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    if !SHELLS.contains(&name) {
        return None;
    }
    let rules = std::env::var(COMMAND_RULES_ENV).ok()?;
    Some(match run(name, &rules, args) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("sandbox: cannot run the command confined: {e}");
            ExitCode::from(CANNOT_RUN)
        }
    })
}

fn run(name: &str, rules: &str, args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let rules: CommandRules =
        serde_json::from_str(rules).map_err(|e| format!("bad command rules: {e}"))?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| dir != Path::new(SHELL_DIR))
        .collect();
    let shell = dirs
        .iter()
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("no `{name}` on PATH"))?;
    let clean_path = std::env::join_paths(&dirs).map_err(|e| e.to_string())?;
    rules::command_domain(&rules)?;
    rules::install_seccomp()?;
    if let Some(bytes) = rules.file_bytes {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, bytes, bytes)
            .map_err(|e| format!("the file size limit: {e}"))?;
    }
    let mut command = std::process::Command::new(&shell);
    command
        .arg0(name)
        .args(args)
        .env_remove(COMMAND_RULES_ENV)
        .env("PATH", clean_path)
        .env("SHELL", &shell);
    let error = command.exec();
    Err(format!("could not start {}: {error}", shell.display()))
}

fn is_executable(path: &Path) -> bool {
    nix::unistd::access(path.as_os_str().as_bytes(), nix::unistd::AccessFlags::X_OK).is_ok()
        && path.is_file()
}
