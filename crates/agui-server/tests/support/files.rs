//! Requests to a thread's files and what the tests check them against (`tests/files.rs`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::served::{Served, token};

pub fn files_url(served: &Served, thread: &str, rel: &str) -> String {
    format!("http://{}/threads/{thread}/files/{rel}", served.addr)
}

pub async fn get(served: &Served, owner: &str, thread: &str, rel: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(files_url(served, thread, rel))
        .bearer_auth(token(owner))
        .send()
        .await
        .unwrap()
}

pub async fn put(
    served: &Served,
    owner: &str,
    thread: &str,
    rel: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    reqwest::Client::new()
        .put(files_url(served, thread, rel))
        .bearer_auth(token(owner))
        .body(body)
        .send()
        .await
        .unwrap()
}

pub async fn delete(served: &Served, owner: &str, thread: &str, rel: &str) -> reqwest::Response {
    reqwest::Client::new()
        .delete(files_url(served, thread, rel))
        .bearer_auth(token(owner))
        .send()
        .await
        .unwrap()
}

/// The status of a request written by hand (a client library would normalise its path).
pub async fn raw_status(served: &Served, owner: &str, method: &str, path: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(&served.addr).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
        served.addr,
        token(owner)
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response);
    text.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP response to {method} {path}: {text}"))
}

/// What a command printed after `KEY=`.
pub fn printed(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} was printed: {out}"))
        .trim()
        .to_owned()
}

/// The names and kinds of a directory listing.
pub async fn listing(
    served: &Served,
    owner: &str,
    thread: &str,
    rel: &str,
) -> BTreeMap<String, String> {
    let response = get(served, owner, thread, rel).await;
    assert_eq!(response.status(), 200, "{rel} is listed");
    let body: Value = response.json().await.unwrap();
    body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every path below `dir` on the host (directories too), links not followed.
pub fn everything_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The names in a zip, with the bytes of its files.
pub fn unzip(bytes: &[u8]) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a valid zip");
    let mut entries = BTreeMap::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        let name = file.name().unwrap().into_owned();
        if file.is_dir() {
            entries.insert(name, None);
        } else {
            let mut data = Vec::new();
            file.read_to_end(&mut data).unwrap();
            entries.insert(name, Some(data));
        }
    }
    entries
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A host directory outside every tree, holding `precious`: what planted links aim at.
pub fn host_dir(served: &Served) -> PathBuf {
    let host = served.dir.path().join("host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("precious"), "HOST-SECRET").unwrap();
    host
}

pub fn assert_host_intact(host: &Path) {
    assert_eq!(
        std::fs::read_to_string(host.join("precious"))
            .ok()
            .as_deref(),
        Some("HOST-SECRET"),
        "the host file behind the link was changed"
    );
    let names: Vec<_> = std::fs::read_dir(host)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        ["precious"],
        "something was written through the link"
    );
}

pub fn vm_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} of {pid}"))
}
