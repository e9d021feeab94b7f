//! Starting and stopping the processes under test: the scripted model and the server.
//!
//! The server is started like `../shared/bench/start_rust.sh` starts it: the release binary,
//! loopback, the model at the mock, `--pool-size 8`, a high `--max-sessions`, workspace and
//! save directories in a scratch directory, `HOME` there too, `RUST_LOG=warn`, and a cleared
//! environment (so nothing of the caller's leaks into the configuration). It is stopped like
//! `stop.sh` stops it: SIGTERM, SIGKILL after 15 s, then any descendant still alive.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::procfs;

/// The binaries a run needs.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    /// `agui-antigravity` (release).
    pub(crate) server: PathBuf,
    /// `gemini-script` (release).
    pub(crate) model: PathBuf,
    /// `localharness`.
    pub(crate) harness: PathBuf,
}

/// How the server is configured, beyond the fixed flags of [`server_args`].
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerSettings {
    /// `--hibernate-after-secs`.
    pub(crate) hibernate_after_secs: Option<u64>,
    /// `--harness-idle-grace-secs`.
    pub(crate) harness_idle_grace_secs: Option<u64>,
    /// `--pool-size` ([`POOL_SIZE`] when `None`).
    pub(crate) pool_size: Option<u64>,
    /// Extra `serve` flags.
    pub(crate) extra: Vec<String>,
    /// `RUST_LOG` of the server (`warn` when `None`: logging costs CPU the figures count).
    pub(crate) log_filter: Option<String>,
}

impl ServerSettings {
    /// What a raw floor is set up from: the servers' harness set-up (`pool_size` conversations
    /// per process), never their sandbox, so the ratio column compares like with like.
    pub(crate) fn floor(pool_size: u64) -> Self {
        Self {
            pool_size: Some(pool_size),
            ..Self::default()
        }
    }
}

/// Conversations per harness process (the server's default).
pub(crate) const POOL_SIZE: u64 = agui_server::internals::POOL_SIZE as u64;

/// The `serve` flags of a benchmark server (the raw floor derives its config from the same).
pub(crate) fn server_args(
    bind: &str,
    model_url: &str,
    dirs: &Dirs,
    settings: &ServerSettings,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "serve",
        "--bind",
        bind,
        "--gemini-base-url",
        model_url,
        "--api-key",
        "fake",
        "--model",
        "gemini-3-flash-preview",
        "--max-sessions",
        "100000",
    ]
    .map(str::to_owned)
    .into();
    args.extend([
        "--pool-size".into(),
        settings.pool_size.unwrap_or(POOL_SIZE).to_string(),
        "--workspace-root".into(),
        dirs.workspace.display().to_string(),
        "--save-dir".into(),
        dirs.save.display().to_string(),
    ]);
    if let Some(secs) = settings.hibernate_after_secs {
        args.extend(["--hibernate-after-secs".into(), secs.to_string()]);
    }
    if let Some(secs) = settings.harness_idle_grace_secs {
        args.extend(["--harness-idle-grace-secs".into(), secs.to_string()]);
    }
    args.extend(settings.extra.iter().cloned());
    args
}

/// A run's scratch directories (wiped when created).
#[derive(Debug, Clone)]
pub(crate) struct Dirs {
    pub(crate) root: PathBuf,
    pub(crate) home: PathBuf,
    pub(crate) workspace: PathBuf,
    pub(crate) save: PathBuf,
}

impl Dirs {
    /// Fresh directories under `root`.
    pub(crate) fn fresh(root: &Path) -> anyhow::Result<Self> {
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("removing {}", root.display()))?;
        }
        let dirs = Self {
            root: root.to_owned(),
            home: root.join("home"),
            workspace: root.join("ws"),
            save: root.join("save"),
        };
        for dir in [&dirs.home, &dirs.workspace, &dirs.save] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(dirs)
    }
}

/// The scripted model, running as its own process (so its CPU is measured apart).
pub(crate) struct Model {
    child: Child,
    /// Closing it stops the model (`--stop-on-eof`), even if this process dies.
    _stdin: ChildStdin,
    pub(crate) pid: u32,
    pub(crate) base_url: String,
}

impl Model {
    /// Starts `gemini-script` serving `script` (a JSON file) on an ephemeral port, its log
    /// keeping only the latest request (bounded memory; enough to compare request shapes).
    pub(crate) async fn start(binary: &Path, script: &Path, log: &Path) -> anyhow::Result<Self> {
        let log = std::fs::File::create(log)?;
        let mut child = Command::new(binary)
            .args([
                "--port",
                "0",
                "--log-limit",
                "1",
                "--stop-on-eof",
                "--script",
            ])
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdin = child.stdin.take().context("model stdin")?;
        let stdout = child.stdout.take().context("model stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .context("the scripted model did not start within 20 s")??
            .context("the scripted model exited before listening")?;
        let base_url = line
            .strip_prefix("gemini-script listening on ")
            .context(format!("unexpected first line from gemini-script: {line}"))?
            .trim()
            .to_owned();
        let pid = child.id().context("model pid")?;
        Ok(Self {
            child,
            _stdin: stdin,
            pid,
            base_url,
        })
    }

    /// Model requests served so far (`GET /_script/state`, `served`).
    pub(crate) async fn served(&self, client: &reqwest::Client) -> Option<u64> {
        let state: serde_json::Value = client
            .get(format!("{}/_script/state", self.base_url))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        state["served"].as_u64()
    }

    /// The latest model request (the log keeps only that one).
    pub(crate) async fn last_request(
        &self,
        client: &reqwest::Client,
    ) -> Option<gemini_script::LoggedRequest> {
        let fetched = async {
            client
                .get(format!("{}/_script/requests", self.base_url))
                .timeout(Duration::from_secs(5))
                .send()
                .await?
                .json::<Vec<gemini_script::LoggedRequest>>()
                .await
        };
        match fetched.await {
            Ok(log) => log.into_iter().last(),
            Err(e) => {
                eprintln!("[agui-bench] could not read the model's request log: {e:#}");
                None
            }
        }
    }

    /// Stops the model.
    pub(crate) async fn stop(mut self) {
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// A running server.
pub(crate) struct Server {
    child: Option<Child>,
    pub(crate) pid: u32,
    pub(crate) url: String,
}

/// What stopping a server took.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct StopReport {
    pub(crate) stop_s: f64,
    pub(crate) killed: bool,
    /// Descendants still alive after the server exited (killed).
    pub(crate) leftovers: usize,
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

impl Server {
    /// Starts the server in fresh scratch directories under `root`; returns once `/healthz`
    /// answers.
    pub(crate) async fn start(
        bins: &Binaries,
        model_url: &str,
        root: &Path,
        settings: &ServerSettings,
        client: &reqwest::Client,
    ) -> anyhow::Result<Self> {
        let dirs = Dirs::fresh(root)?;
        let port = free_port()?;
        let bind = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(root.join("server.log"))?;
        let mut command = Command::new(&bins.server);
        command
            .args(server_args(&bind, model_url, &dirs, settings))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &dirs.home)
            .env("RUST_LOG", settings.log_filter.as_deref().unwrap_or("warn"))
            .env("ANTIGRAVITY_HARNESS_PATH", &bins.harness)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", bins.server.display()))?;
        let pid = child.id().context("server pid")?;
        let url = format!("http://{bind}/");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the server exited at start ({status}); see {}",
                    root.join("server.log").display()
                );
            }
            let health = client
                .get(format!("{url}healthz"))
                .timeout(Duration::from_secs(1))
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            if Instant::now() > deadline {
                bail!("the server did not answer /healthz within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            child: Some(child),
            pid,
            url,
        })
    }

    /// SIGTERM, SIGKILL after 15 s, then kills descendants still alive (found before the
    /// signal, by pid).
    pub(crate) async fn stop(mut self) -> StopReport {
        let Some(mut child) = self.child.take() else {
            return StopReport::default();
        };
        let kids: Vec<u32> = procfs::descendants(self.pid)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let t0 = Instant::now();
        let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
        let mut report = StopReport::default();
        if tokio::time::timeout(Duration::from_secs(15), child.wait())
            .await
            .is_err()
        {
            report.killed = true;
            let _ = child.kill().await;
        }
        report.stop_s = t0.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(500)).await;
        report.leftovers = kill_alive(&kids);
        report
    }
}

/// SIGKILLs each of `pids` still alive; returns how many were.
fn kill_alive(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|p| kill(Pid::from_raw(**p as i32), Signal::SIGKILL).is_ok())
        .count()
}

impl Drop for Server {
    /// A server left running (an error or Ctrl-C mid-run) is killed with its descendants.
    fn drop(&mut self) {
        if self.child.is_some() {
            let kids: Vec<u32> = procfs::descendants(self.pid)
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
            kill_alive(&kids);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_flags_follow_start_rust_sh() {
        let dirs = Dirs {
            root: "/s".into(),
            home: "/s/home".into(),
            workspace: "/s/ws".into(),
            save: "/s/save".into(),
        };
        // No pool size given: the server's default (`start_rust.sh` passes its own,
        // `BENCH_CONV_PER_PROC`, 8 unless told).
        let default = POOL_SIZE.to_string();
        for (pool_size, flag) in [(None, default.as_str()), (Some(1), "1")] {
            let settings = ServerSettings {
                hibernate_after_secs: Some(5),
                harness_idle_grace_secs: None,
                pool_size,
                extra: vec!["--x".into()],
                log_filter: None,
            };
            let args = server_args("127.0.0.1:1", "http://m", &dirs, &settings).join(" ");
            assert_eq!(
                args,
                format!(
                    "serve --bind 127.0.0.1:1 --gemini-base-url http://m --api-key fake \
                     --model gemini-3-flash-preview --max-sessions 100000 --pool-size {flag} \
                     --workspace-root /s/ws --save-dir /s/save --hibernate-after-secs 5 --x"
                )
            );
        }
    }
}
