//! Several replicas: the routing key (the `X-Thread-Id` header and the `/threads/<id>` path,
//! which must agree with the body) and thread leases between two servers sharing one save dir,
//! on the real harness and the demo model.

mod support;

use std::time::Duration;

use agui_server::{RunningServer, Server, ServerConfig};
use agui_types::Event;
use serde_json::{Value, json};
use support::{Fixture, events_of, input, text, user};

fn run_error(events: &[Event]) -> Option<(String, String)> {
    events.iter().find_map(|e| match e {
        Event::RunError(e) => Some((e.code.clone().unwrap_or_default(), e.message.clone())),
        _ => None,
    })
}

#[tokio::test]
async fn the_thread_can_be_named_in_a_header_or_the_path_and_must_agree_with_the_body() {
    let fx = Fixture::start(&["--demo"]).await;
    let ask = || input("t1", json!([user("m1", "What is the weather in Paris?")]));
    let response = fx
        .client
        .post(fx.url("/threads/t1"))
        .json(&ask())
        .send()
        .await
        .unwrap();
    let events = events_of(response).await;
    assert!(text(&events).contains("Paris"), "{}", text(&events));

    let refused = |path: &'static str, header: Option<&'static str>, body: Value| {
        let mut request = fx.client.post(fx.url(path)).json(&body);
        if let Some(thread) = header {
            request = request.header("x-thread-id", thread);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (
                status,
                body["detail"].as_str().unwrap_or_default().to_owned(),
            )
        }
    };
    let (status, detail) = refused("/", Some("t2"), ask()).await;
    assert_eq!(status, 400, "{detail}");
    assert!(
        detail.contains("`t1`")
            && detail.contains("`t2`")
            && detail.contains("X-Thread-Id".to_ascii_lowercase().as_str()),
        "{detail}"
    );
    let (status, detail) = refused("/threads/t2", None, ask()).await;
    assert_eq!(status, 400, "{detail}");
    assert!(detail.contains("the path"), "{detail}");
    let (status, detail) = refused("/threads/t1/connect", Some("t2"), ask()).await;
    assert_eq!(status, 400, "{detail}");
    let (status, _) = refused("/threads/t1/stop", None, json!({"threadId": "t2"})).await;
    assert_eq!(status, 400);

    // Header and body agreeing: served. Connect and stop under the path too.
    let response = fx
        .client
        .post(fx.url("/connect"))
        .header("x-thread-id", "t1")
        .json(&ask())
        .send()
        .await
        .unwrap();
    let events = events_of(response).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::MessagesSnapshot(s) if s.messages.len() >= 2)),
        "connect restates the thread"
    );
    let response = fx
        .client
        .post(fx.url("/threads/t1/stop"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"stopped": false})
    );
    fx.server.shutdown().await;
}

/// A replica started on `dir`'s save dir and workspace root; it waits `lease_wait_secs` for a
/// thread another replica holds (`busy_thread_wait_secs`).
async fn replica(dir: &std::path::Path, id: &str, lease_wait_secs: u64) -> RunningServer {
    let mut args = shared_dirs(dir, id);
    args.extend(
        [
            "--demo",
            "--hibernate-after-secs",
            "2",
            "--busy-thread-wait-secs",
            &lease_wait_secs.to_string(),
        ]
        .map(String::from),
    );
    start_in_process(args).await
}

/// The flags of a replica `id` sharing `dir`'s save dir and workspace root.
fn shared_dirs(dir: &std::path::Path, id: &str) -> Vec<String> {
    [
        "--save-dir",
        &dir.join("save").to_string_lossy(),
        "--workspace-root",
        &dir.join("w").to_string_lossy(),
        "--bind",
        "127.0.0.1:0",
        "--replica-id",
        id,
    ]
    .map(String::from)
    .into()
}

/// A server started in this process with the flags `args`.
async fn start_in_process(args: Vec<String>) -> RunningServer {
    let args = std::iter::once("agui-antigravity".to_owned()).chain(args);
    Server::new(ServerConfig::from_args(args).expect("valid flags"))
        .with_sandbox_launcher(agui_server::sandbox::launcher_at(env!(
            "CARGO_BIN_EXE_agui-antigravity"
        )))
        .start()
        .await
        .expect("the replica starts")
}

#[tokio::test]
async fn a_thread_leased_by_one_replica_is_refused_or_waited_for_by_another_until_it_hibernates() {
    let dir = tempfile::tempdir().unwrap();
    // b refuses a thread held elsewhere at once; c waits for it, as for a busy thread.
    let a = replica(dir.path(), "a", 30).await;
    let b = replica(dir.path(), "b", 0).await;
    let c = replica(dir.path(), "c", 30).await;
    let client = reqwest::Client::new();
    let run = |server: &RunningServer, path: &str, body: Value| {
        let request = client
            .post(format!("http://{}{path}", server.addr()))
            .json(&body);
        async move { events_of(request.send().await.unwrap()).await }
    };
    let first = json!([user("m1", "What is the weather in Paris?")]);
    let events = run(&a, "/", input("t1", first.clone())).await;
    assert_eq!(run_error(&events), None);

    // a holds t1 (its conversation is live): b refuses it, retryably.
    let events = run(&b, "/", input("t1", first.clone())).await;
    let (code, message) = run_error(&events).expect("refused");
    assert_eq!(code, "THREAD_ELSEWHERE", "{message}");
    assert!(message.contains("retry in"), "{message}");

    // c waits until a hibernates the thread and gives the lease up, then continues it with its
    // history: m1 is not sent again (the demo model answers the newest message only).
    let mut later = first.as_array().unwrap().clone();
    let reply = text(&run(&a, "/connect", input("t1", json!([]))).await);
    later.push(json!({"id": "a1", "role": "assistant", "content": reply}));
    later.push(user("m2", "What is the weather in Tokyo?"));
    let started = std::time::Instant::now();
    let events = run(&c, "/", input("t1", Value::Array(later))).await;
    assert_eq!(run_error(&events), None);
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "c waited for a to let go ({:?})",
        started.elapsed()
    );
    let reply = text(&events);
    assert!(
        reply.contains("Tokyo") && !reply.contains("Paris"),
        "{reply}"
    );
    let connect = run(&c, "/connect", input("t1", json!([]))).await;
    let snapshot = connect
        .iter()
        .find_map(|e| match e {
            Event::MessagesSnapshot(s) => Some(serde_json::to_string(&s.messages).unwrap()),
            _ => None,
        })
        .expect("a snapshot");
    assert!(
        snapshot.contains("Paris") && snapshot.contains("Tokyo"),
        "{snapshot}"
    );
    // Now c holds it: b is refused.
    let events = run(&b, "/", input("t1", json!([user("m3", "hi")]))).await;
    assert_eq!(
        run_error(&events).map(|e| e.0).as_deref(),
        Some("THREAD_ELSEWHERE")
    );
    for server in [a, b, c] {
        server.shutdown().await;
    }
}

/// A thread's files need no lease: a replica that does not hold the thread writes and reads
/// them while another one has it live, and a file sent to a new thread through one replica is
/// read through the other.
#[tokio::test]
async fn a_thread_s_files_are_reached_from_a_replica_that_does_not_hold_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let a = replica(dir.path(), "a", 30).await;
    let b = replica(dir.path(), "b", 0).await;
    let client = reqwest::Client::new();
    let files = |server: &RunningServer, thread: &str, rel: &str| {
        format!("http://{}/threads/{thread}/files/{rel}", server.addr())
    };
    let events = events_of(
        client
            .post(format!("http://{}/", a.addr()))
            .json(&input(
                "t1",
                json!([user("m1", "What is the weather in Paris?")]),
            ))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(run_error(&events), None);
    // a holds t1 (b would be refused a run on it); b writes and reads its files all the same.
    let put = client
        .put(files(&b, "t1", "from-b.txt"))
        .body("written by b")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let read = client
        .get(files(&a, "t1", "from-b.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(read.text().await.unwrap(), "written by b");
    let listed: Value = client
        .get(files(&b, "t1", ""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed.to_string().contains("from-b.txt"), "{listed}");
    // A new thread made by b's upload is read through a.
    let put = client
        .put(files(&b, "t2", "seed.txt"))
        .body("seeded on b")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    let read = client
        .get(files(&a, "t2", "seed.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    assert_eq!(read.text().await.unwrap(), "seeded on b");
    for server in [a, b] {
        server.shutdown().await;
    }
}

/// The slow reply's words: a turn that is still streaming when its replica dies.
const SLOW_WORDS: usize = 40;

/// A model that streams a slow reply to "slowly" (a word every 200 ms) and echoes anything
/// else at once.
async fn slow_and_echo_model() -> gemini_script::Handle {
    use gemini_script::{Matcher, Reply, Script, ScriptedModel};
    let slow: Vec<String> = (0..SLOW_WORDS).map(|i| format!("slice{i} ")).collect();
    ScriptedModel::start(
        Script::new()
            .then(
                Reply::text(slow)
                    .delay_ms(200)
                    .when(Matcher::user_text().user_text_contains("slowly"))
                    .forever(),
            )
            .then(
                Reply::text(["Echo: {{user_text}}"])
                    .when(Matcher::user_text())
                    .forever(),
            ),
    )
    .await
    .unwrap()
}

/// The flags of a replica `id` on `dir`'s shared save dir and workspace root, on `model`, with
/// 3 s leases.
fn replica_flags(dir: &std::path::Path, id: &str, model: &gemini_script::Handle) -> Vec<String> {
    let mut args = shared_dirs(dir, id);
    args.extend(
        [
            "--gemini-base-url",
            &model.base_url(),
            "--api-key",
            "k",
            "--model",
            "m",
            "--lease-ttl-secs",
            "3",
            "--prestart-harness",
            "false",
        ]
        .map(String::from),
    );
    args
}

/// A replica started in this process.
async fn replica_on(
    dir: &std::path::Path,
    id: &str,
    model: &gemini_script::Handle,
) -> RunningServer {
    start_in_process(replica_flags(dir, id, model)).await
}

/// A replica started as its own process, so that it can die by SIGKILL as a crashed server
/// does (no shutdown, no lease given up, its harness gone with it).
struct ReplicaProcess {
    child: std::process::Child,
    addr: String,
    log: std::path::PathBuf,
}

impl ReplicaProcess {
    async fn start(dir: &std::path::Path, id: &str, model: &gemini_script::Handle) -> Self {
        let log = dir.join(format!("replica-{id}.log"));
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_agui-antigravity"))
            .arg("serve")
            .args(replica_flags(dir, id, model))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the replica starts");
        let addr = support::served::served_address(&log).await;
        Self { child, addr, log }
    }

    /// SIGKILL, then waits until its harness processes are gone too.
    async fn kill(mut self) {
        let harnesses = support::served::descendants(self.child.id(), "localharness");
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while harnesses
            .iter()
            .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the killed replica's harness processes {harnesses:?} outlived it:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The messages of a connect's `MESSAGES_SNAPSHOT`.
fn snapshot_of(events: &[Event]) -> Vec<agui_types::Message> {
    events
        .iter()
        .find_map(|e| match e {
            Event::MessagesSnapshot(s) => Some(s.messages.clone()),
            _ => None,
        })
        .expect("a connect restates the thread")
}

/// The messages a client holds after `events`, starting from `messages` (the official client's
/// rules).
fn client_view(messages: &[agui_types::Message], events: &[Event]) -> Vec<agui_types::Message> {
    let mut log = agui_types::MessageLog::from_messages(messages.to_vec());
    for event in events {
        log.apply(event);
    }
    log.messages().to_vec()
}

/// (id, role, text) of each message: what a client shows.
fn shown(messages: &[agui_types::Message]) -> Vec<(String, String, String)> {
    messages
        .iter()
        .map(|m| {
            let value = serde_json::to_value(m).unwrap();
            (
                m.id().to_owned(),
                value["role"].as_str().unwrap_or_default().to_owned(),
                value["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The ids of the messages marked as a lost turn's (`metadata.interrupted`).
fn interrupted(messages: &[agui_types::Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| serde_json::to_value(m).unwrap()["metadata"]["interrupted"] == json!(true))
        .map(|m| m.id().to_owned())
        .collect()
}

/// A client of a thread whose turn is streaming on a replica about to die.
struct Watcher {
    thread: &'static str,
    /// Sends back the partial reply it saw (as `HttpAgent` does), or only its own messages.
    keeps_partial: bool,
    response: reqwest::Response,
    seen: Vec<u8>,
}

impl Watcher {
    /// Reads until the reply has streamed a few words.
    async fn read_some(&mut self) {
        while String::from_utf8_lossy(&self.seen)
            .matches("TEXT_MESSAGE_CONTENT")
            .count()
            < 3
        {
            let chunk = self
                .response
                .chunk()
                .await
                .unwrap()
                .expect("the reply streams");
            self.seen.extend_from_slice(&chunk);
        }
    }

    /// What the client shows once the stream is cut: its message and the partial reply.
    fn shows(&self, m1: &agui_types::Message) -> Vec<agui_types::Message> {
        let whole = String::from_utf8_lossy(&self.seen);
        let whole = &whole[..whole.rfind("\n\n").unwrap() + 2];
        let cut = agui_types::Encoding::Sse
            .decode_all(whole.as_bytes())
            .unwrap();
        client_view(std::slice::from_ref(m1), &cut)
    }
}

#[tokio::test]
async fn after_a_replica_dies_mid_turn_the_thread_history_is_what_its_client_saw_on_every_replica()
{
    let model = slow_and_echo_model().await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let post = |addr: String, path: &'static str, body: Value| {
        let request = client.post(format!("http://{addr}{path}")).json(&body);
        async move { events_of(request.send().await.unwrap()).await }
    };
    let m1: agui_types::Message = serde_json::from_value(user("m1", "answer slowly")).unwrap();

    // Replica a streams the slow reply on two threads; it dies with both turns in flight.
    let a = ReplicaProcess::start(dir.path(), "a", &model).await;
    let mut watchers = Vec::new();
    for (thread, keeps_partial) in [("t-keeps", true), ("t-own", false)] {
        let response = client
            .post(format!("http://{}/", a.addr))
            .json(&input(thread, json!([user("m1", "answer slowly")])))
            .send()
            .await
            .unwrap();
        watchers.push(Watcher {
            thread,
            keeps_partial,
            response,
            seen: Vec::new(),
        });
    }
    for watcher in &mut watchers {
        watcher.read_some().await;
    }
    a.kill().await;

    let b = replica_on(dir.path(), "b", &model).await;
    let mut expected = Vec::new();
    for watcher in &watchers {
        let held = watcher.shows(&m1);
        assert_eq!(held.len(), 2, "{:?}", shown(&held));
        let sent = if watcher.keeps_partial {
            held.clone()
        } else {
            vec![m1.clone()]
        };
        // Replica b takes the thread over once a's lease expires: the lost turn is reported,
        // then the next message is answered.
        let events = post(
            b.addr().to_string(),
            "/",
            input(watcher.thread, serde_json::to_value(&sent).unwrap()),
        )
        .await;
        assert_eq!(
            run_error(&events).map(|e| e.0).as_deref(),
            Some("TURN_INTERRUPTED")
        );
        let mut next = sent.clone();
        next.push(serde_json::from_value(user("m2", "and now?")).unwrap());
        let events = post(
            b.addr().to_string(),
            "/",
            input(watcher.thread, serde_json::to_value(&next).unwrap()),
        )
        .await;
        assert_eq!(run_error(&events), None);
        assert_eq!(text(&events), "Echo: and now?");
        // What a client that never left shows: its message, the partial reply, the next
        // exchange — each once, under the ids it saw.
        let mut never_left = held.clone();
        never_left.push(next.last().unwrap().clone());
        let never_left = client_view(&never_left, &events);
        let connect = post(
            b.addr().to_string(),
            "/connect",
            input(watcher.thread, json!([])),
        );
        let on_b = snapshot_of(&connect.await);
        assert_eq!(
            shown(&on_b),
            shown(&never_left),
            "{}: connect on the replica that took over",
            watcher.thread
        );
        assert_eq!(
            interrupted(&on_b),
            [held[1].id()],
            "{}: the partial reply is marked",
            watcher.thread
        );
        expected.push(on_b);
    }

    // The threads return to a, restarted: the same history, read from the shared save dir.
    b.shutdown().await;
    let a = replica_on(dir.path(), "a", &model).await;
    for (watcher, expected) in watchers.iter().zip(&expected) {
        let connect = post(
            a.addr().to_string(),
            "/connect",
            input(watcher.thread, json!([])),
        );
        let on_a = snapshot_of(&connect.await);
        assert_eq!(
            &on_a, expected,
            "{}: connect on the restarted replica",
            watcher.thread
        );
    }
    a.shutdown().await;
}
