//! Who may use the server, over HTTP against the real harness and the scripted model: the Host
//! and Origin checks (DNS rebinding, other sites' pages), the start-up refusals, tokens, thread
//! owners, and error texts that leave host details in the log.

mod support;

use std::time::Duration;

use agui_server::ServerConfig;
use agui_types::Event;
use gemini_script::{Handle, Reply, Script, ScriptedModel};
use serde_json::{Value, json};
use support::{CapturedLog, Fixture, events_of, harnesses_in, input, legacy, text, user};

/// The tokens of these tests (at least 16 characters, as the server demands).
const TOKEN: &str = "s3cret-token-0123";
const ALICE: &str = "alice-token-0123456";
const BOB: &str = "bob-token-01234567";
const PROXY: &str = "proxy-token-0123456";

/// A model that answers every request "Hello.", counting them.
async fn model() -> Handle {
    ScriptedModel::start(Script::new().then(Reply::text(["Hello."]).forever()))
        .await
        .unwrap()
}

/// A server on `model` with `extra` flags.
async fn serve(model: &Handle, extra: &[&str]) -> Fixture {
    let base = model.base_url();
    let mut args = vec!["--gemini-base-url", &base, "--api-key", "k", "--model", "m"];
    args.extend_from_slice(extra);
    Fixture::start(&args).await
}

async fn detail(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["detail"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_rebinding_page_is_refused_on_every_route_and_runs_no_turn() {
    let model = model().await;
    let fx = serve(&model, &[]).await;
    let body = input("t-rebind", json!([user("m1", "hello")]));
    let attack = fx
        .client
        .post(fx.url("/"))
        .header("host", "rebind.attacker.example:8027")
        .header("origin", "http://rebind.attacker.example:8027")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(attack.status(), 421);
    let why = detail(attack).await;
    assert!(
        why.contains("allowed_hosts"),
        "says what to configure: {why}"
    );
    for path in [
        "/",
        "/capabilities",
        "/metrics",
        "/playground/playground.js",
    ] {
        let response = fx
            .client
            .get(fx.url(path))
            .header("host", "rebind.attacker.example")
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 421, "GET {path}");
    }
    let health = fx
        .client
        .get(fx.url("/healthz"))
        .header("host", "10.1.2.3:8027")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "probes reach /healthz by any name");
    assert_eq!(model.request_count(), 0, "the model was never asked");
    fx.server.shutdown().await;
}

#[tokio::test]
async fn another_sites_page_is_refused_and_the_servers_own_page_is_served() {
    let model = model().await;
    let fx = serve(&model, &["--cors-origins", "https://app.example"]).await;
    let body = input("t-origin", json!([user("m1", "hello")]));
    let foreign = fx
        .client
        .post(fx.url("/"))
        .header("origin", "http://evil.example")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    let why = detail(foreign).await;
    assert!(
        why.contains("cors_origins"),
        "says what to configure: {why}"
    );
    assert_eq!(model.request_count(), 0, "no turn ran");
    // The playground posts to its own origin; a configured site may post too.
    let own = format!("http://{}", fx.server.addr());
    for origin in [own.as_str(), "https://app.example"] {
        let response = fx
            .client
            .post(fx.url("/"))
            .header("origin", origin)
            .json(&input(
                &format!("t-{}", origin.len()),
                json!([user("m1", "hello")]),
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(text(&events_of(response).await), "Hello.", "{origin}");
    }
    assert_eq!(model.request_count(), 2);
    fx.server.shutdown().await;
}

#[tokio::test]
async fn allowed_hosts_extend_the_names_the_server_answers_to() {
    let fx = Fixture::start(&["--demo", "--allowed-hosts", "agents.example"]).await;
    let get = |host: &'static str| {
        fx.client
            .get(fx.url("/capabilities"))
            .header("host", host)
            .send()
    };
    assert_eq!(get("agents.example:8443").await.unwrap().status(), 200);
    assert_eq!(get("localhost:1").await.unwrap().status(), 200);
    assert_eq!(get("other.example").await.unwrap().status(), 421);
    // The playground under that name posts to its own origin.
    let page = fx
        .client
        .post(fx.url("/"))
        .header("host", "agents.example:8443")
        .header("origin", "https://agents.example:8443")
        .json(&input("t-named", json!([])))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    fx.server.shutdown().await;
}

#[tokio::test]
async fn exposing_the_agent_without_a_token_refuses_to_start_and_names_the_fix() {
    let config = |args: &[&str]| {
        let mut all = vec!["agui-antigravity", "--demo"];
        all.extend_from_slice(args);
        ServerConfig::from_args(all).map_err(|e| e.to_string())
    };
    let open = config(&["--bind", "0.0.0.0:8027"]).unwrap_err();
    for fix in ["auth_token", "127.0.0.1", "insecure_no_auth"] {
        assert!(open.contains(fix), "names `{fix}`: {open}");
    }
    assert!(config(&["--bind", "0.0.0.0:8027", "--auth-token", TOKEN]).is_ok());
    let any_site = config(&["--cors-origins", "*"]).unwrap_err();
    assert!(any_site.contains("auth_token"), "{any_site}");
    assert!(config(&["--cors-origins", "*", "--auth-token", TOKEN]).is_ok());

    // Explicitly insecure: it starts, and says so.
    let log = CapturedLog::start();
    let fx = Fixture::start(&["--demo", "--bind", "0.0.0.0:0", "--insecure-no-auth"]).await;
    assert!(
        log.text().contains("WARN") && log.text().contains("insecure_no_auth"),
        "{}",
        log.text()
    );
    let caps = fx
        .client
        .get(format!(
            "http://127.0.0.1:{}/capabilities",
            fx.server.addr().port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(caps.status(), 200);
    fx.server.shutdown().await;
}

#[tokio::test]
async fn a_wrong_token_is_refused_whatever_its_length() {
    let fx = Fixture::start(&["--demo", "--auth-token", TOKEN]).await;
    let post = |token: Option<&'static str>| {
        let request = fx
            .client
            .post(fx.url("/"))
            .json(&input("t-token", json!([])));
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
        .send()
    };
    for wrong in [
        None,
        Some("s3cret-token-012X"),
        Some("s3cret"),
        Some("s3cret-token-0123-and-more"),
        Some(""),
    ] {
        let response = post(wrong).await.unwrap();
        assert_eq!(response.status(), 401, "{wrong:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    assert_eq!(post(Some(TOKEN)).await.unwrap().status(), 200);
    let page = fx
        .client
        .get(fx.url("/"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(
        page.status(),
        200,
        "the playground's page asks for the token itself"
    );
    // A refused body names no host path.
    let bad = fx
        .client
        .post(fx.url("/"))
        .bearer_auth(TOKEN)
        .json(&input("../../etc", json!([])))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    let why = detail(bad).await;
    assert!(!why.contains(&*fx.dir.path().to_string_lossy()), "{why}");
    fx.server.shutdown().await;
}

#[tokio::test]
async fn a_thread_belongs_to_the_token_that_created_it_also_after_a_restart() {
    let model = model().await;
    let fx = serve(
        &model,
        &["--auth-tokens", &format!("alice={ALICE},bob={BOB}")],
    )
    .await;
    let post = |fx: &Fixture, token: &str, thread: &str, messages: Value| {
        fx.client
            .post(fx.url("/"))
            .bearer_auth(token)
            .json(&input(thread, messages))
            .send()
    };
    let first = json!([user("m1", "hello")]);
    let events = events_of(post(&fx, ALICE, "t-alice", first.clone()).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.");
    let stolen = post(&fx, BOB, "t-alice", first.clone()).await.unwrap();
    assert_eq!(stolen.status(), 404, "bob cannot see alice's thread");
    for (route, body) in [
        ("/connect", input("t-alice", json!([]))),
        ("/stop", json!({"threadId": "t-alice"})),
    ] {
        let peek = fx
            .client
            .post(fx.url(route))
            .bearer_auth(BOB)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(peek.status(), 404, "bob cannot {route} alice's thread");
    }
    let own = post(&fx, BOB, "t-bob", first.clone()).await.unwrap();
    assert_eq!(text(&events_of(own).await), "Hello.", "bob has his own");
    let second = json!([user("m1", "hello"), user("m2", "again")]);
    let events = events_of(post(&fx, ALICE, "t-alice", second).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.", "alice continues");
    assert_eq!(model.request_count(), 3, "bob's attempt reached no model");

    let fx = fx.restart().await;
    let stolen = post(&fx, BOB, "t-alice", first).await.unwrap();
    assert_eq!(stolen.status(), 404, "the owner survives a restart");
    let third = json!([user("m1", "hello"), user("m2", "again"), user("m3", "more")]);
    let events = events_of(post(&fx, ALICE, "t-alice", third).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.");
    assert_eq!(model.request_count(), 4);
    fx.server.shutdown().await;
}

#[tokio::test]
async fn the_proxy_names_the_user_and_a_request_without_it_is_refused() {
    let model = model().await;
    let fx = serve(&model, &["--user-header", "X-Forwarded-User"]).await;
    let post = |user_name: Option<&'static str>, thread: &str| {
        let request = fx
            .client
            .post(fx.url("/"))
            .json(&input(thread, json!([user("m1", "hello")])));
        match user_name {
            Some(name) => request.header("x-forwarded-user", name),
            None => request,
        }
        .send()
    };
    let anonymous = post(None, "t-carol").await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let why = detail(anonymous).await;
    assert!(why.contains("X-Forwarded-User"), "{why}");
    let carol = post(Some("carol"), "t-carol").await.unwrap();
    assert_eq!(text(&events_of(carol).await), "Hello.");
    assert_eq!(
        post(Some("dave"), "t-carol").await.unwrap().status(),
        404,
        "dave cannot see carol's thread"
    );
    assert_eq!(model.request_count(), 1);
    let metrics = fx
        .client
        .get(fx.url("/metrics"))
        .header("x-forwarded-user", "carol")
        .send()
        .await
        .unwrap();
    assert_eq!(
        metrics.status(),
        401,
        "metrics are the operator's, not any user's"
    );
    fx.server.shutdown().await;
}

#[tokio::test]
async fn a_dead_harness_ends_the_run_with_a_reference_and_leaves_the_details_in_the_log() {
    let log = CapturedLog::start();
    let chunks: Vec<String> = (0..40).map(|i| format!("part{i} ")).collect();
    let model = ScriptedModel::start(Script::new().then(Reply::text(chunks).delay_ms(250)))
        .await
        .unwrap();
    let fx = serve(&model, &[]).await;
    let save = fx.dir.path().join("save");
    let run = fx.post("/", input("t-crash", json!([user("m1", "talk")])));
    let killer = async {
        let pid = loop {
            if let Some(pid) = harnesses_in(&save).first().copied()
                && model.request_count() > 0
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    };
    let (response, ()) = tokio::join!(run, killer);
    let events = events_of(response).await;
    let Some(Event::RunError(error)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("HARNESS_LOST"), "{error:?}");
    let message = &error.message;
    for private in ["/", "pid", "signal", "SIGKILL", "stderr"] {
        assert!(!message.contains(private), "`{private}` in: {message}");
    }
    let reference = message
        .split_once("(ref ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(r, _)| r.to_owned())
        .unwrap_or_else(|| panic!("a reference in: {message}"));
    let logged = log.text();
    let line = logged
        .lines()
        .find(|l| l.contains(&format!("error_ref={reference}")))
        .unwrap_or_else(|| panic!("no log line with ref {reference}:\n{logged}"));
    // Unconfined the harness itself dies by SIGKILL; confined, its launcher reports it as 128+9.
    assert!(
        line.contains("WARN") && (line.contains("SIGKILL") || line.contains("exit code 137")),
        "the line has the detail: {line}"
    );
    fx.server.shutdown().await;
}

/// `auth_tokens` with `user_header`: a token holder could otherwise name any user in the
/// header. The header is trusted only from the proxy that proves itself with `proxy_token`.
#[tokio::test]
async fn a_token_holder_cannot_borrow_another_identity_through_the_user_header() {
    let refused = agui_server::ServerConfig::from_args([
        "agui-antigravity",
        "--auth-tokens",
        &format!("alice={ALICE},bob={BOB}"),
        "--user-header",
        "X-Forwarded-User",
    ])
    .unwrap_err()
    .to_string();
    assert!(refused.contains("proxy_token"), "{refused}");
    let model = model().await;
    let fx = serve(
        &model,
        &[
            "--auth-tokens",
            &format!("alice={ALICE},bob={BOB}"),
            "--user-header",
            "X-Forwarded-User",
            "--proxy-token",
            PROXY,
        ],
    )
    .await;
    let post = |token: &'static str, named: Option<&'static str>| {
        let thread = if named == Some("carol") {
            "t-carol"
        } else {
            "t-alice"
        };
        let mut request = fx
            .client
            .post(fx.url("/"))
            .bearer_auth(token)
            .json(&input(thread, json!([user("m1", "hello")])));
        if let Some(named) = named {
            request = request.header("X-Forwarded-User", named);
        }
        request.send()
    };
    assert_eq!(
        post(ALICE, None).await.unwrap().status(),
        200,
        "alice's own thread"
    );
    let borrowed = post(BOB, Some("alice")).await.unwrap();
    assert_eq!(borrowed.status(), 403, "bob named alice in the header");
    assert!(detail(borrowed).await.contains("authenticating proxy"));
    assert_eq!(
        post(BOB, None).await.unwrap().status(),
        404,
        "bob as himself does not see alice's thread"
    );
    assert_eq!(
        post(PROXY, Some("carol")).await.unwrap().status(),
        200,
        "the proxy names carol"
    );
    assert_eq!(
        post(PROXY, None).await.unwrap().status(),
        401,
        "the proxy must name someone"
    );
    fx.server.shutdown().await;
}

/// A proxy that appends its user header to the one a client sent, instead of replacing it,
/// would let the client choose who it is (the first header counted). A request with two user
/// headers, two users in one, or two `Authorization` headers is refused before anything runs.
#[tokio::test]
async fn a_request_naming_its_user_or_token_twice_is_refused_before_anything_runs() {
    let model = model().await;
    let fx = serve(&model, &["--user-header", "X-Forwarded-User"]).await;
    let post = |users: &[&str], thread: &str| {
        let mut request = fx
            .client
            .post(fx.url("/"))
            .json(&input(thread, json!([user("m1", "hello")])));
        for name in users {
            request = request.header("X-Forwarded-User", *name);
        }
        request.send()
    };
    let events = events_of(post(&["alice"], "t-alice").await.unwrap()).await;
    assert_eq!(text(&events), "Hello.", "alice's thread");
    // Mallory sends `X-Forwarded-User: alice`; her proxy appends her own name after it.
    let appended = post(&["alice", "mallory"], "t-alice").await.unwrap();
    assert_eq!(appended.status(), 400, "mallory named alice first");
    assert!(detail(appended).await.contains("more than once"));
    let joined = post(&["alice, mallory"], "t-alice").await.unwrap();
    assert_eq!(joined.status(), 400, "the same, joined in one header");
    assert!(detail(joined).await.contains("several users"));
    assert_eq!(model.request_count(), 1, "no turn ran for mallory");
    fx.server.shutdown().await;

    let fx = serve(
        &model,
        &["--auth-tokens", &format!("alice={ALICE},bob={BOB}")],
    )
    .await;
    let events = fx
        .client
        .post(fx.url("/"))
        .bearer_auth(ALICE)
        .json(&input("t-alice", json!([user("m1", "hello")])))
        .send()
        .await
        .unwrap();
    assert_eq!(text(&events_of(events).await), "Hello.");
    let twice = fx
        .client
        .post(fx.url("/"))
        .header("authorization", format!("Bearer {ALICE}"))
        .header("authorization", format!("Bearer {BOB}"))
        .json(&input("t-alice", json!([user("m1", "hello")])))
        .send()
        .await
        .unwrap();
    assert_eq!(twice.status(), 400, "two tokens");
    assert!(detail(twice).await.contains("Authorization"));
    assert_eq!(model.request_count(), 2, "no turn ran for the second");
    fx.server.shutdown().await;
}

/// `auth_tokens alice=…` and a proxy's user `alice` are two callers: the proxy's `alice` gets
/// 404 on the token holder's threads, on every route, and the reverse.
#[tokio::test]
async fn a_proxy_user_named_like_a_token_holder_cannot_read_the_token_holders_threads() {
    let model = model().await;
    let fx = serve(
        &model,
        &[
            "--auth-tokens",
            &format!("alice={ALICE}"),
            "--user-header",
            "X-Forwarded-User",
            "--proxy-token",
            PROXY,
        ],
    )
    .await;
    let holder = |route: &str, body: Value| {
        fx.client
            .post(fx.url(route))
            .bearer_auth(ALICE)
            .json(&body)
            .send()
    };
    let proxied = |route: &str, body: Value| {
        fx.client
            .post(fx.url(route))
            .bearer_auth(PROXY)
            .header("X-Forwarded-User", "alice")
            .json(&body)
            .send()
    };
    let first = json!([user("m1", "the holder's secret plan")]);
    let events = events_of(holder("/", input("t-alice", first.clone())).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.");
    for (route, body) in [
        ("/", input("t-alice", first.clone())),
        ("/connect", input("t-alice", json!([]))),
        ("/stop", json!({"threadId": "t-alice"})),
        ("/delete", json!({"threadId": "t-alice"})),
    ] {
        let response = proxied(route, body).await.unwrap();
        assert_eq!(
            response.status(),
            404,
            "the proxy's alice cannot {route} the token holder's thread"
        );
    }
    assert_eq!(
        model.request_count(),
        1,
        "no turn ran for the proxy's alice"
    );
    // Each keeps their own: the holder's thread is intact, the proxy's alice has hers.
    let again = json!([user("m1", "the holder's secret plan"), user("m2", "go on")]);
    let events = events_of(holder("/", input("t-alice", again)).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.");
    let events = events_of(proxied("/", input("t-user", first.clone())).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.");
    let response = holder("/connect", input("t-user", json!([])))
        .await
        .unwrap();
    assert_eq!(response.status(), 404, "and the reverse");
    fx.server.shutdown().await;
}

/// Every token — `auth_token`, each `auth_tokens` entry, `proxy_token`, `metrics_token` —
/// shorter than 16 characters is refused by `check-config` and `serve`, naming the key and the
/// length, never the token.
#[test]
fn short_tokens_are_refused_at_start_naming_the_key_and_length_not_the_token() {
    let short = "Sh0rt-T0k3n"; // 11 characters
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--auth-token", short], "auth_token"),
        (
            &["--auth-tokens", "alice=Sh0rt-T0k3n"],
            "auth_tokens entry `alice`",
        ),
        (
            &[
                "--auth-tokens",
                &alice_entry(),
                "--user-header",
                "X-Forwarded-User",
                "--proxy-token",
                short,
            ],
            "proxy_token",
        ),
        (&["--metrics-token", short], "metrics_token"),
    ];
    for subcommand in ["check-config", "serve"] {
        for (args, key) in &cases {
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agui-antigravity"))
                .args([subcommand, "--bind", "127.0.0.1:0", "--demo"])
                .args(*args)
                .env_clear()
                .env("AGUI_DATA_DIR", dir.path())
                .env("HOME", dir.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // A server that accepts the token serves on: stop it and fail.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(
                out.status.code(),
                Some(2),
                "{subcommand} {args:?} is refused: {stderr}"
            );
            assert!(
                stderr.contains(key) && stderr.contains("11 characters"),
                "{subcommand} names `{key}` and the length: {stderr}"
            );
            assert!(
                !stderr.contains(short) && !stdout.contains(short),
                "{subcommand} shows no token: {stderr}{stdout}"
            );
        }
    }
}

fn alice_entry() -> String {
    format!("alice={ALICE}")
}

/// `/metrics` tells anyone how busy the server is and how its runs fail: with identities it
/// needs a credential. With `user_header` alone no token exists, so it stays closed (401, with
/// a warning at start) until `metrics_token` is set; `metrics_token` opens `/metrics` and
/// nothing else.
#[tokio::test]
async fn metrics_need_a_credential_whenever_callers_have_identities() {
    let metrics = |fx: &Fixture, bearer: Option<&str>| {
        let mut request = fx
            .client
            .get(fx.url("/metrics"))
            .header("X-Forwarded-User", "carol");
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let log = CapturedLog::start();
    let fx = Fixture::start(&["--demo", "--user-header", "X-Forwarded-User"]).await;
    for bearer in [None, Some("anything-0123456789")] {
        let response = metrics(&fx, bearer).await.unwrap();
        assert_eq!(response.status(), 401, "{bearer:?}");
        assert!(detail(response).await.contains("metrics_token"));
    }
    assert!(
        log.text().contains("WARN") && log.text().contains("metrics_token"),
        "the operator is told at start: {}",
        log.text()
    );
    fx.server.shutdown().await;

    const METRICS: &str = "metrics-token-01234";
    let fx = Fixture::start(&[
        "--demo",
        "--user-header",
        "X-Forwarded-User",
        "--metrics-token",
        METRICS,
    ])
    .await;
    let scraped = metrics(&fx, Some(METRICS)).await.unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(scraped.text().await.unwrap().contains("agui_runs_total"));
    assert_eq!(metrics(&fx, None).await.unwrap().status(), 401);
    fx.server.shutdown().await;

    let fx = Fixture::start(&[
        "--demo",
        "--auth-tokens",
        &format!("alice={ALICE}"),
        "--metrics-token",
        METRICS,
    ])
    .await;
    for (bearer, status) in [(Some(ALICE), 200), (Some(METRICS), 200), (None, 401)] {
        let response = fx
            .client
            .get(fx.url("/metrics"))
            .bearer_auth(bearer.unwrap_or_default())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{bearer:?}");
    }
    let run = fx
        .client
        .post(fx.url("/"))
        .bearer_auth(METRICS)
        .json(&input("t-scraper", json!([user("m1", "hello")])))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 401, "metrics_token runs no agent");
    fx.server.shutdown().await;
}

/// A save dir written before identities had namespaces: the upgraded server renames each
/// stored identity once (`alice`, a name in `auth_tokens`, becomes `token:alice`; `bob`, a
/// proxy's user, `user:bob`), so each keeps what was theirs — the token holder her thread, its
/// conversation and its workspace tree — and the proxy's `alice` gets none of it.
#[tokio::test]
async fn threads_stored_with_bare_identities_keep_their_owners_and_trees_after_the_upgrade() {
    let model = model().await;
    let fx = serve(
        &model,
        &[
            "--auth-tokens",
            &format!("alice={ALICE}"),
            "--user-header",
            "X-Forwarded-User",
            "--proxy-token",
            PROXY,
        ],
    )
    .await;
    let post = |fx: &Fixture, who: &str, route: &str, body: Value| {
        let request = fx.client.post(fx.url(route)).json(&body);
        match who {
            "token alice" => request.bearer_auth(ALICE),
            user => request.bearer_auth(PROXY).header("X-Forwarded-User", user),
        }
        .send()
    };
    let hello = json!([user("m1", "hello")]);
    for (who, thread) in [("token alice", "t-alice"), ("bob", "t-bob")] {
        let events = events_of(
            post(&fx, who, "/", input(thread, hello.clone()))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(text(&events), "Hello.", "{who}");
    }
    let save = fx.dir.path().join("save");
    let place = legacy::record(&save, "t-alice")["place"].clone();
    let tree = place["tree"].as_str().unwrap().to_owned();
    let workspace = fx
        .dir
        .path()
        .join("w")
        .join(&tree)
        .join(place["slot"].as_str().unwrap());
    std::fs::write(workspace.join("notes.md"), "alice's notes").unwrap();
    let fx = fx
        .restart_after(|dir| {
            // What the previous version had stored.
            let save = dir.join("save");
            legacy::strip_namespaces(&save);
            assert_eq!(
                legacy::claimed_tree(&save, "alice").as_deref(),
                Some(tree.as_str())
            );
        })
        .await;
    let stolen = post(&fx, "alice", "/", input("t-alice", hello.clone()))
        .await
        .unwrap();
    assert_eq!(stolen.status(), 404, "the proxy's alice gets none of it");
    let again = json!([user("m1", "hello"), user("m2", "again")]);
    for (who, thread) in [("token alice", "t-alice"), ("bob", "t-bob")] {
        let events = events_of(
            post(&fx, who, "/", input(thread, again.clone()))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(text(&events), "Hello.", "{who} continues {thread}");
        let restated = events_of(
            post(&fx, who, "/connect", input(thread, json!([])))
                .await
                .unwrap(),
        )
        .await;
        let history = restated
            .iter()
            .find_map(|e| match e {
                Event::MessagesSnapshot(s) => Some(serde_json::to_string(&s.messages).unwrap()),
                _ => None,
            })
            .unwrap_or_default();
        assert!(
            history.contains("hello") && history.contains("again"),
            "{who}'s conversation goes on: {history}"
        );
    }
    // The same tree and slot, with its files, now claimed by `token:alice`.
    assert_eq!(legacy::record(&save, "t-alice")["owner"], "token:alice");
    assert_eq!(legacy::record(&save, "t-alice")["place"], place);
    assert_eq!(legacy::record(&save, "t-bob")["owner"], "user:bob");
    assert_eq!(
        legacy::claimed_tree(&save, "token:alice").as_deref(),
        Some(tree.as_str())
    );
    assert_eq!(legacy::claimed_tree(&save, "alice"), None);
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.md")).unwrap(),
        "alice's notes"
    );
    // The proxy's alice starts afresh, in a tree of her own.
    let events = events_of(
        post(&fx, "alice", "/", input("t-user-alice", hello))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text(&events), "Hello.");
    let hers = legacy::claimed_tree(&save, "user:alice").expect("a tree for the proxy's alice");
    assert_ne!(hers, tree);
    fx.server.shutdown().await;
}
