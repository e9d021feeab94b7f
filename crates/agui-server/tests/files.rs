//! A thread's files over HTTP (issue 38), against a real `agui-antigravity serve` on the real
//! harness and the scripted model: `GET`, `PUT` and `DELETE <path>/threads/<id>/files/…` and
//! `GET <dir>?archive=zip`. Another owner gets 404; a path that leaves the workspace is a 400;
//! what the agent planted (a link to the host, a hard link, a FIFO) is listed but never
//! followed, read or written through; downloads and uploads stream (the server's memory stays
//! flat; the disk cap is in `files_disk_cap.rs`); files move while a turn runs; a
//! `PUT` makes a new thread whose next run sees the file; attachments too large to send inline
//! land in the workspace.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::StreamExt as _;
use gemini_script::{Matcher, Reply, Script};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use support::files::{
    assert_host_intact, delete, everything_below, files_url, get, hex, host_dir, listing, printed,
    put, raw_status, sha256_hex, unzip, vm_kb,
};
use support::served::{Served, Start, secret, token, tool_results};

#[tokio::test]
async fn another_owner_gets_404_on_every_method_and_reading_claims_nothing() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "alices",
            "mkdir d && printf secret > d/s.txt && echo MADE=yes",
        )
        .await;
    assert_eq!(printed(&out, "MADE"), "yes");
    for rel in ["", "d", "d/s.txt", "d?archive=zip"] {
        let response = get(&served, "bob", "alices", rel).await;
        assert_eq!(response.status(), 404, "bob's GET of `{rel}`");
        let body: Value = response.json().await.unwrap();
        assert!(!body.to_string().contains("secret"), "{body}");
    }
    assert_eq!(
        put(&served, "bob", "alices", "d/s.txt", "bob's")
            .await
            .status(),
        404
    );
    assert_eq!(
        put(&served, "bob", "alices", "new.txt", "bob's")
            .await
            .status(),
        404
    );
    assert_eq!(
        delete(&served, "bob", "alices", "d/s.txt").await.status(),
        404
    );
    assert_eq!(delete(&served, "bob", "alices", "d").await.status(), 404);
    // Alice's files are as she left them.
    let mine = get(&served, "alice", "alices", "d/s.txt").await;
    assert_eq!(mine.status(), 200);
    assert_eq!(mine.text().await.unwrap(), "secret");
    assert!(
        !listing(&served, "alice", "alices", "")
            .await
            .contains_key("new.txt")
    );
    // A read of a thread nobody has does not make it the reader's: alice can still make it.
    assert_eq!(get(&served, "bob", "unclaimed", "").await.status(), 404);
    assert_eq!(delete(&served, "bob", "unclaimed", "x").await.status(), 404);
    assert_eq!(
        put(&served, "alice", "unclaimed", "x.txt", "alice's")
            .await
            .status(),
        201,
        "the thread bob only read is free for alice"
    );
    assert_eq!(
        get(&served, "bob", "unclaimed", "x.txt").await.status(),
        404
    );
}

#[tokio::test]
async fn paths_that_leave_the_workspace_are_refused_with_400_on_every_method() {
    let served = Served::start(Start::default()).await;
    let thread = "paths";
    assert_eq!(
        put(&served, "alice", thread, "a/b.txt", "inside")
            .await
            .status(),
        201
    );
    let base = format!("/threads/{thread}/files");
    let bad = [
        "/..",
        "/../escape.txt",
        "/a/../../escape.txt",
        "/%2e%2e/escape.txt",
        "/%2E%2E%2Fescape.txt",
        "/%2fetc%2fpasswd",
        "/a%2f..%2f..%2fescape.txt",
        "/a//b.txt",
        "/./a/b.txt",
        "/a%5cb.txt",
        "/a%00b.txt",
        "/a/",
    ];
    for method in ["GET", "PUT", "DELETE"] {
        for path in bad {
            let status = raw_status(&served, "alice", method, &format!("{base}{path}")).await;
            assert_eq!(status, 400, "{method} {base}{path}");
        }
    }
    // Nothing was written or removed anywhere.
    let escaped: Vec<_> = everything_below(served.dir.path())
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.contains("escape")
                || name.contains('\\')
                || name == "b.txt" && !p.ends_with("a/b.txt")
        })
        .collect();
    assert!(escaped.is_empty(), "{escaped:?}");
    let inside = get(&served, "alice", thread, "a/b.txt").await;
    assert_eq!(inside.text().await.unwrap(), "inside");
}

#[tokio::test]
async fn what_the_agent_planted_is_listed_but_never_followed_read_or_written_through() {
    let served = Served::start(Start::default()).await;
    let host = host_dir(&served);
    let thread = "planted";
    let out = served
        .say(
            "alice",
            thread,
            &format!(
                "mkdir sub && printf inside > sub/f.txt && ln -s {host} dirlink && ln -s {host}/precious ptr && mkfifo fifo && printf twice > sub/two.txt && ln sub/two.txt hard.txt && echo PLANTED=yes",
                host = host.display()
            ),
        )
        .await;
    assert_eq!(printed(&out, "PLANTED"), "yes");
    let kinds = listing(&served, "alice", thread, "").await;
    let expected: BTreeMap<String, String> = [
        ("dirlink", "symlink"),
        ("fifo", "other"),
        ("hard.txt", "file"),
        ("ptr", "symlink"),
        ("sub", "dir"),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_owned(), k.to_owned()))
    .collect();
    assert_eq!(kinds, expected);
    // Reads: the links, what lies through them, the FIFO (at once) and both names of the
    // hard-linked file are refused.
    for rel in [
        "dirlink",
        "dirlink/precious",
        "ptr",
        "fifo",
        "hard.txt",
        "sub/two.txt",
    ] {
        let started = Instant::now();
        let response = get(&served, "alice", thread, rel).await;
        assert_eq!(response.status(), 403, "GET {rel}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "GET {rel} blocked"
        );
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("HOST-SECRET") && !body.contains("twice"),
            "{body}"
        );
    }
    assert_eq!(
        get(&served, "alice", thread, "sub/f.txt")
            .await
            .text()
            .await
            .unwrap(),
        "inside"
    );
    // The archive leaves them all out.
    let zip = get(&served, "alice", thread, "?archive=zip").await;
    assert_eq!(zip.status(), 200);
    let entries = unzip(&zip.bytes().await.unwrap());
    assert_eq!(
        entries.keys().cloned().collect::<Vec<_>>(),
        ["sub/", "sub/f.txt"],
        "only the directory and the plain file"
    );
    // Writes: nothing goes through the directory link; a file over the link to a file
    // replaces the link, never what it named.
    assert_eq!(
        put(&served, "alice", thread, "dirlink/new.txt", "x")
            .await
            .status(),
        409
    );
    assert_eq!(
        put(&served, "alice", thread, "dirlink/deeper/new.txt", "x")
            .await
            .status(),
        409
    );
    assert_eq!(
        put(&served, "alice", thread, "ptr", "replaced")
            .await
            .status(),
        200
    );
    assert_eq!(
        get(&served, "alice", thread, "ptr")
            .await
            .text()
            .await
            .unwrap(),
        "replaced"
    );
    assert_host_intact(&host);
    // Removals: a link goes as a link, what it led to stays.
    assert_eq!(
        delete(&served, "alice", thread, "dirlink/precious")
            .await
            .status(),
        409
    );
    assert_eq!(
        delete(&served, "alice", thread, "sub").await.status(),
        409,
        "not empty"
    );
    for rel in ["dirlink", "fifo", "hard.txt"] {
        assert_eq!(
            delete(&served, "alice", thread, rel).await.status(),
            200,
            "DELETE {rel}"
        );
    }
    assert_eq!(delete(&served, "alice", thread, "fifo").await.status(), 404);
    let kinds = listing(&served, "alice", thread, "").await;
    assert_eq!(kinds.keys().cloned().collect::<Vec<_>>(), ["ptr", "sub"]);
    assert_host_intact(&host);
    let out = served
        .say(
            "alice",
            thread,
            "cat sub/two.txt; echo; ls -l hard.txt 2>&1 | head -1",
        )
        .await;
    assert!(out.contains("twice"), "the other name is left: {out}");
}

#[tokio::test]
async fn a_200_mb_download_streams_with_the_server_s_memory_flat() {
    let served = Served::start(Start::default()).await;
    let thread = "big";
    let out = served
        .say(
            "alice",
            thread,
            "head -c 209715200 /dev/urandom > big.bin && echo SUM=$(sha256sum big.bin | cut -d' ' -f1)",
        )
        .await;
    let expected = printed(&out, "SUM");
    let pid = served.pid();
    let before = vm_kb(pid, "VmRSS:");
    let peak_before = vm_kb(pid, "VmHWM:");
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::spawn(async move {
            let mut max = 0;
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                max = max.max(vm_kb(pid, "VmRSS:"));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            max
        })
    };
    let response = get(&served, "alice", thread, "big.bin").await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-length"].to_str().unwrap(),
        "209715200"
    );
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/octet-stream"
    );
    let mut stream = response.bytes_stream();
    let (mut hasher, mut len) = (Sha256::new(), 0u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        len += chunk.len() as u64;
        hasher.update(&chunk);
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let max = sampler.await.unwrap();
    let peak_after = vm_kb(pid, "VmHWM:");
    eprintln!(
        "server RSS: {before} kB before, {max} kB at most while sending; peak {peak_before} kB before, {peak_after} kB after"
    );
    assert_eq!(len, 209_715_200);
    assert_eq!(
        hex(&hasher.finalize()),
        expected,
        "the bytes are the file's"
    );
    let bound = 40 * 1024;
    assert!(
        max.saturating_sub(before) < bound,
        "the server's RSS went from {before} kB to {max} kB while sending 200 MB"
    );
    assert!(
        peak_after.saturating_sub(peak_before.max(before)) < bound,
        "the server's peak RSS went from {peak_before} kB to {peak_after} kB"
    );
}

#[tokio::test]
async fn ranges_validators_and_the_headers_that_keep_a_browser_safe() {
    let served = Served::start(Start::default()).await;
    let thread = "ranges";
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(
        put(&served, "alice", thread, "data.txt", data.clone())
            .await
            .status(),
        201
    );
    let client = reqwest::Client::new();
    let url = files_url(&served, thread, "data.txt");
    let ranged = |range: &str| {
        client
            .get(&url)
            .bearer_auth(token("alice"))
            .header("range", range)
            .send()
    };
    let part = ranged("bytes=10-19").await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 10-19/4096");
    assert_eq!(part.bytes().await.unwrap().as_ref(), &data[10..20]);
    let tail = ranged("bytes=-5").await.unwrap();
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap().as_ref(), &data[4091..]);
    let past = ranged("bytes=5000-").await.unwrap();
    assert_eq!(past.status(), 416);
    assert_eq!(past.headers()["content-range"], "bytes */4096");
    let whole = get(&served, "alice", thread, "data.txt").await;
    assert_eq!(whole.status(), 200);
    let headers = whole.headers().clone();
    assert_eq!(headers["accept-ranges"], "bytes");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert!(
        headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline")
    );
    assert!(headers.contains_key("last-modified"));
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(whole.bytes().await.unwrap().as_ref(), &data[..]);
    let cached = client
        .get(&url)
        .bearer_auth(token("alice"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), 304);
    assert!(cached.bytes().await.unwrap().is_empty());
    // Changed: the old validator no longer matches.
    assert_eq!(
        put(&served, "alice", thread, "data.txt", "new")
            .await
            .status(),
        200
    );
    let changed = client
        .get(&url)
        .bearer_auth(token("alice"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(changed.text().await.unwrap(), "new");
    // What could run in a page is never shown inline.
    for (name, content_type) in [
        ("page.html", "text/html; charset=utf-8"),
        ("image.svg", "image/svg+xml"),
        ("blob", "application/octet-stream"),
    ] {
        assert_eq!(
            put(&served, "alice", thread, name, "<script>1</script>")
                .await
                .status(),
            201
        );
        let response = get(&served, "alice", thread, name).await;
        assert_eq!(response.headers()["content-type"], content_type, "{name}");
        assert_eq!(
            response.headers()["content-disposition"],
            format!("attachment; filename=\"{name}\"; filename*=UTF-8''{name}").as_str(),
            "{name}"
        );
    }
    assert_eq!(
        put(&served, "alice", thread, "pixel.png", vec![0x89, b'P'])
            .await
            .status(),
        201
    );
    let png = get(&served, "alice", thread, "pixel.png").await;
    assert_eq!(png.headers()["content-type"], "image/png");
    assert!(
        png.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline")
    );
}

#[tokio::test]
async fn files_go_up_and_down_while_a_turn_runs() {
    let served = Arc::new(Served::start(Start::default()).await);
    let thread = "busy";
    assert_eq!(
        printed(&served.say("alice", thread, "echo UP=1").await, "UP"),
        "1"
    );
    let turn = {
        let served = served.clone();
        tokio::spawn(async move {
            let out = served.say("alice", thread, "sleep 8; echo SLEPT=yes").await;
            (Instant::now(), out)
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let up = put(&served, "alice", thread, "during.txt", "written mid-turn").await;
    assert_eq!(up.status(), 201);
    let down = get(&served, "alice", thread, "during.txt").await;
    assert_eq!(down.text().await.unwrap(), "written mid-turn");
    let done = Instant::now();
    assert!(
        done - started < Duration::from_secs(3),
        "the files waited for the turn"
    );
    assert!(!turn.is_finished(), "the turn was still running");
    let (turn_ended, out) = turn.await.unwrap();
    assert_eq!(printed(&out, "SLEPT"), "yes");
    assert!(turn_ended > done);
}

#[tokio::test]
async fn a_put_to_a_new_thread_makes_it_and_its_next_run_sees_the_file() {
    let served = Served::start(Start::default()).await;
    let thread = "seeded";
    let created = put(
        &served,
        "alice",
        thread,
        "notes/hello.txt",
        "hello from the client",
    )
    .await;
    assert_eq!(created.status(), 201);
    let entry: Value = created.json().await.unwrap();
    assert_eq!(entry["name"], "hello.txt");
    assert_eq!(entry["size"], 21);
    assert!(
        entry["modified"].as_str().unwrap().ends_with('Z'),
        "{entry}"
    );
    let out = served.say("alice", thread, "cat notes/hello.txt").await;
    assert!(out.contains("hello from the client"), "{out}");
    assert_eq!(
        get(&served, "bob", thread, "notes/hello.txt")
            .await
            .status(),
        404
    );
    assert_eq!(
        put(&served, "bob", thread, "notes/hello.txt", "x")
            .await
            .status(),
        404
    );
    assert_eq!(
        put(&served, "alice", thread, "notes/hello.txt", "again")
            .await
            .status(),
        200,
        "replaced"
    );
    assert_eq!(
        put(&served, "alice", thread, "notes", "a directory")
            .await
            .status(),
        409,
        "a directory is not replaced by a file"
    );
    assert_eq!(
        put(
            &served,
            "alice",
            thread,
            "notes/hello.txt/x",
            "below a file"
        )
        .await
        .status(),
        409
    );
    assert_eq!(
        delete(&served, "alice", thread, "notes/hello.txt")
            .await
            .status(),
        200
    );
    assert_eq!(
        delete(&served, "alice", thread, "notes").await.status(),
        200,
        "now empty"
    );
    assert_eq!(
        delete(&served, "alice", thread, "notes").await.status(),
        404
    );
}

#[tokio::test]
async fn a_directory_downloads_as_a_zip_of_its_tree() {
    let served = Served::start(Start::default()).await;
    let thread = "zipped";
    let out = served
        .say(
            "alice",
            thread,
            "mkdir -p proj/src/deep proj/empty && printf A > proj/a.txt && printf main > proj/src/main.rs && head -c 300000 /dev/urandom > proj/src/deep/bin.dat && ln -s /etc proj/link && mkfifo proj/fifo && echo SUM=$(sha256sum proj/src/deep/bin.dat | cut -d' ' -f1)",
        )
        .await;
    let sum = printed(&out, "SUM");
    let response = get(&served, "alice", thread, "proj?archive=zip").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/zip");
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"proj.zip\"; filename*=UTF-8''proj.zip"
    );
    let entries = unzip(&response.bytes().await.unwrap());
    assert_eq!(
        entries.keys().cloned().collect::<Vec<_>>(),
        [
            "a.txt",
            "empty/",
            "src/",
            "src/deep/",
            "src/deep/bin.dat",
            "src/main.rs"
        ]
    );
    assert_eq!(entries["a.txt"].as_deref(), Some(&b"A"[..]));
    assert_eq!(entries["src/main.rs"].as_deref(), Some(&b"main"[..]));
    assert_eq!(
        sha256_hex(entries["src/deep/bin.dat"].as_deref().unwrap()),
        sum
    );
    let whole = get(&served, "alice", thread, "?archive=zip").await;
    assert_eq!(
        whole.headers()["content-disposition"],
        format!("attachment; filename=\"{thread}.zip\"; filename*=UTF-8''{thread}.zip").as_str()
    );
    let names = unzip(&whole.bytes().await.unwrap());
    assert!(
        names.contains_key("proj/src/deep/bin.dat"),
        "{:?}",
        names.keys()
    );
    assert_eq!(
        get(&served, "alice", thread, "proj/a.txt?archive=zip")
            .await
            .status(),
        400,
        "only a directory is archived"
    );
}

/// The served model's script, with one entry first: a prompt naming an upload runs a command
/// that reports the uploads.
fn script_reading_uploads() -> Script {
    Script::new()
        .then(
            Reply::text(["Done."])
                .when(Matcher::function_response())
                .forever(),
        )
        .then(
            Reply::call(
                "run_command",
                json!({
                    "CommandLine": "for f in uploads/*; do echo \"UP=$f $(wc -c < $f) $(sha256sum < $f | cut -d' ' -f1)\"; done",
                    "Cwd": "{{workspace}}",
                    "WaitMsBeforeAsync": 30000
                }),
            )
            .when(Matcher::user_text().user_text_contains("saved in your workspace as"))
            .forever(),
        )
        .then(
            Reply::call(
                "run_command",
                json!({"CommandLine": "{{user_text}}", "Cwd": "{{workspace}}", "WaitMsBeforeAsync": 30000}),
            )
            .when(Matcher::user_text())
            .forever(),
        )
}

#[tokio::test]
async fn an_attachment_too_large_to_send_inline_is_saved_in_the_workspace_and_named_to_the_model() {
    let served = Served::start(Start {
        args: &["--max-attachment-bytes", "1000"],
        ..Start::default()
    })
    .await;
    served.model.set_script(script_reading_uploads()).unwrap();
    let thread = "attached";
    let (one, two): (Vec<u8>, Vec<u8>) = (
        (0..5000u32).map(|i| (i % 253) as u8).collect(),
        (0..3000u32).map(|i| (i % 7) as u8).collect(),
    );
    let encode = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    let id = secret("m");
    let body = json!({"threadId": thread, "runId": id, "messages": [{"id": id, "role": "user", "content": [
        {"type": "text", "text": "look at these"},
        {"type": "document", "source": {"type": "data", "value": encode(&one), "mimeType": "application/octet-stream"},
         "metadata": {"filename": "../report.bin"}},
        {"type": "binary", "mimeType": "application/pdf", "data": encode(&two), "filename": "report.bin"},
    ]}]});
    let response = reqwest::Client::new()
        .post(format!("http://{}/", served.addr))
        .bearer_auth(token("alice"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = tokio::time::timeout(Duration::from_secs(120), response.bytes())
        .await
        .unwrap()
        .unwrap();
    let events = agui_types::Encoding::Sse.decode_all(&bytes).unwrap();
    let out = tool_results(&events);
    let saved: Vec<&str> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("UP="))
        .collect();
    assert_eq!(
        saved,
        [
            format!("uploads/report-2.bin 3000 {}", sha256_hex(&two)),
            format!("uploads/report.bin 5000 {}", sha256_hex(&one)),
        ],
        "both saved with their bytes, under names of their own: {out}"
    );
    let prompt = served
        .model
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .find(|b| b.contains("look at these"))
        .expect("the model got the prompt");
    assert!(
        prompt.contains("saved in your workspace as uploads/report.bin")
            && prompt.contains("saved in your workspace as uploads/report-2.bin"),
        "the model is told where: {prompt}"
    );
    assert!(
        !prompt.contains(&encode(&one)),
        "the bytes were not sent inline"
    );
    let listed = get(&served, "alice", thread, "uploads/report.bin").await;
    assert_eq!(listed.bytes().await.unwrap().as_ref(), &one[..]);
}

#[tokio::test]
async fn a_new_thread_starts_with_the_workspace_template_its_links_left_out() {
    let template = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(template.path().join("src")).unwrap();
    std::fs::write(template.path().join("README.md"), "from the template").unwrap();
    std::fs::write(template.path().join("src/main.rs"), "fn main() {}").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", template.path().join("link")).unwrap();
    nix::unistd::mkfifo(&template.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let path = template.path().display().to_string();
    let served = Served::start(Start {
        args: &["--workspace-template", &path],
        ..Start::default()
    })
    .await;
    let out = served
        .say(
            "alice",
            "templated",
            "cat README.md; echo; cat src/main.rs; echo; echo LS=$(ls -A | tr '\\n' ' ')",
        )
        .await;
    assert!(
        out.contains("from the template") && out.contains("fn main() {}"),
        "{out}"
    );
    assert_eq!(
        printed(&out, "LS"),
        "README.md src",
        "links and FIFOs are left out"
    );
    // A thread made by an upload starts with it too.
    assert_eq!(
        put(&served, "alice", "uploaded", "mine.txt", "mine")
            .await
            .status(),
        201
    );
    let kinds = listing(&served, "alice", "uploaded", "").await;
    assert_eq!(
        kinds.keys().cloned().collect::<Vec<_>>(),
        ["README.md", "mine.txt", "src"]
    );
    // A later thread of the same owner gets its own copy, not the first one's files.
    let out = served
        .say("alice", "another", "echo LS=$(ls -A | tr '\\n' ' ')")
        .await;
    assert_eq!(printed(&out, "LS"), "README.md src");
}

#[tokio::test]
async fn a_thread_made_by_an_upload_starts_its_conversation_after_its_task_ended() {
    let served = Served::start(Start {
        args: &["--session-timeout-secs", "1", "--parked-timeout-secs", "1"],
        ..Start::default()
    })
    .await;
    let thread = "seeded-then-idle";
    assert_eq!(
        put(&served, "alice", thread, "notes.txt", "seeded")
            .await
            .status(),
        201
    );
    // Its task ends idle; the next one reads the record back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let out = served.say("alice", thread, "cat notes.txt").await;
    assert!(out.contains("seeded"), "{out}");
}

#[tokio::test]
async fn with_a_tree_per_thread_an_upload_makes_the_thread_s_own_tree() {
    let served = Served::start(Start {
        args: &["--sandbox", "thread"],
        ..Start::default()
    })
    .await;
    assert_eq!(
        put(&served, "alice", "own-1", "a.txt", "one")
            .await
            .status(),
        201
    );
    assert_eq!(
        put(&served, "alice", "own-2", "b.txt", "two")
            .await
            .status(),
        201
    );
    let out = served
        .say(
            "alice",
            "own-1",
            "cat a.txt; echo; echo LS=$(ls -A | tr '\\n' ' ')",
        )
        .await;
    assert!(out.contains("one"), "{out}");
    assert_eq!(
        printed(&out, "LS"),
        "a.txt",
        "each thread has its own workspace"
    );
    assert_eq!(
        get(&served, "alice", "own-2", "b.txt")
            .await
            .text()
            .await
            .unwrap(),
        "two"
    );
    assert_eq!(get(&served, "bob", "own-2", "b.txt").await.status(), 404);
}
