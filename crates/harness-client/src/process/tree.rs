//! The harness's process tree, from `/proc`: its commands (to kill them with it, and to tell
//! whether one still runs). Only process ids, parents, groups and states are read.

/// `(pid, process group)` of every live descendant of `root`, from `/proc` (Linux; empty
/// elsewhere). A command that detaches itself completely (double fork) is not found.
pub(super) fn descendants(root: u32) -> Vec<(u32, u32)> {
    descendants_in(&process_table(), root)
        .map(|p| (p.pid, p.pgrp))
        .collect()
}

/// How many descendants of `root` run (exited ones waiting to be reaped left out).
pub(super) fn running_descendants(root: u32) -> usize {
    descendants_in(&process_table(), root)
        .filter(|p| !p.exited)
        .count()
}

/// A row of the process table.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    /// A zombie, waiting for its parent to reap it.
    exited: bool,
}

/// Every process, from `/proc` (Linux; empty elsewhere). A process that exits while the table
/// is read is simply not in it.
fn process_table() -> Vec<Proc> {
    let Ok(processes) = procfs::process::all_processes() else {
        return Vec::new();
    };
    processes
        .flatten()
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            Some(Proc {
                pid: u32::try_from(stat.pid).ok()?,
                ppid: u32::try_from(stat.ppid).ok()?,
                pgrp: u32::try_from(stat.pgrp).ok()?,
                exited: matches!(stat.state, 'Z' | 'X' | 'x'),
            })
        })
        .collect()
}

/// The descendants of `root` in `table`, each once.
fn descendants_in(table: &[Proc], root: u32) -> impl Iterator<Item = Proc> {
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in table {
            if p.ppid == parent && !found.iter().any(|f| f.pid == p.pid) {
                found.push(*p);
                frontier.push(p.pid);
            }
        }
    }
    found.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_s_commands_are_found_and_one_that_exited_unreaped_does_not_run() {
        // `sh` starts a short command, then becomes a long one that never reaps it.
        let mut parent = std::process::Command::new("sh")
            .args(["-c", "sleep 0.1 & exec sleep 30"])
            .spawn()
            .unwrap();
        let pid = parent.id();
        // Until the short command has started and exited (it stays in the tree, unreaped).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !(descendants(pid).len() == 1 && running_descendants(pid) == 0) {
            assert!(
                std::time::Instant::now() < deadline,
                "the short command ends unreaped: {:?}, {} running",
                descendants(pid),
                running_descendants(pid)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        parent.kill().unwrap();
        parent.wait().unwrap();

        let mut parent = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = parent.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while running_descendants(pid) == 0 {
            assert!(std::time::Instant::now() < deadline, "the command starts");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let commands = descendants(pid);
        assert_eq!(commands.len(), 1, "{commands:?}");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(commands[0].0 as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        parent.wait().unwrap();
    }
}
