//! A file's bytes, streamed from the door's descriptor a few chunks at a time: the headers a
//! browser needs to show it safely (its type from the extension, `nosniff`, inline only for
//! raster images and plain text, a sandboxing content policy) and to fetch it again cheaply
//! (`ETag`, `Last-Modified`, one `Range`).

use std::io::{Read, Seek, SeekFrom};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use harness_client::sandbox::Entry;

use super::{Op, Target, empty, http_date};
use crate::endpoint::reject;

/// How much of a file is read at once.
const CHUNK: usize = 64 * 1024;

/// Chunks read ahead of the client at most.
const AHEAD: usize = 4;

/// The file at the target, streamed (or its part a `Range` asks for; or 304 when the client
/// holds it already).
pub(super) async fn file(target: Target, headers: &HeaderMap) -> Response {
    let (file, entry) = match target.blocking(|ws, rel| ws.dir().open_file(rel)).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => return target.door_error(Op::Read, e),
        Err(response) => return response,
    };
    let name = entry.name.to_string_lossy().into_owned();
    let etag = etag(&entry);
    let mut response = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::LAST_MODIFIED, http_date(entry.modified))
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::CACHE_CONTROL, "private, no-cache")
        // Opened directly, nothing in it runs or loads anything.
        .header(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        );
    if none_match(headers, &etag) {
        return response
            .status(StatusCode::NOT_MODIFIED)
            .body(empty())
            .unwrap_or_else(|e| target.failed("a response could not be made", &e));
    }
    let len = entry.len;
    let (start, count) = match range(headers, len) {
        Ranged::Full => {
            response = response.status(StatusCode::OK);
            (0, len)
        }
        Ranged::Part(first, last) => {
            response = response
                .status(StatusCode::PARTIAL_CONTENT)
                .header(header::CONTENT_RANGE, format!("bytes {first}-{last}/{len}"));
            (first, last - first + 1)
        }
        Ranged::Unsatisfiable => {
            let mut refused = reject(
                &target.files.metrics,
                StatusCode::RANGE_NOT_SATISFIABLE,
                "range not satisfiable",
                format!("{} has {len} bytes", target.shown()),
            );
            if let Ok(value) = HeaderValue::from_str(&format!("bytes */{len}")) {
                refused.headers_mut().insert(header::CONTENT_RANGE, value);
            }
            return refused;
        }
    };
    let (content_type, inline) = content_type(&name);
    response
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_DISPOSITION, disposition(&name, inline))
        .header(header::CONTENT_LENGTH, count)
        .body(stream(file, start, count))
        .unwrap_or_else(|e| target.failed("a response could not be made", &e))
        .into_response()
}

/// `count` bytes of `file` from `start`, read on the blocking pool at most [`AHEAD`] chunks
/// ahead of the client. A file that ends early (the agent shortened it meanwhile) ends the body
/// with an error, never a short success.
fn stream(mut file: impl Read + Seek + Send + 'static, start: u64, count: u64) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(AHEAD);
    tokio::task::spawn_blocking(move || {
        if start > 0
            && let Err(e) = file.seek(SeekFrom::Start(start))
        {
            let _ = tx.blocking_send(Err(e));
            return;
        }
        let mut left = count;
        while left > 0 {
            let mut chunk = vec![0; usize::try_from(left).map_or(CHUNK, |left| left.min(CHUNK))];
            match file.read(&mut chunk) {
                Ok(0) => {
                    let _ = tx.blocking_send(Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file became shorter while it was sent",
                    )));
                    return;
                }
                Ok(n) => {
                    chunk.truncate(n);
                    left -= n as u64;
                    if tx.blocking_send(Ok(Bytes::from(chunk))).is_err() {
                        // The client went away.
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}

/// A strong validator: the file's length and modification time, to the nanosecond.
fn etag(entry: &Entry) -> String {
    let nanos = entry
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("\"{:x}-{nanos:x}\"", entry.len)
}

/// Whether `If-None-Match` names `etag` (or `*`): compared weakly, as the header asks.
fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

/// What a `Range` header asks of a file of `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ranged {
    /// No range, one the server ignores (several, another unit, malformed): the whole file.
    Full,
    /// The bytes `first..=last`.
    Part(u64, u64),
    /// A range that starts past the end: 416.
    Unsatisfiable,
}

/// One `bytes=` range: `a-b`, `a-` or `-n` (the last n bytes).
fn range(headers: &HeaderMap, len: u64) -> Ranged {
    let Some(spec) = headers
        .get(header::RANGE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().strip_prefix("bytes="))
    else {
        return Ranged::Full;
    };
    if spec.contains(',') {
        return Ranged::Full;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Ranged::Full;
    };
    let number = |text: &str| text.trim().parse::<u64>().ok();
    match (first.trim(), last.trim()) {
        ("", suffix) => match number(suffix) {
            Some(0) => Ranged::Unsatisfiable,
            Some(_) if len == 0 => Ranged::Unsatisfiable,
            Some(n) => Ranged::Part(len.saturating_sub(n), len - 1),
            None => Ranged::Full,
        },
        (first, last) => {
            let Some(first) = number(first) else {
                return Ranged::Full;
            };
            let last = if last.is_empty() {
                u64::MAX
            } else {
                match number(last) {
                    Some(last) if last >= first => last,
                    _ => return Ranged::Full,
                }
            };
            if first >= len {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part(first, last.min(len - 1))
            }
        }
    }
}

/// The media type of a file by its name, and whether a browser may show it inline: raster
/// images and plain text only (never HTML, SVG or anything else that runs or embeds).
fn content_type(name: &str) -> (&'static str, bool) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let lower = name.to_ascii_lowercase();
    let extension = lower.rsplit_once('.').map_or("", |(_, ext)| ext);
    let plain_names = [
        "makefile",
        "dockerfile",
        "readme",
        "license",
        "licence",
        "changelog",
        ".gitignore",
        ".dockerignore",
        ".editorconfig",
    ];
    if plain_names.contains(&lower.as_str()) {
        return (TEXT, true);
    }
    match extension {
        "png" => ("image/png", true),
        "jpg" | "jpeg" => ("image/jpeg", true),
        "gif" => ("image/gif", true),
        "webp" => ("image/webp", true),
        "bmp" => ("image/bmp", true),
        "ico" => ("image/x-icon", true),
        "txt" | "text" | "md" | "markdown" | "rst" | "log" | "csv" | "tsv" | "rs" | "py" | "js"
        | "mjs" | "cjs" | "ts" | "tsx" | "jsx" | "go" | "java" | "kt" | "kts" | "c" | "h"
        | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "cs" | "rb" | "php" | "sh" | "bash" | "zsh"
        | "fish" | "pl" | "lua" | "swift" | "scala" | "sql" | "toml" | "yaml" | "yml" | "ini"
        | "cfg" | "conf" | "json" | "jsonl" | "css" | "scss" | "less" | "vue" | "svelte"
        | "xml" | "proto" | "diff" | "patch" | "lock" | "env" | "gradle" | "r" | "dart" | "ex"
        | "exs" | "erl" | "hs" | "ml" | "zig" | "nim" | "tf" => (TEXT, true),
        "html" | "htm" => ("text/html; charset=utf-8", false),
        "svg" => ("image/svg+xml", false),
        "pdf" => ("application/pdf", false),
        "zip" => ("application/zip", false),
        "gz" | "tgz" => ("application/gzip", false),
        "tar" => ("application/x-tar", false),
        "wasm" => ("application/wasm", false),
        "mp3" => ("audio/mpeg", false),
        "wav" => ("audio/wav", false),
        "ogg" => ("audio/ogg", false),
        "mp4" => ("video/mp4", false),
        "webm" => ("video/webm", false),
        "avif" => ("image/avif", false),
        "tif" | "tiff" => ("image/tiff", false),
        _ => ("application/octet-stream", false),
    }
}

/// `inline` or `attachment`, with the name: an ASCII fallback (quotes, backslashes and control
/// characters replaced) and the exact name percent-encoded (RFC 6266).
pub(super) fn disposition(name: &str, inline: bool) -> String {
    let fallback: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let kind = if inline { "inline" } else { "attachment" };
    format!("{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranged(value: &str, len: u64) -> Ranged {
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_str(value).unwrap());
        range(&headers, len)
    }

    #[test]
    fn one_byte_range_is_served_and_what_cannot_be_is_said() {
        assert_eq!(ranged("bytes=0-9", 100), Ranged::Part(0, 9));
        assert_eq!(ranged("bytes=90-", 100), Ranged::Part(90, 99));
        assert_eq!(ranged("bytes=90-500", 100), Ranged::Part(90, 99));
        assert_eq!(ranged("bytes=-10", 100), Ranged::Part(90, 99));
        assert_eq!(ranged("bytes=-500", 100), Ranged::Part(0, 99));
        assert_eq!(ranged("bytes=100-", 100), Ranged::Unsatisfiable);
        assert_eq!(ranged("bytes=-0", 100), Ranged::Unsatisfiable);
        assert_eq!(ranged("bytes=0-", 0), Ranged::Unsatisfiable);
        for ignored in [
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=9-2",
            "bytes=x-",
            "bytes",
        ] {
            assert_eq!(ranged(ignored, 100), Ranged::Full, "{ignored}");
        }
    }

    #[test]
    fn only_raster_images_and_plain_text_are_shown_inline() {
        assert_eq!(content_type("a.PNG"), ("image/png", true));
        assert_eq!(content_type("main.rs"), ("text/plain; charset=utf-8", true));
        assert_eq!(
            content_type("Makefile"),
            ("text/plain; charset=utf-8", true)
        );
        assert_eq!(content_type("x.svg"), ("image/svg+xml", false));
        assert_eq!(
            content_type("index.html"),
            ("text/html; charset=utf-8", false)
        );
        assert_eq!(content_type("blob"), ("application/octet-stream", false));
        assert_eq!(
            disposition("r\"é.txt", true),
            "inline; filename=\"r__.txt\"; filename*=UTF-8''r%22%C3%A9.txt"
        );
    }

    #[test]
    fn a_matching_validator_means_not_modified() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"1\", W/\"2-3\""),
        );
        assert!(none_match(&headers, "\"2-3\""));
        assert!(!none_match(&headers, "\"2-4\""));
        assert!(!none_match(&HeaderMap::new(), "\"2-3\""));
    }
}
