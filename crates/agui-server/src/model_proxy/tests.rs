//! Unit tests of the model proxy's routes, grants and limits.

use futures_util::StreamExt as _;

use super::*;

fn route(upstream: Upstream) -> Route {
    Route {
        agent: "a".into(),
        upstream,
        headers: Vec::new(),
        models: BTreeSet::new(),
        limits: CallLimits::default(),
    }
}

fn url(route: &Route, rest: &str) -> Option<String> {
    route.target(rest).map(|(url, _)| url)
}

#[test]
fn only_the_generation_routes_of_the_endpoint_are_forwarded() {
    let gemini = route(Upstream::Gemini {
        base: "https://g.example/p".into(),
    });
    assert_eq!(
        gemini.target("/v1beta/models/gemini-3-flash-preview:streamGenerateContent"),
        Some((
            "https://g.example/p/v1beta/models/gemini-3-flash-preview:streamGenerateContent".into(),
            Some("gemini-3-flash-preview".into())
        ))
    );
    assert!(gemini.target("/v1beta/models/m:countTokens").is_some());
    assert!(gemini.target("/v1beta/models/m:generateContent").is_some());
    for refused in [
        "/v1beta/models/m",
        "/v1beta/models/m:embedContent",
        "/v1beta/models/../files:streamGenerateContent",
        "/v1beta/files",
        "/v1/chat/completions",
        "",
    ] {
        assert_eq!(url(&gemini, refused), None, "{refused}");
    }
    let vertex = route(Upstream::Vertex {
        base: "https://v.example".into(),
        project: "p".into(),
        location: "l".into(),
    });
    let call = "/v1beta1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent";
    assert_eq!(url(&vertex, call), Some(format!("https://v.example{call}")));
    assert_eq!(
        url(
            &vertex,
            "/v1beta1/projects/other/locations/l/publishers/google/models/m:generateContent"
        ),
        None,
        "another project is refused"
    );
    let openai = route(Upstream::OpenAi {
        base: "http://o.example".into(),
    });
    assert_eq!(
        openai.target("/v1/chat/completions"),
        Some(("http://o.example/v1/chat/completions".into(), None))
    );
    assert_eq!(url(&openai, "/v1/models"), None);
}

#[test]
fn only_alt_goes_up_of_the_harnesss_query() {
    for (query, google, sent) in [
        (Some("alt=sse"), true, Some("alt=sse")),
        (Some("key=K&alt=sse"), true, Some("alt=sse")),
        (Some("alt=sse&alt=json"), true, Some("alt=sse")),
        (Some("key=K"), true, None),
        (Some("%61lt=sse"), true, None),
        (Some("$alt=sse"), true, None),
        (Some("alt=sse%26key%3DK"), true, None),
        (Some("alt="), true, None),
        (Some("alt"), true, None),
        (None, true, None),
        (Some("alt=sse"), false, None),
        (Some("api-version=1"), false, None),
    ] {
        assert_eq!(
            outgoing::query(google, query).as_deref(),
            sent,
            "{query:?} (google: {google})"
        );
    }
}

/// What the upload of `chunks`, declared `declared` long, sends before it ends, and why it was
/// cut, if it was.
async fn uploaded(
    chunks: &[&'static str],
    limit: u64,
    declared: Option<u64>,
) -> (String, Option<outgoing::Cut>) {
    let source = futures_util::stream::iter(
        chunks
            .iter()
            .map(|c| Ok::<_, axum::Error>(bytes::Bytes::from_static(c.as_bytes())))
            .collect::<Vec<_>>(),
    );
    let (upload, cut) = outgoing::upload(source, limit, declared);
    let sent: Vec<_> = upload.collect().await;
    let text = sent
        .iter()
        .map_while(|chunk| chunk.as_ref().ok())
        .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
        .collect();
    assert_eq!(
        sent.iter().any(Result::is_err),
        cut.get().is_some(),
        "an upload fails exactly when it was cut"
    );
    (text, cut.get().copied())
}

#[tokio::test]
async fn an_upload_is_never_a_complete_request_unless_its_length_and_limit_hold() {
    use outgoing::Cut;
    for (chunks, limit, declared, sent, cut) in [
        (&["ab", "cd"][..], 10, Some(4), "abcd", None),
        (&["ab", "cd"], 10, None, "abcd", None),
        (&["ab", "", "cd", ""], 10, Some(4), "abcd", None),
        // Longer than declared: the chunk that completes the length is held back, so the
        // request never ends whole upstream.
        (&["ab", "cd", "ef"], 10, Some(4), "ab", Some(Cut::Longer)),
        (&["abcdef"], 10, Some(4), "", Some(Cut::Longer)),
        (&["ab"], 10, Some(4), "ab", Some(Cut::Shorter)),
        (&[], 10, Some(4), "", Some(Cut::Shorter)),
        (&["abcd", "ef"], 5, None, "abcd", Some(Cut::TooLarge)),
        (&["abcdef"], 5, Some(6), "", Some(Cut::TooLarge)),
    ] {
        assert_eq!(
            uploaded(chunks, limit, declared).await,
            (sent.to_owned(), cut),
            "{chunks:?}, limit {limit}, declared {declared:?}"
        );
    }
}

#[test]
fn tokens_are_long_random_and_distinct() {
    let (a, b) = (new_token().unwrap(), new_token().unwrap());
    assert_eq!(a.len(), 64);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

#[test]
fn vertex_urls_follow_the_location() {
    assert_eq!(vertex_url("global"), "https://aiplatform.googleapis.com");
    assert_eq!(
        vertex_url("us-central1"),
        "https://us-central1-aiplatform.googleapis.com"
    );
}

/// Limits no test call reaches.
const ROOMY: CallLimits = CallLimits {
    concurrent: 8,
    per_minute: 100,
    max_request_bytes: 4096,
};

/// A proxy for a scripted model, a sandbox's listener served with `limits`, its token.
async fn sandbox(
    limits: CallLimits,
) -> (
    ModelProxy,
    gemini_script::Handle,
    SocketAddr,
    String,
    ServiceGrant,
) {
    use gemini_script::{Reply, Script, ScriptedModel};
    let model = ScriptedModel::start(
        Script::new().then(Reply::text(["slow ", "answer"]).delay_ms(400).forever()),
    )
    .await
    .unwrap();
    let proxy = ModelProxy::start(0).await.unwrap();
    let (_, channel) = proxy
        .register(
            "a",
            &ModelEndpoint::gemini(model.base_url(), "REAL-KEY"),
            &BTreeMap::new(),
            BTreeSet::from(["m".to_owned()]),
            limits,
        )
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let grant = channel.serve(listener, "tree-1").unwrap();
    let token = grant.token.clone().unwrap();
    (proxy, model, addr, token, grant)
}

async fn call(addr: SocketAddr, token: &str, model: &str, body: Vec<u8>) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!(
            "http://{addr}/{token}/v1beta/models/{model}:streamGenerateContent?alt=sse"
        ))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

fn request() -> Vec<u8> {
    br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#.to_vec()
}

#[tokio::test]
async fn a_sandboxs_token_works_only_on_its_own_listener_for_the_agents_models() {
    let (proxy, model, addr, token, grant) = sandbox(ROOMY).await;
    assert_eq!(call(addr, &token, "m", request()).await.status(), 200);
    let seen = model.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("x-goog-api-key"), Some("REAL-KEY"));
    assert_eq!(
        call(addr, &token, "gemini-2.5-pro", request())
            .await
            .status(),
        403
    );
    assert_eq!(
        call(addr, &token, "imagen-4.0", request()).await.status(),
        403
    );
    assert_eq!(
        call(addr, "not-the-token", "m", request()).await.status(),
        401
    );
    // The process's token means nothing on the loopback listener of unconfined harnesses.
    assert_eq!(
        call(proxy.addr(), &token, "m", request()).await.status(),
        401
    );
    assert_eq!(
        model.requests().len(),
        1,
        "nothing refused reached the model"
    );
    // Revoked when its process stops.
    drop(grant);
    let after = reqwest::Client::new()
        .post(format!(
            "http://{addr}/{token}/v1beta/models/m:generateContent"
        ))
        .body(request())
        .send()
        .await;
    assert!(after.is_err() || after.unwrap().status() == 401);
}

#[tokio::test]
async fn a_sandboxs_calls_are_limited_in_size_number_and_rate() {
    let limits = CallLimits {
        concurrent: 1,
        per_minute: 3,
        max_request_bytes: 1024,
    };
    let (_proxy, model, addr, token, _grant) = sandbox(limits).await;
    let big = vec![b' '; 4096];
    assert_eq!(call(addr, &token, "m", big).await.status(), 413);
    // One call at once: a second while the first streams is refused.
    let first = call(addr, &token, "m", request()).await;
    assert_eq!(first.status(), 200);
    let second = call(addr, &token, "m", request()).await;
    assert_eq!(second.status(), 429);
    assert!(second.text().await.unwrap().contains("at once"));
    let _ = first.bytes().await;
    // Three calls a minute (refused ones do not count): the first, two more, then 429.
    for _ in 0..2 {
        let ok = call(addr, &token, "m", request()).await;
        assert_eq!(ok.status(), 200);
        let _ = ok.bytes().await;
    }
    let fourth = call(addr, &token, "m", request()).await;
    assert_eq!(fourth.status(), 429, "{:?}", fourth.text().await);
    assert_eq!(model.requests().len(), 3);
}

/// Every task a sandbox's listener started ends when its grant is dropped: a server that
/// outlives many processes (killed, crashed or stopped) must not keep one task per process.
#[tokio::test]
async fn a_revoked_sandbox_listener_leaves_no_task_behind() {
    let (proxy, _model, _addr, _token, grant) = sandbox(ROOMY).await;
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    // The listener's own tasks, once it runs: its accept loop and its wait for the signal to
    // shut down.
    let own = 2;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let serving = alive();
    drop(grant);
    // Tasks end asynchronously; the wait is bounded only so a leak fails instead of hanging.
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        while alive() + own > serving {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "tasks alive while serving: {serving}, ten seconds after the grant was dropped: {}",
        alive()
    );
    drop(proxy);
}
