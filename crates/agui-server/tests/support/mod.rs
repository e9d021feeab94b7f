//! What the HTTP tests share: a server started in-process on the real harness, requests,
//! input builders, the harness processes of a save dir and captured logs.

#![allow(dead_code, unreachable_pub)]

pub mod upstream;

pub mod served;

pub mod files;

pub mod legacy;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agui_server::{RunningServer, Server, ServerConfig};
use agui_types::{Encoding, Event, StreamVerifier};
use serde_json::{Value, json};

/// A server started in-process, with its temporary directory and a client.
pub struct Fixture {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
    pub client: reqwest::Client,
    args: Vec<String>,
}

impl Fixture {
    /// A server with its directories in a fresh temporary directory and `extra` flags, on
    /// 127.0.0.1 unless they say `--bind`.
    pub async fn start(extra: &[&str]) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), extra).await
    }

    async fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Self {
        let save = dir.path().join("save").to_string_lossy().into_owned();
        let work = dir.path().join("w").to_string_lossy().into_owned();
        let mut args: Vec<String> = [
            "agui-antigravity",
            "--save-dir",
            &save,
            "--workspace-root",
            &work,
        ]
        .map(String::from)
        .into();
        if !extra.contains(&"--bind") {
            args.extend(["--bind".into(), "127.0.0.1:0".into()]);
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let config = ServerConfig::from_args(args.clone()).expect("valid flags");
        let server = Server::new(config)
            // The binary is the sandbox launcher (this test program is not).
            .with_sandbox_launcher(agui_server::sandbox::launcher_at(env!(
                "CARGO_BIN_EXE_agui-antigravity"
            )))
            .start()
            .await
            .expect("the server starts");
        Self {
            server,
            dir,
            client: reqwest::Client::new(),
            args,
        }
    }

    /// The same server stopped and started again on the same directories.
    pub async fn restart(self) -> Self {
        self.restart_after(|_| {}).await
    }

    /// [`restart`](Self::restart), with `between` done to the directories (the temporary
    /// directory's path) while the server is stopped.
    pub async fn restart_after(self, between: impl FnOnce(&std::path::Path)) -> Self {
        self.server.shutdown().await;
        between(self.dir.path());
        let extra: Vec<String> = self.args[5..].to_vec();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        Self::start_in(self.dir, &extra).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr())
    }

    /// The JSON body of `GET path`.
    pub async fn get_json(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Runs to the end and decodes the events (checked with the client's ordering rules).
    pub async fn run(&self, path: &str, body: Value) -> Vec<Event> {
        events_of(self.post(path, body).await).await
    }
}

/// The events of a run's response, read to the end (checked with the client's ordering rules).
pub async fn events_of(response: reqwest::Response) -> Vec<Event> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let bytes = tokio::time::timeout(Duration::from_secs(60), response.bytes())
        .await
        .expect("the run ends")
        .unwrap();
    let events = Encoding::Sse.decode_all(&bytes).expect("valid SSE");
    StreamVerifier::verify_all(&events).unwrap_or_else(|v| panic!("{v}"));
    events
}

pub fn input(thread: &str, messages: Value) -> Value {
    json!({"threadId": thread, "runId": format!("run-{thread}-{}", messages.as_array().map_or(0, Vec::len)), "messages": messages})
}

pub fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": text})
}

pub fn text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| {
            if let Event::TextMessageContent(c) = e {
                Some(c.delta.as_str())
            } else {
                None
            }
        })
        .collect()
}

/// `localharness` processes working in `dir` (each agent's save dir is its harness's cwd).
pub fn harnesses_in(dir: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            (cwd.starts_with(dir) && exe.ends_with("localharness")).then_some(pid)
        })
        .collect()
}

/// The log lines this thread emits while it is alive (a current-thread runtime's tasks
/// included), as text without colours.
pub struct CapturedLog {
    lines: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLog {
    pub fn start() -> Self {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || Writer(writer.clone()))
            .finish();
        Self {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.lines.lock().unwrap()).into_owned()
    }
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
