//! Confining a `localharness` process, so that everything its agent runs — commands and the
//! built-in file tools alike — reaches only what it is given.
//!
//! A confined harness runs in its own user, mount, PID, IPC, UTS and network namespaces:
//!
//! - **Files**: an allow-list view of the system (`/usr` and its links, a few files of `/etc`
//!   that ordinary programs need, certificates, time zones — never the rest of `/etc`), the
//!   directories it is granted (read-write) and any extra paths the operator allows (read-only);
//!   a private, size-limited `/tmp`, its own `/proc` and a minimal `/dev`.
//! - **Network**: only a loopback interface of its own. The host reaches the harness's socket
//!   through the launcher (which connects inside and hands the host the connected socket), and
//!   the harness reaches the model through a listener the launcher opens inside and hands to
//!   the host, who serves it ([`NetworkServices`]); an egress proxy for the agent's web access
//!   is offered the same way. Nothing else goes in or out: no UDP, no other host port, no
//!   listener inside reachable from outside. Sockets are Unix, TCP, UDP or routing netlink
//!   only (seccomp), since Landlock's network rules cover TCP alone (not MPTCP, say).
//! - **The harness out of its commands' reach**: the harness runs under Landlock and a seccomp
//!   filter with every capability dropped; each command it starts (through the shell, which is
//!   the launcher's shell stage) runs in a nested, stricter Landlock domain — it cannot trace,
//!   read the memory of or signal the harness, nor connect to the model listener.
//! - **Identity**: an unprivileged host user, inside 0 of a user namespace that maps nothing
//!   else: the host's own, or, for a host running as root, the one it gives
//!   ([`Confinement::run_as`], [`sandbox_identity`]) — never root.
//! - **Limits**: a cgroup per process where the machine delegates one (pids, memory), a
//!   size-limited `/tmp`, and a file-size limit on commands.
//!
//! The host side — [`Confinement`] (what to grant), [`probe`] (what this machine supports),
//! [`ConfinedLaunch`] (one confined process's start: its cgroup, the launcher and its control
//! channel, in one step), [`SandboxControl`] (the running launcher), [`cgroups`] and the webm-encoder
//! mask — needs no privileges and builds without the `launcher` feature. The **launcher** (feature
//! `launcher`, on by default) is a program: any program that hands its arguments to
//! [`run_if_launcher`] first thing in `main` can be one (`agui-antigravity` is, as
//! `agui-antigravity __sandbox-exec …`). Its stages are fresh executions of that program, so
//! nothing runs in a forked copy of a multi-threaded host: the outer stage builds the namespaces
//! (with `hakoniwa`), the inner stage is the sandbox's PID 1 (brings the loopback up, opens the
//! service listeners, relays the harness's stdio and connects to it for the host, reaps orphans,
//! exits with the harness), the harness stage applies the harness's restrictions and becomes the
//! harness, and the shell stage applies a command's restrictions and becomes the real shell.

mod agent_dir;
pub mod cgroups;
mod confinement;
mod control;
mod encoder;
mod host;
mod identity;
mod launch;
#[cfg(feature = "launcher")]
mod launcher;
mod probe;
mod roots;
mod services;
mod spec;

pub use agent_dir::{AgentDir, DiskUsage, Entry, EntryKind, Refusal, TempName, Walk, WalkEntry};
pub use confinement::{Confinement, Launcher, Limits};
pub use encoder::{WEBM_ENCODER_DIR, keep_out as keep_webm_encoder_out};
pub use host::{SandboxControl, SandboxStdin, SandboxStdout};
pub use identity::{SandboxIdentity, sandbox_identity};
pub use launch::{ConfinedChild, ConfinedLaunch};
#[cfg(feature = "launcher")]
pub use launcher::{launcher_main, run_if_launcher};
pub use probe::{SIMULATE_UNAVAILABLE_ENV, SandboxSupport, probe};
pub use roots::{ClearedRoots, ROOT_PREFIX, clear_stale_roots};
pub use services::{NetworkServices, ProcessLabel, ServiceGrant, Services};
pub use spec::{EGRESS_PORT, MODEL_PORT};

/// Errors of the host side.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The confinement asks for something that cannot be expressed (a relative path, text
    /// that is not UTF-8).
    #[error("invalid sandbox spec: {0}")]
    Spec(String),
    /// An I/O operation of the host side failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An entry below a directory the agent can write was refused rather than followed or
    /// read ([`AgentDir`]): a link, a special file, a file with several links, a bad path.
    #[error("{path}: refused, {why}")]
    Refused {
        /// The entry (for messages).
        path: std::path::PathBuf,
        /// What it is.
        why: Refusal,
    },
    /// The launcher broke the control protocol or went away.
    #[error("the sandbox launcher's control channel: {0}")]
    Channel(String),
    /// A network service of the host refused to serve a new sandbox.
    #[error("the sandbox's {service} service could not start: {reason}")]
    Service {
        /// `model` or `egress`.
        service: &'static str,
        /// Why.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

impl SandboxError {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let action = action.into();
        move |source| Self::Io { action, source }
    }
}
