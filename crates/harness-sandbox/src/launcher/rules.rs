//! The restrictions of the harness and of its commands: Landlock domains (the command's nested
//! in the harness's, so it can neither trace, read the memory of nor signal the harness), a
//! seccomp filter, no capabilities.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use serde::{Deserialize, Serialize};

use crate::spec::{EGRESS_PORT, MODEL_PORT, Spec};

/// The newest Landlock ABI these rules know; older kernels get what they support.
const ABI_USED: ABI = ABI::V6;

/// What a command may do: set by the harness stage in the harness's environment (under
/// [`COMMAND_RULES_ENV`]), read by the shell stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CommandRules {
    /// Directories it may write (the harness's, `/tmp` and `/dev` included).
    pub(super) writable: Vec<PathBuf>,
    /// TCP ports it may connect to on the sandbox's loopback (the egress proxy's).
    pub(super) connect: Vec<u16>,
    /// The largest file it may write.
    pub(super) file_bytes: Option<u64>,
}

/// The variable carrying [`CommandRules`] from the harness stage to the shell stage.
pub(super) const COMMAND_RULES_ENV: &str = "AGUI_SANDBOX_COMMAND_RULES";

impl CommandRules {
    pub(super) fn for_spec(spec: &Spec) -> Self {
        Self {
            writable: writable(spec),
            connect: if spec.services {
                vec![EGRESS_PORT]
            } else {
                Vec::new()
            },
            file_bytes: spec.file_bytes,
        }
    }
}

/// The probe's command rules.
pub(super) fn command_rules_for_probe() -> Result<CommandRules, String> {
    Ok(CommandRules::for_spec(&Spec::probe(None)))
}

fn writable(spec: &Spec) -> Vec<PathBuf> {
    spec.read_write
        .iter()
        .cloned()
        .chain([PathBuf::from("/tmp"), PathBuf::from("/dev")])
        .collect()
}

/// Puts this process in the harness's domain: everything visible readable, its directories,
/// `/tmp` and `/dev` writable; TCP connections only to the model and egress listeners; no
/// signals or abstract Unix sockets beyond the sandbox. (The mount namespace is the boundary
/// for files; this is a second one, and it also forbids remounting.)
pub(super) fn harness_domain(spec: &Spec) -> Result<RestrictionStatus, String> {
    let ports = if spec.services {
        vec![MODEL_PORT, EGRESS_PORT]
    } else {
        Vec::new()
    };
    restrict(&writable(spec), &ports)
}

/// Puts this process (a command) in a domain nested in the harness's: the same files, TCP
/// connections only to the egress proxy. Being nested, it cannot trace or signal the harness.
pub(super) fn command_domain(rules: &CommandRules) -> Result<RestrictionStatus, String> {
    restrict(&rules.writable, &rules.connect)
}

fn restrict(writable: &[PathBuf], connect: &[u16]) -> Result<RestrictionStatus, String> {
    let fail = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut created = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(fail)?
        .handle_access(AccessNet::ConnectTcp)
        .map_err(fail)?
        .scope(Scope::from_all(ABI_USED))
        .map_err(fail)?
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_USED)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(
            writable
                .iter()
                .map(PathBuf::as_path)
                .filter(|p| Path::exists(p)),
            AccessFs::from_all(ABI_USED),
        ))
        .map_err(fail)?;
    for port in connect {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(fail)?;
    }
    created.restrict_self().map_err(fail)
}

/// The Landlock ABI the kernel offers, as a number (0: none).
pub(super) fn abi_number(status: &RestrictionStatus) -> u8 {
    match status.landlock {
        landlock::LandlockStatus::Available { effective_abi, .. } => {
            // The ABI's name is `V<n>`.
            format!("{effective_abi:?}")
                .trim_start_matches('V')
                .parse()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

/// `fully`, `partially` or `not`.
pub(super) fn status_name(status: &RestrictionStatus) -> &'static str {
    match status.ruleset {
        RulesetStatus::FullyEnforced => "fully",
        RulesetStatus::PartiallyEnforced => "partially",
        RulesetStatus::NotEnforced => "not",
    }
}

/// System calls neither the harness nor a command needs, each a way around the sandbox or a
/// kernel attack surface: tracing and other processes' memory, namespaces and mounts, kernel
/// keys, BPF, perf events, userfaultfd, io_uring, modules, kexec, swap, reboot, accounting,
/// quotas, handles to files outside the view, raw I/O ports.
fn denied_syscalls() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_open_by_handle_at,
        libc::SYS_syslog,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm]);
    calls
}

/// Address families a socket may have: Unix sockets (any type), IPv4 and IPv6 (see
/// [`INET_TYPES`] and [`INET_PROTOCOLS`]) and routing netlink (see [`NETLINK_PROTOCOLS`]).
const SOCKET_FAMILIES: &[u64] = &[
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
    libc::AF_NETLINK as u64,
];

/// The families whose type and protocol are checked against [`INET_TYPES`] and
/// [`INET_PROTOCOLS`].
const INET_FAMILIES: &[u64] = &[libc::AF_INET as u64, libc::AF_INET6 as u64];

/// Socket types an IPv4 or IPv6 socket may have (after `SOCK_NONBLOCK`/`SOCK_CLOEXEC` are masked
/// off): no raw sockets, no `SOCK_SEQPACKET` (SCTP).
const INET_TYPES: &[u64] = &[libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64];

/// Protocols an IPv4 or IPv6 socket may ask for: the default, TCP and UDP. Not MPTCP (262),
/// which Landlock's TCP rules do not cover, nor SCTP, UDP-Lite or ICMP.
const INET_PROTOCOLS: &[u64] = &[0, libc::IPPROTO_TCP as u64, libc::IPPROTO_UDP as u64];

/// Netlink protocols a socket may ask for: `NETLINK_ROUTE` alone, which the C library's
/// `getifaddrs` (Node's `os.networkInterfaces`, `if_nameindex`) and `getaddrinfo` with
/// `AI_ADDRCONFIG` read the sandbox's own interfaces with; changing them needs a capability
/// nothing inside has.
const NETLINK_PROTOCOLS: &[u64] = &[libc::NETLINK_ROUTE as u64];

/// `socket`'s type argument: the type, below the flags.
const SOCK_TYPE_MASK: u64 = 0xf;

/// A condition on the low 32 bits of argument `arg` (the `int` the kernel reads).
fn arg(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| format!("seccomp: {e}"))
}

/// A rule matching when argument `index` is none of `allowed`.
fn none_of(
    first: Vec<SeccompCondition>,
    index: u8,
    allowed: &[u64],
) -> Result<SeccompRule, String> {
    let mut conditions = first;
    for value in allowed {
        conditions.push(arg(index, SeccompCmpOp::Ne, *value)?);
    }
    SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
}

/// The sockets refused with `EAFNOSUPPORT` (as on a kernel without the family, which programs
/// fall back from): `socket` of a family not in [`SOCKET_FAMILIES`], `socketpair` of any but
/// `AF_UNIX`.
fn refused_families() -> Result<std::collections::BTreeMap<i64, Vec<SeccompRule>>, String> {
    Ok([
        (
            libc::SYS_socket,
            vec![none_of(Vec::new(), 0, SOCKET_FAMILIES)?],
        ),
        (
            libc::SYS_socketpair,
            vec![none_of(Vec::new(), 0, &[libc::AF_UNIX as u64])?],
        ),
    ]
    .into_iter()
    .collect())
}

/// The sockets of an allowed family refused with `EPROTONOSUPPORT` (as for a protocol the kernel
/// lacks: Go, for one, then falls back from MPTCP to TCP): IPv4 and IPv6 of a type not in
/// [`INET_TYPES`] or a protocol not in [`INET_PROTOCOLS`], netlink of a protocol not in
/// [`NETLINK_PROTOCOLS`].
fn refused_protocols() -> Result<std::collections::BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules = Vec::new();
    for family in INET_FAMILIES {
        let is_family = || arg(0, SeccompCmpOp::Eq, *family);
        // No "masked not-equal": each refused type is its own rule.
        for kind in (0..=SOCK_TYPE_MASK).filter(|kind| !INET_TYPES.contains(kind)) {
            let of_kind = arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?;
            rules.push(
                SeccompRule::new(vec![is_family()?, of_kind])
                    .map_err(|e| format!("seccomp: {e}"))?,
            );
        }
        rules.push(none_of(vec![is_family()?], 2, INET_PROTOCOLS)?);
    }
    rules.push(none_of(
        vec![arg(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?],
        2,
        NETLINK_PROTOCOLS,
    )?);
    Ok([(libc::SYS_socket, rules)].into_iter().collect())
}

/// Installs the seccomp filters: [`denied_syscalls`] fail with `EPERM`, `clone` creating a user
/// namespace too; `clone3` fails with `ENOSYS` (its flags cannot be inspected; C libraries then
/// fall back to `clone`); sockets outside the allow-list fail with `EAFNOSUPPORT`
/// ([`refused_families`]) or `EPROTONOSUPPORT` ([`refused_protocols`]). Everything else is
/// allowed.
pub(super) fn install_seccomp() -> Result<(), String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: {e:?}"))?;
    let fail = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = denied_syscalls()
        .into_iter()
        .map(|call| (call, Vec::new()))
        .collect();
    let new_user = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_NEWUSER as u64),
        libc::CLONE_NEWUSER as u64,
    )
    .map_err(fail)?;
    rules.insert(
        libc::SYS_clone,
        vec![SeccompRule::new(vec![new_user]).map_err(fail)?],
    );
    let refusing = |rules, errno: i32| {
        SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(fail)
    };
    let filters = [
        refusing(rules, libc::EPERM)?,
        refusing(
            [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
            libc::ENOSYS,
        )?,
        refusing(refused_families()?, libc::EAFNOSUPPORT)?,
        refusing(refused_protocols()?, libc::EPROTONOSUPPORT)?,
    ];
    for filter in filters {
        let program: BpfProgram = filter.try_into().map_err(fail)?;
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
    }
    Ok(())
}

/// Drops every capability (the bounding set too, so nothing it starts gets any on exec); true
/// when none is left.
pub(super) fn drop_capabilities() -> Result<bool, String> {
    use caps::CapSet;
    let fail = |e: caps::errors::CapsError| format!("dropping capabilities: {e}");
    for set in [
        CapSet::Ambient,
        CapSet::Bounding,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(fail)?;
    }
    let left = [CapSet::Effective, CapSet::Permitted, CapSet::Bounding]
        .into_iter()
        .map(|set| caps::read(None, set).map(|s| s.len()).unwrap_or(1))
        .sum::<usize>();
    Ok(left == 0)
}
