//! Who may use the server, over HTTP against the real harness and the scripted model: the Host
//! and Origin checks (DNS rebinding, other sites' pages), the start-up refusals, tokens, thread
//! owners, and error texts that leave host details in the log.

mod support;

use std::time::Duration;

use agui_server::ServerConfig;
use agui_types::Event;
use gemini_script::{Handle, Reply, Script, ScriptedModel};
use serde_json::{Value, json};
use support::{CapturedLog, Fixture, events_of, harnesses_in, input, text, user};

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
    assert!(config(&["--bind", "0.0.0.0:8027", "--auth-token", "t"]).is_ok());
    let any_site = config(&["--cors-origins", "*"]).unwrap_err();
    assert!(any_site.contains("auth_token"), "{any_site}");
    assert!(config(&["--cors-origins", "*", "--auth-token", "t"]).is_ok());

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
    let fx = Fixture::start(&["--demo", "--auth-token", "s3cret-token"]).await;
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
        Some("s3cret-tokeN"),
        Some("s3cret"),
        Some("s3cret-token-and-more"),
        Some(""),
    ] {
        let response = post(wrong).await.unwrap();
        assert_eq!(response.status(), 401, "{wrong:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    assert_eq!(post(Some("s3cret-token")).await.unwrap().status(), 200);
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
        .bearer_auth("s3cret-token")
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
        &["--auth-tokens", "alice=alice-token,bob=bob-token"],
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
    let events = events_of(
        post(&fx, "alice-token", "t-alice", first.clone())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text(&events), "Hello.");
    let stolen = post(&fx, "bob-token", "t-alice", first.clone())
        .await
        .unwrap();
    assert_eq!(stolen.status(), 404, "bob cannot see alice's thread");
    for (route, body) in [
        ("/connect", input("t-alice", json!([]))),
        ("/stop", json!({"threadId": "t-alice"})),
    ] {
        let peek = fx
            .client
            .post(fx.url(route))
            .bearer_auth("bob-token")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(peek.status(), 404, "bob cannot {route} alice's thread");
    }
    let own = post(&fx, "bob-token", "t-bob", first.clone())
        .await
        .unwrap();
    assert_eq!(text(&events_of(own).await), "Hello.", "bob has his own");
    let second = json!([user("m1", "hello"), user("m2", "again")]);
    let events = events_of(post(&fx, "alice-token", "t-alice", second).await.unwrap()).await;
    assert_eq!(text(&events), "Hello.", "alice continues");
    assert_eq!(model.request_count(), 3, "bob's attempt reached no model");

    let fx = fx.restart().await;
    let stolen = post(&fx, "bob-token", "t-alice", first).await.unwrap();
    assert_eq!(stolen.status(), 404, "the owner survives a restart");
    let third = json!([user("m1", "hello"), user("m2", "again"), user("m3", "more")]);
    let events = events_of(post(&fx, "alice-token", "t-alice", third).await.unwrap()).await;
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
    let metrics = fx.client.get(fx.url("/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 200, "metrics belong to no thread");
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
        "alice=alice-t,bob=bob-t",
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
            "alice=alice-t,bob=bob-t",
            "--user-header",
            "X-Forwarded-User",
            "--proxy-token",
            "proxy-t",
        ],
    )
    .await;
    let post = |token: &'static str, named: Option<&'static str>| {
        let mut request = fx
            .client
            .post(fx.url("/"))
            .bearer_auth(token)
            .json(&input("t-alice", json!([user("m1", "hello")])));
        if let Some(named) = named {
            request = request.header("X-Forwarded-User", named);
        }
        request.send()
    };
    assert_eq!(
        post("alice-t", None).await.unwrap().status(),
        200,
        "alice's own thread"
    );
    let borrowed = post("bob-t", Some("alice")).await.unwrap();
    assert_eq!(borrowed.status(), 403, "bob named alice in the header");
    assert!(detail(borrowed).await.contains("authenticating proxy"));
    assert_eq!(
        post("bob-t", None).await.unwrap().status(),
        404,
        "bob as himself does not see alice's thread"
    );
    assert_eq!(
        post("proxy-t", Some("alice")).await.unwrap().status(),
        200,
        "the proxy names alice"
    );
    assert_eq!(
        post("proxy-t", None).await.unwrap().status(),
        401,
        "the proxy must name someone"
    );
    fx.server.shutdown().await;
}
