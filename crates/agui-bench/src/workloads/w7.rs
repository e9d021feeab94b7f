//! W7 threads and files (issue 38), one owner on a fresh server, no model turn:
//!
//! - **List**: `threads` new threads made by a `PUT` of a small file each (`concurrency` at a
//!   time), then the owner's whole list read `passes` times page by page (`limit` a page,
//!   following the cursor): the time of each page request, of each whole listing, and whether
//!   every listing held each thread exactly once.
//! - **File**: a `file_mb` MiB file uploaded into a thread's workspace by a streamed `PUT`
//!   (no declared length), then downloaded by `GET`, read to the end and dropped, with the
//!   server's RSS sampled every 10 ms; next to it `cat` of the file the server wrote (found
//!   under its workspace root) to `/dev/null`, both from a warm page cache.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use tokio::io::AsyncWriteExt as _;

use super::{Ctx, progress};
use crate::launch::{Server, ServerSettings};
use crate::stats::{Summary, percentile, ratio};

/// W7's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Params {
    pub(crate) threads: usize,
    /// Threads a page holds (the server's default page is 50).
    pub(crate) limit: usize,
    /// Whole listings read.
    pub(crate) passes: usize,
    /// `PUT`s in flight while making the threads.
    pub(crate) concurrency: usize,
    /// The size of the file uploaded and downloaded, MiB.
    pub(crate) file_mb: u64,
}

/// W7's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W7 {
    pub(crate) params: Params,
    pub(crate) list: Listing,
    pub(crate) file: FileTransfer,
}

/// Making and listing the threads.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Listing {
    /// Threads made (`PUT` answered 201).
    pub(crate) made: usize,
    /// Time to make them all, s.
    pub(crate) make_s: f64,
    /// Each `PUT` that made a thread.
    pub(crate) put_ms: Summary,
    /// Each page request, over every pass.
    pub(crate) page_ms: Summary,
    pub(crate) page_p95_ms: Option<f64>,
    /// Pages in one listing.
    pub(crate) pages_per_listing: usize,
    /// Each whole listing.
    pub(crate) listing_ms: Summary,
    /// Listings that held each thread made exactly once, and no other.
    pub(crate) complete_listings: usize,
    pub(crate) listings: usize,
}

/// The big file's way in and out.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FileTransfer {
    pub(crate) bytes: u64,
    pub(crate) upload_s: f64,
    pub(crate) upload_mib_s: Option<f64>,
    pub(crate) download_s: f64,
    pub(crate) download_mib_s: Option<f64>,
    /// The download held every byte of the file.
    pub(crate) download_complete: bool,
    /// `cat <file> > /dev/null`.
    pub(crate) cat_s: f64,
    pub(crate) cat_mib_s: Option<f64>,
    /// What `cat` read: the server's copy in the workspace, or the uploaded source when the
    /// copy was not found.
    pub(crate) cat_of: String,
    /// Download throughput / `cat` throughput.
    pub(crate) download_over_cat: Option<f64>,
    /// The server's RSS just before the download, MiB.
    pub(crate) server_rss_before_mib: f64,
    /// The highest server RSS sampled during the download (every 10 ms), MiB.
    pub(crate) server_rss_peak_mib: f64,
    /// The server's peak RSS (`VmHWM`) before and after the download, MiB.
    pub(crate) server_hwm_before_mib: f64,
    pub(crate) server_hwm_after_mib: f64,
}

/// Runs W7 against a fresh server.
pub(crate) async fn run(ctx: &Ctx, params: Params) -> anyhow::Result<W7> {
    progress("W7: server");
    let server = ctx.server("w7", &ServerSettings::default()).await?;
    let result = measure(ctx, &server, params).await;
    server.stop().await;
    let (list, file) = result?;
    Ok(W7 { params, list, file })
}

async fn measure(
    ctx: &Ctx,
    server: &Server,
    params: Params,
) -> anyhow::Result<(Listing, FileTransfer)> {
    let http = Http {
        client: ctx.client.clone(),
        base: format!("{}threads", server.url),
        token: crate::sse::one_owner_token(),
    };
    progress(&format!(
        "W7: making {} threads, {} at a time",
        params.threads, params.concurrency
    ));
    let mut list = make_threads(&http, params).await?;
    progress(&format!(
        "W7: listing them {} times, {} a page",
        params.passes, params.limit
    ));
    list_threads(&http, params, &mut list).await?;
    progress(&format!("W7: a {} MiB file up and down", params.file_mb));
    let root = ctx.scratch.join("w7");
    let file = transfer(&http, server.pid, &root, params.file_mb).await?;
    Ok((list, file))
}

/// Requests as the one owner.
#[derive(Clone)]
struct Http {
    client: reqwest::Client,
    /// `<server>/threads`.
    base: String,
    token: Option<String>,
}

impl Http {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }
}

fn thread_id(i: usize) -> String {
    format!("w7-{i:05}")
}

async fn make_threads(http: &Http, params: Params) -> anyhow::Result<Listing> {
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..params.concurrency.max(1) {
        let (next, http) = (next.clone(), http.clone());
        let threads = params.threads as u64;
        workers.spawn(async move {
            let mut times = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= threads {
                    return Ok::<_, anyhow::Error>(times);
                }
                let path = format!("/{}/files/seed.txt", thread_id(i as usize));
                let started = Instant::now();
                let response = http
                    .request(reqwest::Method::PUT, &path)
                    .body("seed")
                    .send()
                    .await?;
                let status = response.status();
                if status != reqwest::StatusCode::CREATED {
                    let body = response.text().await.unwrap_or_default();
                    bail!("PUT {path}: {status} {body}");
                }
                times.push(started.elapsed());
            }
        });
    }
    let mut times = Vec::new();
    while let Some(done) = workers.join_next().await {
        times.extend(done.context("a PUT worker")??);
    }
    Ok(Listing {
        made: times.len(),
        make_s: t0.elapsed().as_secs_f64(),
        put_ms: Summary::of(times.into_iter().map(Some)),
        ..Listing::default()
    })
}

async fn list_threads(http: &Http, params: Params, list: &mut Listing) -> anyhow::Result<()> {
    let expected: HashSet<String> = (0..params.threads).map(thread_id).collect();
    let (mut pages, mut listings) = (Vec::new(), Vec::new());
    for _ in 0..params.passes {
        let t0 = Instant::now();
        let (mut seen, mut cursor, mut count) = (Vec::new(), None::<String>, 0);
        loop {
            let mut path = format!("?limit={}", params.limit);
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={cursor}"));
            }
            let started = Instant::now();
            let response = http.request(reqwest::Method::GET, &path).send().await?;
            let status = response.status();
            let page: serde_json::Value = response.json().await?;
            pages.push(started.elapsed());
            if !status.is_success() {
                bail!("GET threads{path}: {status} {page}");
            }
            count += 1;
            seen.extend(
                page["threads"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["id"].as_str().map(str::to_owned)),
            );
            match page["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        listings.push(t0.elapsed());
        list.pages_per_listing = count;
        let distinct: HashSet<String> = seen.iter().cloned().collect();
        if seen.len() == expected.len() && distinct == expected {
            list.complete_listings += 1;
        }
    }
    let mut page_ms: Vec<f64> = pages.iter().map(|d| crate::stats::ms(*d)).collect();
    page_ms.sort_by(f64::total_cmp);
    list.page_p95_ms = percentile(&page_ms, 95.0).map(|v| (v * 100.0).round() / 100.0);
    list.page_ms = Summary::of_ms(page_ms);
    list.listings = listings.len();
    list.listing_ms = Summary::of(listings.into_iter().map(Some));
    Ok(())
}

const MIB: f64 = 1024.0 * 1024.0;

async fn transfer(
    http: &Http,
    server_pid: u32,
    root: &Path,
    file_mb: u64,
) -> anyhow::Result<FileTransfer> {
    let bytes = file_mb << 20;
    let source = root.join("w7-source.bin");
    write_source(&source, bytes).await?;
    let thread = "w7-file";
    let path = format!("/{thread}/files/big.bin");
    let mut out = FileTransfer {
        bytes,
        ..FileTransfer::default()
    };
    let t0 = Instant::now();
    let file = tokio::fs::File::open(&source).await?;
    let response = http
        .request(reqwest::Method::PUT, &path)
        .body(reqwest::Body::from(file))
        .send()
        .await?;
    out.upload_s = t0.elapsed().as_secs_f64();
    let status = response.status();
    if status != reqwest::StatusCode::CREATED {
        let body = response.text().await.unwrap_or_default();
        bail!("PUT of the {file_mb} MiB file: {status} {body}");
    }
    out.upload_mib_s = throughput(bytes, out.upload_s);

    let rss = |pid| crate::procfs::rss_kb(pid).unwrap_or(0) as f64 / 1024.0;
    let hwm = |pid| crate::procfs::hwm_kb(pid).unwrap_or(0) as f64 / 1024.0;
    out.server_rss_before_mib = rss(server_pid);
    out.server_hwm_before_mib = hwm(server_pid);
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let sampling = sampling.clone();
        tokio::task::spawn_blocking(move || {
            let mut peak = 0u64;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(crate::procfs::rss_kb(server_pid).unwrap_or(0));
                std::thread::sleep(Duration::from_millis(10));
            }
            peak as f64 / 1024.0
        })
    };
    let t0 = Instant::now();
    let downloaded = download(http, &path).await;
    out.download_s = t0.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    out.server_rss_peak_mib = sampler.await.context("the RSS sampler")?;
    out.server_hwm_after_mib = hwm(server_pid);
    let received = downloaded?;
    out.download_complete = received == bytes;
    out.download_mib_s = throughput(received, out.download_s);

    let (target, cat_of) = match find_file(&root.join("ws"), "big.bin") {
        Some(copy) => (copy, "the server's copy in the workspace".to_owned()),
        None => (
            source.clone(),
            "the uploaded source (copy not found)".to_owned(),
        ),
    };
    out.cat_of = cat_of;
    let t0 = Instant::now();
    let status = tokio::process::Command::new("cat")
        .arg(&target)
        .stdout(Stdio::null())
        .status()
        .await
        .context("running cat")?;
    out.cat_s = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("cat {}: {status}", target.display());
    }
    out.cat_mib_s = throughput(bytes, out.cat_s);
    out.download_over_cat = ratio(out.download_mib_s, out.cat_mib_s);
    let _ = tokio::fs::remove_file(&source).await;
    Ok(out)
}

/// Reads the body of a `GET` of `path` to its end, dropping it: the bytes received.
async fn download(http: &Http, path: &str) -> anyhow::Result<u64> {
    let mut response = http.request(reqwest::Method::GET, path).send().await?;
    let status = response.status();
    if !status.is_success() {
        bail!("GET of the big file: {status}");
    }
    let mut received = 0u64;
    while let Some(chunk) = response.chunk().await? {
        received += chunk.len() as u64;
    }
    Ok(received)
}

fn throughput(bytes: u64, secs: f64) -> Option<f64> {
    (secs > 0.0).then(|| bytes as f64 / MIB / secs)
}

/// Writes `bytes` of varied (not all-equal) data to `path`.
async fn write_source(path: &Path, bytes: u64) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut file = tokio::fs::File::create(path)
        .await
        .with_context(|| format!("creating {}", path.display()))?;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut block = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        for word in block.chunks_exact_mut(8) {
            // xorshift64: cheap bytes no layer can shrink.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        file.write_all(&block[..n]).await?;
        left -= n as u64;
    }
    file.flush().await?;
    Ok(())
}

/// The regular file named `name` below `dir` (symlinks not followed), if any.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut todo = vec![dir.to_owned()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() && entry.file_name() == name {
                return Some(entry.path());
            }
        }
    }
    None
}
