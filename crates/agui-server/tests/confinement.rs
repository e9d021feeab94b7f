//! The attacks of issue 13 against a real `agui-antigravity serve` (the binary, with a marker
//! secret in its environment and on its command line), the real harness and a scripted model
//! that runs what the user types: as a command (`run_command`), or, for a path containing
//! `/./`, as `view_file`. Every attack is made from an agent's tools and must fail under the
//! default `sandbox = "strict"`.
//!
//! `AGUI_SANDBOX=off cargo test --test confinement` runs the same attacks against unconfined
//! harnesses (today's behaviour before the sandbox): they then succeed and the tests fail.
//! The fallback test simulates a machine without user namespaces with
//! `AGUI_SANDBOX_SIMULATE_UNAVAILABLE` (see `harness_client::sandbox`).
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agui_types::{Encoding, Event};
use gemini_script::{Handle, Matcher, Reply, Script, ScriptedModel};
use serde_json::{Value, json};

/// A token no test writes literally, so a scan never finds its own command line.
fn secret(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{what}-{}x{nanos}", std::process::id())
}

/// The model: text after a tool result; `view_file` of a typed path holding `/./`; otherwise
/// the typed text as a command in the workspace.
fn script() -> Script {
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
                json!({"CommandLine": "{{user_text}}", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 30000}),
            )
            .when(Matcher::user_text())
            .forever(),
        )
}

/// A server started as a separate process, as an operator starts it.
struct Served {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
    log: PathBuf,
    env_secret: String,
    cmdline_secret: String,
    _model: Handle,
}

impl Served {
    /// `agui-antigravity serve` with the agent tools of the attack, the key both in
    /// `GEMINI_API_KEY` and `--api-key`, and `extra` flags / `env`.
    async fn start(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let model = ScriptedModel::start(script()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let env_secret = secret("env-secret");
        let cmdline_secret = secret("cmdline-secret");
        let harness = harness_client::find_binary(None).unwrap_or_else(|e| {
            panic!("these tests run the real harness and did not find it: {e}\nRun `cargo xtask fetch-harness` first.")
        });
        let path = |name: &str| dir.path().join(name).display().to_string();
        let mut command = Command::new(env!("CARGO_BIN_EXE_agui-antigravity"));
        command
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--prestart-harness",
                "false",
            ])
            .args(["--save-dir", &path("save"), "--workspace-root", &path("w")])
            .args(["--gemini-base-url", &model.base_url(), "--model", "m"])
            .args(["--api-key", &cmdline_secret, "--api-retries", "1"])
            .args([
                "--builtin-tools",
                "list_dir,view_file,write_to_file,run_command",
            ])
            .arg("--harness-path")
            .arg(&harness)
            .args(extra)
            .env("GEMINI_API_KEY", &env_secret)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = command.spawn().expect("the server starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(line) = text
                .lines()
                .find(|l| l.contains("serving AG-UI on http://"))
            {
                break line.rsplit("http://").next().unwrap().trim().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not start:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Self {
            child,
            addr,
            dir,
            log,
            env_secret,
            cmdline_secret,
            _model: model,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    fn save_dir(&self) -> PathBuf {
        self.dir.path().join("save")
    }

    fn workspace_root(&self) -> PathBuf {
        self.dir.path().join("w")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn capabilities(&self) -> Value {
        reqwest::get(format!("http://{}/capabilities", self.addr))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Sends `text` as the next user message of `thread`; the text of the tool results.
    async fn say(&self, thread: &str, text: &str) -> String {
        let events = self.run(thread, text).await;
        assert!(
            matches!(events.last(), Some(Event::RunFinished(_))),
            "the run finished: {events:?}"
        );
        events
            .iter()
            .filter(|e| matches!(e, Event::ToolCallResult(_)))
            .map(|e| {
                let content = serde_json::to_value(e).unwrap()["content"].clone();
                content
                    .as_str()
                    .map_or_else(|| content.to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Sends `text` as the next user message of `thread`; the run's events.
    async fn run(&self, thread: &str, text: &str) -> Vec<Event> {
        let id = secret("m");
        let body = json!({"threadId": thread, "runId": id, "messages": [{"id": id, "role": "user", "content": text}]});
        let response = reqwest::Client::new()
            .post(format!("http://{}/", self.addr))
            .json(&body)
            .send()
            .await
            .unwrap();
        let bytes = tokio::time::timeout(Duration::from_secs(120), response.bytes())
            .await
            .expect("the run ends")
            .unwrap();
        Encoding::Sse.decode_all(&bytes).expect("valid SSE")
    }

    /// The workspace directory the server made for the thread that used it first.
    fn only_workspace(&self) -> PathBuf {
        let dirs: Vec<PathBuf> = std::fs::read_dir(self.workspace_root())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(dirs.len(), 1, "one thread so far: {dirs:?}");
        dirs[0].clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM: the server reaps its harness processes on the way out.
        signal(self.child.id(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Thread A works (writes `secret` into a file of its workspace and says it in its prompt);
/// returns A's workspace.
async fn thread_a_works(served: &Served, secret: &str) -> PathBuf {
    let out = served
        .say(
            "thread-a",
            &format!("echo {secret} > a.txt && echo written"),
        )
        .await;
    assert!(out.contains("written"), "thread A worked: {out}");
    served.only_workspace()
}

#[tokio::test]
async fn commands_cannot_read_the_servers_environment_or_command_line() {
    let served = Served::start(&[], &[]).await;
    let out = served
        .say(
            "scan",
            "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null \
             | grep -a -o -e 'env-secre[t]-[0-9x]*' -e 'cmdline-secre[t]-[0-9x]*' | sort -u; \
             echo scanned $(ls -d /proc/[0-9]* | wc -l) processes",
        )
        .await;
    assert!(out.contains("scanned"), "the scan ran: {out}");
    assert!(
        !out.contains(&served.env_secret),
        "environment leaked: {out}"
    );
    assert!(
        !out.contains(&served.cmdline_secret),
        "command line leaked: {out}"
    );
}

/// (Today's harness reads `/proc` files as empty through `view_file`, so this is a guard
/// rather than a leak that confinement closes.)
#[tokio::test]
async fn view_file_cannot_read_the_servers_environment() {
    let served = Served::start(&[], &[]).await;
    let out = served
        .say("view", &format!("/proc/./{}/environ", served.pid()))
        .await;
    assert!(
        !out.contains(&served.env_secret),
        "environment leaked: {out}"
    );
}

#[tokio::test]
async fn another_threads_file_cannot_be_read_by_its_path() {
    let served = Served::start(&[], &[]).await;
    let secret = secret("thread-a-file");
    let a = thread_a_works(&served, &secret).await;
    let by_command = served
        .say("thread-b", &format!("cat {}/a.txt", a.display()))
        .await;
    assert!(
        !by_command.contains(&secret),
        "read by a command: {by_command}"
    );
    let by_tool = served
        .say("thread-b", &format!("{}/./a.txt", a.display()))
        .await;
    assert!(!by_tool.contains(&secret), "read by view_file: {by_tool}");
}

#[tokio::test]
async fn another_threads_file_cannot_be_found_by_grep_over_the_file_system() {
    let served = Served::start(&[], &[]).await;
    let secret = secret("thread-a-grep");
    thread_a_works(&served, &secret).await;
    let pattern = format!("{}[{}]", &secret[..3], &secret[3..4]);
    let rest = &secret[4..];
    let out = served
        .say(
            "thread-b",
            &format!(
                "timeout 60 grep -rl -e '{pattern}{rest}' / --exclude-dir=proc --exclude-dir=sys \
                 --exclude-dir=usr --exclude-dir=work --exclude-dir=shm --exclude-dir=.rustup \
                 --exclude-dir=.cargo 2>/dev/null | head; echo grep-done"
            ),
        )
        .await;
    assert!(out.contains("grep-done"), "grep ran: {out}");
    // Whatever holds the secret (A's file, database, transcript) is in the test's directory.
    let root = served.dir.path().display().to_string();
    assert!(!out.contains(&root), "found thread A's data: {out}");
}

#[tokio::test]
async fn a_symlink_planted_in_the_workspace_does_not_reach_another_thread() {
    let served = Served::start(&[], &[]).await;
    let secret = secret("thread-a-link");
    let a = thread_a_works(&served, &secret).await;
    let by_command = served
        .say(
            "thread-b",
            &format!("ln -s {}/a.txt link.txt; cat link.txt", a.display()),
        )
        .await;
    assert!(
        !by_command.contains(&secret),
        "read by a command: {by_command}"
    );
    let b = std::fs::read_dir(served.workspace_root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| *p != a)
        .expect("thread B's workspace");
    let by_tool = served
        .say("thread-b", &format!("{}/./link.txt", b.display()))
        .await;
    assert!(!by_tool.contains(&secret), "read by view_file: {by_tool}");
}

#[tokio::test]
async fn another_threads_transcript_home_and_database_are_out_of_sight() {
    let served = Served::start(&[], &[]).await;
    let secret = secret("thread-a-prompt");
    let a = thread_a_works(&served, &secret).await;
    let a_slot = a.file_name().unwrap().to_string_lossy().into_owned();
    let save = served.save_dir();
    let out = served
        .say(
            "thread-b",
            &format!(
                "ls -R {save} 2>&1 | head -100; cat {save}/t/*/app/brain/*/.system_generated/logs/*.jsonl \
                 2>&1 | head -c 20000; find / -xdev \\( -name '*.db' -o -name '*.json' \\) \
                 -path '*{save_name}*' 2>/dev/null | head -50; echo listed",
                save = save.display(),
                save_name = save.file_name().unwrap().to_string_lossy(),
            ),
        )
        .await;
    assert!(out.contains("listed"), "the commands ran: {out}");
    assert!(
        !out.contains(&secret),
        "thread A's transcript leaked: {out}"
    );
    let a_databases: Vec<String> = walk(&save)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        a_databases.len(),
        2,
        "one conversation per thread: {a_databases:?}"
    );
    let seen: Vec<&String> = a_databases.iter().filter(|db| out.contains(*db)).collect();
    assert!(
        seen.len() <= 1,
        "another thread's database is visible: {out}"
    );
    assert!(
        !out.contains("threads/"),
        "the thread store is visible: {out}"
    );
    assert!(
        !out.contains(&a_slot),
        "thread A's directories are visible: {out}"
    );
}

#[tokio::test]
async fn writes_outside_the_workspace_fail() {
    let served = Served::start(&[], &[]).await;
    let a = thread_a_works(&served, &secret("thread-a-write")).await;
    let outside = served.dir.path().join("outside.txt");
    let targets = [
        a.join("pwned.txt"),
        served.save_dir().join("pwned.txt"),
        outside.clone(),
    ];
    let command: Vec<String> = targets
        .iter()
        .map(|t| format!("echo pwned > {}", t.display()))
        .collect();
    let out = served
        .say(
            "thread-b",
            &format!("{}; echo mine > mine.txt; echo tried", command.join("; ")),
        )
        .await;
    assert!(out.contains("tried"), "the commands ran: {out}");
    for target in &targets {
        assert!(!target.exists(), "wrote {}", target.display());
    }
    let mine = walk(&served.workspace_root())
        .into_iter()
        .any(|p| p.ends_with("mine.txt"));
    assert!(mine, "the agent still writes its own workspace");
}

/// The harness would store its 16.8 MB webm encoder (browser recordings) in every thread's
/// own `HOME`; the sandbox keeps it out, and the agent cannot make room for it.
#[tokio::test]
async fn a_threads_home_holds_no_copy_of_the_harness_encoder_and_the_agent_cannot_make_room() {
    let served = Served::start(&[], &[]).await;
    let out = served
        .say(
            "thread-a",
            "rm -rf $HOME/.gemini/antigravity/bin; mkdir -p $HOME/.gemini/antigravity/bin \
             && echo made; echo tried",
        )
        .await;
    assert!(out.contains("tried"), "the commands ran: {out}");
    assert!(!out.contains("made"), "the agent replaced the mask: {out}");
    // A second turn: a process's first turn is when the harness installs the encoder.
    let out = served.say("thread-a", "echo again").await;
    assert!(out.contains("again"), "{out}");
    let files = walk(&served.save_dir());
    let encoders: Vec<_> = files
        .iter()
        .filter(|p| p.ends_with("webm_encoder"))
        .collect();
    assert!(
        encoders.is_empty(),
        "the encoder was installed: {encoders:?}"
    );
    let masks: Vec<_> = files
        .iter()
        .filter(|p| p.ends_with(".gemini/antigravity/bin"))
        .collect();
    assert_eq!(masks.len(), 1, "{files:?}");
    assert_eq!(std::fs::metadata(masks[0]).unwrap().len(), 0);
}

#[tokio::test]
async fn tmp_is_private_to_each_thread() {
    let served = Served::start(&[], &[]).await;
    let secret = secret("tmp-secret");
    let name = format!("agui-{}", self::secret("confinement"));
    let out = served
        .say(
            "thread-a",
            &format!("echo {secret} > /tmp/{name} && echo written"),
        )
        .await;
    assert!(out.contains("written"), "{out}");
    let host = Path::new("/tmp").join(&name);
    let on_host = host.exists();
    let _ = std::fs::remove_file(&host);
    let out = served.say("thread-b", &format!("cat /tmp/{name}")).await;
    assert!(
        !out.contains(&secret),
        "thread B read thread A's /tmp: {out}"
    );
    assert!(!on_host, "the host's /tmp got the file");
}

#[tokio::test]
async fn commands_cannot_signal_or_connect_to_the_server() {
    let served = Served::start(&[], &[]).await;
    let out = served
        .say(
            "signal",
            &format!(
                "kill -0 {pid} && echo SIGNALLED; (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED; echo tried",
                pid = served.pid(),
                port = served.port()
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(!out.contains("SIGNALLED"), "signalled the server: {out}");
    assert!(
        !out.contains("CONNECTED"),
        "connected to the server's port: {out}"
    );
}

#[tokio::test]
async fn commands_die_with_their_threads_harness_even_when_it_crashes() {
    let served = Served::start(&[], &[]).await;
    // A unique duration names the command.
    let seconds = 86_000 + std::process::id() % 400;
    let command = format!("sleep {seconds}");
    let run = served.run("crash", &command);
    let crash = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        while processes_running(&command).is_empty() {
            assert!(Instant::now() < deadline, "the command did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The harness dies abruptly (a crash, an OOM kill): nothing gets to clean up.
        let harnesses = descendants(served.pid(), "localharness");
        assert_eq!(harnesses.len(), 1, "one harness for the thread");
        signal(harnesses[0], nix::sys::signal::Signal::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !processes_running(&command).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        processes_running(&command)
    };
    let (_, left) = tokio::join!(run, crash);
    for pid in &left {
        signal(*pid, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(
        left.is_empty(),
        "the command outlived the thread's harness: {left:?}"
    );
}

#[tokio::test]
async fn strict_says_the_harness_is_sandboxed() {
    let served = Served::start(&["--sandbox", "strict"], &[]).await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], true, "{caps}");
    assert_eq!(caps["custom"]["sandbox"]["confined"], true, "{caps}");
    let ports = caps["custom"]["sandbox"]["tcpPorts"].as_array().unwrap();
    assert!(
        !ports
            .iter()
            .any(|p| p.as_u64() == served.port().parse().ok()),
        "the AG-UI port is not open to commands: {caps}"
    );
}

#[tokio::test]
async fn without_user_namespaces_the_tools_that_need_them_are_withheld_and_the_reason_given() {
    let served = Served::start(
        &["--sandbox", "strict"],
        &[(
            harness_client::sandbox::SIMULATE_UNAVAILABLE_ENV,
            "no user namespaces",
        )],
    )
    .await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], false, "{caps}");
    let sandbox = &caps["custom"]["sandbox"];
    assert_eq!(sandbox["confined"], false, "{caps}");
    assert_eq!(
        sandbox["withheldTools"],
        json!(["run_command", "write_to_file"]),
        "{caps}"
    );
    assert!(
        sandbox["reason"]
            .as_str()
            .unwrap()
            .contains("no user namespaces"),
        "{caps}"
    );
    assert!(
        sandbox["fix"]
            .as_str()
            .unwrap()
            .contains("sandbox = \"off\""),
        "{caps}"
    );
    assert_eq!(
        caps["custom"]["builtinTools"],
        json!(["list_dir", "view_file"]),
        "{caps}"
    );
    assert!(
        served.log().contains("SANDBOX UNAVAILABLE"),
        "said loudly in the log: {}",
        served.log()
    );
    // The model is not offered the withheld tools; the read tools stay, contained.
    let out = served
        .say("fallback", &format!("/proc/./{}/environ", served.pid()))
        .await;
    assert!(!out.contains(&served.env_secret), "{out}");
    let declared = served._model.requests()[0].declared_functions();
    assert!(
        !declared
            .iter()
            .any(|f| f == "run_command" || f == "write_to_file"),
        "{declared:?}"
    );
    assert!(declared.iter().any(|f| f == "view_file"), "{declared:?}");
}

#[tokio::test]
async fn off_runs_unconfined_and_says_so() {
    let served = Served::start(&["--sandbox", "off"], &[]).await;
    let caps = served.capabilities().await;
    assert_eq!(caps["execution"]["sandboxed"], false, "{caps}");
    assert_eq!(caps["custom"]["sandbox"]["mode"], "off", "{caps}");
    assert!(served.log().contains("SANDBOX OFF"), "{}", served.log());
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
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

fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

/// The descendants of `root` running the executable `name`.
fn descendants(root: u32, name: &str) -> Vec<u32> {
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

/// The pids of the host's processes whose command line is `command`.
fn processes_running(command: &str) -> Vec<u32> {
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
