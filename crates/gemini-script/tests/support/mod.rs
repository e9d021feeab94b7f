//! Test support: a minimal raw host for the real `localharness`.
//!
//! It speaks the wire protocol itself (only the binary lookup is `harness-client`'s), so these
//! tests check the scripted model against the real harness without depending on the host
//! under test elsewhere, using the raw `HarnessConfig` fragments of
//! [`HostSetup`](gemini_script::scenarios::HostSetup). It does only what these tests need:
//! spawn the harness with a scratch `HOME`, do the stdio protobuf handshake, open one WebSocket
//! per conversation, run turns that answer tool calls and questions, and make sure no harness
//! process outlives the test.

mod conversation;
mod proto;

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use gemini_script::{Handle, scenarios::HostSetup};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    process::{Child, ChildStdin, Command},
};

pub(crate) use conversation::Conversation;

/// The model name the tests configure.
pub(crate) const MODEL: &str = "gemini-3-flash-preview";
/// A guard against a stuck harness, not a speed expectation.
pub(crate) const GUARD: Duration = Duration::from_secs(120);

/// The harness binary, found as the server finds it (`ANTIGRAVITY_HARNESS_PATH`, the project
/// cache of `cargo xtask fetch-harness`, …). Fails the test (never skips) when there is none.
fn harness_path() -> PathBuf {
    harness_client::find_binary(None).unwrap_or_else(|e| panic!("{e}"))
}

/// Keeps the last lines of the harness's stderr for failure messages.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() >= 100 {
            lines.remove(0);
        }
        lines.push(line);
    }

    /// The kept lines, for panic messages.
    pub(crate) fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }
}

/// One running harness process with its scratch directories.
pub(crate) struct Harness {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    api_key: String,
    scratch: tempfile::TempDir,
    stderr: StderrTail,
}

impl Harness {
    /// Spawns the harness and completes the stdio handshake.
    pub(crate) async fn spawn() -> Self {
        let binary = harness_path();
        let scratch = tempfile::tempdir().expect("scratch dir");
        for dir in ["home", "storage", "ws", "appdata"] {
            std::fs::create_dir_all(scratch.path().join(dir)).expect("scratch subdir");
        }
        // The harness installs helpers under $HOME; keep them out of the real one.
        let mut child = Command::new(&binary)
            .env("HOME", scratch.path().join("home"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stderr = StderrTail::default();
        if let Some(pipe) = child.stderr.take() {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tail.push(line);
                }
            });
        }
        let mut stdin = child.stdin.take().expect("stdin pipe");
        let mut stdout = child.stdout.take().expect("stdout pipe");
        let storage = scratch.path().join("storage");
        let handshake = async {
            stdin
                .write_all(&proto::input_config_frame(&storage.to_string_lossy()))
                .await?;
            stdin.flush().await?;
            let mut len = [0u8; 4];
            stdout.read_exact(&mut len).await?;
            let mut buf = vec![0u8; u32::from_le_bytes(len) as usize];
            stdout.read_exact(&mut buf).await?;
            Ok::<_, std::io::Error>(buf)
        };
        let output = match tokio::time::timeout(GUARD, handshake).await {
            Ok(Ok(buf)) => buf,
            other => panic!(
                "harness handshake failed: {other:?}\nstderr:\n{}",
                stderr.text()
            ),
        };
        let (port, api_key) = proto::decode_output_config(&output)
            .unwrap_or_else(|e| panic!("bad OutputConfig: {e}\nstderr:\n{}", stderr.text()));
        // Nothing more is expected on stdout, but a full pipe must never block the harness.
        tokio::spawn(async move {
            let mut sink = tokio::io::sink();
            let _ = tokio::io::copy(&mut stdout, &mut sink).await;
        });
        Self {
            child,
            stdin: Some(stdin),
            port,
            api_key,
            scratch,
            stderr,
        }
    }

    /// The workspace directory.
    pub(crate) fn workspace(&self) -> PathBuf {
        self.scratch.path().join("ws")
    }

    fn app_data(&self) -> PathBuf {
        self.scratch.path().join("appdata")
    }

    /// Creates files in the workspace.
    pub(crate) fn write_workspace_files(&self, files: &[(&str, &str)]) {
        for (relative, content) in files {
            let path = self.workspace().join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("workspace subdir");
            }
            std::fs::write(&path, content).expect("workspace file");
        }
    }

    /// A `HarnessConfig` pointing at `model`, configured per `setup`. With a
    /// `cascade_id` the conversation is created or resumed under that id.
    pub(crate) fn config(
        &self,
        model: &Handle,
        setup: &HostSetup,
        cascade_id: Option<&str>,
    ) -> Value {
        let endpoint = json!({"baseUrl": model.base_url(), "apiKey": "fake-key"});
        let mut config = json!({
            "cascadeId": cascade_id.unwrap_or(""),
            "workspaces": [{"filesystemWorkspace": {"directory": path_str(&self.workspace())}}],
            "appDataDir": path_str(&self.app_data()),
            "models": [
                {"name": MODEL, "types": ["MODEL_TYPE_TEXT"], "geminiApiEndpoint": endpoint},
                {"name": "scripted-image-model", "types": ["MODEL_TYPE_IMAGE"], "geminiApiEndpoint": endpoint}
            ],
            "harnessSideTools": setup.harness_side_tools(),
            "policyConfig": {
                "rules": [{"tool": "*", "name": "allow_all", "decision": "POLICY_DECISION_ALLOW"}],
                "workspaceContainment": "WORKSPACE_CONTAINMENT_DISABLED"
            },
            "agentBehavior": setup.agent_behavior(),
        });
        if cascade_id.is_some() {
            config["sessionContinuationMode"] = json!("CREATE_OR_RESUME");
        }
        if let Some(tools) = setup.tools() {
            config["tools"] = tools;
        }
        if let Some(retry) = setup.retry_config() {
            config["retryConfig"] = retry;
        }
        config
    }

    /// Opens a WebSocket and initialises a conversation with `config`.
    pub(crate) async fn connect(&self, config: Value) -> Conversation {
        match Conversation::open(self.port, &self.api_key, config, self.stderr.clone()).await {
            Some(conversation) => conversation,
            None => self.init_failed().await,
        }
    }

    /// Re-attaches to a conversation whose socket was just closed. The harness
    /// releases the id asynchronously after the close ("Cascade ID … is already
    /// in use"), so the init is retried a bounded number of times.
    pub(crate) async fn reattach(&self, config: Value) -> Conversation {
        for _ in 0..100 {
            let stderr = self.stderr.clone();
            if let Some(conversation) =
                Conversation::open(self.port, &self.api_key, config.clone(), stderr).await
            {
                return conversation;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.init_failed().await
    }

    async fn init_failed(&self) -> ! {
        // The harness logs why it dropped the socket just after dropping it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        panic!(
            "the harness dropped the socket during init\nstderr:\n{}",
            self.stderr.text()
        )
    }

    /// The harness's recent stderr.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Closes stdin (the shutdown signal) and waits for the process to exit.
    pub(crate) async fn shutdown(mut self) -> ExitStatus {
        drop(self.stdin.take());
        match tokio::time::timeout(GUARD, self.child.wait()).await {
            Ok(Ok(status)) => status,
            other => {
                let _ = self.child.kill().await;
                panic!(
                    "harness did not exit after stdin closed: {other:?}\nstderr:\n{}",
                    self.stderr.text()
                )
            }
        }
    }
}

fn path_str(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
