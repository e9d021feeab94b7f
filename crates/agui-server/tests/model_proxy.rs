//! The model proxy: the harness reaches its model only through the server, which alone holds the
//! key. What the harness is told (a token), what the model receives (the real key and headers),
//! what the proxy refuses, and that answers stream through unbuffered.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agui_server::{RunningServer, Server, ServerConfig};
use agui_types::{Encoding, Event};
use axum::body::Body;
use axum::response::Response;
use gemini_script::{Reply, Script, ScriptedModel};
use harness_client::ModelEndpoint;
use serde_json::json;
use support::harnesses_in;
use support::upstream::{Answer, LengthOnly, Upstream, contains, plain};

mod support;

// ---------------------------------------------------------------------------------------------
// A real turn through the proxy, against the real harness and the scripted model.

/// Every `harness_client` trace line of this test binary (the frames sent to the harness).
fn traced() -> &'static Arc<Mutex<Vec<u8>>> {
    static LINES: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("harness_client=trace")
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        lines
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn start_server(dir: &std::path::Path, extra: &[&str]) -> RunningServer {
    let save = dir.join("save").to_string_lossy().into_owned();
    let work = dir.join("w").to_string_lossy().into_owned();
    let mut args = vec![
        "agui-antigravity",
        "--bind",
        "127.0.0.1:0",
        "--save-dir",
        &save,
        "--workspace-root",
        &work,
    ];
    args.extend_from_slice(extra);
    let config = ServerConfig::from_args(args).expect("valid flags");
    Server::new(config)
        .with_sandbox_launcher(agui_server::sandbox::launcher_at(env!(
            "CARGO_BIN_EXE_agui-antigravity"
        )))
        .start()
        .await
        .expect("the server starts")
}

#[tokio::test]
async fn the_harness_is_told_a_token_and_only_the_model_receives_the_real_key() {
    let traced = traced();
    let dir = tempfile::tempdir().unwrap();
    let key = format!("REAL-KEY-{}", std::process::id());
    let header = "GATEWAY-SECRET-7f3a";
    let key_file = dir.path().join("gemini.key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    let model = ScriptedModel::start(
        Script::new().then(Reply::text(["Hello ", "through the proxy."]).forever()),
    )
    .await
    .unwrap();
    let server = start_server(
        dir.path(),
        &[
            "--api-key-file",
            key_file.to_str().unwrap(),
            "--gemini-base-url",
            &model.base_url(),
            "--model-header",
            &format!("x-gateway={header}"),
        ],
    )
    .await;

    // What the harness is given: the proxy, and a token as its key.
    let ModelEndpoint::Gemini {
        base_url: Some(base_url),
        api_key: Some(token),
        headers,
        ..
    } = server.runtime().agents[0].agent.options().endpoint.clone()
    else {
        panic!("a Gemini endpoint")
    };
    assert_eq!(
        base_url,
        format!("http://{}/{token}", server.model_proxy_addr())
    );
    assert_ne!(token, key);
    assert!(headers.is_empty(), "model headers stay in the server");

    assert_eq!(turn_text(&server).await, "Hello through the proxy.");

    // What the model received: the real key and header, never the token.
    let requests = model.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(
            request.path.starts_with("/v1beta/models/") && !request.path.contains(&token),
            "{}",
            request.path
        );
        assert_eq!(request.header("x-goog-api-key"), Some(key.as_str()));
        assert_eq!(request.header("x-gateway"), Some(header));
        assert!(
            request.headers.values().all(|v| !v.contains(&token)),
            "{:?}",
            request.headers
        );
    }

    // What the harness holds: its configuration frame names the sandbox's model listener and a
    // token of its process alone (not the agent's), never the key; and neither its
    // environment, its command line nor its memory holds the key.
    let log = String::from_utf8_lossy(&traced.lock().unwrap()).into_owned();
    // Other tests in this binary trace frames too: this server's name its workspace root.
    let workspace_root = dir.path().join("w");
    let frame = log
        .lines()
        .find(|l| {
            l.contains("to harness")
                && l.contains("geminiApiEndpoint")
                && l.contains(workspace_root.to_str().unwrap())
        })
        .expect("the configuration frame was traced");
    let listener = format!("http://127.0.0.1:{}/", harness_client::sandbox::MODEL_PORT);
    let at = frame
        .find(&listener)
        .unwrap_or_else(|| panic!("the sandbox's model listener: {frame}"));
    let process_token: String = frame[at + listener.len()..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert_eq!(process_token.len(), 64, "{frame}");
    assert_ne!(
        process_token, token,
        "a confined harness gets a token of its own"
    );
    assert!(
        !frame.contains(&token),
        "the agent's token reached a confined harness"
    );
    assert!(!log.contains(&key), "the key was sent to the harness");
    assert!(
        !log.contains(header),
        "a model header was sent to the harness"
    );
    let harnesses = harnesses_in(&dir.path().join("save"));
    assert!(!harnesses.is_empty(), "a harness serves the agent");
    for pid in harnesses {
        for file in ["environ", "cmdline"] {
            let text = std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
            assert!(!contains(&text, key.as_bytes()), "the key is in its {file}");
        }
        let (holds_token, holds_key) = memory_holds(pid, process_token.as_bytes(), key.as_bytes());
        assert!(
            holds_token,
            "the memory scan finds what the harness was given"
        );
        assert!(!holds_key, "the key is in the harness's memory");
    }
    server.shutdown().await;
}

/// With the sandbox off, the server starts a harness at once and warms it with one turn that the
/// proxy answers itself: the model never sees it, nothing of it is left in the save dir, and
/// the first thread is then served by that harness.
#[tokio::test]
async fn a_harness_started_with_the_server_warms_up_against_the_proxy_alone() {
    let traced = traced();
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(Script::new().then(Reply::text(["Hello."]).forever()))
        .await
        .unwrap();
    let server = start_server(
        dir.path(),
        &[
            "--sandbox",
            "off",
            "--api-key",
            "REAL",
            "--gemini-base-url",
            &model.base_url(),
        ],
    )
    .await;
    let save = dir.path().join("save");
    let log = || plain(&String::from_utf8_lossy(&traced.lock().unwrap()));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // The warm-up conversation runs on a harness that this server started: its pid is logged.
    let warmed = loop {
        let pid = log()
            .lines()
            .filter(|l| l.contains("harness warmed up"))
            .filter_map(|l| {
                l.split("pid=")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .find(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe"))
                    .is_ok_and(|exe| exe.ends_with("localharness"))
                    && std::fs::read_to_string(format!("/proc/{pid}/environ"))
                        .is_ok_and(|env| env.contains(save.to_str().unwrap()))
            });
        if let Some(pid) = pid {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no harness of this server warmed up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(model.requests().is_empty(), "the warm-up reached the model");
    let left: Vec<String> = walk(&save)
        .into_iter()
        .filter(|name| name.contains("warm-up") || name.ends_with(".db"))
        .collect();
    assert!(left.is_empty(), "the warm-up left {left:?}");

    assert_eq!(turn_text(&server).await, "Hello.");
    assert_eq!(model.requests().len(), 1, "the thread's own turn");
    let opened_on_warmed = log()
        .lines()
        .filter(|l| l.contains("conversation open") && l.contains(&format!("pid={warmed} ")))
        .count();
    // Then, maybe already, the conversation opened ahead of the next new thread.
    assert!(
        (2..=3).contains(&opened_on_warmed),
        "the warm-up's conversation, then the first thread's, on the warmed harness: {opened_on_warmed}"
    );
    server.shutdown().await;
}

/// Every path under `dir`, relative to it.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            found.push(
                path.strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    found
}

/// One turn of `hi` on a fresh thread; the text the agent answered.
async fn turn_text(server: &RunningServer) -> String {
    let body = json!({"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(format!("http://{}/", server.addr()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let bytes = tokio::time::timeout(Duration::from_secs(60), response.bytes())
        .await
        .expect("the run ends")
        .unwrap();
    let events = Encoding::Sse.decode_all(&bytes).unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Event::TextMessageContent(c) => Some(c.delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(!text.is_empty(), "{events:?}");
    text
}

/// An upstream answering Gemini-format SSE on Google's routes and OpenAI chunks on
/// `/v1/chat/completions`, as the harness expects from each.
fn model_answer() -> Answer {
    Arc::new(|path| {
        let events = if path.ends_with("/v1/chat/completions") {
            concat!(
                r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hello from the model"},"finish_reason":"stop"}]}"#,
                "\n\ndata: [DONE]\n\n"
            )
        } else {
            concat!(
                r#"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hello from the model"}]},"finishReason":"STOP","index":0}]}"#,
                "\n\n"
            )
        };
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(events))
            .unwrap()
    })
}

#[tokio::test]
async fn a_vertex_turn_reaches_the_project_route_with_the_real_key() {
    let upstream = Upstream::start(model_answer()).await;
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(
        dir.path(),
        &[
            "--vertex-project",
            "proj-x",
            "--vertex-location",
            "us-central1",
            "--gemini-base-url",
            &upstream.url,
            "--api-key",
            "REAL-VERTEX-KEY",
        ],
    )
    .await;
    assert_eq!(turn_text(&server).await, "hello from the model");
    let received = upstream.received();
    assert!(!received.is_empty());
    for got in &received {
        assert_eq!(
            got.path,
            "/v1beta1/projects/proj-x/locations/us-central1/publishers/google/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
        );
        assert_eq!(got.headers["x-goog-api-key"], "REAL-VERTEX-KEY");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn an_openai_compatible_turn_reaches_the_chat_route_with_the_model_headers() {
    let upstream = Upstream::start(model_answer()).await;
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(
        dir.path(),
        &[
            "--openai-base-url",
            &format!("{}/ollama", upstream.url),
            "--model-header",
            "authorization=Bearer sk-real",
        ],
    )
    .await;
    assert_eq!(turn_text(&server).await, "hello from the model");
    let received = upstream.received();
    assert!(!received.is_empty());
    for got in &received {
        assert_eq!(got.path, "/ollama/v1/chat/completions");
        assert_eq!(got.headers["authorization"], "Bearer sk-real");
    }
    server.shutdown().await;
}

/// The harness sends its model requests with a `Content-Length`, and a model server that reads
/// no chunked body (Python's `http.server`) gets them whole through the proxy.
#[tokio::test]
async fn a_model_server_that_reads_only_lengths_gets_the_harnesss_whole_requests() {
    let model = LengthOnly::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(
        dir.path(),
        &["--api-key", "REAL", "--gemini-base-url", &model.url],
    )
    .await;
    assert_eq!(turn_text(&server).await, "hello from the model");
    let reads = model.reads();
    assert!(!reads.is_empty());
    for read in &reads {
        assert_eq!(
            read.headers.get("content-length"),
            Some(&read.body.len().to_string()),
            "{:?}",
            read.headers
        );
        let body: serde_json::Value = serde_json::from_slice(&read.body)
            .unwrap_or_else(|e| panic!("the model read {} bytes: {e}", read.body.len()));
        assert!(body["contents"].is_array(), "{body}");
    }
    server.shutdown().await;
}

/// Whether the writable memory of process `pid` holds `a`, and `b`.
fn memory_holds(pid: u32, a: &[u8], b: &[u8]) -> (bool, bool) {
    use std::os::unix::fs::FileExt as _;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let (mut found_a, mut found_b) = (false, false);
    let overlap = a.len().max(b.len());
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        if !perms.starts_with("rw") {
            continue;
        }
        let (start, end) = range.split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        let mut offset = start;
        let mut chunk = vec![0u8; 1 << 20];
        while offset < end {
            let len = ((end - offset) as usize).min(chunk.len());
            let Ok(read) = mem.read_at(&mut chunk[..len], offset) else {
                break;
            };
            if read == 0 {
                break;
            }
            found_a |= contains(&chunk[..read], a);
            found_b |= contains(&chunk[..read], b);
            // Step back a little, so a needle across two chunks is still seen.
            offset += (read.saturating_sub(overlap)).max(1) as u64;
        }
    }
    (found_a, found_b)
}
