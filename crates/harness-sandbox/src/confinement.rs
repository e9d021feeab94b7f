//! What a host asks for: [`Confinement`] (what one harness process may reach, and its limits).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

use crate::agent_dir::AgentDir;
use crate::cgroups;
use crate::encoder::{self, WEBM_ENCODER_DIR};
use crate::host::HostChannel;
use crate::identity::SandboxIdentity;
use crate::services::{ProcessLabel, Services};
use crate::spec::{RUN_ARG, Spec};
use crate::{Result, SandboxError};

/// A program that acts as the launcher: started as `program args… --run` (its spec comes on its
/// control channel, never on its command line) or `program args… --probe`, it must hand its
/// arguments to [`crate::run_if_launcher`] (or those after `args` to [`crate::launcher_main`])
/// first thing in `main`; inside the sandbox it is started again, as its other stages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Launcher {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the launcher's own (e.g. `__sandbox-exec`).
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

    pub(crate) fn std_command(&self, last: impl Into<OsString>) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args).arg(last.into());
        command
    }
}

/// Limits of one confined process and everything it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The size of its private `/tmp` (a tmpfs; what it holds counts as its memory).
    pub tmp_bytes: u64,
    /// The largest file one of its commands may write (`RLIMIT_FSIZE`); `None`: no limit.
    pub file_bytes: Option<u64>,
    /// Where its cgroup is made, with the pids and memory limits; `None`: no cgroup (the
    /// machine delegates none to this program).
    pub cgroups: Option<cgroups::Parent>,
    /// Processes and threads at most (`pids.max`), harness included.
    pub pids: Option<u64>,
    /// Memory at most (`memory.max`), harness, commands and `/tmp` included.
    pub memory_bytes: Option<u64>,
    /// Disk at most: what its granted directories take, and what its processes hold open
    /// after unlinking. Past it, while it grows, the host stops the sandbox's commands (the
    /// harness lives on); `None`: no cap.
    pub disk_bytes: Option<u64>,
}

impl Default for Limits {
    /// A 256 MiB `/tmp`, no other limit.
    fn default() -> Self {
        Self {
            tmp_bytes: 256 << 20,
            file_bytes: None,
            cgroups: None,
            pids: None,
            memory_bytes: None,
            disk_bytes: None,
        }
    }
}

/// How to confine a harness process (see the crate documentation). Part of a harness process's
/// fixed options: processes are shared only between identical confinements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Confinement {
    /// The program that sets the sandbox up.
    pub launcher: Launcher,
    /// Whom the process serves, for logs and the services (an owner, a thread).
    pub label: ProcessLabel,
    /// Directories the harness may read and write. The process's storage directory and `HOME`
    /// are added when it starts.
    pub read_write: Vec<PathBuf>,
    /// Extra paths it may read besides the system allow-list (the harness binary is added when
    /// it starts).
    pub read_only: Vec<PathBuf>,
    /// Paths inside readable directories that it must not see (e.g. a configuration file the
    /// operator keeps under `/usr/local/etc`): masked.
    pub hidden: Vec<PathBuf>,
    /// Let the harness install the webm encoder it embeds (used only to record browser
    /// sessions) under `HOME`. Off: `HOME/.gemini/antigravity/bin` is made an empty file, masked
    /// read-only, so the harness skips the install (16.8 MB of disk and ~30 ms of the first turn
    /// of every process otherwise).
    pub webm_encoder: bool,
    /// The model endpoint and egress proxy served inside; `None`: the sandbox has no network
    /// beyond its own loopback (the harness cannot reach a model).
    pub services: Option<Services>,
    /// Resource limits.
    pub limits: Limits,
    /// The host identity its processes run as (a host running as root must give one, e.g.
    /// [`sandbox_identity`]); `None`: the host's own. The directories it may write (its
    /// `read_write` ones, the storage directory and `HOME`) must belong to that identity.
    pub run_as: Option<SandboxIdentity>,
}

impl Confinement {
    /// A confinement started by `launcher` for `label`, with nothing granted yet.
    pub fn new(launcher: Launcher, label: impl Into<String>) -> Self {
        Self {
            launcher,
            label: ProcessLabel(label.into()),
            read_write: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            webm_encoder: false,
            services: None,
            limits: Limits::default(),
            run_as: None,
        }
    }

    /// The launcher command that starts `binary` confined, working in `storage_dir` with `home`
    /// as `HOME` (both writable), in the cgroups `cgroups` (made by the host), and the host's
    /// end of its control channel, which becomes the launcher's stdin and stdout and carries the
    /// spec (what the sandbox grants, by host path: never on a command line). Every path must
    /// be absolute. Hosts start processes through [`Confinement::prepare`].
    pub(crate) fn command(
        &self,
        binary: &Path,
        storage_dir: &Path,
        home: &Path,
        cgroups: &[PathBuf],
    ) -> Result<(tokio::process::Command, HostChannel)> {
        let spec = self.spec(binary, storage_dir, home, cgroups);
        spec.check().map_err(SandboxError::Spec)?;
        let (host, launcher) = channel_with(&spec)?;
        let stdout: OwnedFd = launcher
            .try_clone()
            .map_err(SandboxError::io("duplicate the launcher's control channel"))?;
        let mut command: tokio::process::Command = self.launcher.std_command(RUN_ARG).into();
        command.stdin(launcher).stdout(stdout);
        tracing::trace!(fd = host.as_raw_fd(), "launcher control channel created");
        Ok((command, HostChannel::new(host)?))
    }

    fn spec(&self, binary: &Path, storage_dir: &Path, home: &Path, cgroups: &[PathBuf]) -> Spec {
        // Only directories the host names are mounted: the storage dir and `HOME` inside a
        // granted directory come with it (the sandbox can replace them by a link, which a bind
        // mount would follow to anywhere on the host).
        let mut read_write = self.read_write.clone();
        for dir in [storage_dir, home] {
            if !self.read_write.iter().any(|root| dir.starts_with(root)) {
                read_write.push(dir.to_owned());
            }
        }
        let mut read_only = self.read_only.clone();
        read_only.push(binary.to_owned());
        let mut hidden = self.hidden.clone();
        if !self.webm_encoder
            && AgentDir::below(&self.read_write, home, false, self.run_as)
                .is_ok_and(|home| encoder::is_kept_out(&home))
        {
            // Masked: the agent cannot turn it back into a directory the harness installs into.
            hidden.push(home.join(WEBM_ENCODER_DIR));
        }
        Spec {
            program: binary.to_owned(),
            cwd: storage_dir.to_owned(),
            read_write,
            read_only,
            hidden,
            services: self.services.is_some(),
            tmp_bytes: self.limits.tmp_bytes,
            file_bytes: self.limits.file_bytes,
            cgroups: cgroups.to_vec(),
            run_as: self.run_as,
            probe: false,
        }
    }
}

/// The control channel of a launcher about to start, `(host's end, launcher's end)`, with the spec
/// as its first message, waiting in the socket's buffer.
fn channel_with(spec: &Spec) -> Result<(OwnedFd, OwnedFd)> {
    let (host, launcher) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SandboxError::io("create the launcher's control channel")(e.into()))?;
    spec.send(host.as_fd()).map_err(SandboxError::Spec)?;
    Ok((host, launcher))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec the launcher started by `confinement` would read from its control channel (its
    /// command line holds none).
    fn spec_of(
        confinement: &Confinement,
        binary: &Path,
        storage_dir: &Path,
        home: &Path,
        cgroups: &[PathBuf],
    ) -> Result<Spec> {
        let (command, _channel) = confinement.command(binary, storage_dir, home, cgroups)?;
        let args: Vec<String> = command
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["__sandbox-exec", RUN_ARG]);
        let (_host, launcher) =
            channel_with(&confinement.spec(binary, storage_dir, home, cgroups)).unwrap();
        Ok(Spec::receive(launcher.as_raw_fd(), false).unwrap().0)
    }

    #[tokio::test]
    async fn the_spec_grants_the_storage_dir_home_and_binary_and_refuses_relative_paths() {
        let mut confinement = Confinement::new(
            Launcher::new("/bin/launcher", ["__sandbox-exec"]),
            "owner-1",
        );
        confinement.read_write.push("/w/abc".into());
        let spec = spec_of(
            &confinement,
            Path::new("/opt/localharness"),
            Path::new("/s/o/abc/save"),
            Path::new("/s/o/abc/home"),
            &[PathBuf::from("/sys/fs/cgroup/agui/p1")],
        )
        .unwrap();
        assert_eq!(spec.cwd, Path::new("/s/o/abc/save"));
        assert_eq!(
            spec.read_write,
            [
                PathBuf::from("/w/abc"),
                "/s/o/abc/save".into(),
                "/s/o/abc/home".into()
            ]
        );
        assert_eq!(spec.read_only, [PathBuf::from("/opt/localharness")]);
        assert_eq!(spec.cgroups, [PathBuf::from("/sys/fs/cgroup/agui/p1")]);
        assert!(!spec.services, "no services: no network beyond loopback");
        confinement.read_write.push("relative/dir".into());
        let err = confinement
            .command(Path::new("/h"), Path::new("/s"), Path::new("/home"), &[])
            .unwrap_err();
        assert!(err.to_string().contains("relative/dir"), "{err}");
    }

    #[tokio::test]
    async fn the_encoders_place_in_home_is_masked_unless_the_encoder_is_wanted() {
        let home = tempfile::tempdir().unwrap();
        crate::keep_webm_encoder_out(&AgentDir::open(home.path()).unwrap()).unwrap();
        let mut confinement =
            Confinement::new(Launcher::new("/bin/launcher", ["__sandbox-exec"]), "t");
        let hidden = |confinement: &Confinement| {
            spec_of(
                confinement,
                Path::new("/opt/localharness"),
                Path::new("/s"),
                home.path(),
                &[],
            )
            .unwrap()
            .hidden
        };
        assert_eq!(hidden(&confinement), [home.path().join(WEBM_ENCODER_DIR)]);
        confinement.webm_encoder = true;
        assert!(hidden(&confinement).is_empty());
    }

    #[test]
    fn confinements_with_the_same_services_compare_equal_and_others_do_not() {
        let services = Services::forward_model_to("127.0.0.1:9".parse().unwrap());
        let launcher = Launcher::new("/l", ["x"]);
        let mut a = Confinement::new(launcher.clone(), "o");
        a.services = Some(services.clone());
        let mut b = Confinement::new(launcher, "o");
        b.services = Some(services);
        assert_eq!(a, b);
        b.services = Some(Services::forward_model_to("127.0.0.1:9".parse().unwrap()));
        assert_ne!(a, b);
    }
}
