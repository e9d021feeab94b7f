//! A thread's files against the disk cap and the listed size (issue 38), on a real
//! `agui-antigravity serve` with the real harness: an upload past `workspace_max_mb` is 413 and
//! leaves nothing behind, uploads in flight together cannot pass it, and the thread's listed
//! workspace size follows uploads and removals. `files.rs` has the routes' other behaviour.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::Value;
use support::files::{delete, everything_below, listing, put};
use support::served::{Served, Start, token};

#[tokio::test]
async fn an_upload_past_the_disk_cap_is_refused_and_leaves_nothing_behind() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "8"],
        ..Start::default()
    })
    .await;
    let thread = "capped";
    let small = put(&served, "alice", thread, "small.bin", vec![1u8; 2 << 20]).await;
    assert_eq!(small.status(), 201, "an upload under the cap is written");
    let entry: Value = small.json().await.unwrap();
    assert_eq!(entry["name"], "small.bin");
    assert_eq!(entry["kind"], "file");
    assert_eq!(entry["size"], 2 << 20);
    let before = everything_below(&served.workspace_root());
    // Streamed, with no length: refused once it passes the cap.
    let chunks = futures_util::stream::iter(
        (0..20).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![7u8; 1 << 20]))),
    );
    let streamed = put(
        &served,
        "alice",
        thread,
        "deep/er/big.bin",
        reqwest::Body::wrap_stream(chunks),
    )
    .await;
    assert_eq!(streamed.status(), 413, "{:?}", streamed.text().await);
    // With its length: refused before it is read.
    let declared = put(
        &served,
        "alice",
        thread,
        "deep/er/big.bin",
        vec![7u8; 20 << 20],
    )
    .await;
    assert_eq!(declared.status(), 413);
    // Past the cap together with what is there already.
    let together = put(&served, "alice", thread, "more.bin", vec![7u8; 7 << 20]).await;
    assert_eq!(together.status(), 413);
    let after = everything_below(&served.workspace_root());
    assert_eq!(
        after, before,
        "no temporary file, no directory, no partial file"
    );
    let kinds = listing(&served, "alice", thread, "").await;
    assert_eq!(kinds.keys().cloned().collect::<Vec<_>>(), ["small.bin"]);
}

#[tokio::test]
async fn uploads_in_flight_together_cannot_pass_the_disk_cap() {
    let served = Served::start(Start {
        args: &["--workspace-max-mb", "8"],
        ..Start::default()
    })
    .await;
    let thread = "racing";
    let seeded = put(&served, "alice", thread, "seed.txt", b"seed".to_vec()).await;
    assert_eq!(seeded.status(), 201);
    // Two uploads of 5 MiB each, streamed slowly so that both are in flight at once: each is
    // under the 8 MiB cap alone, not together.
    let slow = || {
        reqwest::Body::wrap_stream(futures_util::stream::iter(0..10).then(|_| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, std::io::Error>(bytes::Bytes::from(vec![7u8; 512 << 10]))
        }))
    };
    let (first, second) = tokio::join!(
        put(&served, "alice", thread, "one.bin", slow()),
        put(&served, "alice", thread, "two.bin", slow()),
    );
    let mut statuses = [first.status().as_u16(), second.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 413], "one of the two fits, not both");
    let kinds = listing(&served, "alice", thread, "").await;
    assert_eq!(kinds.len(), 2, "the seed and one upload: {kinds:?}");
}

/// The thread's `workspaceBytes` once it satisfies `ok` (its size is measured in the
/// background), or the last one seen after 10 s.
async fn workspace_bytes_once(
    served: &Served,
    owner: &str,
    thread: &str,
    ok: impl Fn(u64) -> bool,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let summary: Value = reqwest::Client::new()
            .get(format!("http://{}/threads/{thread}", served.addr))
            .bearer_auth(token(owner))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let bytes = summary["workspaceBytes"].as_u64().unwrap_or_default();
        if ok(bytes) || Instant::now() > deadline {
            return bytes;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_listed_workspace_size_follows_uploads_and_removals() {
    let served = Served::start(Start::default()).await;
    let thread = "sized";
    let put_big = put(&served, "alice", thread, "big.bin", vec![3u8; 3 << 20]).await;
    assert_eq!(put_big.status(), 201);
    let after_put = workspace_bytes_once(&served, "alice", thread, |b| b >= 3 << 20).await;
    assert!(after_put >= 3 << 20, "after the upload: {after_put}");
    assert_eq!(
        delete(&served, "alice", thread, "big.bin").await.status(),
        200
    );
    let after_delete = workspace_bytes_once(&served, "alice", thread, |b| b < 1 << 20).await;
    assert!(after_delete < 1 << 20, "after the removal: {after_delete}");
}
