//! The HTTP server: start/stop, the Gemini model routes and streaming.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    net::{Ipv4Addr, SocketAddr},
    sync::Arc,
    time::Duration,
};

use axum::serve::ListenerExt as _;
use axum::{
    Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use tokio::{
    net::TcpListener,
    sync::{mpsc, watch},
    task::JoinHandle,
};
use tokio_stream::wrappers::ReceiverStream;

use crate::{
    control,
    engine::{Engine, EntryState},
    error::{Error, Result},
    log::{AnsweredBy, LoggedRequest},
    render::{self, Plan},
    reply::Hang,
    script::{self, Entry, Script},
    shared::Shared,
    template::RequestCtx,
};

/// Harness requests carry the whole history (and media); do not cap them at axum's 2 MB.
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

/// Entry point: starts a scripted Gemini endpoint.
#[derive(Debug)]
pub struct ScriptedModel;

impl ScriptedModel {
    /// Starts a server on an ephemeral port of 127.0.0.1 serving `script`.
    pub async fn start(script: Script) -> Result<Handle> {
        Self::start_on(0, script).await
    }

    /// Starts a server on `127.0.0.1:port` (0 = ephemeral) serving `script`.
    pub async fn start_on(port: u16, script: Script) -> Result<Handle> {
        script.validate()?;
        let bind_err = |source| Error::Bind { port, source };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared::new(Engine::new(script), stop_rx.clone()));
        let app = router(shared.clone());
        let mut stop = stop_rx;
        // Like the real endpoint, every SSE event leaves at once: with Nagle's algorithm the
        // end of a stream waits for the client's delayed ACK (~40 ms), and the harness waits
        // for the end of the stream before it runs the reply's calls.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::warn!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped(&mut stop).await });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "scripted model server stopped with an error");
            }
        });
        tracing::info!(%addr, "scripted model listening");
        Ok(Handle {
            addr,
            shared,
            stop: stop_tx,
            task: Some(task),
        })
    }
}

/// A running server. Dropping it stops the server (open streams are closed).
pub struct Handle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Handle {
    /// `http://127.0.0.1:<port>`: the harness's `geminiApiEndpoint.baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every model request so far, oldest first.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.engine().requests().to_vec()
    }

    /// The number of requests logged so far.
    pub fn request_count(&self) -> usize {
        self.shared.engine().requests().len()
    }

    /// Model requests answered so far, whether or not the log keeps them.
    pub fn served(&self) -> u64 {
        self.shared.engine().served()
    }

    /// Keeps at most `limit` requests in the log (the newest; `Some(0)` keeps none, so a
    /// long-running server does not grow); `None`, the default, keeps every request.
    pub fn set_log_limit(&self, limit: Option<usize>) {
        self.shared.engine().set_log_limit(limit);
    }

    /// Forgets the logged requests.
    pub fn clear_requests(&self) {
        self.shared.engine().clear_requests();
    }

    /// Replaces the script (the request log is kept).
    pub fn set_script(&self, script: Script) -> Result<()> {
        script.validate()?;
        self.shared.engine().load(script);
        Ok(())
    }

    /// Appends an entry to the script.
    pub fn push(&self, entry: impl Into<Entry>) -> Result<()> {
        let entry = entry.into();
        script::validate_pushed(0, &entry)?;
        self.shared.engine().push(entry);
        Ok(())
    }

    /// Empties the script and the request log.
    pub fn reset(&self) {
        self.shared.engine().reset();
    }

    /// The entries that can still answer.
    pub fn remaining(&self) -> Vec<EntryState> {
        self.shared.engine().state()
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Resolves once the server is asked to stop (or its handle is gone).
async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

fn router(shared: Arc<Shared>) -> Router {
    control::routes()
        .fallback(model_endpoint)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

/// `/{v1beta|v1|v1alpha}/models/{model}:{rpc}` → (model, rpc).
fn parse_model_path(path: &str) -> Option<(&str, &str)> {
    let rest = ["/v1beta/models/", "/v1/models/", "/v1alpha/models/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))?;
    let (model, rpc) = rest.rsplit_once(':')?;
    (!model.is_empty() && !model.contains('/')).then_some((model, rpc))
}

fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        out.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    out
}

async fn model_endpoint(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = String::from_utf8_lossy(&body);
    let parsed: Option<Value> = serde_json::from_str(&raw).ok();
    let route = parse_model_path(uri.path());
    let mut engine = shared.engine();
    let seq = engine.next_seq();
    let response_id = format!("gemini-script-{seq}");
    let (answered_by, plan) = match (route, &parsed) {
        (Some((model, rpc)), Some(body))
            if method == Method::POST
                && matches!(rpc, "streamGenerateContent" | "generateContent") =>
        {
            let ctx = RequestCtx {
                model,
                raw: &raw,
                body,
            };
            engine.pick(&ctx, &response_id)
        }
        (Some((_, "countTokens")), Some(_)) if method == Method::POST => {
            // Deterministic rough estimate; the harness does not depend on the number.
            let tokens = raw.len() / 4;
            (
                AnsweredBy::Builtin,
                json_plan(json!({"totalTokens": tokens})),
            )
        }
        (Some(_), None) if method == Method::POST => (
            AnsweredBy::Rejected,
            error_plan(400, "Invalid JSON payload received.", "INVALID_ARGUMENT"),
        ),
        _ => (
            AnsweredBy::Rejected,
            error_plan(
                404,
                &format!("{method} {} is not a Gemini model route", uri.path()),
                "NOT_FOUND",
            ),
        ),
    };
    let status = match &plan {
        Plan::Error { status, .. } => *status,
        Plan::Stream { .. } => 200,
    };
    let (model, rpc) = route.map_or((None, None), |(m, r)| {
        (Some(m.to_owned()), Some(r.to_owned()))
    });
    tracing::debug!(seq, ?model, ?rpc, ?answered_by, status, "model request");
    if engine.keeps_log() {
        engine.record(LoggedRequest {
            seq,
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned()),
            model,
            rpc: rpc.clone(),
            headers: header_map(&headers),
            body: parsed.unwrap_or_else(|| Value::String(raw.into_owned())),
            answered_by,
            status,
        });
    }
    drop(engine);
    match (plan, rpc.as_deref()) {
        (
            Plan::Error {
                status,
                body,
                headers,
            },
            _,
        ) => json_response(status, &body, &headers),
        (
            Plan::Stream {
                events, headers, ..
            },
            Some("generateContent" | "countTokens"),
        ) => json_response(200, &merge(events), &headers),
        (
            Plan::Stream {
                events,
                delay,
                hang,
                headers,
            },
            _,
        ) => sse_response(events, delay, hang, &headers, shared.shutdown()),
    }
}

fn json_plan(body: Value) -> Plan {
    Plan::Stream {
        events: vec![body],
        delay: Duration::ZERO,
        hang: None,
        headers: BTreeMap::new(),
    }
}

fn error_plan(status: u16, message: &str, name: &str) -> Plan {
    Plan::Error {
        status,
        body: render::error_body(status, message, name),
        headers: BTreeMap::new(),
    }
}

/// One response for the non-streaming method: all parts in one candidate,
/// `finishReason` and usage from the last event. An error event wins.
fn merge(events: Vec<Value>) -> Value {
    if let Some(error) = events.iter().find(|e| e.get("error").is_some()) {
        return error.clone();
    }
    let Some(mut merged) = events.last().cloned() else {
        return json!({});
    };
    let parts: Vec<Value> = events
        .iter()
        .filter_map(|e| {
            e.pointer("/candidates/0/content/parts")
                .and_then(Value::as_array)
        })
        .flatten()
        .cloned()
        .collect();
    // Raw scripted chunks may have any shape; only an object content can take the parts.
    if let Some(Value::Object(content)) = merged.pointer_mut("/candidates/0/content") {
        content.insert("parts".into(), Value::Array(parts));
    }
    merged
}

fn apply_headers(response: &mut Response, headers: &BTreeMap<String, String>) {
    for (name, value) in headers {
        match (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            (Ok(n), Ok(v)) => {
                response.headers_mut().insert(n, v);
            }
            _ => tracing::warn!(%name, "skipping an invalid scripted response header"),
        }
    }
}

fn json_response(status: u16, body: &Value, headers: &BTreeMap<String, String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body.to_string(),
    )
        .into_response();
    apply_headers(&mut response, headers);
    response
}

fn sse_response(
    events: Vec<Value>,
    delay: Duration,
    hang: Option<Hang>,
    headers: &BTreeMap<String, String>,
    mut stop: watch::Receiver<bool>,
) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        for event in events {
            if !delay.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stopped(&mut stop) => return,
                    () = tx.closed() => return,
                }
            }
            let frame = Bytes::from(format!("data: {event}\n\n"));
            if tx.send(Ok(frame)).await.is_err() {
                return;
            }
        }
        // Holding `tx` keeps the response open; dropping it ends the stream.
        match hang {
            None => {}
            Some(Hang::Millis(ms)) => tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                () = stopped(&mut stop) => {}
                () = tx.closed() => {}
            },
            Some(Hang::Forever) => tokio::select! {
                () = stopped(&mut stop) => {}
                () = tx.closed() => {}
            },
        }
    });
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(ReceiverStream::new(rx)),
    )
        .into_response();
    apply_headers(&mut response, headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_model_paths() {
        for (path, expected) in [
            (
                "/v1beta/models/gemini-3:streamGenerateContent",
                Some(("gemini-3", "streamGenerateContent")),
            ),
            ("/v1/models/m:countTokens", Some(("m", "countTokens"))),
            ("/v1beta/models/:generateContent", None),
            ("/v1beta/models/a/b:generateContent", None),
            ("/v2/models/m:generateContent", None),
            ("/v1beta/models/m", None),
        ] {
            assert_eq!(parse_model_path(path), expected, "path {path}");
        }
    }

    #[test]
    fn merges_events_for_generate_content() {
        let events = vec![
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}]}, "index": 0}]}),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "b"}]}, "index": 0, "finishReason": "STOP"}], "usageMetadata": {"totalTokenCount": 1}}),
        ];
        assert_eq!(
            merge(events),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}, {"text": "b"}]}, "index": 0, "finishReason": "STOP"}], "usageMetadata": {"totalTokenCount": 1}})
        );
        assert_eq!(
            merge(vec![json!({"error": {"code": 500}})]),
            json!({"error": {"code": 500}})
        );
        // Raw chunks are sent as scripted, even when they are not Gemini-shaped.
        let odd = json!({"candidates": [{"content": "not an object"}]});
        assert_eq!(merge(vec![odd.clone()]), odd);
    }
}
