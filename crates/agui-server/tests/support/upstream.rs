//! A recording model upstream for the model proxy's tests, and the byte and text helpers they
//! share.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::response::Response;

/// What the upstream received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

/// An upstream that records requests and answers each with `answer()`.
pub struct Upstream {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
}

/// What the upstream answers to a request for a path.
pub type Answer = Arc<dyn Fn(&str) -> Response + Send + Sync>;

impl Upstream {
    pub async fn start(answer: Answer) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let state = (received.clone(), answer);
        let app = axum::Router::new().fallback(record).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, received }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

pub async fn record(
    State((received, answer)): State<(Arc<Mutex<Vec<Received>>>, Answer)>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    // A body that broke off is no request: nothing is recorded.
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::builder()
            .status(400)
            .body(axum::body::Body::empty())
            .unwrap();
    };
    received.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        path: parts.uri.to_string(),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: body.to_vec(),
    });
    answer(parts.uri.path())
}

/// What a [`LengthOnly`] server read on one connection.
#[derive(Debug, Clone)]
pub struct Read {
    /// The request line.
    pub line: String,
    /// The headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// Whether the whole body its `Content-Length` announced arrived.
    pub complete: bool,
}

/// A model server that reads a request body by its `Content-Length` alone, as Python's
/// `http.server` does: a chunked body reads as empty (no length: nothing to read), and it answers
/// at once, with one finished text in Gemini's format. One request per connection; what each
/// connection carried is recorded.
pub struct LengthOnly {
    pub url: String,
    reads: Arc<Mutex<Vec<Read>>>,
}

impl LengthOnly {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let reads = Arc::new(Mutex::new(Vec::new()));
        let recorded = reads.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    if let Some(read) = read_by_length(socket).await {
                        recorded.lock().unwrap().push(read);
                    }
                });
            }
        });
        Self { url, reads }
    }

    pub fn reads(&self) -> Vec<Read> {
        self.reads.lock().unwrap().clone()
    }
}

async fn read_by_length(mut socket: tokio::net::TcpStream) -> Option<Read> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.lines();
    let line = lines.next().unwrap_or_default().to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = bytes[end..].to_vec();
    while body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let complete = body.len() >= length;
    body.truncate(length);
    if complete {
        let events = concat!(
            r#"data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hello from the model"}]},"finishReason":"STOP","index":0}]}"#,
            "\n\n"
        );
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{events}",
            events.len()
        );
        let _ = socket.write_all(answer.as_bytes()).await;
    }
    Some(Read {
        line,
        headers,
        body,
        complete,
    })
}

/// `text` without ANSI colour codes.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
