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
    let args = [
        "agui-antigravity",
        "--save-dir",
        &dir.join("save").to_string_lossy(),
        "--workspace-root",
        &dir.join("w").to_string_lossy(),
        "--bind",
        "127.0.0.1:0",
        "--demo",
        "--replica-id",
        id,
        "--hibernate-after-secs",
        "2",
        "--busy-thread-wait-secs",
        &lease_wait_secs.to_string(),
    ]
    .map(String::from);
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
