//! Who a sandbox's processes are on the host: [`SandboxIdentity`], never root when the host is.

/// The host identity a sandbox's processes run as, when it is not the host's own (see
/// [`crate::Confinement::run_as`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SandboxIdentity {
    /// The host user id.
    pub uid: u32,
    /// The host group id.
    pub gid: u32,
}

impl SandboxIdentity {
    /// The id a root host runs its sandboxes as unless told otherwise (`nobody`/`nogroup`).
    pub const DEFAULT_ID: u32 = 65534;

    /// `uid` for both the user and the group.
    pub fn same(id: u32) -> Self {
        Self { uid: id, gid: id }
    }
}

/// The identity a host should run its sandboxes as: `Some` (uid and gid
/// [`SandboxIdentity::DEFAULT_ID`]) when this process is root — a sandbox mapped to host root
/// would reach whatever its mounts and Landlock leave open to root — and `None` otherwise (a
/// sandbox then runs as the host's own user, the only one it can map).
pub fn sandbox_identity() -> Option<SandboxIdentity> {
    nix::unistd::geteuid()
        .is_root()
        .then(|| SandboxIdentity::same(SandboxIdentity::DEFAULT_ID))
}
