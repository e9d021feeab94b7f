//! The sandbox's processes as its PID 1 sees them (its `/proc` shows the sandbox alone): the
//! commands stopped, and the disk held by files they keep open after unlinking them.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How many sweeps of `/proc` a stop makes at most: each kills what the last one missed (a
/// process forked in between), and killed processes fork no more.
const STOP_SWEEPS: usize = 64;

/// Kills every process of the sandbox but this one (its PID 1) and the harness; how many were
/// killed. Sweeps until a sweep finds nothing new, so children forked during a sweep die too.
pub(super) fn stop_commands(harness: u32) -> u32 {
    let mut killed = HashSet::new();
    for _ in 0..STOP_SWEEPS {
        let mut new = false;
        for pid in commands(harness) {
            if killed.contains(&pid) {
                continue;
            }
            let Ok(raw) = i32::try_from(pid) else {
                continue;
            };
            if kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok() {
                killed.insert(pid);
                new = true;
            }
        }
        if !new {
            break;
        }
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// How many processes of the sandbox run besides this one (its PID 1) and the harness: the
/// commands the harness started and whatever they left running.
pub(super) fn count_commands(harness: u32) -> u32 {
    u32::try_from(commands(harness).count()).unwrap_or(u32::MAX)
}

/// The live processes of the sandbox but this one (its PID 1) and the harness.
fn commands(harness: u32) -> impl Iterator<Item = u32> {
    let me = std::process::id();
    pids()
        .into_iter()
        .filter(move |&pid| pid != me && pid != harness && !is_dead(pid))
}

/// The bytes (allocated blocks) of regular files with no name left (`st_nlink == 0`) that a
/// process of the sandbox holds open, on the file systems `devices` (those of the directories
/// the sandbox may write); each file once. A file only mapped, its descriptor closed, is not
/// seen (`/proc/<pid>/map_files` needs a capability).
pub(super) fn unlinked_bytes(devices: &[u64]) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for pid in pids() {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // The magic link's target, stat'ed through it (its name is gone).
            let Ok(meta) = std::fs::metadata(fd.path()) else {
                continue;
            };
            if meta.is_file()
                && meta.nlink() == 0
                && devices.contains(&meta.dev())
                && seen.insert((meta.dev(), meta.ino()))
            {
                total = total.saturating_add(meta.blocks().saturating_mul(512));
            }
        }
    }
    total
}

/// The devices of `dirs` (those that exist).
pub(super) fn devices(dirs: &[PathBuf]) -> Vec<u64> {
    let mut devices: Vec<u64> = dirs
        .iter()
        .filter_map(|dir| std::fs::metadata(dir).ok())
        .map(|meta| meta.dev())
        .collect();
    devices.sort_unstable();
    devices.dedup();
    devices
}

/// The pids in this PID namespace's `/proc`.
fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` has exited (a zombie waiting to be reaped, or gone).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's name, which ends with the last `)`.
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_none_or(|state| matches!(state, 'Z' | 'X' | 'x')),
        Err(_) => true,
    }
}
