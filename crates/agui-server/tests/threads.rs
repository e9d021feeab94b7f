//! Threads as resources of their owner (issue 38), against a real `agui-antigravity serve` with
//! the real harness, the scripted model and two owners, alice and bob: the list (paged, titled by
//! the first message), one thread, renaming and archiving, deletion, another owner's 404, the
//! stream of changes, and the same list from another replica sharing the save dir.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use support::served::{Served, Start, token};

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn get(served: &Served, owner: &str, path: &str) -> (u16, Value) {
    let response = client()
        .get(format!("http://{}{path}", served.addr))
        .bearer_auth(token(owner))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn patch(served: &Served, owner: &str, thread: &str, body: Value) -> (u16, Value) {
    let response = client()
        .patch(format!("http://{}/threads/{thread}", served.addr))
        .bearer_auth(token(owner))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn ids(list: &Value) -> Vec<String> {
    list["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_owner_lists_reads_renames_archives_and_deletes_their_threads_and_another_gets_404() {
    let served = Served::start(Start::default()).await;
    served.say("alice", "a1", "echo first > notes.txt").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    served.say("alice", "a2", "echo second").await;
    served.say("bob", "b1", "echo bob").await;

    let (status, list) = get(&served, "alice", "/threads").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids(&list), ["a2", "a1"], "newest activity first: {list}");
    assert_eq!(list["nextCursor"], Value::Null);
    let a1 = &list["threads"][1];
    assert_eq!(a1["title"], "echo first > notes.txt");
    assert_eq!(a1["archived"], false);
    assert!(a1["messageCount"].as_u64().unwrap() >= 2, "{a1}");
    assert!(
        ["idle", "hibernated"].contains(&a1["status"].as_str().unwrap()),
        "{a1}"
    );
    assert!(a1["createdAt"].as_str().unwrap().ends_with('Z'), "{a1}");
    // The workspace's size shows once measured (after the turn, in the background).
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&served, "alice", "/threads/a1").await.1["workspaceBytes"] == 0 {
        assert!(
            Instant::now() < deadline,
            "the workspace was never measured"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Paged: one at a time, each once.
    let (_, first) = get(&served, "alice", "/threads?limit=1").await;
    assert_eq!(ids(&first), ["a2"]);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let (_, second) = get(
        &served,
        "alice",
        &format!("/threads?limit=1&cursor={cursor}"),
    )
    .await;
    assert_eq!(ids(&second), ["a1"]);
    assert_eq!(second["nextCursor"], Value::Null);
    for bad in [
        "/threads?limit=0",
        "/threads?limit=201",
        "/threads?cursor=nope",
        "/threads?archived=maybe",
        "/threads?colour=red",
    ] {
        assert_eq!(get(&served, "alice", bad).await.0, 400, "{bad}");
    }

    // Bob sees his own only, and none of alice's.
    assert_eq!(ids(&get(&served, "bob", "/threads").await.1), ["b1"]);
    assert_eq!(get(&served, "bob", "/threads/a1").await.0, 404);
    assert_eq!(
        patch(&served, "bob", "a1", json!({"title": "bob's"}))
            .await
            .0,
        404
    );
    assert_eq!(get(&served, "alice", "/threads/nope").await.0, 404);

    // Rename and archive.
    let (status, renamed) = patch(&served, "alice", "a1", json!({"title": "  Notes  "})).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["title"], "Notes");
    for bad in [
        json!({}),
        json!({"title": ""}),
        json!({"title": "x".repeat(201)}),
        json!({"colour": "red"}),
    ] {
        assert_eq!(
            patch(&served, "alice", "a1", bad.clone()).await.0,
            422,
            "{bad}"
        );
    }
    let (_, archived) = patch(&served, "alice", "a1", json!({"archived": true})).await;
    assert_eq!(archived["archived"], true);
    assert_eq!(ids(&get(&served, "alice", "/threads").await.1), ["a2"]);
    assert_eq!(
        ids(&get(&served, "alice", "/threads?archived=true").await.1),
        ["a1"]
    );
    assert_eq!(
        ids(&get(&served, "alice", "/threads?archived=all").await.1).len(),
        2
    );
    assert_eq!(
        get(&served, "alice", "/threads/a1").await.1["title"],
        "Notes"
    );

    // Delete: gone from the list.
    let deleted = client()
        .delete(format!("http://{}/threads/a2", served.addr))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert!(ids(&get(&served, "alice", "/threads?archived=all").await.1) == ["a1"]);
    // Deleting it again, or an id nobody used, finds nothing (and makes nothing).
    for thread in ["a2", "never-made"] {
        let again = client()
            .delete(format!("http://{}/threads/{thread}", served.addr))
            .bearer_auth(token("alice"))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 404, "{thread}");
    }
    assert!(ids(&get(&served, "alice", "/threads?archived=all").await.1) == ["a1"]);
}

/// The `event: thread` events of a stream, as JSON, until `stop` says so or 30 s pass.
async fn watch(served: &Served, owner: &str) -> impl futures_util::Stream<Item = Value> {
    let response = client()
        .get(format!("http://{}/threads/events", served.addr))
        .bearer_auth(token(owner))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut buffer = String::new();
    response
        .bytes_stream()
        .map(move |chunk| {
            buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            let mut events = Vec::new();
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if let Some(data) = event
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .filter(|_| event.starts_with("event: thread"))
                {
                    events.push(serde_json::from_str::<Value>(data).unwrap());
                }
            }
            futures_util::stream::iter(events)
        })
        .flatten()
}

#[tokio::test]
async fn the_event_stream_tells_its_owner_of_threads_made_running_and_deleted_and_nothing_of_others()
 {
    let served = Served::start(Start::default()).await;
    let events = watch(&served, "alice").await;
    tokio::pin!(events);
    served.say("bob", "b1", "echo bob").await;
    served.say("alice", "a1", "sleep 1; echo done").await;
    let deleted = client()
        .delete(format!("http://{}/threads/a1", served.addr))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let mut seen = Vec::new();
    while !seen.contains(&"deleted".to_owned()) {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("an event within 30 s")
            .expect("the stream goes on");
        assert_eq!(event["thread"]["id"], "a1", "only alice's: {event}");
        let kind = event["type"].as_str().unwrap().to_owned();
        if let Some(status) = event["thread"]["status"].as_str() {
            seen.push(format!("{kind}:{status}"));
        }
        seen.push(kind);
    }
    assert!(seen.iter().any(|s| s == "created"), "{seen:?}");
    assert!(
        seen.iter().any(|s| s.ends_with(":running")),
        "the turn was seen running: {seen:?}"
    );
    assert!(seen.iter().any(|s| s == "deleted"), "{seen:?}");
}

#[tokio::test]
async fn another_replica_lists_and_reads_the_threads_the_first_served() {
    let first = Served::start(Start {
        args: &["--replica-id", "r1"],
        ..Start::default()
    })
    .await;
    let second = Served::start(Start {
        args: &["--replica-id", "r2"],
        replica_of: Some(&first),
        ..Start::default()
    })
    .await;
    first
        .say("alice", "a1", "echo from the first replica")
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, list) = get(&second, "alice", "/threads").await;
        assert_eq!(status, 200);
        if ids(&list) == ["a1"] && list["threads"][0]["title"] == "echo from the first replica" {
            break;
        }
        assert!(Instant::now() < deadline, "{list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, one) = get(&second, "alice", "/threads/a1").await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(get(&second, "bob", "/threads/a1").await.0, 404);
}

/// Runs `messages` (explicit ids) on `owner`'s `thread`; the run's events.
async fn run_messages(
    served: &Served,
    owner: &str,
    thread: &str,
    messages: Value,
) -> Vec<agui_types::Event> {
    let body =
        json!({"threadId": thread, "runId": format!("r-{}", rand_suffix()), "messages": messages});
    let response = client()
        .post(format!("http://{}/", served.addr))
        .bearer_auth(token(owner))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = tokio::time::timeout(Duration::from_secs(120), response.bytes())
        .await
        .expect("the run ends")
        .unwrap();
    agui_types::Encoding::Sse
        .decode_all(&bytes)
        .expect("valid SSE")
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test]
async fn an_edit_forks_on_another_replica_after_a_failover_and_the_branches_are_listed_and_switched()
 {
    let mut first = Served::start(Start {
        args: &["--replica-id", "r1"],
        ..Start::default()
    })
    .await;
    let second = Served::start(Start {
        args: &["--replica-id", "r2"],
        replica_of: Some(&first),
        ..Start::default()
    })
    .await;
    let u1 = json!({"id": "u1", "role": "user", "content": "echo one"});
    let u2 = json!({"id": "u2", "role": "user", "content": "echo two"});
    for messages in [json!([u1]), json!([u1, u2])] {
        let events = run_messages(&first, "alice", "f1", messages).await;
        assert!(matches!(
            events.last(),
            Some(agui_types::Event::RunFinished(_))
        ));
    }
    let (_, before) = get(&first, "alice", "/threads/f1").await;
    first.stop();

    // The other replica takes the thread over, and the edit forks it there.
    let edited = json!([u1, {"id": "u2", "role": "user", "content": "echo three"}]);
    let events = run_messages(&second, "alice", "f1", edited).await;
    assert!(
        matches!(events.last(), Some(agui_types::Event::RunFinished(_))),
        "{events:?}"
    );
    assert!(support::served::tool_results(&events).contains("three"));
    let requests = second.model.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(
        last.contains("echo one") && last.contains("echo three"),
        "{last}"
    );
    assert!(
        !last.contains("echo two"),
        "the edited-away message is not in the kept history"
    );

    let (status, forked) = get(&second, "alice", "/threads/f1").await;
    assert_eq!(status, 200);
    assert_eq!(forked["branches"].as_array().unwrap().len(), 1, "{forked}");
    assert_eq!(forked["branches"][0]["id"], before["branch"], "{forked}");
    assert_eq!(forked["branches"][0]["leftAt"], "u2");
    assert_ne!(forked["branch"], before["branch"]);

    let (status, switched) =
        patch(&second, "alice", "f1", json!({"branch": before["branch"]})).await;
    assert_eq!(status, 200, "{switched}");
    assert_eq!(switched["branch"], before["branch"]);
    assert_eq!(switched["branches"][0]["id"], forked["branch"]);
    let (status, refused) = patch(&second, "alice", "f1", json!({"branch": "nope"})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        patch(&second, "bob", "f1", json!({"branch": before["branch"]}))
            .await
            .0,
        404
    );
}

/// A `PUT` of a small file to `thread` as `owner` (which makes the thread, theirs): its status.
async fn seed(client: &reqwest::Client, served: &Served, owner: &str, thread: &str) -> u16 {
    client
        .put(format!(
            "http://{}/threads/{thread}/files/seed.txt",
            served.addr
        ))
        .bearer_auth(token(owner))
        .body("seed")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// One list page: its `(updatedAt, id)` pairs and its cursor.
async fn list_page(
    client: &reqwest::Client,
    served: &Served,
    limit: usize,
    cursor: Option<&str>,
) -> (Vec<(String, String)>, Option<String>) {
    let mut url = format!("http://{}/threads?limit={limit}", served.addr);
    if let Some(cursor) = cursor {
        url.push_str(&format!("&cursor={cursor}"));
    }
    let response = client
        .get(url)
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let page: Value = response.json().await.unwrap();
    let threads = page["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["updatedAt"].as_str().unwrap().to_owned(),
                t["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (threads, page["nextCursor"].as_str().map(str::to_owned))
}

/// Every page of alice's list with `limit`, following the cursor until there is none; `between`
/// runs after each page but the last. Each page holds `limit` threads but the last, which holds
/// at least one.
async fn walk(
    client: &reqwest::Client,
    served: &Served,
    limit: usize,
    mut between: impl AsyncFnMut(usize),
) -> Vec<(String, String)> {
    let (mut all, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let (threads, next) = list_page(client, served, limit, cursor.as_deref()).await;
        pages += 1;
        assert!(!threads.is_empty(), "page {pages} (limit {limit}) is empty");
        all.extend(threads.iter().cloned());
        match next {
            Some(next) => {
                assert_eq!(threads.len(), limit, "page {pages} is not full");
                between(pages).await;
                cursor = Some(next);
            }
            None => {
                assert!(
                    threads.len() <= limit,
                    "page {pages} is longer than {limit}"
                );
                return all;
            }
        }
    }
}

fn only_ids(threads: &[(String, String)]) -> Vec<String> {
    threads.iter().map(|(_, id)| id.clone()).collect()
}

#[tokio::test]
async fn a_thousand_threads_are_listed_page_by_page_each_exactly_once_newest_activity_first() {
    let started = Instant::now();
    let served = Served::start(Start::default()).await;
    let client = client();
    // The default `max_threads_per_owner` is 1000: alice makes as many, 16 at a time, by a
    // `PUT` of a file to each new thread.
    const THREADS: usize = 1000;
    let (by_ref, served_ref) = (&client, &served);
    let made: Vec<u16> = futures_util::stream::iter(0..THREADS)
        .map(move |i| async move { seed(by_ref, served_ref, "alice", &format!("t{i:04}")).await })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(made.iter().all(|s| *s == 201), "{made:?}");
    assert_eq!(
        seed(&client, &served, "alice", "one-too-many").await,
        429,
        "the 1001st thread is past the default cap"
    );
    let seeded = started.elapsed();

    // The order the server defines: newest activity first (`updatedAt`, to the second), then
    // by id; every id exactly once, whatever the page size.
    let by_100 = walk(&client, &served, 100, async |_| {}).await;
    let mut expected: Vec<(String, String)> = by_100.clone();
    expected.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(by_100, expected, "pages in the server's order");
    let mut ids = only_ids(&by_100);
    ids.sort();
    let all: Vec<String> = (0..THREADS).map(|i| format!("t{i:04}")).collect();
    assert_eq!(ids, all, "each of the 1000 threads exactly once");
    let by_77 = walk(&client, &served, 77, async |_| {}).await;
    assert_eq!(
        by_77, by_100,
        "a page size that does not divide 1000 gives the same list"
    );
    let by_200 = walk(&client, &served, 200, async |_| {}).await;
    assert_eq!(by_200, by_100);

    // A rename is activity: the renamed thread moves to the head of the list (a later second
    // than every thread made above). The cursor is a position in that order, so a walk under
    // way never lists a thread twice: one already listed (`seen`) is not listed again, and
    // one not reached yet (`ahead`) is not reached at all (a new walk, or the event stream,
    // shows it at the head); every other thread is listed exactly once, in order.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let order = only_ids(&by_100);
    let (seen, ahead) = (order[40].clone(), order[640].clone());
    let during = walk(&client, &served, 100, async |page| {
        if page == 1 {
            for id in [&seen, &ahead] {
                let (status, renamed) = patch(
                    &served,
                    "alice",
                    id,
                    json!({"title": format!("renamed {id}")}),
                )
                .await;
                assert_eq!(status, 200, "{renamed}");
            }
        }
    })
    .await;
    let during = only_ids(&during);
    let unchanged: Vec<String> = order.iter().filter(|id| **id != ahead).cloned().collect();
    assert_eq!(
        during, unchanged,
        "listed once each, in order, but the thread renamed before the walk reached it"
    );
    let after = only_ids(&walk(&client, &served, 100, async |_| {}).await);
    let mut head = after[..2].to_vec();
    head.sort();
    let mut renamed = vec![seen.clone(), ahead.clone()];
    renamed.sort();
    assert_eq!(head, renamed, "the renamed threads lead a new walk");
    let rest: Vec<String> = order
        .iter()
        .filter(|id| **id != seen && **id != ahead)
        .cloned()
        .collect();
    assert_eq!(&after[2..], &rest[..]);
    eprintln!(
        "1000 threads made in {:.1} s; the whole test took {:.1} s",
        seeded.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
