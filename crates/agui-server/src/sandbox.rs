//! Confinement of the agents' harness processes (`sandbox = "strict" | "off"`): the launcher
//! the `agui-antigravity` binary doubles as (`agui-antigravity __sandbox-exec …`, hidden from
//! `--help`), and what each agent gets from the start-up probe's findings — a confined
//! process per thread, or, where the machine cannot confine, its command and write tools
//! withheld. The mechanism itself is harness-client's [`harness_client::sandbox`].

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

use agui_session::AgentOptions;
use harness_client::sandbox::{Confinement, Launcher, SandboxSupport};
use harness_client::{BuiltinTool, ModelEndpoint, ProcessOptions};
use serde::Serialize;

use crate::config::{SandboxMode, choice_name};

/// The subcommand that makes a program the sandbox launcher.
pub const LAUNCHER_ARG: &str = "__sandbox-exec";

/// Built-in tools withheld where harness processes cannot be confined: they run commands or
/// write files. (The read tools stay, limited by the harness's own workspace check, which
/// cannot be raced without a command or a write.)
pub const UNCONFINABLE_TOOLS: [BuiltinTool; 3] = [
    BuiltinTool::RunCommand,
    BuiltinTool::CreateFile,
    BuiltinTool::EditFile,
];

/// Ports every confined harness may connect to: HTTPS and HTTP (the model, `read_url_content`)
/// and DNS over TCP.
const ALWAYS_OPEN_PORTS: [u16; 3] = [443, 80, 53];

/// This program, when its `main` called [`launcher_if_asked`].
static THIS_PROGRAM: OnceLock<Launcher> = OnceLock::new();

/// Call first thing in `main`, before any thread starts. When the program was started as the
/// sandbox launcher (`<program> __sandbox-exec …`), runs it and returns its exit code (return
/// it from `main`); otherwise records that this program can launch sandboxes for the servers
/// it starts, and returns `None`.
pub fn launcher_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|arg| arg == LAUNCHER_ARG) {
        return Some(harness_client::sandbox::launcher_main(args));
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

/// What the probe says when no launcher is known.
pub(crate) fn no_launcher() -> SandboxSupport {
    SandboxSupport {
        available: false,
        landlock_abi: 0,
        tcp_filter: false,
        reason: Some(
            "this program cannot start the sandbox: its main does not call \
             agui_server::sandbox::launcher_if_asked() and no launcher was given"
                .into(),
        ),
        fix: Some(
            "serve with the agui-antigravity binary, or call launcher_if_asked() first in main \
             (or Server::with_sandbox_launcher)"
                .into(),
        ),
    }
}

/// How an agent's harness processes are confined, as the log and `/capabilities` tell it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// The configured mode (`strict` or `off`).
    pub mode: String,
    /// Each thread's harness process runs confined to the thread's directories.
    pub confined: bool,
    /// Built-in tools withheld because they could not be confined.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub withheld_tools: Vec<String>,
    /// The only TCP ports commands may connect to (absent: every port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_ports: Option<Vec<u16>>,
    /// Why the agent is not (fully) confined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The one setting or install that confines it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What an agent's harness processes may reach beyond their thread's directories.
pub(crate) struct Reach {
    /// Files to hide inside the readable system directories (the configuration file).
    pub(crate) hidden: Vec<PathBuf>,
    /// TCP ports to admit besides the model endpoint's and [`ALWAYS_OPEN_PORTS`].
    pub(crate) extra_ports: Vec<u16>,
}

/// Applies `mode` to an agent: with `strict` and a machine that can confine, its harness
/// processes are confined (one per thread); with `strict` and a machine that cannot, the
/// tools that need confinement are withheld and the harness's workspace check is enforced on
/// the read tools; with `off`, nothing changes.
pub(crate) fn apply(
    mode: SandboxMode,
    support: &SandboxSupport,
    launcher: Option<&Launcher>,
    reach: &Reach,
    options: &mut AgentOptions,
    process: &mut ProcessOptions,
) -> SandboxStatus {
    let mut status = SandboxStatus {
        mode: choice_name(&mode),
        confined: false,
        withheld_tools: Vec::new(),
        tcp_ports: None,
        reason: None,
        fix: None,
    };
    match (mode, launcher) {
        (SandboxMode::Off, _) => {
            status.reason = Some(
                "sandbox = \"off\": commands and file tools run unconfined, as the server's user, \
                 and see everything it can (other threads, the save dir, the server's \
                 environment)"
                    .into(),
            );
            status.fix = Some("set sandbox = \"strict\"".into());
        }
        (SandboxMode::Strict, Some(launcher)) if support.available => {
            let mut confinement = Confinement::new(launcher.clone());
            confinement.hidden = reach.hidden.clone();
            if support.tcp_filter {
                let ports = tcp_ports(&options.endpoint, &reach.extra_ports);
                status.tcp_ports = Some(ports.iter().copied().collect());
                confinement.tcp_connect = Some(ports);
            }
            process.confinement = Some(confinement);
            status.confined = true;
            status.reason = support.reason.clone();
            status.fix = support.fix.clone();
        }
        (SandboxMode::Strict, _) => {
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
        }
    }
    status
}

/// The TCP ports a confined harness may connect to: the model endpoint's (a loopback mock or
/// gateway included), the proxies in the environment, `extra` and [`ALWAYS_OPEN_PORTS`].
fn tcp_ports(endpoint: &ModelEndpoint, extra: &[u16]) -> BTreeSet<u16> {
    let base = match endpoint {
        ModelEndpoint::Gemini { base_url, .. } | ModelEndpoint::Vertex { base_url, .. } => {
            base_url.clone()
        }
        ModelEndpoint::OpenAiCompatible { base_url } => Some(base_url.clone()),
    };
    let proxies = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok());
    base.into_iter()
        .chain(proxies)
        .filter_map(|url| url_port(&url))
        .chain(extra.iter().copied())
        .chain(ALWAYS_OPEN_PORTS)
        .collect()
}

/// The port a URL connects to (explicit, or its scheme's).
fn url_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') && !port.contains(']') => port.parse().ok(),
        _ => None,
    };
    port.or(match scheme.to_ascii_lowercase().as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_urls_or_their_scheme() {
        assert_eq!(url_port("http://127.0.0.1:4011"), Some(4011));
        assert_eq!(url_port("http://127.0.0.1:4011/prefix/x?y"), Some(4011));
        assert_eq!(url_port("https://gw.example/v1"), Some(443));
        assert_eq!(url_port("http://user:pw@proxy:3128"), Some(3128));
        assert_eq!(url_port("http://[::1]:8080/"), Some(8080));
        assert_eq!(url_port("http://[::1]/"), Some(80));
        assert_eq!(url_port("localhost:9"), Some(9));
    }

    #[test]
    fn the_model_port_is_admitted_next_to_the_web_ports() {
        let ports = tcp_ports(
            &ModelEndpoint::gemini("http://127.0.0.1:4011", "k"),
            &[7000],
        );
        for port in [4011, 7000, 443, 80, 53] {
            assert!(ports.contains(&port), "{port} in {ports:?}");
        }
        assert!(!ports.contains(&8027), "not the AG-UI port");
    }

    /// `apply` to a fresh agent: the status, the agent's options and its process options.
    fn applied(
        mode: SandboxMode,
        support: &SandboxSupport,
        launcher: Option<&Launcher>,
    ) -> (SandboxStatus, AgentOptions, ProcessOptions) {
        let reach = Reach {
            hidden: vec!["/etc/agui.toml".into()],
            extra_ports: Vec::new(),
        };
        let mut options =
            AgentOptions::new("m", ModelEndpoint::gemini("http://127.0.0.1:9", "k"), "/d");
        let mut process = ProcessOptions::new("/d/save");
        let status = apply(mode, support, launcher, &reach, &mut options, &mut process);
        (status, options, process)
    }

    #[test]
    fn strict_confines_where_it_can_and_withholds_the_tools_where_it_cannot() {
        let launcher = launcher_at("/bin/agui-antigravity");
        let works = SandboxSupport {
            available: true,
            landlock_abi: 7,
            tcp_filter: true,
            reason: None,
            fix: None,
        };
        let (status, options, process) = applied(SandboxMode::Strict, &works, Some(&launcher));
        assert!(status.confined && status.withheld_tools.is_empty());
        let confinement = process.confinement.expect("confined");
        assert_eq!(confinement.hidden, [PathBuf::from("/etc/agui.toml")]);
        assert!(confinement.tcp_connect.unwrap().contains(&9));
        assert!(options.builtin_tools.contains(&BuiltinTool::RunCommand));

        let (status, options, process) = applied(SandboxMode::Strict, &no_launcher(), None);
        assert!(!status.confined && process.confinement.is_none());
        assert_eq!(
            status.withheld_tools,
            ["run_command", "write_to_file", "replace_file_content"]
        );
        assert!(options.workspace_containment);
        assert!(options.builtin_tools.contains(&BuiltinTool::ViewFile));
        assert!(status.fix.unwrap().contains("sandbox = \"off\""));

        let (status, options, process) = applied(SandboxMode::Off, &works, Some(&launcher));
        assert!(!status.confined && process.confinement.is_none());
        assert!(status.withheld_tools.is_empty() && !options.workspace_containment);
    }
}
