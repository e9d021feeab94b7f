//! The model proxy alone, in front of a recording upstream: what it refuses, what the model
//! receives (the real key and headers instead of the token), that answers stream through
//! unbuffered, and its limits. `model_proxy.rs` has the tests through a real server and harness.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agui_server::internals::{CallLimits, ModelProxy, uses_ambient_credentials};
use axum::body::Body;
use axum::response::Response;
use harness_client::ModelEndpoint;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

mod support;

use support::upstream::{Answer, LengthOnly, Received, Upstream};

// ---------------------------------------------------------------------------------------------
// The proxy alone, in front of a recording upstream.

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

/// The three kinds of endpoint, each called the way a harness that meddles would: with a key,
/// parameters and headers of its own beside the API's. What the model received of each call,
/// with the route called and whether it is a Google API.
async fn meddling_calls() -> Vec<(Received, &'static str, bool)> {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let vertex = ModelEndpoint::Vertex {
        project: "p".into(),
        location: "l".into(),
        base_url: Some(upstream.url.clone()),
        api_key: Some("REAL-KEY".into()),
        headers: BTreeMap::new(),
    };
    let openai = ModelEndpoint::OpenAiCompatible {
        base_url: upstream.url.clone(),
    };
    let calls = [
        (
            gemini(&upstream.url, "REAL-KEY"),
            "/v1beta/models/m:streamGenerateContent",
            true,
        ),
        (
            vertex,
            "/v1beta1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent",
            true,
        ),
        (openai, "/v1/chat/completions", false),
    ];
    for (i, (endpoint, call, _)) in calls.iter().enumerate() {
        let (base, token) = parts(
            &proxy
                .register_plain(&format!("a{i}"), endpoint, &none())
                .unwrap(),
        );
        let answer = reqwest::Client::new()
            .post(format!(
                "{base}{call}?key=HARNESS-KEY&alt=sse&%61lt=json&$alt=proto&quotaUser=q&fields=x&alt=json"
            ))
            .header("content-type", "application/json")
            .header("user-agent", "google-genai-sdk/1.74.0 gl-go/go1.24")
            .header("x-goog-api-client", "google-genai-sdk/1.74.0 gl-go/go1.24")
            .header("x-goog-api-key", token.unwrap_or_default())
            .header("x-forwarded-for", "10.0.0.1")
            .header("forwarded", "for=10.0.0.1")
            .header("x-real-ip", "10.0.0.1")
            .header("x-http-method-override", "DELETE")
            .header("x-goog-user-project", "someone-elses-project")
            .header("x-goog-request-params", "project=other")
            .header("cookie", "session=1")
            .header("accept-encoding", "gzip")
            .body(r#"{"contents":[]}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{call}");
    }
    let received = upstream.received();
    assert_eq!(received.len(), calls.len());
    received
        .into_iter()
        .zip(calls)
        .map(|(got, (_, call, google))| (got, call, google))
        .collect()
}

/// The harness's query goes upstream only as far as the API reads it: `alt` on a Google API
/// call (its first, a plain word, named as written), nothing on an OpenAI-compatible one. A
/// credential in the query (`?key=`) and Google's system parameters (`quotaUser`, `fields`,
/// `$alt`) never reach the model.
#[tokio::test]
async fn the_harnesss_own_query_parameters_never_reach_the_model() {
    for (got, call, google) in meddling_calls().await {
        let query = if google { "?alt=sse" } else { "" };
        assert_eq!(
            got.path,
            format!("{call}{query}"),
            "only the API's parameter"
        );
        assert_eq!(got.body, br#"{"contents":[]}"#);
    }
}

/// The harness's headers go upstream only as far as the API reads them: the body's type and the
/// client's identification. Headers a gateway acts on (`X-Forwarded-For`, `Forwarded`, a method
/// override, a cookie), the Google headers that choose what is billed or routed, and the
/// harness's key never reach the model.
#[tokio::test]
async fn the_harnesss_extra_headers_never_reach_the_model() {
    for (got, call, google) in meddling_calls().await {
        let names: Vec<&str> = got.headers.keys().map(String::as_str).collect();
        let expected: &[&str] = if google {
            &[
                "accept",
                "content-length",
                "content-type",
                "host",
                "user-agent",
                "x-goog-api-client",
                "x-goog-api-key",
            ]
        } else {
            &[
                "accept",
                "content-length",
                "content-type",
                "host",
                "user-agent",
            ]
        };
        assert_eq!(names, expected, "{call}: {:?}", got.headers);
        if google {
            assert_eq!(got.headers["x-goog-api-key"], "REAL-KEY");
        }
    }
}

/// A body the harness sent with its length goes up with that length: a model server that reads
/// no chunked body (Python's `http.server`) gets all of it, not an empty request.
#[tokio::test]
async fn a_body_sent_with_its_length_reaches_a_model_server_that_reads_only_lengths() {
    let model = LengthOnly::start().await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini(&model.url, "REAL"), &none())
            .unwrap(),
    );
    let body = format!(
        r#"{{"contents":[{{"parts":[{{"text":"{}"}}]}}]}}"#,
        "x".repeat(100_000)
    );
    let answer = reqwest::Client::new()
        .post(format!(
            "{base}/v1beta/models/m:streamGenerateContent?alt=sse"
        ))
        .header("content-type", "application/json")
        .header("x-goog-api-key", token.unwrap())
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("hello from the model")
    );
    let reads = model.reads();
    assert_eq!(reads.len(), 1);
    let read = &reads[0];
    assert_eq!(
        read.headers.get("content-length"),
        Some(&body.len().to_string()),
        "{:?}",
        read.headers
    );
    assert!(
        !read.headers.contains_key("transfer-encoding"),
        "{:?}",
        read.headers
    );
    assert!(read.complete);
    assert_eq!(read.body, body.as_bytes(), "the model read the whole body");
}

/// A body the harness sent chunked (no length known ahead) goes up chunked, streamed.
#[tokio::test]
async fn a_chunked_body_goes_up_chunked() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini(&upstream.url, "REAL"), &none())
            .unwrap(),
    );
    let chunks = ["{\"contents\":", "[]}"].map(|c| Ok::<_, std::io::Error>(c.to_owned()));
    let answer = reqwest::Client::new()
        .post(format!(
            "{base}/v1beta/models/m:streamGenerateContent?alt=sse"
        ))
        .header("content-type", "application/json")
        .header("x-goog-api-key", token.unwrap())
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let got = &upstream.received()[0];
    assert_eq!(
        got.headers.get("transfer-encoding").map(String::as_str),
        Some("chunked")
    );
    assert!(!got.headers.contains_key("content-length"));
    assert_eq!(got.body, br#"{"contents":[]}"#);
}

/// A body that ends before the length it announced is never forwarded as a complete request
/// (sent up with that length, it stops short; the model server never reads a request).
#[tokio::test]
async fn a_body_shorter_than_its_length_never_reaches_the_model_as_a_whole_request() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let model = LengthOnly::start().await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (base, token) = parts(
        &proxy
            .register_plain("a", &gemini(&model.url, "REAL"), &none())
            .unwrap(),
    );
    let path = base.split_once(&proxy.addr().to_string()).unwrap().1;
    let mut harness = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let half = "x".repeat(50);
    harness
        .write_all(
            format!(
                "POST {path}/v1beta/models/m:streamGenerateContent?alt=sse HTTP/1.1\r\nhost: x\r\n\
                 x-goog-api-key: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{half}",
                token.unwrap()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    harness.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), harness.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "the harness is told its request was refused, if it still listens: {answer}"
    );
    // The model server records a connection once it ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while model.reads().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reads = model.reads();
    assert!(!reads.is_empty(), "the request went up: {answer}");
    for read in &reads {
        assert!(
            !read.complete,
            "the model read a whole request: {read:?}; the harness got {answer}"
        );
        assert_eq!(
            read.headers.get("content-length").map(String::as_str),
            Some("100")
        );
    }
}

/// `model_max_request_mb` holds for a body of no declared length: it is cut off as it passes the
/// limit (413), and the model never reads a request.
#[tokio::test]
async fn a_chunked_body_past_the_size_limit_is_refused_and_never_complete_upstream() {
    let upstream = Upstream::start(sse_answer()).await;
    let proxy = ModelProxy::start(0).await.unwrap();
    let (proxied, _) = proxy
        .register(
            "a",
            &gemini(&upstream.url, "REAL"),
            &none(),
            Default::default(),
            CallLimits {
                max_request_bytes: 1024,
                ..CallLimits::default()
            },
        )
        .unwrap();
    let (base, token) = parts(&proxied);
    let chunks = (0..8).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512]));
    let (status, body) = error_of(
        reqwest::Client::new()
            .post(format!(
                "{base}/v1beta/models/m:streamGenerateContent?alt=sse"
            ))
            .header("x-goog-api-key", token.unwrap())
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                chunks,
            )))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert!(upstream.received().is_empty(), "the model read a request");
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
