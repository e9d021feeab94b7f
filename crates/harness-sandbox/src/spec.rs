//! What the host tells the launcher: the harness to run, what it may reach, its limits. Sent as
//! JSON in the launcher's last argument; every stage reads the same spec.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The port, on the sandbox's own loopback, of the model endpoint the launcher opens and the host
/// serves: the harness's model base URL inside is `http://127.0.0.1:<MODEL_PORT>/…`. A
/// privileged port, so nothing else inside can take it (the sandbox's init binds it before it
/// drops its capabilities).
pub const MODEL_PORT: u16 = 1;

/// The port, on the sandbox's own loopback, of the egress proxy the host serves (the harness's
/// and its commands' `HTTP_PROXY`/`HTTPS_PROXY`).
pub const EGRESS_PORT: u16 = 3128;

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

    /// The self-test's spec: a sandbox like a harness's with nothing granted.
    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn probe() -> Self {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_with_a_relative_or_non_utf8_path_is_refused() {
        let mut spec = Spec::probe();
        assert!(spec.check().is_ok());
        spec.read_write.push("relative/dir".into());
        assert!(spec.check().unwrap_err().contains("relative/dir"));
        spec.read_write.clear();
        spec.cgroups.push("cg".into());
        assert!(spec.check().is_err());
    }
}
