//! Starting one confined harness process: everything it needs before it runs (the webm encoder
//! kept out of its `HOME`, its cgroup, the launcher command and its control channel), made in
//! one step, then the spawn that hands the host the harness's stdio and the sandbox's control.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::process::{Child, Command};

use crate::agent_dir::AgentDir;
use crate::cgroups::Cgroup;
use crate::confinement::Confinement;
use crate::host::{HostChannel, SandboxControl, SandboxStdin, SandboxStdout};
use crate::{Result, SandboxError};

/// A confined harness process ready to spawn ([`Confinement::prepare`]). Dropping it unspawned
/// removes its cgroup.
#[derive(Debug)]
pub struct ConfinedLaunch {
    confinement: Confinement,
    command: Command,
    channel: HostChannel,
    cgroup: Option<Cgroup>,
}

/// A confined harness process just spawned: the launcher's child and the harness's stdio.
#[derive(Debug)]
pub struct ConfinedChild {
    /// The launcher (the sandbox's outer stage); it exits with the harness.
    pub child: Child,
    /// The harness's stdin, through the launcher.
    pub stdin: SandboxStdin,
    /// The harness's stdout, through the launcher.
    pub stdout: SandboxStdout,
    /// Connections into the sandbox, what its services granted, what its PID 1 does for the host.
    pub control: SandboxControl,
    /// The process's cgroup, when the machine delegates one: keep it until the child has exited
    /// (dropping it kills what is left in it and removes it, a blocking step).
    pub cgroup: Option<Cgroup>,
}

impl Confinement {
    /// Prepares a confined start of `binary`, working in `storage_dir` with `home` as `HOME`
    /// (both absolute, made by the caller, below a granted directory or the host's own):
    /// keeps the webm encoder out of `home` unless [`Confinement::webm_encoder`] (a failure is
    /// logged: the harness may then install it), makes the process's cgroup where
    /// [`crate::Limits::cgroups`] names a parent, and builds the launcher command.
    ///
    /// Blocking (directories and cgroup files): call it off an async runtime's worker threads.
    pub fn prepare(
        &self,
        binary: &Path,
        storage_dir: &Path,
        home: &Path,
    ) -> Result<ConfinedLaunch> {
        if !self.webm_encoder {
            let kept_out = AgentDir::below(&self.read_write, home, false, self.run_as)
                .and_then(|home| crate::keep_webm_encoder_out(&home));
            if let Err(e) = kept_out {
                tracing::warn!(home = %home.display(), error = %e, "could not keep the harness's webm encoder out of HOME; it may install it there (16.8 MB)");
            }
        }
        let cgroup = match &self.limits.cgroups {
            Some(parent) => Some(
                parent
                    .create(&cgroup_name(), self.limits.pids, self.limits.memory_bytes)
                    .map_err(SandboxError::io("make the harness's cgroup"))?,
            ),
            None => None,
        };
        let cgroup_dirs = cgroup
            .as_ref()
            .map(|c| c.dirs().to_vec())
            .unwrap_or_default();
        let (command, channel) = self.command(binary, storage_dir, home, &cgroup_dirs)?;
        Ok(ConfinedLaunch {
            confinement: self.clone(),
            command,
            channel,
            cgroup,
        })
    }
}

impl ConfinedLaunch {
    /// The launcher's command, for what the host adds: its environment, working directory,
    /// stderr and process group. Its stdin and stdout are the control channel: leave them.
    pub fn command(&mut self) -> &mut Command {
        &mut self.command
    }

    /// The program that will run (the launcher), for messages.
    pub fn program(&self) -> PathBuf {
        self.command.as_std().get_program().into()
    }

    /// Spawns the launcher and starts serving its control channel (inside a tokio runtime).
    pub fn spawn(self) -> Result<ConfinedChild> {
        let Self {
            confinement,
            mut command,
            channel,
            cgroup,
        } = self;
        let child = command.spawn().map_err(|source| SandboxError::Io {
            action: format!(
                "start the sandbox launcher {}",
                command.as_std().get_program().to_string_lossy()
            ),
            source,
        })?;
        // The launcher's end of its channel is the child's now: ours must not keep it open.
        drop(command);
        // The sandbox's reports are logged in the harness's span.
        let span = tracing::info_span!("harness", pid = child.id().unwrap_or_default());
        let started = span.in_scope(|| channel.start(confinement.services, confinement.label))?;
        Ok(ConfinedChild {
            child,
            stdin: started.stdin,
            stdout: started.stdout,
            control: started.control,
            cgroup,
        })
    }
}

/// A unique name for a process's cgroup.
fn cgroup_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("h{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
