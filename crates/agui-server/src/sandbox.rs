//! Confinement of the agents' harness processes (`sandbox = "owner" | "thread" | "off"`): the
//! launcher the `agui-antigravity` binary doubles as (`agui-antigravity __sandbox-exec …`,
//! hidden from `--help`), the services each sandbox reaches (the model proxy, the egress
//! proxy), and what each agent gets from the start-up probe's findings — confined processes
//! per owner or per thread, or, where the machine cannot confine, its command and write tools
//! withheld. The mechanism itself is the `harness-sandbox` crate ([`harness_client::sandbox`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use agui_session::{AgentOptions, Isolation};
use harness_client::sandbox::{
    Confinement, Launcher, Limits, NetworkServices, ProcessLabel, SandboxIdentity, SandboxSupport,
    ServiceGrant, Services, cgroups,
};
use harness_client::{BuiltinTool, ProcessOptions};
use serde::Serialize;

use crate::choices::{SandboxMode, choice_name};
use crate::egress::EgressProxy;
use crate::error::{ConfigProblem, ServerError};
use crate::model_proxy::ModelChannel;

/// The subcommand that makes a program the sandbox launcher.
pub(crate) const LAUNCHER_ARG: &str = "__sandbox-exec";

/// Built-in tools withheld where harness processes cannot be confined: they run commands or
/// write files. (The read tools stay, limited by the harness's own workspace check, which
/// cannot be raced without a command or a write.)
pub(crate) const UNCONFINABLE_TOOLS: [BuiltinTool; 3] = [
    BuiltinTool::RunCommand,
    BuiltinTool::CreateFile,
    BuiltinTool::EditFile,
];

/// This program, when its `main` called [`launcher_if_asked`].
static THIS_PROGRAM: OnceLock<Launcher> = OnceLock::new();

/// Call first thing in `main`, before any thread starts. When the program was started as a
/// stage of the sandbox launcher (`<program> __sandbox-exec …`, or as the sandbox's shell),
/// runs it and returns its exit code (return it from `main`); otherwise records that this
/// program can launch sandboxes for the servers it starts, and returns `None`.
pub fn launcher_if_asked() -> Option<ExitCode> {
    if let Some(code) = harness_client::sandbox::run_if_launcher(LAUNCHER_ARG) {
        return Some(code);
    }
    if let Ok(program) = std::env::current_exe() {
        let _ = THIS_PROGRAM.set(launcher_at(program));
    }
    None
}

/// A `main` for programs that serve agents: runs the launcher when asked to (see
/// [`launcher_if_asked`]), otherwise `serve` on a multi-threaded runtime started afterwards.
pub fn main<F>(serve: impl FnOnce() -> F) -> ExitCode
where
    F: std::future::Future<Output = ExitCode>,
{
    if let Some(code) = launcher_if_asked() {
        return code;
    }
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(serve()),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The launcher of a program at `program` whose `main` calls [`launcher_if_asked`], such as
/// the `agui-antigravity` binary.
pub fn launcher_at(program: impl Into<PathBuf>) -> Launcher {
    Launcher::new(program, [LAUNCHER_ARG])
}

/// The launcher [`launcher_if_asked`] registered, if this program called it.
pub(crate) fn registered_launcher() -> Option<Launcher> {
    THIS_PROGRAM.get().cloned()
}

/// The start-up error of an agent that must be confined by a program that cannot launch
/// sandboxes: it names the fix.
pub(crate) fn no_launcher(path: &str, mode: SandboxMode) -> ServerError {
    ServerError::config(
        ConfigProblem::NoSandboxLauncher,
        format!(
            "the agent at `{path}` has sandbox = \"{}\", but this program cannot start sandboxes: call \
         `agui_server::sandbox::launcher_if_asked()` first in `main` (or use \
         `agui_server::sandbox::main`, or `Server::with_sandbox_launcher`), or set \
         sandbox = \"off\" for agents of trusted users",
            choice_name(&mode)
        ),
    )
}

/// How an agent's harness processes are confined, as the log and `/capabilities` tell it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SandboxStatus {
    /// The configured mode (`owner`, `thread` or `off`).
    pub mode: String,
    /// Which threads share a harness process: `owner` (an owner's threads), `thread` (none),
    /// `shared` (every thread of the agent).
    pub isolation: String,
    /// The harness processes run confined.
    pub confined: bool,
    /// The confined network: loopback only, the model and the egress proxy through the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The hosts the egress proxy lets the agent reach (empty: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress_allow: Vec<String>,
    /// The limits of each confined process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsStatus>,
    /// Commands cannot trace, read the memory of or signal their harness.
    pub commands_isolated: bool,
    /// Built-in tools withheld because they could not be confined.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld_tools: Vec<String>,
    /// Why the agent is not (fully) confined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The one setting or install that confines it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl SandboxStatus {
    /// The agent was to be confined (`owner` or `thread`) but the machine cannot confine it:
    /// its command and write tools are withheld.
    pub(crate) fn is_unavailable(&self) -> bool {
        self.mode != choice_name(&SandboxMode::Off) && !self.confined
    }
}

/// The limits of a confined process, as `/capabilities` tells them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LimitsStatus {
    /// Processes and threads at most, when a cgroup applies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// Memory at most, in bytes, when a cgroup applies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The size of its `/tmp`.
    pub tmp_bytes: u64,
    /// The largest file a command may write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_bytes: Option<u64>,
    /// The cgroup version the process and memory limits use; absent when none applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups: Option<String>,
    /// Why the process and memory limits do not apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups_unavailable: Option<String>,
}

/// What an agent's confined harnesses may reach and use, from its settings.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    /// Files to hide inside the readable system view (the configuration file, key files).
    pub(crate) hidden: Vec<PathBuf>,
    /// Extra paths its harnesses may read (`sandbox_ro_paths`).
    pub(crate) read_only: Vec<PathBuf>,
    /// The hosts its egress proxy allows, as written.
    pub(crate) egress_allow: Vec<String>,
    /// Its processes' limits (the cgroup parent filled in from the machine).
    pub(crate) limits: Limits,
}

/// The machine's findings, made once at start-up.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) support: SandboxSupport,
    /// Where process cgroups go, or why there are none.
    pub(crate) cgroups: Result<cgroups::Parent, String>,
    /// The host identity confined processes run as (`None`: the server's own).
    pub(crate) run_as: Option<SandboxIdentity>,
}

/// The host identity confined harness processes run as: with the server as root, `sandbox_uid`
/// (its default, [`crate::defaults::SANDBOX_UID`], when unset) for both the user and the group,
/// or root itself for `0`; otherwise the server's own user (`None`), the only one its sandboxes
/// can be.
pub(crate) fn identity(sandbox_uid: Option<u32>) -> Option<SandboxIdentity> {
    if harness_client::sandbox::sandbox_identity().is_none() {
        if let Some(uid) = sandbox_uid {
            tracing::warn!(
                sandbox_uid = uid,
                "sandbox_uid is ignored: the server does not run as root, and its confined harness processes run as its own user"
            );
        }
        return None;
    }
    match sandbox_uid.unwrap_or(crate::defaults::SANDBOX_UID) {
        0 => {
            tracing::warn!(
                "SANDBOX AS ROOT: sandbox_uid = 0 runs confined harness processes as the host's root user; only read-only mounts and Landlock keep them off root's files (set a sandbox_uid no other process uses)"
            );
            None
        }
        uid => Some(SandboxIdentity::same(uid)),
    }
}

/// The services an agent's sandboxes reach: its model, its egress proxy.
struct AgentServices {
    model: ModelChannel,
    egress: Arc<EgressProxy>,
}

impl NetworkServices for AgentServices {
    fn model(
        &self,
        listener: std::net::TcpListener,
        process: &ProcessLabel,
    ) -> Result<ServiceGrant, String> {
        self.model.serve(listener, &process.0)
    }

    fn egress(
        &self,
        listener: std::net::TcpListener,
        process: &ProcessLabel,
    ) -> Result<ServiceGrant, String> {
        self.egress.serve(listener, &process.0)
    }
}

/// Applies `mode` to an agent: with `owner` or `thread` and a machine that can confine, its
/// harness processes are confined (per owner or per thread) and reach the model and the web
/// only through `model` and `egress`; with those modes and a machine that cannot, the tools
/// that need confinement are withheld, the harness's workspace check is enforced on the read
/// tools and threads share processes; with `off`, threads share unconfined processes. Returns
/// the status and the isolation of its backend.
pub(crate) fn apply(
    mode: SandboxMode,
    machine: &Machine,
    launcher: &Launcher,
    reach: &Reach,
    (model, egress): (ModelChannel, Arc<EgressProxy>),
    options: &mut AgentOptions,
    process: &mut ProcessOptions,
) -> (SandboxStatus, Isolation) {
    let support = &machine.support;
    let mut status = SandboxStatus {
        mode: choice_name(&mode),
        isolation: "shared".into(),
        confined: false,
        network: None,
        egress_allow: Vec::new(),
        limits: None,
        commands_isolated: false,
        withheld_tools: Vec::new(),
        reason: None,
        fix: None,
    };
    let isolation = match mode {
        SandboxMode::Owner => Isolation::Owner,
        SandboxMode::Thread => Isolation::Thread,
        SandboxMode::Off => {
            status.reason = Some(
                "sandbox = \"off\": commands and file tools run unconfined, as the server's user, \
                 and see everything it can (other threads and owners, the save dir, the \
                 server's environment and network)"
                    .into(),
            );
            status.fix = Some("set sandbox = \"owner\"".into());
            return (status, Isolation::Shared);
        }
    };
    if !support.available {
        for tool in UNCONFINABLE_TOOLS {
            if options.builtin_tools.remove(&tool) {
                status.withheld_tools.push(tool.model_name().to_owned());
            }
        }
        options.workspace_containment = true;
        status.reason = support.reason.clone();
        status.fix = Some(format!(
            "{} (or set sandbox = \"off\" to run them unconfined)",
            support
                .fix
                .clone()
                .unwrap_or_else(|| "make the sandbox available".into())
        ));
        return (status, Isolation::Shared);
    }
    let mut confinement = Confinement::new(launcher.clone(), "");
    confinement.hidden = reach.hidden.clone();
    confinement.read_only = reach.read_only.clone();
    confinement.services = Some(Services(Arc::new(AgentServices { model, egress })));
    confinement.limits = reach.limits.clone();
    let (cgroup_version, cgroups_unavailable) = match &machine.cgroups {
        Ok(parent) => {
            confinement.limits.cgroups = Some(parent.clone());
            (Some(parent.version().to_owned()), None)
        }
        Err(why) => (None, Some(why.clone())),
    };
    confinement.run_as = machine.run_as;
    process.confinement = Some(confinement);
    status.isolation = match isolation {
        Isolation::Owner => "owner",
        Isolation::Thread => "thread",
        Isolation::Shared => "shared",
    }
    .into();
    status.confined = true;
    status.network = Some(
        "private: a loopback of its own; the model and the egress proxy through the server".into(),
    );
    status.egress_allow = reach.egress_allow.clone();
    let applied = cgroup_version.is_some();
    status.limits = Some(LimitsStatus {
        pids: reach.limits.pids.filter(|_| applied),
        memory_bytes: reach.limits.memory_bytes.filter(|_| applied),
        tmp_bytes: reach.limits.tmp_bytes,
        file_bytes: reach.limits.file_bytes,
        cgroups: cgroup_version,
        cgroups_unavailable,
    });
    status.commands_isolated = support.commands_isolated;
    status.reason = support.reason.clone();
    status.fix = support.fix.clone();
    (status, isolation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn works() -> Machine {
        Machine {
            support: SandboxSupport {
                available: true,
                landlock_abi: 7,
                commands_isolated: true,
                seccomp: true,
                reason: None,
                fix: None,
            },
            cgroups: Err("no cgroups here".into()),
            run_as: None,
        }
    }

    fn unavailable() -> Machine {
        Machine {
            support: SandboxSupport {
                available: false,
                landlock_abi: 0,
                commands_isolated: false,
                seccomp: false,
                reason: Some("no user namespaces".into()),
                fix: Some("sysctl".into()),
            },
            cgroups: Err("no cgroups here".into()),
            run_as: None,
        }
    }

    /// `apply` to a fresh agent: the status, isolation, the agent's options and process options.
    async fn applied(
        mode: SandboxMode,
        machine: &Machine,
    ) -> (SandboxStatus, Isolation, AgentOptions, ProcessOptions) {
        let reach = Reach {
            hidden: vec!["/etc/agui.toml".into()],
            read_only: vec!["/opt/data".into()],
            egress_allow: vec!["pypi.org".into()],
            limits: Limits::default(),
        };
        let proxy = crate::model_proxy::ModelProxy::start(0).await.unwrap();
        let endpoint = harness_client::ModelEndpoint::gemini("http://127.0.0.1:9", "k");
        let (_, channel) = proxy
            .register(
                "a",
                &endpoint,
                &Default::default(),
                Default::default(),
                Default::default(),
            )
            .unwrap();
        let mut options = AgentOptions::new("m", endpoint, "/d");
        let mut process = ProcessOptions::new("/d/save");
        let (status, isolation) = apply(
            mode,
            machine,
            &launcher_at("/bin/agui-antigravity"),
            &reach,
            (channel, EgressProxy::new("a", Vec::new())),
            &mut options,
            &mut process,
        );
        (status, isolation, options, process)
    }

    #[tokio::test]
    async fn owner_confines_per_owner_where_it_can_and_says_why_limits_do_not_apply() {
        let (status, isolation, options, process) = applied(SandboxMode::Owner, &works()).await;
        assert_eq!(isolation, Isolation::Owner);
        assert!(status.confined && status.withheld_tools.is_empty() && status.commands_isolated);
        let confinement = process.confinement.expect("confined");
        assert_eq!(confinement.hidden, [PathBuf::from("/etc/agui.toml")]);
        assert_eq!(confinement.read_only, [PathBuf::from("/opt/data")]);
        assert!(confinement.services.is_some());
        assert!(options.builtin_tools.contains(&BuiltinTool::RunCommand));
        let limits = status.limits.unwrap();
        assert_eq!(limits.cgroups, None);
        assert_eq!(
            limits.pids, None,
            "no cgroup: the pids limit is not claimed"
        );
        assert_eq!(
            limits.cgroups_unavailable.as_deref(),
            Some("no cgroups here")
        );
        assert_eq!(status.egress_allow, ["pypi.org"]);
    }

    #[tokio::test]
    async fn thread_isolates_per_thread() {
        let (status, isolation, _, process) = applied(SandboxMode::Thread, &works()).await;
        assert_eq!(isolation, Isolation::Thread);
        assert_eq!(status.isolation, "thread");
        assert!(process.confinement.is_some());
    }

    #[tokio::test]
    async fn where_the_machine_cannot_confine_the_tools_are_withheld_and_processes_shared() {
        let (status, isolation, options, process) =
            applied(SandboxMode::Owner, &unavailable()).await;
        assert_eq!(isolation, Isolation::Shared);
        assert!(!status.confined && process.confinement.is_none());
        assert_eq!(
            status.withheld_tools,
            ["run_command", "write_to_file", "replace_file_content"]
        );
        assert!(options.workspace_containment);
        assert!(options.builtin_tools.contains(&BuiltinTool::ViewFile));
        assert!(status.fix.unwrap().contains("sandbox = \"off\""));
    }

    #[test]
    fn a_root_server_runs_its_sandboxes_as_sandbox_uid_and_another_as_itself() {
        if harness_client::sandbox::sandbox_identity().is_some() {
            assert_eq!(identity(None), Some(SandboxIdentity::same(65534)));
            assert_eq!(identity(Some(4321)), Some(SandboxIdentity::same(4321)));
            assert_eq!(identity(Some(0)), None, "0: root, as asked");
        } else {
            assert_eq!(identity(None), None);
            assert_eq!(identity(Some(4321)), None, "ignored: only root can");
        }
    }

    #[tokio::test]
    async fn the_confinement_runs_as_the_machines_identity() {
        let mut machine = works();
        machine.run_as = Some(SandboxIdentity::same(4321));
        let (_, _, _, process) = applied(SandboxMode::Owner, &machine).await;
        assert_eq!(
            process.confinement.and_then(|c| c.run_as),
            Some(SandboxIdentity::same(4321))
        );
    }

    #[tokio::test]
    async fn off_shares_unconfined_processes() {
        let (status, isolation, options, process) = applied(SandboxMode::Off, &works()).await;
        assert_eq!(isolation, Isolation::Shared);
        assert!(!status.confined && process.confinement.is_none());
        assert!(status.withheld_tools.is_empty() && !options.workspace_containment);
    }
}
