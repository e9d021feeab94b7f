//! What of the harness's request goes upstream: the API's own query parameters, the headers the
//! API reads, and the body — streamed, with its length when it came with one.
//!
//! Everything is an allow-list: the harness (and whatever manages to speak through it) adds
//! nothing of its own to what the model's endpoint or a gateway in front of it acts on — no
//! `?key=`, no `X-Forwarded-For`, no `x-goog-user-project` naming another project to bill, no
//! method override. The allow-lists are what the harness sends (the captures of its model
//! requests: `POST …:streamGenerateContent?alt=sse` with `content-type`, `content-length`,
//! `user-agent`, `x-goog-api-client`, `x-goog-api-key` and `accept-encoding`), less its
//! credential and `accept-encoding`.

use std::sync::{Arc, OnceLock};

use axum::http::{HeaderMap, HeaderName, header};
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};

/// The query parameter a Gemini or Vertex generation call may carry: `alt` (`sse` on the
/// harness's streaming call, which answers server-sent events only when asked to). An
/// OpenAI-compatible call carries none.
const GOOGLE_QUERY: &str = "alt";

/// The harness's request headers forwarded on every route: the body's type, what answer it
/// accepts, and which client it is (logged by the API and gateways, acted on by neither).
/// `accept-encoding` is not among them, so that the answer arrives uncompressed and is passed
/// on event by event; `content-length` follows the body ([`upload`]).
const HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::ACCEPT, header::USER_AGENT];

/// Forwarded on Gemini and Vertex calls too: the Google SDK's identification. No other
/// `x-goog-*` header: `x-goog-api-key` is a credential (replaced by the real one), and the rest
/// (`x-goog-user-project`, `x-goog-request-params`, …) would let the harness choose the project
/// billed or the resource routed to — an operator sets those in `model_headers`.
const GOOGLE_HEADERS: [HeaderName; 1] = [HeaderName::from_static("x-goog-api-client")];

/// The query string sent upstream for the harness's `query`: for a Google API call, its first
/// `alt` parameter when its value is a plain word; nothing else, and nothing at all on an
/// OpenAI-compatible call. Names are compared as written, not decoded, so `%61lt` is not `alt`.
pub(super) fn query(google: bool, query: Option<&str>) -> Option<String> {
    if !google {
        return None;
    }
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == GOOGLE_QUERY)
        .filter(|(_, value)| !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|(name, value)| format!("{name}={value}"))
}

/// The harness's headers that go upstream (before the route's own are added).
pub(super) fn headers(google: bool, incoming: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let google_headers: &[HeaderName] = if google { &GOOGLE_HEADERS } else { &[] };
    for name in HEADERS.iter().chain(google_headers) {
        for value in incoming.get_all(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// Why a request's body was not sent upstream whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    /// Past `model_max_request_mb`.
    TooLarge,
    /// More bytes than its `Content-Length`.
    Longer,
    /// Fewer bytes than its `Content-Length`.
    Shorter,
    /// The harness's side of the request failed (it went away mid-body).
    Broken,
}

impl Cut {
    /// What the harness is told.
    pub(super) fn message(self, limit: u64, declared: Option<u64>) -> String {
        let declared = declared.unwrap_or_default();
        match self {
            Self::TooLarge => {
                format!("the request exceeds the model proxy's limit of {limit} bytes")
            }
            Self::Longer => format!("the request body is longer than its {declared}-byte length"),
            Self::Shorter => {
                format!("the request body is shorter than its {declared}-byte length")
            }
            Self::Broken => "the request body broke off".to_owned(),
        }
    }
}

/// The body of a request, to stream upstream as it arrives (never buffered): it fails — and
/// records why in the returned cell — as soon as it passes `limit` bytes, or, when its length
/// was `declared`, passes that length or ends short of it. A body that failed is never a
/// complete request upstream: sent with its `Content-Length`, it ends short; sent chunked, it
/// never gets its last chunk. The chunk that completes a declared length is held until the
/// body has ended, so that a longer body is not forwarded cut to its declared length.
pub(super) fn upload<S>(
    body: S,
    limit: u64,
    declared: Option<u64>,
) -> (
    impl Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    Arc<OnceLock<Cut>>,
)
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Unpin + Send + 'static,
{
    let cut = Arc::new(OnceLock::new());
    let state = Upload {
        source: body.fuse(),
        seen: 0,
        limit,
        declared,
        cut: cut.clone(),
    };
    (futures_util::stream::try_unfold(state, Upload::next), cut)
}

struct Upload<S> {
    source: futures_util::stream::Fuse<S>,
    seen: u64,
    limit: u64,
    declared: Option<u64>,
    cut: Arc<OnceLock<Cut>>,
}

impl<S> Upload<S>
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    fn fail(&self, cut: Cut) -> std::io::Error {
        let _ = self.cut.set(cut);
        std::io::Error::other(cut.message(self.limit, self.declared))
    }

    async fn next(mut self) -> std::io::Result<Option<(Bytes, Self)>> {
        let chunk = match self.source.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(_)) => return Err(self.fail(Cut::Broken)),
            None => {
                return match self.declared {
                    Some(declared) if self.seen != declared => Err(self.fail(Cut::Shorter)),
                    _ => Ok(None),
                };
            }
        };
        self.seen += chunk.len() as u64;
        if self.seen > self.limit {
            return Err(self.fail(Cut::TooLarge));
        }
        match self.declared {
            Some(declared) if self.seen > declared => return Err(self.fail(Cut::Longer)),
            Some(declared) if self.seen == declared => {
                // Upstream the request ends with this chunk: only if the body does.
                while let Some(more) = self.source.next().await {
                    match more {
                        Ok(more) if more.is_empty() => {}
                        Ok(_) => return Err(self.fail(Cut::Longer)),
                        Err(_) => return Err(self.fail(Cut::Broken)),
                    }
                }
            }
            _ => {}
        }
        Ok(Some((chunk, self)))
    }
}
