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
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
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
