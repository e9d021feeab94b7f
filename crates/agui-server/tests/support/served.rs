//! A real `agui-antigravity serve` started as a separate process, as an operator starts it
//! (a marker secret in its environment and on its command line, and the API key in a file),
//! with the real harness and a scripted model that runs what the user types: as a command
//! (`run_command` in the workspace), or, for a path containing `/./`, as `view_file`. Callers
//! are `alice` and `bob` (`auth_tokens`), so threads have owners.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agui_types::{Encoding, Event};
use gemini_script::{Handle, Matcher, Reply, Script, ScriptedModel};
use serde_json::{Value, json};

/// The two callers of a served agent, by name: their tokens.
pub const OWNERS: [(&str, &str); 2] = [
    ("alice", "alice-token-7f3a"),
    ("bob", "bob-token-9c1e-0123"),
];

/// A token no test writes literally, so a scan never finds its own command line.
pub fn secret(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{what}-{}x{nanos}", std::process::id())
}

/// A shell comment that makes the model send the command to the background after 200 ms
/// (`WaitMsBeforeAsync`): the turn ends while it runs on.
pub const BACKGROUND: &str = "#background";

/// The model: text after a tool result; `view_file` of a typed path holding `/./`; otherwise
/// the typed text as a command in the workspace (sent to the background after 200 ms when it
/// holds [`BACKGROUND`]).
pub fn script() -> Script {
    Script::new()
        .then(
            Reply::text(["Done."])
                .when(Matcher::function_response())
                .forever(),
        )
        .then(
            Reply::call("view_file", json!({"AbsolutePath": "{{user_text}}"}))
                .when(Matcher::user_text().user_text_contains("/./"))
                .forever(),
        )
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "{{user_text}}", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 200}),
            )
            .when(Matcher::user_text().user_text_contains(BACKGROUND))
            .forever(),
        )
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "{{user_text}}", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 30000}),
            )
            .when(Matcher::user_text())
            .forever(),
        )
}

/// A server started as a separate process.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    pub env_secret: String,
    pub cmdline_secret: String,
    /// What the API key file holds (the model's key).
    pub key_secret: String,
    /// Where it is: under `/etc` when the tests run as root, as the deploy recipes keep it.
    pub key_file: PathBuf,
    pub model: Handle,
}

/// How to start a [`Served`].
#[derive(Default)]
pub struct Start<'a> {
    /// Extra flags.
    pub args: &'a [&'a str],
    /// Extra environment.
    pub env: &'a [(&'a str, &'a str)],
    /// Serve without identities (a single local owner).
    pub anonymous: bool,
    /// Share this server's save dir and workspace root (another replica of it).
    pub replica_of: Option<&'a Served>,
}

impl Served {
    /// `agui-antigravity serve` with the agent tools of the attacks, identities for `alice` and
    /// `bob`, the key in `--api-key-file`, a marker secret in `GEMINI_API_KEY` and `--api-key`.
    pub async fn start(start: Start<'_>) -> Self {
        let model = ScriptedModel::start(script()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let env_secret = secret("env-secret");
        let cmdline_secret = secret("cmdline-secret");
        let key_secret = secret("key-secret");
        let key_file = key_file_path(dir.path());
        if let Some(parent) = key_file.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&key_file, format!("{key_secret}\n")).unwrap();
        let harness = harness_client::find_binary(None).unwrap_or_else(|e| {
            panic!("these tests run the real harness and did not find it: {e}\nRun `cargo xtask fetch-harness` first.")
        });
        let base = start.replica_of.map_or_else(
            || dir.path().to_owned(),
            |other| other.dir.path().to_owned(),
        );
        let path = |name: &str| base.join(name).display().to_string();
        let tokens = OWNERS
            .iter()
            .map(|(name, token)| format!("{name}={token}"))
            .collect::<Vec<_>>()
            .join(",");
        // With AGUI_TEST_UNCONFINED set, every attack runs against an unconfined server, where
        // each must succeed (its test fails): what proves no attack test is vacuous.
        let unconfined = std::env::var_os("AGUI_TEST_UNCONFINED").is_some();
        let mut args: Vec<&str> = start.args.to_vec();
        if unconfined {
            match args.iter().position(|a| *a == "--sandbox") {
                Some(i) if i + 1 < args.len() => args[i + 1] = "off",
                _ => args.extend(["--sandbox", "off"]),
            }
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_agui-antigravity"));
        command
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(["--save-dir", &path("save"), "--workspace-root", &path("w")])
            .args(["--gemini-base-url", &model.base_url(), "--model", "m"])
            .args(["--api-key", &cmdline_secret, "--api-retries", "1"])
            .arg("--api-key-file")
            .arg(&key_file)
            .args([
                "--builtin-tools",
                "list_dir,view_file,write_to_file,run_command",
            ])
            .arg("--harness-path")
            .arg(&harness)
            .args(&args)
            .env("GEMINI_API_KEY", &env_secret)
            .envs(start.env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if !start.anonymous {
            command.args(["--auth-tokens", &tokens]);
        }
        if unconfined {
            command.env("AGUI_INSECURE_UNCONFINED", "true");
        }
        if !start.args.contains(&"--prestart-harness") {
            // No process ahead of need unless a test asks: each starts exactly what it uses.
            command.args(["--prestart-harness", "false"]);
        }
        let child = command.spawn().expect("the server starts");
        let addr = served_address(&log).await;
        Self {
            child,
            addr,
            dir,
            log,
            env_secret,
            cmdline_secret,
            key_secret,
            key_file,
            model,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    pub fn save_dir(&self) -> PathBuf {
        self.dir.path().join("save")
    }

    pub fn workspace_root(&self) -> PathBuf {
        self.dir.path().join("w")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The capabilities, as `owner` sees them.
    pub async fn capabilities(&self) -> Value {
        reqwest::Client::new()
            .get(format!("http://{}/capabilities", self.addr))
            .bearer_auth(token(OWNERS[0].0))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Sends `text` as the next user message of `owner`'s `thread`; the text of the tool
    /// results.
    pub async fn say(&self, owner: &str, thread: &str, text: &str) -> String {
        let events = self.run(owner, thread, text).await;
        assert!(
            matches!(events.last(), Some(Event::RunFinished(_))),
            "the run finished: {events:?}"
        );
        tool_results(&events)
    }

    /// Sends `text` as the next user message of `owner`'s `thread`; the run's events.
    pub async fn run(&self, owner: &str, thread: &str, text: &str) -> Vec<Event> {
        let id = secret("m");
        let body = json!({"threadId": thread, "runId": id, "messages": [{"id": id, "role": "user", "content": text}]});
        let response = reqwest::Client::new()
            .post(format!("http://{}/", self.addr))
            .bearer_auth(token(owner))
            .json(&body)
            .send()
            .await
            .unwrap();
        if response.status() != 200 {
            let status = response.status();
            panic!(
                "the run was refused ({status}): {}",
                response.text().await.unwrap_or_default()
            );
        }
        let bytes = tokio::time::timeout(Duration::from_secs(120), response.bytes())
            .await
            .expect("the run ends")
            .unwrap();
        Encoding::Sse.decode_all(&bytes).expect("valid SSE")
    }

    /// The workspace of `owner`'s `thread`, as its command sees it.
    pub async fn workspace(&self, owner: &str, thread: &str) -> PathBuf {
        let out = self.say(owner, thread, "echo WS=$PWD").await;
        let line = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("WS="))
            .unwrap_or_else(|| panic!("the workspace was printed: {out}"));
        PathBuf::from(line.trim())
    }
}

impl Served {
    /// Stops the server (SIGTERM: it reaps its harness processes on the way out), keeping its
    /// directories for another server to start on ([`Start::replica_of`]).
    pub fn stop(&mut self) {
        signal(self.child.id(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
        if self.key_file.starts_with("/etc") {
            let _ = std::fs::remove_dir_all(self.key_file.parent().unwrap());
        }
    }
}

/// The address a server started as a process serves on, read from its log (`log`, its
/// stderr) once it says so.
pub async fn served_address(log: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        // Complete lines only: the line may be read while it is being written.
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        if let Some(line) = complete
            .lines()
            .find(|l| l.contains("serving AG-UI on http://"))
        {
            return line.rsplit("http://").next().unwrap().trim().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the server did not start:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where the key file goes: under `/etc`, as the deploy recipes put it, when this process may
/// write there; else in the test's directory (outside the sandbox's view either way).
fn key_file_path(dir: &Path) -> PathBuf {
    let etc = PathBuf::from(format!("/etc/agui-test-{}", secret("k")));
    match std::fs::create_dir(&etc) {
        Ok(()) => etc.join("gemini.key"),
        Err(_) => dir.join("gemini.key"),
    }
}

/// The bearer token of `owner`.
pub fn token(owner: &str) -> &'static str {
    OWNERS
        .iter()
        .find(|(name, _)| *name == owner)
        .map(|(_, token)| *token)
        .unwrap_or("no-such-token")
}

/// The text of a run's tool results: a command's output as it printed it, anything else as
/// the harness reported it.
pub fn tool_results(events: &[Event]) -> String {
    events
        .iter()
        .filter(|e| matches!(e, Event::ToolCallResult(_)))
        .map(|e| {
            let content = serde_json::to_value(e).unwrap()["content"].clone();
            let text = content
                .as_str()
                .map_or_else(|| content.to_string(), str::to_owned);
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(result)) => match result.get("combinedOutput") {
                    Some(Value::String(output)) => output.replace('\r', ""),
                    _ => text,
                },
                _ => text,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file below `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// The descendants of `root` running the executable `name`.
pub fn descendants(root: u32, name: &str) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found
        .into_iter()
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == name))
        })
        .collect()
}

/// The pid namespace of a process (`pid:[<inode>]`): one per sandbox.
pub fn pid_namespace(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .map(|link| link.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The pids of the host's processes whose command line is `command`.
pub fn processes_running(command: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let file = std::fs::File::open(e.path().join("cmdline")).ok()?;
            let mut line = Vec::new();
            BufReader::new(file).read_until(0xff, &mut line).ok()?;
            let text = String::from_utf8_lossy(&line).replace('\0', " ");
            (text.trim() == command).then_some(pid)
        })
        .collect()
}
