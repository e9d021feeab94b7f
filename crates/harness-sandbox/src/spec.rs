//! What the host tells the launcher: the harness to run, what it may reach, its limits. JSON in a
//! sealed memfd, passed beside the control channel's first message and from stage to stage as a
//! descriptor, never on a command line (which every process of the machine, and every process
//! of the sandbox, can read in `/proc/<pid>/cmdline`).

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};

use crate::identity::SandboxIdentity;

use serde::{Deserialize, Serialize};

/// The port, on the sandbox's own loopback, of the model endpoint the launcher opens and the host
/// serves: the harness's model base URL inside is `http://127.0.0.1:<MODEL_PORT>/…`. A
/// privileged port, so nothing else inside can take it (the sandbox's init binds it before it
/// drops its capabilities).
pub const MODEL_PORT: u16 = 1;

/// The port, on the sandbox's own loopback, of the egress proxy the host serves (the harness's
/// and its commands' `HTTP_PROXY`/`HTTPS_PROXY`).
pub const EGRESS_PORT: u16 = 3128;

/// The argument that starts the launcher on a harness, its spec on the control channel.
pub(crate) const RUN_ARG: &str = "--run";

/// The largest spec a stage reads (a spec lists a few dozen paths).
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// The launcher's instructions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The harness binary.
    pub(crate) program: PathBuf,
    /// Where the harness starts (its storage directory).
    pub(crate) cwd: PathBuf,
    /// Directories it may read and write.
    pub(crate) read_write: Vec<PathBuf>,
    /// Paths it may read besides the system allow-list (the harness binary among them).
    pub(crate) read_only: Vec<PathBuf>,
    /// Paths inside readable directories it must not see: masked.
    pub(crate) hidden: Vec<PathBuf>,
    /// Open the model and egress listeners and hand them to the host.
    pub(crate) services: bool,
    /// The size of the private `/tmp`, in bytes.
    pub(crate) tmp_bytes: u64,
    /// The largest file a command may write, in bytes (`RLIMIT_FSIZE`).
    pub(crate) file_bytes: Option<u64>,
    /// Cgroup directories the sandbox joins before it starts (one per hierarchy), created and
    /// limited by the host.
    pub(crate) cgroups: Vec<PathBuf>,
    /// The host identity the sandbox runs as; `None`: the launcher's own.
    #[serde(default)]
    pub(crate) run_as: Option<SandboxIdentity>,
    /// The launcher's self-test: report what took effect instead of starting `program`.
    #[serde(default)]
    pub(crate) probe: bool,
}

impl Spec {
    /// Every path absolute and valid UTF-8 (the mount helpers take text).
    pub(crate) fn check(&self) -> Result<(), String> {
        let paths = [&self.program, &self.cwd]
            .into_iter()
            .chain(&self.read_write)
            .chain(&self.read_only)
            .chain(&self.hidden)
            .chain(&self.cgroups);
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

    /// The spec in a new memfd, sealed against every change.
    pub(crate) fn to_memfd(&self) -> Result<OwnedFd, String> {
        let json = serde_json::to_vec(self).map_err(|e| format!("cannot encode the spec: {e}"))?;
        let fd = memfd_create(
            c"agui-sandbox-spec",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )
        .map_err(|e| format!("cannot make the spec's memfd: {e}"))?;
        let file = File::from(fd);
        file.write_all_at(&json, 0)
            .map_err(|e| format!("cannot write the spec's memfd: {e}"))?;
        let seals = SealFlag::F_SEAL_SEAL
            | SealFlag::F_SEAL_SHRINK
            | SealFlag::F_SEAL_GROW
            | SealFlag::F_SEAL_WRITE;
        fcntl(&file, FcntlArg::F_ADD_SEALS(seals))
            .map_err(|e| format!("cannot seal the spec's memfd: {e}"))?;
        Ok(file.into())
    }

    /// The spec in `fd` (a memfd of [`Spec::to_memfd`]), checked. Reads by position, so the
    /// stages sharing the descriptor's offset do not disturb each other.
    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn from_fd(fd: BorrowedFd<'_>) -> Result<Self, String> {
        let file = File::from(
            fd.try_clone_to_owned()
                .map_err(|e| format!("cannot read the spec: {e}"))?,
        );
        let len = file
            .metadata()
            .map_err(|e| format!("cannot read the spec: {e}"))?
            .len();
        if len > MAX_SPEC_BYTES {
            return Err(format!("the spec is too large ({len} bytes)"));
        }
        let mut json = vec![0u8; usize::try_from(len).map_err(|e| e.to_string())?];
        file.read_exact_at(&mut json, 0)
            .map_err(|e| format!("cannot read the spec: {e}"))?;
        let spec: Self = serde_json::from_slice(&json).map_err(|e| format!("bad spec: {e}"))?;
        spec.check()?;
        Ok(spec)
    }

    /// Sends the spec as the control channel's first message, from the host's end `socket`.
    pub(crate) fn send(&self, socket: BorrowedFd<'_>) -> Result<(), String> {
        let memfd = self.to_memfd()?;
        crate::control::send(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            &crate::control::ToLauncher::Spec.encode(),
            Some(memfd.as_fd()),
        )
        .map_err(|e| format!("cannot send the spec to the launcher: {e}"))
    }

    /// The spec the host sent on the control channel `socket` (the launcher's stdin), and its
    /// memfd; `peek` leaves the message for the next stage.
    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn receive(socket: RawFd, peek: bool) -> Result<(Self, OwnedFd), String> {
        let received = if peek {
            crate::control::peek(socket)
        } else {
            crate::control::receive(socket)
        };
        let (packet, mut fds) = received
            .map_err(|e| format!("cannot read the spec from the control channel: {e}"))?
            .ok_or("the control channel closed before the spec came")?;
        match crate::control::ToLauncher::decode(&packet) {
            Ok(crate::control::ToLauncher::Spec) => {}
            _ => return Err("the control channel's first message is not the spec".into()),
        }
        let fd = fds.pop().ok_or("the spec came without its memfd")?;
        Ok((Self::from_fd(fd.as_fd())?, fd))
    }

    /// The self-test's spec: a sandbox like a harness's with nothing granted, run as `run_as`.
    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn probe(run_as: Option<SandboxIdentity>) -> Self {
        Self {
            program: PathBuf::from("/"),
            cwd: PathBuf::from("/"),
            read_write: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            services: false,
            tmp_bytes: 1 << 20,
            file_bytes: None,
            cgroups: Vec::new(),
            run_as,
            probe: true,
        }
    }
}

/// What the launcher's self-test writes to stdout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProbeReport {
    /// The sandbox's first process was PID 1 of a new PID namespace.
    pub(crate) pid_namespace: bool,
    /// The sandbox has a network of its own with a working loopback interface.
    pub(crate) private_network: bool,
    /// The Landlock ABI offered by the kernel (0: none).
    pub(crate) landlock_abi: u8,
    /// Whether the harness's Landlock rules took effect: `fully`, `partially` or `not`.
    pub(crate) landlock: String,
    /// A command's nested Landlock domain took effect (it cannot trace the harness).
    pub(crate) nested_domain: bool,
    /// The seccomp filters could be installed.
    pub(crate) seccomp: bool,
    /// Every capability was dropped.
    pub(crate) capabilities_dropped: bool,
    /// The host user id the sandbox's processes ran as, from their `/proc/self/uid_map`.
    #[serde(default)]
    pub(crate) host_uid: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_with_a_relative_or_non_utf8_path_is_refused() {
        let mut spec = Spec::probe(None);
        assert!(spec.check().is_ok());
        spec.read_write.push("relative/dir".into());
        assert!(spec.check().unwrap_err().contains("relative/dir"));
        spec.read_write.clear();
        spec.cgroups.push("cg".into());
        assert!(spec.check().is_err());
    }

    #[test]
    fn a_spec_travels_in_a_sealed_memfd_beside_the_channels_first_message() {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        use std::os::fd::AsRawFd as _;
        let (host, launcher) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let mut spec = Spec::probe(None);
        spec.read_write.push("/w/tree".into());
        spec.send(host.as_fd()).unwrap();
        // Peeked by one stage, then received by the next: the same spec both times.
        let (peeked, fd) = Spec::receive(launcher.as_raw_fd(), true).unwrap();
        assert_eq!(peeked, spec);
        let (received, _) = Spec::receive(launcher.as_raw_fd(), false).unwrap();
        assert_eq!(received, spec);
        // Sealed: no stage can change what the next one reads.
        let file = File::from(fd);
        assert!(file.write_all_at(b"{}", 0).is_err());
        assert!(file.set_len(0).is_err());
        assert_eq!(Spec::from_fd(file.as_fd()).unwrap(), spec);
    }
}
