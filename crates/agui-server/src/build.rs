//! Turning configuration into running agents: options, model endpoints, harness pools and the
//! demo model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agui_session::{Agent, AgentOptions, Backend, ConcurrentRuns, ToolRegistry};
use harness_client::sandbox::{Launcher, Limits, cgroups};
use harness_client::{
    BuiltinTool, DEFAULT_IMAGE_MODEL, HarnessPool, ModelEndpoint, PoolOptions, ProcessOptions,
    SystemInstructions,
};

use crate::config::{
    AgentSettings, SandboxMode, ServerConfig, SystemInstructionsMode, builtin_tools, choice_name,
    slug,
};
use crate::egress::{AllowedHost, EgressProxy};
use crate::error::{ConfigProblem, ServerError};
use crate::model_proxy::{self, CallLimits, ModelProxy};
use crate::sandbox::{Machine, SandboxStatus};
use crate::{defaults, demo, sandbox};

/// An agent mounted at a path.
#[derive(Debug, Clone)]
pub struct MountedAgent {
    /// Mount path (`/` or `/a/b`).
    pub path: String,
    /// The agent.
    pub agent: Agent,
    /// Served by the demo model.
    pub demo: bool,
    /// How its harness processes are confined.
    pub(crate) sandbox: SandboxStatus,
    /// What one identity may have.
    pub(crate) owner_limits: OwnerLimits,
}

/// What one identity (an `auth_tokens` name, a proxy's user) may have of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnerLimits {
    /// Threads it may create.
    pub max_threads: usize,
    /// Runs (and connects) it may have in flight at once.
    pub max_runs: usize,
}

/// Everything the configured agents run on; keep it alive while serving.
pub struct Runtime {
    /// The agents, in mount order.
    pub agents: Vec<MountedAgent>,
    /// The embedded demo model, when an agent uses it.
    #[expect(dead_code, reason = "held, not read: dropping it stops the demo model")]
    pub(crate) demo_model: Option<gemini_script::Handle>,
    /// The harnesses' model endpoint, which holds the real keys.
    pub(crate) model_proxy: ModelProxy,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Closes every session (checkpointing conversations) and stops every harness, then the
    /// model proxy.
    pub async fn shutdown(&self) {
        let stops = self.agents.iter().map(|a| a.agent.shutdown());
        futures_util::future::join_all(stops).await;
        self.model_proxy.stop();
    }

    /// The loopback address every harness sends its model requests to: the only model address
    /// a harness needs to reach.
    pub fn model_proxy_addr(&self) -> std::net::SocketAddr {
        self.model_proxy.addr()
    }
}

/// Where data goes when nothing is configured: `$AGUI_DATA_DIR`, else
/// `$XDG_DATA_HOME/agui-antigravity`, else `~/.local/share/agui-antigravity`.
pub(crate) fn default_data_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("AGUI_DATA_DIR")
        .or_else(|| var("XDG_DATA_HOME").map(|d| d.join("agui-antigravity")))
        .or_else(|| var("HOME").map(|d| d.join(".local/share/agui-antigravity")))
        .unwrap_or_else(|| std::env::temp_dir().join("agui-antigravity"))
}

/// Builds every configured agent. `tools_for(path)` gives each agent its server tools (the
/// binary has none; embedders and examples add theirs). `demo_script` replaces the embedded
/// demo script for agents served by the demo model; without it they run
/// [`gemini_script::demo::script`] and get its `get_weather` tool. `launcher` starts the
/// sandboxes of confined agents (default: this program, if its `main` calls
/// [`sandbox::launcher_if_asked`]; without one, a confined agent is refused); the machine is
/// probed once, before the first such agent.
pub(crate) async fn build(
    config: &ServerConfig,
    tools_for: impl Fn(&str) -> ToolRegistry,
    mut demo_script: Option<gemini_script::Script>,
    launcher: Option<Launcher>,
) -> Result<Runtime, ServerError> {
    let launcher = launcher.or_else(sandbox::registered_launcher);
    let mut machine: Option<Machine> = None;
    let several_owners = !config.auth_tokens.is_empty() || config.user_header.is_some();
    // The built-in demo tools exist for the built-in script; a custom script brings its own.
    let demo_tools = demo_script.is_none();
    let mut demo_model = None;
    let mut pools: BTreeMap<(usize, Duration, bool), HarnessPool> = BTreeMap::new();
    // Discovery may run `python3` or even install the harness: once per configured binary.
    let mut binaries: BTreeMap<Option<PathBuf>, PathBuf> = BTreeMap::new();
    let pool_defaults = PoolOptions::default();
    let mut agents = Vec::new();
    let mut claimed = ClaimedDirs::new();
    let data = default_data_dir();
    let model_proxy = ModelProxy::start(config.model_proxy_port).await?;
    for settings in &config.agents {
        let path = settings.path.clone().unwrap_or_else(|| "/".into());
        let demo = config.demo || !settings.has_endpoint();
        let endpoint_url = if demo {
            if demo_model.is_none() {
                demo_model = Some(match demo_script.take() {
                    Some(script) => demo::start_model_with(script).await?,
                    None => demo::start_model().await?,
                });
            }
            demo_model.as_ref().map(|m| m.base_url())
        } else {
            None
        };
        let mut options = options(settings, &path, &data, endpoint_url)?;
        options.several_owners = several_owners;
        options.replica_id = config.replica_id.clone();
        claim_dirs(&mut claimed, &path, &options)?;
        let mode = settings.sandbox.unwrap_or(defaults::SANDBOX);
        if model_proxy::uses_ambient_credentials(&options.endpoint) {
            if mode != SandboxMode::Off {
                return Err(ServerError::config(
                    ConfigProblem::Confinement,
                    format!(
                        "agent at `{path}`: Vertex without api_key needs the harness to reach Google with its own ambient credentials, which a confined harness cannot (its only network is the server's model proxy); set api_key, or sandbox = \"off\""
                    ),
                ));
            }
            tracing::warn!(path = %path, "Vertex without api_key: the harness authenticates itself with its ambient credentials and calls Vertex directly, not through the model proxy; set api_key to keep credentials out of the agent's reach");
        }
        // The harness gets the proxy's address and a token; the key and headers stay here.
        // An OpenAI-compatible endpoint has no headers of its own: the proxy adds them.
        let extra = match &options.endpoint {
            ModelEndpoint::OpenAiCompatible { .. } => model_headers(settings),
            _ => BTreeMap::new(),
        };
        let (proxied, channel) = model_proxy.register(
            &options.name,
            &options.endpoint,
            &extra,
            agent_models(&options),
            call_limits(settings),
        )?;
        if !model_proxy::uses_ambient_credentials(&options.endpoint) {
            options.endpoint = proxied;
            options.warm_up_endpoint = model_proxy.warm_up_endpoint(&options.endpoint);
        }
        let binary = match binaries.get(&settings.harness_path) {
            Some(binary) => binary.clone(),
            None => {
                // Discovery may run python3, or pip to install the harness: off the runtime.
                let explicit = settings.harness_path.clone();
                let binary = tokio::task::spawn_blocking(move || {
                    harness_client::find_or_install_binary(explicit.as_deref())
                })
                .await
                .map_err(|e| ServerError::Io {
                    action: "look for the harness binary".into(),
                    source: std::io::Error::other(e),
                })??;
                binaries.insert(settings.harness_path.clone(), binary.clone());
                binary
            }
        };
        let pool_key = (
            settings.pool_size.unwrap_or(defaults::POOL_SIZE),
            settings
                .harness_idle_grace_secs
                .map_or(pool_defaults.idle_grace, Duration::from_secs),
            settings
                .prestart_harness
                .unwrap_or(defaults::PRESTART_HARNESS),
        );
        let pool = match pools.get(&pool_key) {
            Some(pool) => pool.clone(),
            None => {
                let pool = HarnessPool::new(PoolOptions {
                    max_conversations_per_process: pool_key.0,
                    idle_grace: pool_key.1,
                    prestart_spare: pool_key.2,
                    ..PoolOptions::default()
                })?;
                pools.insert(pool_key, pool.clone());
                pool
            }
        };
        // Work ahead of need goes with prestarting; a process of one conversation would need
        // a second process for a conversation opened ahead.
        options.spare_conversations = pool_key.2 && pool_key.0 > 1;
        let mut process = ProcessOptions::new(options.save_dir.clone());
        process.binary = Some(binary);
        let (status, isolation) = match (mode, &launcher) {
            (SandboxMode::Off, _) => {
                let off = Machine {
                    support: harness_client::sandbox::SandboxSupport {
                        available: false,
                        landlock_abi: 0,
                        commands_isolated: false,
                        seccomp: false,
                        reason: None,
                        fix: None,
                    },
                    cgroups: Err("unconfined".into()),
                    run_as: None,
                };
                let unused = sandbox::launcher_at("/");
                sandbox::apply(
                    mode,
                    &off,
                    &unused,
                    &reach(config, settings, &path)?,
                    (channel, EgressProxy::new(&options.name, Vec::new())),
                    &mut options,
                    &mut process,
                )
            }
            (_, None) => return Err(sandbox::no_launcher(&path, mode)),
            (_, Some(launcher)) => {
                if machine.is_none() {
                    let run_as = sandbox::identity(config.sandbox_uid);
                    if let Some(identity) = run_as {
                        tracing::info!(
                            uid = identity.uid,
                            gid = identity.gid,
                            "confined harness processes run as this host user and group"
                        );
                    }
                    clear_stale_roots().await;
                    let support = harness_client::sandbox::probe(launcher, run_as).await;
                    let cgroups = tokio::task::spawn_blocking(cgroups::detect)
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()));
                    match &cgroups {
                        Ok(parent) => tracing::info!(
                            version = parent.version(),
                            "each confined harness process gets a cgroup with its pids and memory limits"
                        ),
                        Err(why) => {
                            tracing::warn!(reason = %why, "NO CGROUP LIMITS: confined harness processes get no pids or memory limit (delegate a cgroup v2 subtree to the server, e.g. systemd's Delegate=yes)")
                        }
                    }
                    machine = Some(Machine {
                        support,
                        cgroups,
                        run_as,
                    });
                }
                let machine = machine.as_ref().expect("probed just above");
                let egress = egress_proxy(settings, &options.name, &path)?;
                sandbox::apply(
                    mode,
                    machine,
                    launcher,
                    &reach(config, settings, &path)?,
                    (channel, egress),
                    &mut options,
                    &mut process,
                )
            }
        };
        log_sandbox(&path, &status);
        let mut tools = tools_for(&path);
        if demo && demo_tools {
            demo::add_demo_tools(&mut tools);
        }
        if several_owners {
            // Before the agent opens its save dir: identities stored bare get their namespace.
            crate::identities::migrate(&options.save_dir, &config.auth_tokens).await?;
        }
        let backend = Backend::harness_isolated(pool, process, isolation)?;
        let agent = match &config.replica_id {
            // Replicas share the save dir: each thread is driven under a lease kept there.
            Some(replica) => {
                let leases = crate::leases::FileLeases::new(
                    options.save_dir.join("leases"),
                    replica,
                    config.lease_ttl,
                );
                Agent::with_leases(options, backend, tools, std::sync::Arc::new(leases))?
            }
            None => Agent::new(options, backend, tools)?,
        };
        tracing::info!(path = %path, agent = %agent.options().name, model = %agent.options().model, demo, confined = status.confined, "agent ready");
        agents.push(MountedAgent {
            path,
            agent,
            demo,
            sandbox: status,
            owner_limits: OwnerLimits {
                max_threads: settings
                    .max_threads_per_owner
                    .unwrap_or(defaults::MAX_THREADS_PER_OWNER)
                    .max(1),
                max_runs: settings
                    .max_runs_per_owner
                    .unwrap_or(defaults::MAX_RUNS_PER_OWNER)
                    .max(1),
            },
        });
    }
    Ok(Runtime {
        agents,
        demo_model,
        model_proxy,
    })
}

/// Says loudly when an agent runs unconfined or without some of its tools.
fn log_sandbox(path: &str, status: &SandboxStatus) {
    let reason = status.reason.as_deref().unwrap_or_default();
    let fix = status.fix.as_deref().unwrap_or_default();
    if status.confined {
        tracing::info!(
            path,
            isolation = %status.isolation,
            egress_allow = ?status.egress_allow,
            "harness processes run confined ({} per process), with a private network",
            if status.isolation == "thread" { "one thread" } else { "one owner" }
        );
        if status.reason.is_some() {
            tracing::warn!(
                path,
                "the sandbox is incomplete on this machine: {reason}. To complete it: {fix}"
            );
        }
    } else if status.mode == "off" {
        tracing::warn!(
            path,
            "SANDBOX OFF: {reason}. Do not expose this agent to users you do not trust; to confine it: {fix}"
        );
    } else {
        tracing::error!(
            path,
            withheld = ?status.withheld_tools,
            "SANDBOX UNAVAILABLE: {reason}. Withholding the tools that run commands or write files; the read tools stay, limited by the harness's workspace check. To enable them: {fix}"
        );
    }
}

/// The models an agent's harnesses may call through the proxy: its text model and, when it
/// may generate images, its image model.
fn agent_models(options: &AgentOptions) -> std::collections::BTreeSet<String> {
    let mut models = std::collections::BTreeSet::from([options.model.clone()]);
    if options.builtin_tools.contains(&BuiltinTool::GenerateImage) {
        models.insert(
            options
                .image_model
                .clone()
                .unwrap_or_else(|| DEFAULT_IMAGE_MODEL.to_owned()),
        );
    }
    models
}

/// The model proxy's limits for one harness process of an agent.
fn call_limits(settings: &AgentSettings) -> CallLimits {
    let defaults = CallLimits::default();
    CallLimits {
        concurrent: settings
            .model_max_concurrent_calls
            .unwrap_or(defaults.concurrent)
            .max(1),
        per_minute: settings
            .model_calls_per_minute
            .unwrap_or(defaults.per_minute)
            .max(1),
        max_request_bytes: settings
            .model_max_request_mb
            .map_or(defaults.max_request_bytes, |mb| mb.max(1) << 20),
    }
}

/// An agent's egress proxy, from its `egress_allow`.
fn egress_proxy(
    settings: &AgentSettings,
    name: &str,
    path: &str,
) -> Result<std::sync::Arc<EgressProxy>, ServerError> {
    let allow = settings
        .egress_allow
        .iter()
        .flatten()
        .map(|entry| AllowedHost::parse(entry))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            ServerError::config(ConfigProblem::Agent, format!("agent at `{path}`: {e}"))
        })?;
    Ok(EgressProxy::new(name, allow))
}

/// What an agent's confined harnesses may reach and their limits, from its settings: the
/// configuration and key files hidden wherever they are, the extra read-only paths (which must
/// exist), the egress allow-list, the limits.
fn reach(
    config: &ServerConfig,
    settings: &AgentSettings,
    path: &str,
) -> Result<sandbox::Reach, ServerError> {
    let hidden = config
        .config_file
        .iter()
        .chain(config.agents.iter().filter_map(|a| a.api_key_file.as_ref()))
        .filter_map(|file| std::fs::canonicalize(file).ok())
        .collect();
    let mut read_only = Vec::new();
    for extra in settings.sandbox_ro_paths.iter().flatten() {
        let resolved = std::fs::canonicalize(extra).map_err(|e| {
            ServerError::config(
                ConfigProblem::Agent,
                format!(
                    "agent at `{path}`: sandbox_ro_paths `{}`: {e}",
                    extra.display()
                ),
            )
        })?;
        read_only.push(resolved);
    }
    let mib = |mb: u64| mb.saturating_mul(1 << 20);
    Ok(sandbox::Reach {
        hidden,
        read_only,
        egress_allow: settings.egress_allow.clone().unwrap_or_default(),
        limits: Limits {
            tmp_bytes: mib(settings
                .sandbox_tmp_mb
                .unwrap_or(defaults::SANDBOX_TMP_MB)
                .max(1)),
            file_bytes: Some(mib(settings
                .sandbox_file_mb
                .unwrap_or(defaults::SANDBOX_FILE_MB)
                .max(1))),
            cgroups: None,
            pids: Some(
                settings
                    .sandbox_max_pids
                    .unwrap_or(defaults::SANDBOX_MAX_PIDS)
                    .max(64),
            ),
            memory_bytes: Some(mib(settings
                .sandbox_memory_mb
                .unwrap_or(defaults::SANDBOX_MEMORY_MB)
                .max(64))),
            disk_bytes: Some(
                settings
                    .workspace_max_mb
                    .unwrap_or(defaults::WORKSPACE_MAX_MB),
            )
            .filter(|&mb| mb > 0)
            .map(mib),
        },
    })
}

/// Checks `config` as [`build`] would, without starting anything: every agent's options and
/// directories. The demo model's address is known only once it runs, and no check reads it.
pub(crate) fn check(config: &ServerConfig) -> Result<(), ServerError> {
    let mut claimed = ClaimedDirs::new();
    let data = default_data_dir();
    for settings in &config.agents {
        let path = settings.path.clone().unwrap_or_else(|| "/".into());
        let demo = config.demo || !settings.has_endpoint();
        let options = options(settings, &path, &data, demo.then(String::new))?;
        claim_dirs(&mut claimed, &path, &options)?;
    }
    Ok(())
}

/// Directories already used by an agent: `(mount path, save_dir, workspace_root)`.
type ClaimedDirs = Vec<(String, PathBuf, PathBuf)>;

/// Records the agent's directories, refusing ones another agent uses: agents must never read
/// each other's conversations or workspaces.
fn claim_dirs(
    claimed: &mut ClaimedDirs,
    path: &str,
    options: &AgentOptions,
) -> Result<(), ServerError> {
    for (other, save_dir, workspace_root) in claimed.iter() {
        for (what, mine, theirs) in [
            ("save_dir", &options.save_dir, save_dir),
            ("workspace_root", &options.workspace_root, workspace_root),
        ] {
            if mine == theirs {
                return Err(ServerError::config(
                    ConfigProblem::Conflict,
                    format!(
                        "agents at `{other}` and `{path}` both use {what} `{}`; give each agent its own",
                        mine.display()
                    ),
                ));
            }
        }
    }
    claimed.push((
        path.to_owned(),
        options.save_dir.clone(),
        options.workspace_root.clone(),
    ));
    Ok(())
}

/// The `model_headers` of an agent.
fn model_headers(settings: &AgentSettings) -> BTreeMap<String, String> {
    settings
        .model_headers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The session options of one agent.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub fn options(
    settings: &AgentSettings,
    path: &str,
    data: &Path,
    demo_url: Option<String>,
) -> Result<AgentOptions, ServerError> {
    let bad =
        |m: String| ServerError::config(ConfigProblem::Agent, format!("agent at `{path}`: {m}"));
    let headers = model_headers(settings);
    let endpoint = if let Some(url) = demo_url {
        ModelEndpoint::gemini(url, "demo")
    } else if let Some(base_url) = &settings.openai_base_url {
        ModelEndpoint::OpenAiCompatible {
            base_url: base_url.clone(),
        }
    } else if let Some(project) = &settings.vertex_project {
        let location = settings
            .vertex_location
            .clone()
            .ok_or_else(|| bad("vertex_project needs vertex_location".into()))?;
        ModelEndpoint::Vertex {
            project: project.clone(),
            location,
            base_url: settings.gemini_base_url.clone(),
            api_key: settings.api_key.clone(),
            headers,
        }
    } else {
        if settings.api_key.as_deref().is_none_or(str::is_empty) {
            return Err(bad("the Gemini API needs an API key (--api-key or GEMINI_API_KEY); any non-empty value works against a mock".into()));
        }
        ModelEndpoint::Gemini {
            base_url: settings.gemini_base_url.clone(),
            api_key: settings.api_key.clone(),
            headers,
            thinking_level: settings.thinking_level.as_ref().map(choice_name),
        }
    };
    let model = settings
        .model
        .clone()
        .unwrap_or_else(|| defaults::MODEL.to_owned());
    let slug = slug(path);
    // Unset keys keep the session's defaults: `AgentOptions::new` starts from them.
    let mut options = AgentOptions::new(model, endpoint, data);
    options.name = settings.name.clone().unwrap_or_else(|| slug.clone());
    options.workspace_root = settings
        .workspace_root
        .clone()
        .unwrap_or_else(|| data.join("w").join(&slug));
    options.save_dir = settings
        .save_dir
        .clone()
        .unwrap_or_else(|| data.join("agents").join(&slug));
    options.image_model = settings.image_model.clone();
    options.system_instructions = settings.system_instructions.clone().map(|text| {
        match settings
            .system_instructions_mode
            .unwrap_or(defaults::SYSTEM_INSTRUCTIONS_MODE)
        {
            SystemInstructionsMode::Append => SystemInstructions::Appended(text),
            SystemInstructionsMode::Replace => SystemInstructions::Custom(text),
        }
    });
    if let Some(choices) = &settings.builtin_tools {
        options.builtin_tools = builtin_tools(choices);
    }
    // Keys that map onto one option each (`ask_question` onto `ask_question_interrupts`).
    macro_rules! set {
        ($($option:ident = $key:ident),* $(,)?) => {
            $( if let Some(value) = settings.$key { options.$option = value; } )*
        };
    }
    set!(
        behavior = behavior,
        tool_approval = tool_approval,
        frontend_tools = frontend_tools,
        ask_question_interrupts = ask_question,
        interrupt_reasons = interrupt_reasons,
        deduplicate_tool_calls = deduplicate_tool_calls,
        rewind_files = rewind_files,
        app_context_tool = app_context_tool,
        app_state_tool = app_state_tool,
        emit_builtin_tool_calls = emit_builtin_tool_calls,
        subagent_events = subagent_events,
        activities = activities,
        max_sessions = max_sessions,
        max_attachment_bytes = max_attachment_bytes,
        on_disconnect = on_disconnect,
        client_buffer_events = client_buffer_events,
    );
    if let Some(secs) = settings.turn_stall_timeout_secs {
        options.turn_stall_timeout = Duration::from_secs(secs);
    }
    let retention = settings
        .thread_retention_days
        .unwrap_or(defaults::THREAD_RETENTION_DAYS);
    if retention == 0 {
        return Err(bad("thread_retention_days must be at least 1".into()));
    }
    options.remember_threads_for = Duration::from_secs(retention.saturating_mul(24 * 60 * 60));
    let disk_cap = settings
        .workspace_max_mb
        .unwrap_or(defaults::WORKSPACE_MAX_MB);
    options.workspace_max_bytes = (disk_cap > 0).then(|| disk_cap.saturating_mul(1 << 20));
    // 0 is refused by `options.validate()` below, naming `prestart_harness = false`.
    if let Some(max) = settings.max_spare_harnesses {
        options.max_spare_harnesses = max;
    }
    if let Some(template) = &settings.workspace_template {
        // The operator's directory, read as it is when each new thread is placed.
        match std::fs::metadata(template) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(bad(format!(
                    "workspace_template `{}` is not a directory",
                    template.display()
                )));
            }
            Err(e) => {
                return Err(bad(format!(
                    "workspace_template `{}`: {e}",
                    template.display()
                )));
            }
        }
        options.workspace_template = Some(template.clone());
    }
    if let Some(tools) = &settings.auto_approve_tools {
        options.auto_approve_tools = tools.iter().cloned().collect();
    }
    let mode = settings
        .structured_output
        .unwrap_or(agui_session::defaults::STRUCTURED_OUTPUT);
    options.response_schema = settings
        .response_schema
        .clone()
        .map(|schema| (schema, mode));
    options.max_tool_calls_per_turn = settings.max_tool_calls_per_turn;
    if let Some(secs) = settings.session_timeout_secs {
        options.session_timeout = Duration::from_secs(secs);
    }
    if let Some(secs) = settings.parked_timeout_secs {
        options.parked_timeout = Duration::from_secs(secs);
    }
    options.parked_timeout = options.parked_timeout.max(options.session_timeout);
    if let Some(secs) = settings.hibernate_after_secs {
        options.hibernate_after = Duration::from_secs(secs);
    }
    options.concurrent_runs = match settings.busy_thread_wait_secs {
        Some(0) => ConcurrentRuns::Refuse,
        Some(secs) => ConcurrentRuns::Wait(Duration::from_secs(secs)),
        None => options.concurrent_runs,
    };
    if let Some(retries) = settings.api_retries {
        options.api_retry = Some((retries, agui_session::defaults::API_RETRY_FIRST_SLEEP_MS));
    }
    options.validate().map_err(|e| bad(e.to_string()))?;
    Ok(options)
}

/// Removes the sandbox roots that killed launchers (of this server's predecessors) left in the
/// temporary directory, before this server starts any.
async fn clear_stale_roots() {
    let tmp = std::env::temp_dir();
    let cleared =
        tokio::task::spawn_blocking(move || harness_client::sandbox::clear_stale_roots(&tmp))
            .await
            .unwrap_or_default();
    if !cleared.removed.is_empty() {
        tracing::info!(
            removed = cleared.removed.len(),
            dir = %std::env::temp_dir().display(),
            "removed the sandbox roots that killed launchers left"
        );
    }
    for (root, why) in &cleared.kept {
        tracing::warn!(root = %root.display(), reason = %why, "a killed launcher's sandbox root is left in place");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> AgentSettings {
        toml::from_str(toml).expect("valid settings")
    }

    /// Claims the directories of agents `(path, settings)` in order; the error text, if any.
    fn claim_all(agents: &[(&str, &str)]) -> Result<(), String> {
        let mut claimed = ClaimedDirs::new();
        for (path, toml) in agents {
            let opts = options(
                &settings(toml),
                path,
                Path::new("/data"),
                Some("http://m".into()),
            )
            .map_err(|e| e.to_string())?;
            claim_dirs(&mut claimed, path, &opts).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    #[test]
    fn every_agent_needs_its_own_directories() {
        assert_eq!(claim_all(&[("/", ""), ("/a", ""), ("/b/c", "")]), Ok(()));
        assert_eq!(
            claim_all(&[("/a", "save_dir = \"/s\""), ("/b", "save_dir = \"/s\"")]),
            Err("configuration error: agents at `/a` and `/b` both use save_dir `/s`; give each agent its own".into())
        );
        // Default directories come from the mount path, so `/a-b` and `/a/b` would collide.
        let clash = claim_all(&[("/a-b", ""), ("/a/b", "")]).unwrap_err();
        assert!(
            clash.contains("both use save_dir `/data/agents/a-b`"),
            "{clash}"
        );
        let clash = claim_all(&[
            ("/a", "workspace_root = \"/w\""),
            ("/b", "workspace_root = \"/w\""),
        ]);
        assert!(clash.unwrap_err().contains("workspace_root `/w`"));
    }
}
