//! The model proxy: the harness reaches its model only through the server, which alone holds the
//! key. What the harness is told (a token), what the model receives (the real key and headers),
//! what the proxy refuses, and that answers stream through unbuffered.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agui_server::model_proxy::{ModelProxy, uses_ambient_credentials};
use agui_server::{RunningServer, Server, ServerConfig};
use agui_types::{Encoding, Event};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use gemini_script::{Reply, Script, ScriptedModel};
use harness_client::ModelEndpoint;
use serde_json::{Value, json};
use support::harnesses_in;
use tokio::sync::{Notify, mpsc};

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
    assert_eq!(
        opened_on_warmed, 2,
        "the warm-up's conversation, then the first thread's, on the warmed harness"
    );
    server.shutdown().await;
}

/// `text` without ANSI colour codes.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
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

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// The proxy alone, in front of a recording upstream.

/// What the upstream received.
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// An upstream that records requests and answers each with `answer()`.
struct Upstream {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

/// What the upstream answers to a request for a path.
type Answer = Arc<dyn Fn(&str) -> Response + Send + Sync>;

impl Upstream {
    async fn start(answer: Answer) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let state = (received.clone(), answer);
        let app = axum::Router::new().fallback(record).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, received }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn record(
    State((received, answer)): State<(Arc<Mutex<Vec<Received>>>, Answer)>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    received.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        path: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: body.to_vec(),
    });
    answer(parts.uri.path())
}

fn sse_answer() -> Answer {
    Arc::new(|_| {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from("data: {\"candidates\":[]}\n\n"))
            .unwrap()
    })
}

/// Sends what the harness would: `POST <base><path>` with its key header and usual headers.
async fn as_the_harness(base: &str, path: &str, harness_key: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("user-agent", "google-genai-sdk/1.74.0 gl-go/go1.24")
        .header("accept-encoding", "gzip")
        .body(r#"{"contents":[]}"#);
    if let Some(key) = harness_key {
        request = request.header("x-goog-api-key", key);
    }
    request.send().await.unwrap()
}

fn parts(endpoint: &ModelEndpoint) -> (String, Option<String>) {
    match endpoint {
        ModelEndpoint::Gemini {
            base_url, api_key, ..
        }
        | ModelEndpoint::Vertex {
            base_url, api_key, ..
        } => (base_url.clone().unwrap(), api_key.clone()),
        ModelEndpoint::OpenAiCompatible { base_url } => (base_url.clone(), None),
    }
}

fn none() -> BTreeMap<String, String> {
    BTreeMap::new()
}

/// `register` with any model and the default limits, returning the endpoint only.
trait RegisterPlain {
    fn register_plain(
        &self,
        agent: &str,
        endpoint: &ModelEndpoint,
        headers: &BTreeMap<String, String>,
    ) -> Result<ModelEndpoint, agui_server::ServerError>;
}

impl RegisterPlain for ModelProxy {
    fn register_plain(
        &self,
        agent: &str,
        endpoint: &ModelEndpoint,
        headers: &BTreeMap<String, String>,
    ) -> Result<ModelEndpoint, agui_server::ServerError> {
        self.register(
            agent,
            endpoint,
            headers,
            Default::default(),
            Default::default(),
        )
        .map(|(endpoint, _)| endpoint)
    }
}

fn gemini(base_url: &str, key: &str) -> ModelEndpoint {
    ModelEndpoint::Gemini {
        base_url: Some(base_url.into()),
        api_key: Some(key.into()),
        headers: BTreeMap::new(),
        thinking_level: None,
    }
}

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn wrong_tokens_and_foreign_paths_are_refused_before_reaching_the_model() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini(&upstream.url, "REAL"), &none())
            .unwrap(),
    );
    let token = token.unwrap();
    let root = format!("http://{}", proxy.addr());
    let call = "/v1beta/models/m:streamGenerateContent?alt=sse";
    let wrong = "0".repeat(token.len());

    for (url, what) in [
        (format!("{root}{call}"), "no token"),
        (format!("{root}/{wrong}{call}"), "a wrong token"),
        (format!("{root}/{}{call}", &token[1..]), "a shortened token"),
    ] {
        let (status, body) = error_of(
            reqwest::Client::new()
                .post(&url)
                .header("x-goog-api-key", &token)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 401, "{what}");
        assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{what}: {body}");
    }
    for path in [
        "/v1beta/files",
        "/v1beta/models/m:embedContent",
        "/v1beta/models",
        "/v1beta1/projects/p/locations/l/publishers/google/models/m:generateContent",
        "/v1/chat/completions",
        "/upload/v1beta/files",
    ] {
        let (status, body) = error_of(as_the_harness(&base, path, Some(&token)).await).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["error"]["status"], "NOT_FOUND", "{path}: {body}");
    }
    let get = reqwest::Client::new()
        .get(format!("{base}{call}"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 404, "only POST is forwarded");
    assert!(upstream.received().is_empty(), "nothing reached the model");

    let allowed = as_the_harness(&base, call, Some(&token)).await;
    assert_eq!(allowed.status(), 200);
    assert_eq!(
        upstream.received().len(),
        1,
        "the right token and path pass"
    );
}

/// A harness started ahead of need warms up against the proxy's warm-up endpoint: the proxy
/// answers the generation calls itself (a finished text), checks the token like any call, and
/// nothing reaches the model.
#[tokio::test]
async fn warm_up_calls_are_answered_by_the_proxy_and_never_reach_the_model() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let proxied = proxy
        .register_plain("a", &gemini(&upstream.url, "REAL"), &none())
        .unwrap();
    let (base, token) = parts(&proxy.warm_up_endpoint(&proxied).unwrap());
    let token = token.unwrap();
    assert!(base.ends_with("/warm-up"), "{base}");

    let stream = as_the_harness(
        &base,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        Some(&token),
    )
    .await;
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let text = stream.text().await.unwrap();
    let event: Value = serde_json::from_str(
        text.strip_prefix("data: ")
            .and_then(|rest| rest.strip_suffix("\r\n\r\n"))
            .unwrap_or_else(|| panic!("one SSE event: {text:?}")),
    )
    .unwrap();
    assert_eq!(
        event["candidates"][0]["content"]["parts"][0]["text"],
        "Ready."
    );
    assert_eq!(event["candidates"][0]["finishReason"], "STOP");
    let unary = as_the_harness(&base, "/v1beta/models/m:generateContent", Some(&token)).await;
    assert_eq!(unary.status(), 200);
    let unary: Value = unary.json().await.unwrap();
    assert_eq!(unary["candidates"][0]["finishReason"], "STOP");

    let wrong = base.replace(&token, &"0".repeat(token.len()));
    let (status, _) =
        error_of(as_the_harness(&wrong, "/v1beta/models/m:generateContent", Some(&token)).await)
            .await;
    assert_eq!(status, 401, "a warm-up needs the agent's token");
    let (status, _) = error_of(as_the_harness(&base, "/v1beta/files", Some(&token)).await).await;
    assert_eq!(status, 404, "only generation routes");
    assert!(upstream.received().is_empty(), "nothing reached the model");

    let openai = proxy
        .register_plain(
            "b",
            &ModelEndpoint::OpenAiCompatible {
                base_url: upstream.url.clone(),
            },
            &none(),
        )
        .unwrap();
    assert!(
        proxy.warm_up_endpoint(&openai).is_none(),
        "no canned answer in the OpenAI format"
    );
}

#[tokio::test]
async fn gemini_requests_carry_the_real_key_and_headers_instead_of_the_token() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let mut endpoint = gemini(&format!("{}/gateway/", upstream.url), "REAL-GEMINI-KEY");
    if let ModelEndpoint::Gemini { headers, .. } = &mut endpoint {
        headers.insert("x-gateway-auth".into(), "GATEWAY".into());
    }
    let (base, token) = parts(&proxy.register_plain("a", &endpoint, &none()).unwrap());
    let token = token.unwrap();
    let answer = as_the_harness(
        &base,
        "/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse",
        Some(&token),
    )
    .await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    assert_eq!(
        answer.text().await.unwrap(),
        "data: {\"candidates\":[]}\n\n"
    );
    let received = upstream.received();
    let got = &received[0];
    assert_eq!(got.method, "POST");
    assert_eq!(
        got.path,
        "/gateway/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
    );
    assert_eq!(got.headers["x-goog-api-key"], "REAL-GEMINI-KEY");
    assert_eq!(got.headers["x-gateway-auth"], "GATEWAY");
    assert_eq!(got.headers["content-type"], "application/json");
    assert_eq!(
        got.headers["user-agent"],
        "google-genai-sdk/1.74.0 gl-go/go1.24"
    );
    assert!(
        !got.headers.contains_key("accept-encoding"),
        "answers come uncompressed"
    );
    assert!(
        got.headers.values().all(|v| !v.contains(&token)),
        "{:?}",
        got.headers
    );
    assert_eq!(got.body, br#"{"contents":[]}"#);
}

#[tokio::test]
async fn vertex_requests_reach_the_configured_project_with_the_real_key() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let endpoint = ModelEndpoint::Vertex {
        project: "proj-x".into(),
        location: "us-central1".into(),
        base_url: Some(upstream.url.clone()),
        api_key: Some("REAL-VERTEX-KEY".into()),
        headers: BTreeMap::from([("x-goog-user-project".into(), "billing-proj".into())]),
    };
    let proxied = proxy.register_plain("v", &endpoint, &none()).unwrap();
    let ModelEndpoint::Vertex {
        project, location, ..
    } = &proxied
    else {
        panic!("{proxied:?}")
    };
    assert_eq!(
        (project.as_str(), location.as_str()),
        ("proj-x", "us-central1")
    );
    let (base, token) = parts(&proxied);
    let token = token.expect("the harness needs some key to send");
    let call = "/v1beta1/projects/proj-x/locations/us-central1/publishers/google/models/gemini-3-flash-preview:streamGenerateContent?alt=sse";
    assert_eq!(
        as_the_harness(&base, call, Some(&token)).await.status(),
        200
    );
    let other = call.replace("proj-x", "proj-y");
    assert_eq!(
        as_the_harness(&base, &other, Some(&token)).await.status(),
        404,
        "another project is not this agent's"
    );
    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, call);
    assert_eq!(received[0].headers["x-goog-api-key"], "REAL-VERTEX-KEY");
    assert_eq!(received[0].headers["x-goog-user-project"], "billing-proj");
    assert!(received[0].headers.values().all(|v| !v.contains(&token)));

    // Without a key or base URL the harness authenticates itself, so only it can call Vertex;
    // with a base URL (a gateway) it sends no credentials, and the proxy adds the headers.
    let keyless = |base_url: Option<String>| ModelEndpoint::Vertex {
        project: "proj-x".into(),
        location: "us-central1".into(),
        base_url,
        api_key: None,
        headers: BTreeMap::new(),
    };
    assert!(!uses_ambient_credentials(&keyless(Some(
        upstream.url.clone()
    ))));
    assert!(!uses_ambient_credentials(&endpoint));
    assert!(uses_ambient_credentials(&keyless(None)));
}

#[tokio::test]
async fn openai_compatible_requests_reach_the_server_root_with_the_configured_headers() {
    let upstream = Upstream::start(Arc::new(|_| {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from("data: [DONE]\n\n"))
            .unwrap()
    }))
    .await;
    let proxy = ModelProxy::start(0).await.unwrap();
    // Its credentials are a model header (a Gemini `api_key` is never sent to it).
    let endpoint = ModelEndpoint::OpenAiCompatible {
        base_url: format!("{}/ollama", upstream.url),
    };
    let headers = BTreeMap::from([("authorization".into(), "Bearer sk-real".into())]);
    let proxied = proxy.register_plain("o", &endpoint, &headers).unwrap();
    let (base, _) = parts(&proxied);
    assert!(base.starts_with(&format!("http://{}/", proxy.addr())));
    let token = base.rsplit('/').next().unwrap().to_owned();
    let answer = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer from-the-harness")
        .body(r#"{"model":"gemma","stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "data: [DONE]\n\n");
    let got = &upstream.received()[0];
    assert_eq!(got.path, "/ollama/v1/chat/completions");
    assert_eq!(
        got.headers["authorization"], "Bearer sk-real",
        "the configured credentials, not the harness's"
    );
    assert!(got.headers.values().all(|v| !v.contains(&token)));
    assert_eq!(got.body, br#"{"model":"gemma","stream":true}"#);
    let gemini_path = as_the_harness(&base, "/v1beta/models/m:streamGenerateContent", None).await;
    assert_eq!(gemini_path.status(), 404, "only the chat completions route");
}

#[tokio::test]
async fn answers_stream_through_event_by_event() {
    // The upstream sends one event, then waits until the test has seen it through the proxy.
    let release = Arc::new(Notify::new());
    let released = release.clone();
    let upstream = Upstream::start(Arc::new(move |_| {
        let (tx, rx) = mpsc::channel::<Result<&'static str, std::io::Error>>(2);
        let released = released.clone();
        tokio::spawn(async move {
            let _ = tx.send(Ok("data: {\"n\":1}\n\n")).await;
            released.notified().await;
            let _ = tx.send(Ok("data: {\"n\":2}\n\n")).await;
        });
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(tokio_stream_of(rx)))
            .unwrap()
    }))
    .await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini(&upstream.url, "K"), &none())
            .unwrap(),
    );
    let mut answer = as_the_harness(
        &base,
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        token.as_deref(),
    )
    .await;
    let first = tokio::time::timeout(Duration::from_secs(10), answer.chunk())
        .await
        .expect("the first event arrives before the upstream sends the second")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"data: {\"n\":1}\n\n");
    release.notify_one();
    let second = tokio::time::timeout(Duration::from_secs(10), answer.chunk())
        .await
        .expect("the second event arrives")
        .unwrap()
        .unwrap();
    assert_eq!(&second[..], b"data: {\"n\":2}\n\n");
}

/// A body stream of what `rx` receives.
fn tokio_stream_of(
    rx: mpsc::Receiver<Result<&'static str, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<&'static str, std::io::Error>> {
    futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

#[tokio::test]
async fn an_unreachable_model_is_a_gateway_error_that_names_the_model_host() {
    let proxy = ModelProxy::start(0).await.unwrap();
    // Nothing listens on port 1.
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini("http://127.0.0.1:1", "SECRET-KEY"), &none())
            .unwrap(),
    );
    let (status, body) = error_of(
        as_the_harness(
            &base,
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            token.as_deref(),
        )
        .await,
    )
    .await;
    assert_eq!(status, 502);
    assert_eq!(body["error"]["status"], "UNAVAILABLE");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("model unreachable"), "{message}");
    assert!(message.contains("127.0.0.1:1"), "{message}");
    assert!(!message.contains("SECRET-KEY"), "{message}");
}
