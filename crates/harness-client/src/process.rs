//! One `localharness` process: spawn, stdio handshake, stderr, exit monitoring and shutdown.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use harness_proto::lh::{ClientInfo, InputConfig, OutputConfig};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use harness_sandbox::cgroups::Cgroup;
use harness_sandbox::{AgentDir, Confinement, SandboxControl, SandboxError, SandboxStdin};

use crate::blocking::off_runtime;
use crate::discovery::find_binary;
use crate::error::{HarnessError, Result};
use crate::exit::ExitInfo;

/// How long [`HarnessProcess::runs_commands`] waits for its answer (a stuck sandbox must not
/// hold its caller up).
const COUNT_COMMANDS_WITHIN: Duration = Duration::from_secs(3);

/// Variables passed from the host's environment to the harness; everything else is removed, so
/// the host's secrets (e.g. `GEMINI_API_KEY`) never reach the agent's shell commands.
pub const DEFAULT_PASSTHROUGH_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "USER",
    "LOGNAME",
    "SHELL",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// How to start a harness process. Everything here is fixed for the life of the process and
/// shared by its conversations (it is the pool's partition key, with the binary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOptions {
    /// The binary; `None` runs discovery ([`crate::find_binary`]).
    pub binary: Option<PathBuf>,
    /// Where the harness stores conversations (`<id>.db`); needed to resume them later.
    pub storage_dir: PathBuf,
    /// `HOME` of the harness (it writes helper binaries under it); default `<storage_dir>/.home`.
    pub home_dir: Option<PathBuf>,
    /// Extra environment: set on the process and sent in `InputConfig.env` (the harness applies
    /// it to `run_command`).
    pub env: BTreeMap<String, String>,
    /// Host variables passed through (see [`DEFAULT_PASSTHROUGH_ENV`]).
    pub passthrough_env: Vec<String>,
    /// How long the harness may take to answer the stdio handshake.
    pub boot_timeout: Duration,
    /// How many stderr lines to keep for error messages.
    pub stderr_tail_lines: usize,
    /// Run the harness in a sandbox that reaches only these directories (plus the storage
    /// directory and `HOME`); `None` runs it as a plain child process.
    pub confinement: Option<Confinement>,
}

impl ProcessOptions {
    /// Defaults for a given storage directory.
    pub fn new(storage_dir: impl Into<PathBuf>) -> Self {
        Self {
            binary: None,
            storage_dir: storage_dir.into(),
            home_dir: None,
            env: BTreeMap::new(),
            passthrough_env: DEFAULT_PASSTHROUGH_ENV
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            boot_timeout: Duration::from_secs(60),
            stderr_tail_lines: 100,
            confinement: None,
        }
    }

    fn home(&self) -> PathBuf {
        self.home_dir
            .clone()
            .unwrap_or_else(|| self.storage_dir.join(".home"))
    }

    /// `dir` — the storage dir, `HOME` or a directory below them — through the door, made
    /// where missing when `create`. For a confined process it is reached below the granted
    /// directory that holds it, which the sandbox can write, so no link there is followed (a
    /// link planted as `save` or `home` is moved aside); any other `dir` is the host's own
    /// (the operator's storage dir, a sandbox root of its own) and is opened as named.
    pub(crate) fn reach(&self, dir: &Path, create: bool) -> Result<AgentDir, SandboxError> {
        let roots = self
            .confinement
            .as_ref()
            .map(|c| c.read_write.as_slice())
            .unwrap_or_default();
        let owner = self.confinement.as_ref().and_then(|c| c.run_as);
        AgentDir::below(roots, dir, create, owner)
    }
}

/// A running harness process. Cheap to clone; the process is stopped when the last clone is
/// dropped (SIGKILL of its whole process group) or explicitly with [`HarnessProcess::shutdown`].
#[derive(Clone)]
pub struct HarnessProcess {
    inner: Arc<ProcessInner>,
}

impl std::fmt::Debug for HarnessProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessProcess")
            .field("pid", &self.inner.pid)
            .field("port", &self.inner.port)
            .finish()
    }
}

struct ProcessInner {
    binary: PathBuf,
    pid: u32,
    port: u16,
    /// The key the harness requires on every WebSocket (`x-goog-api-key`).
    api_key: String,
    stdin: Mutex<Option<Stdin>>,
    /// A confined process's launcher: connections into its sandbox, its services' grants.
    sandbox: Option<SandboxControl>,
    /// How many times its disk cap's watcher stopped its commands.
    disk_cap_stops: Arc<std::sync::atomic::AtomicU64>,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<StderrLog>,
    /// Number of open conversation sockets; shutdown waits for it to reach zero before closing
    /// stdin.
    live: watch::Sender<usize>,
    /// Set when shutdown starts: conversations close their sockets.
    closing: watch::Sender<bool>,
}

impl HarnessProcess {
    /// Starts a harness and completes the stdio handshake.
    ///
    /// Discovery (when [`ProcessOptions::binary`] is `None`) may run `python3`; it runs on the
    /// runtime's blocking pool, so the calling runtime keeps serving its other tasks.
    pub async fn spawn(options: &ProcessOptions) -> Result<Self> {
        let explicit = options.binary.clone();
        let binary = off_runtime(move || find_binary(explicit.as_deref()))
            .await
            .ok_or_else(|| HarnessError::BootFailed {
                reason: "the runtime shut down while looking for the harness binary".into(),
            })??;
        let home = std::path::absolute(options.home())
            .map_err(HarnessError::io("resolve the harness HOME"))?;
        for dir in [options.storage_dir.clone(), home.clone()] {
            let opts = options.clone();
            off_runtime(move || opts.reach(&dir, true).map(drop))
                .await
                .ok_or_else(|| HarnessError::BootFailed {
                    reason: "the runtime shut down while making the harness's directories".into(),
                })??;
        }
        let storage_dir = std::path::absolute(&options.storage_dir).map_err(HarnessError::io(
            format!("resolve {}", options.storage_dir.display()),
        ))?;
        let launch = match &options.confinement {
            None => Launch::Plain(Command::new(&binary)),
            Some(confinement) => {
                let (confinement, binary) = (confinement.clone(), binary.clone());
                let (storage_dir, home) = (storage_dir.clone(), home.clone());
                let prepared =
                    off_runtime(move || confinement.prepare(&binary, &storage_dir, &home))
                        .await
                        .ok_or_else(|| HarnessError::BootFailed {
                            reason: "the runtime shut down while preparing the sandbox".into(),
                        })??;
                Launch::Confined(Box::new(prepared))
            }
        };
        let Started {
            mut child,
            mut stdin,
            mut stdout,
            sandbox,
            cgroup,
        } = launch.start(options, &home, &storage_dir)?;
        let pid = child.id().unwrap_or_default();
        let span = tracing::info_span!("harness", pid);
        let stderr = Arc::new(StderrLog::new(options.stderr_tail_lines));
        let stderr_done = child
            .stderr
            .take()
            .map(|err| tokio::spawn(drain_stderr(err, stderr.clone()).instrument(span.clone())));

        let config = InputConfig {
            storage_directory: Some(storage_dir.to_string_lossy().into_owned()),
            client_info: Some(client_info()),
            env: options.env.clone(),
            ..Default::default()
        };
        let handshake = handshake(&mut stdin, &mut stdout, &config);
        // A failed boot has a reason, or none when the harness did not answer in time.
        let booted = match tokio::time::timeout(options.boot_timeout, handshake).await {
            Ok(Ok(output)) => match u16::try_from(output.port()) {
                Ok(port) if port != 0 && !output.api_key().is_empty() => Ok((port, output)),
                _ => Err(Some(format!(
                    "OutputConfig without a usable port and key: {output:?}"
                ))),
            },
            Ok(Err(e)) => Err(Some(format!("stdio handshake failed: {e}"))),
            Err(_) => Err(None),
        };
        // A sandbox whose services could not start cannot reach its model: a failed boot.
        let booted = match (booted, sandbox.as_ref().and_then(SandboxControl::failure)) {
            (Ok(_), Some(failure)) => Err(Some(failure)),
            (booted, _) => booted,
        };
        let (port, output) =
            match booted {
                Ok(booted) => booted,
                Err(reason) => {
                    let timeout = options.boot_timeout;
                    return Err(fail_boot(child, pid, &stderr, stderr_done, |stderr_tail| {
                        match reason {
                            Some(reason) => HarnessError::Handshake {
                                binary,
                                reason,
                                stderr_tail,
                            },
                            None => HarnessError::BootTimeout {
                                binary,
                                timeout,
                                stderr_tail,
                            },
                        }
                    })
                    .await);
                }
            };
        // The harness writes nothing more to stdout, but a full pipe would block it: drain anyway.
        tokio::spawn(async move {
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut stdout, &mut sink).await;
        });
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(
            monitor(child, pid, stderr.clone(), stderr_done, exit_tx, cgroup).instrument(span),
        );
        tracing::info!(pid, port, binary = %binary.display(), confined = options.confinement.is_some(), "started localharness");
        let inner = Arc::new(ProcessInner {
            binary,
            pid,
            port,
            api_key: output.api_key().to_owned(),
            stdin: Mutex::new(Some(stdin)),
            sandbox,
            disk_cap_stops: Arc::default(),
            exit: exit_rx,
            stderr,
            live: watch::channel(0).0,
            closing: watch::channel(false).0,
        });
        if let (Some(confinement), Some(sandbox)) = (&options.confinement, &inner.sandbox)
            && let Some(cap) = confinement.limits.disk_bytes
        {
            tokio::spawn(crate::disk_watch::watch(
                Arc::downgrade(&inner),
                inner.disk_cap_stops.clone(),
                sandbox.clone(),
                confinement.read_write.clone(),
                cap,
                confinement.label.0.clone(),
            ));
        }
        Ok(Self { inner })
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The WebSocket port the harness listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// The binary this process runs.
    pub fn binary(&self) -> &Path {
        &self.inner.binary
    }

    /// How the process ended, if it has.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        self.inner.exit.borrow().clone()
    }

    /// Whether the process is still running and not shutting down.
    pub fn is_usable(&self) -> bool {
        self.exit_info().is_none() && !*self.inner.closing.borrow()
    }

    /// Number of conversations currently connected to this process (open sockets).
    pub fn live_conversations(&self) -> usize {
        *self.inner.live.borrow()
    }

    /// For a confined process, its sandbox's control: what its PID 1 does for the host, such as
    /// [`SandboxControl::stop_commands`] (kill the commands, the harness goes on) and
    /// [`SandboxControl::unlinked_bytes`] (the disk its processes hold in unlinked files, which
    /// a walk of its directories misses). `None` for a process that is not confined.
    pub fn sandbox(&self) -> Option<SandboxControl> {
        self.inner.sandbox.clone()
    }

    /// Whether a command the harness started still runs (one it left running in the
    /// background among them): a confined process asks its sandbox, another reads `/proc` for
    /// its descendants. The harness's own account of its background tasks outlives them when
    /// it is restarted (its conversation file still lists the tasks of the process that
    /// exited), so a host uses this to tell. `true` when it cannot tell within a few seconds.
    pub async fn runs_commands(&self) -> bool {
        if self.exit_info().is_some() {
            // Its pid may be another process's now.
            return false;
        }
        let count = async {
            match &self.inner.sandbox {
                Some(sandbox) => sandbox.running_commands().await.ok().map(|n| n > 0),
                None => {
                    let pid = self.inner.pid;
                    off_runtime(move || running_descendants(pid) > 0).await
                }
            }
        };
        tokio::time::timeout(COUNT_COMMANDS_WITHIN, count)
            .await
            .ok()
            .flatten()
            .unwrap_or(true)
    }

    /// How many times the watcher of its disk cap ([`harness_sandbox::Limits::disk_bytes`])
    /// stopped its commands: a turn during which this grows filled the disk.
    pub fn disk_cap_stops(&self) -> u64 {
        self.inner
            .disk_cap_stops
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many lines of its stderr said a write failed for want of room on the disk: a turn
    /// during which this grows may not have been saved (the harness answers anyway).
    pub fn storage_full_writes(&self) -> u64 {
        self.inner
            .stderr
            .storage_full
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The last lines the harness wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.inner.stderr.tail()
    }

    /// Waits until the process has exited.
    pub async fn wait(&self) -> ExitInfo {
        let mut exit = self.inner.exit.clone();
        loop {
            if let Some(info) = exit.borrow_and_update().clone() {
                return info;
            }
            if exit.changed().await.is_err() {
                // The monitor is gone without reporting (runtime shutting down).
                return ExitInfo {
                    pid: self.inner.pid,
                    status: "unknown".into(),
                    code: None,
                    stderr_tail: self.stderr_tail(),
                };
            }
        }
    }

    /// Stops the process: conversations close their sockets, then stdin is closed (the
    /// harness's shutdown signal); if it has not exited after 5 s its process group gets
    /// SIGTERM, then after 1 s SIGKILL. Leftover processes of the group are killed.
    pub async fn shutdown(&self) -> ExitInfo {
        self.shutdown_with_grace(Duration::from_secs(5), Duration::from_secs(1))
            .await
    }

    /// [`HarnessProcess::shutdown`] with explicit waits: `grace` after closing stdin, then
    /// `term_grace` after SIGTERM.
    pub async fn shutdown_with_grace(&self, grace: Duration, term_grace: Duration) -> ExitInfo {
        let inner = &self.inner;
        inner.closing.send_replace(true);
        // The harness runs commands in sessions of their own; find them while they are still
        // its children (once it exits they are reparented and untraceable). Reading `/proc`
        // is a file per process: off the runtime.
        let pid = inner.pid;
        let commands = off_runtime(move || descendants(pid))
            .await
            .unwrap_or_default();
        let mut live = inner.live.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(2), live.wait_for(|n| *n == 0)).await;
        drop(inner.stdin.lock().take());
        let info = match tokio::time::timeout(grace, self.wait()).await {
            Ok(info) => info,
            Err(_) => {
                tracing::warn!(
                    pid = inner.pid,
                    "harness did not exit after stdin closed; sending SIGTERM"
                );
                signal_group(inner.pid, Signal::SIGTERM);
                match tokio::time::timeout(term_grace, self.wait()).await {
                    Ok(info) => info,
                    Err(_) => {
                        tracing::warn!(pid = inner.pid, "harness ignored SIGTERM; sending SIGKILL");
                        signal_group(inner.pid, Signal::SIGKILL);
                        self.wait().await
                    }
                }
            }
        };
        kill_tree(inner.pid, &commands);
        info
    }

    /// The key the harness requires on every WebSocket, as its stdout handshake gave it.
    pub(crate) fn ws_key(&self) -> &str {
        &self.inner.api_key
    }

    /// A TCP connection to the harness's WebSocket port: on loopback, or, for a confined
    /// process, inside its sandbox (connected there by the launcher).
    pub(crate) async fn connect_socket(&self) -> std::io::Result<tokio::net::TcpStream> {
        match &self.inner.sandbox {
            Some(sandbox) => sandbox.connect(self.inner.port).await,
            None => {
                let stream = tokio::net::TcpStream::connect((
                    std::net::Ipv4Addr::LOCALHOST,
                    self.inner.port,
                ))
                .await?;
                Ok(stream)
            }
        }
    }

    /// For a confined process: the token its sandbox's model service granted (`Some(None)`
    /// when the service wants none); `None` for a process that is not confined.
    pub(crate) fn model_token(&self) -> Option<Option<String>> {
        self.inner.sandbox.as_ref().map(SandboxControl::model_token)
    }

    /// New stderr lines from now on (init failures are only explained there).
    pub(crate) fn subscribe_stderr(&self) -> broadcast::Receiver<String> {
        self.inner.stderr.subscribe()
    }

    /// Changes to how the process ended (`Some` once it has).
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<ExitInfo>> {
        self.inner.exit.clone()
    }

    /// Turns `true` when shutdown starts: conversations close their sockets then.
    pub(crate) fn closing_watch(&self) -> watch::Receiver<bool> {
        self.inner.closing.subscribe()
    }

    /// Counts an open socket until the guard is dropped; shutdown waits for the count to reach
    /// zero before closing stdin. The guard keeps the process alive while the socket is open.
    pub(crate) fn count_live(&self) -> LiveGuard {
        self.inner.live.send_modify(|n| *n += 1);
        LiveGuard(self.clone())
    }

    /// Whether both handles are the same process (a pid can be reused, a handle cannot).
    pub(crate) fn same_as(&self, other: &HarnessProcess) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// An open socket counted on its process (see [`HarnessProcess::count_live`]).
pub(crate) struct LiveGuard(HarnessProcess);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.inner.live.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Drop for ProcessInner {
    fn drop(&mut self) {
        // Last handle gone: make sure nothing of this harness outlives it.
        let reap = Reap {
            pid: self.pid,
            exit: self.exit.clone(),
        };
        // Dropping `reap` does the work; on the blocking pool when there is one, since it walks
        // `/proc`. A pool that refuses the job (its runtime is shutting down) drops it unrun,
        // which still does the work, wherever that happens.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(reap))),
            Err(_) => drop(reap),
        }
    }
}

/// Kills a harness whose last handle is gone, and every command it started, when dropped.
struct Reap {
    pid: u32,
    exit: watch::Receiver<Option<ExitInfo>>,
}

impl Drop for Reap {
    fn drop(&mut self) {
        // Once the harness has exited and been reaped its pid may belong to an unrelated
        // process, whose children must not be taken for the harness's commands (those were
        // reparented anyway).
        let commands = if self.exit.borrow().is_none() {
            descendants(self.pid)
        } else {
            Vec::new()
        };
        kill_tree(self.pid, &commands);
    }
}

/// SIGKILLs the harness's group and the process groups of `descendants` (its commands).
fn kill_tree(pid: u32, descendants: &[(u32, u32)]) {
    signal_group(pid, Signal::SIGKILL);
    let ours = u32::try_from(nix::unistd::getpgrp().as_raw()).unwrap_or(0);
    for &(child, group) in descendants {
        if group > 1 && group != ours {
            signal_group(group, Signal::SIGKILL);
        }
        if let Ok(child) = i32::try_from(child) {
            let _ = nix::sys::signal::kill(Pid::from_raw(child), Signal::SIGKILL);
        }
    }
}

fn signal_group(pid: u32, signal: Signal) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if pid > 0 {
        // ESRCH (already gone) is the expected case after a clean exit.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// The stdio handshake: the harness's configuration out, its port and key back.
async fn handshake(
    stdin: &mut Stdin,
    stdout: &mut (dyn AsyncRead + Unpin + Send),
    config: &InputConfig,
) -> std::io::Result<OutputConfig> {
    stdin
        .write_all(&harness_proto::encode_stdio_frame(config))
        .await?;
    let mut len = [0u8; 4];
    stdout.read_exact(&mut len).await?;
    let size = u32::from_le_bytes(len) as usize;
    if size > harness_proto::MAX_STDIO_FRAME {
        return Err(std::io::Error::other(format!(
            "OutputConfig length {size} is implausible"
        )));
    }
    let mut frame = len.to_vec();
    frame.resize(4 + size, 0);
    stdout.read_exact(&mut frame[4..]).await?;
    harness_proto::decode_stdio_frame::<OutputConfig>(&frame).map_err(std::io::Error::other)
}

/// Kills a process that failed to boot and builds the error with its stderr tail.
async fn fail_boot(
    mut child: Child,
    pid: u32,
    stderr: &StderrLog,
    stderr_done: Option<JoinHandle<()>>,
    error: impl FnOnce(String) -> HarnessError,
) -> HarnessError {
    signal_group(pid, Signal::SIGKILL);
    let _ = child.wait().await;
    stderr_settled(stderr_done).await;
    error(stderr.tail())
}

/// Waits for the stderr reader to reach the end of the pipe after the process exited, so the
/// tail holds the last lines (they explain a crash). Bounded: a command the harness started
/// may keep the pipe open.
async fn stderr_settled(stderr_done: Option<JoinHandle<()>>) {
    if let Some(done) = stderr_done {
        let _ = tokio::time::timeout(Duration::from_millis(250), done).await;
    }
}

async fn monitor(
    mut child: Child,
    pid: u32,
    stderr: Arc<StderrLog>,
    stderr_done: Option<JoinHandle<()>>,
    exit: watch::Sender<Option<ExitInfo>>,
    cgroup: Option<Cgroup>,
) {
    let status = child.wait().await;
    stderr_settled(stderr_done).await;
    if let Some(cgroup) = cgroup {
        // Kills what is left in it (commands that outlived the sandbox's init cannot exist:
        // the PID namespace took them) and removes it; a few files, off the runtime.
        let _ = off_runtime(move || drop(cgroup)).await;
    }
    let (status, code) = match status {
        Ok(s) => (describe(&s), s.code()),
        Err(e) => (format!("wait failed: {e}"), None),
    };
    let info = ExitInfo {
        pid,
        status,
        code,
        stderr_tail: stderr.tail(),
    };
    if code == Some(0) {
        tracing::info!(status = %info.status, "localharness exited");
    } else {
        tracing::warn!(status = %info.status, stderr_tail = %info.stderr_tail, "localharness exited abnormally");
    }
    exit.send_replace(Some(info));
}

fn describe(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("killed by {s}"),
            Err(_) => format!("killed by signal {sig}"),
        },
        _ => status.to_string(),
    }
}

/// A process's stdin: a pipe, or a confined process's, through its launcher. Dropping it closes
/// the harness's stdin (its signal to shut down).
enum Stdin {
    Pipe(ChildStdin),
    Sandbox(SandboxStdin),
}

impl Stdin {
    async fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Pipe(pipe) => {
                pipe.write_all(data).await?;
                pipe.flush().await
            }
            Self::Sandbox(sandbox) => sandbox.write_all(data).await,
        }
    }
}

/// How a process starts: a plain child, or a confined one ([`harness_sandbox::ConfinedLaunch`]:
/// its cgroup, launcher and control channel, prepared off the runtime).
enum Launch {
    Plain(Command),
    Confined(Box<harness_sandbox::ConfinedLaunch>),
}

/// A process just spawned, either way: its child, its stdio, a confined one's sandbox and cgroup.
struct Started {
    child: Child,
    stdin: Stdin,
    stdout: Box<dyn AsyncRead + Unpin + Send>,
    sandbox: Option<SandboxControl>,
    cgroup: Option<Cgroup>,
}

impl Launch {
    /// Sets what every harness process gets (only the passed-through environment, `HOME`, its
    /// storage dir as working directory, stderr piped, a process group of its own) and spawns.
    fn start(self, options: &ProcessOptions, home: &Path, storage_dir: &Path) -> Result<Started> {
        let set_up = |command: &mut Command| {
            command.env_clear();
            for name in &options.passthrough_env {
                if let Some(value) = std::env::var_os(name) {
                    command.env(name, value);
                }
            }
            command
                .env("HOME", home)
                .envs(&options.env)
                .current_dir(storage_dir)
                .stderr(Stdio::piped())
                // Its own group, so shutdown reaches the shell commands it starts too.
                .process_group(0)
                .kill_on_drop(true);
        };
        match self {
            Self::Plain(mut command) => {
                set_up(&mut command);
                command.stdin(Stdio::piped()).stdout(Stdio::piped());
                let mut child = command.spawn().map_err(|source| HarnessError::Spawn {
                    binary: command.as_std().get_program().into(),
                    source,
                })?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(HarnessError::BootFailed {
                        reason: "the harness's stdio pipes were not made".into(),
                    });
                };
                Ok(Started {
                    child,
                    stdin: Stdin::Pipe(stdin),
                    stdout: Box::new(stdout),
                    sandbox: None,
                    cgroup: None,
                })
            }
            Self::Confined(mut launch) => {
                set_up(launch.command());
                let started = launch.spawn()?;
                Ok(Started {
                    child: started.child,
                    stdin: Stdin::Sandbox(started.stdin),
                    stdout: Box::new(started.stdout),
                    sandbox: Some(started.control),
                    cgroup: started.cgroup,
                })
            }
        }
    }
}

fn client_info() -> ClientInfo {
    ClientInfo {
        language: Some("rust".into()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        language_version: Some(
            option_env!("CARGO_PKG_RUST_VERSION")
                .unwrap_or("unknown")
                .into(),
        ),
        os: Some(std::env::consts::OS.into()),
        os_version: Some(std::env::consts::ARCH.into()),
    }
}

mod stderr;
mod tree;

use stderr::{StderrLog, drain_stderr};
use tree::{descendants, running_descendants};
