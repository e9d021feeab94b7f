//! The harness's model endpoint: a proxy that keeps the model credentials in the server.
//!
//! An unconfined harness is configured with `http://127.0.0.1:<port>/<token>` as its model base
//! URL and the token as its API key ([`ModelProxy::register`]), never with the real endpoint's
//! key or `model_headers`. A confined harness has no network but its sandbox's loopback: it
//! reaches the proxy through a listener its launcher opened inside, which the proxy serves
//! ([`ModelChannel::serve`]) with a token of that process alone, revoked when it stops. A
//! request must carry the token of where it arrived and name a generation route of the agent's
//! kind of endpoint and one of the agent's models; each token has limits (calls at once, calls
//! per minute, request size). The proxy then forwards only what of the harness's request the
//! API reads (`outgoing`: its own query parameter and headers, never the harness's credentials
//! or anything a gateway acts on), adds the real key and headers, streams the request up (with
//! its length when it came with one) and the answer back as they arrive, and logs each call
//! with the process it came from. Neither the harness nor anything the agent runs holds the
//! key.

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use futures_util::{StreamExt as _, TryStreamExt as _};
use harness_client::ModelEndpoint;
use harness_client::sandbox::ServiceGrant;
use subtle::ConstantTimeEq as _;
use tokio::sync::{Semaphore, oneshot, watch};

use crate::defaults;
use crate::error::{ConfigProblem, ServerError};

mod outgoing;
mod warm_up;

/// Google's Gemini API, where a Gemini endpoint without `gemini_base_url` goes.
pub const GEMINI_API_URL: &str = "https://generativelanguage.googleapis.com";

/// The model calls the proxy forwards: the harness's streaming call, and the two others of the
/// same API surface it may make.
const RPCS: [&str; 3] = ["streamGenerateContent", "generateContent", "countTokens"];

/// Limits of the model calls made with one token (one harness process, or every unconfined
/// harness of an agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Calls in flight at once; more are answered 429 (the harness retries).
    pub concurrent: usize,
    /// Calls started per minute; more are answered 429.
    pub per_minute: u32,
    /// The largest request body; a larger one is answered 413 (streamed up, never buffered).
    pub max_request_bytes: u64,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            concurrent: defaults::MODEL_MAX_CONCURRENT_CALLS,
            per_minute: defaults::MODEL_CALLS_PER_MINUTE,
            max_request_bytes: defaults::MODEL_MAX_REQUEST_BYTES,
        }
    }
}

/// The model endpoint of every agent of a server; stops when dropped.
pub struct ModelProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for ModelProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelProxy")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

struct Shared {
    /// The tokens accepted on the loopback listener: each agent's own, for its unconfined
    /// harnesses.
    host_grants: RwLock<Vec<Arc<Grant>>>,
    client: reqwest::Client,
    stopped: watch::Receiver<bool>,
    /// Calls by agent and outcome, for `/metrics`.
    calls: ModelCalls,
}

/// Model calls by agent and outcome (`forwarded`, `refused`, `limited`, `unreachable`).
pub(crate) type ModelCalls = Arc<Mutex<BTreeMap<(String, &'static str), u64>>>;

/// Where one agent's model calls go, with which credentials, to which models.
struct Route {
    agent: String,
    upstream: Upstream,
    /// The configured `model_headers`, then the real key's header: added in this order, so the
    /// key wins over a header of the same name.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The models its harnesses may call (empty: any).
    models: BTreeSet<String>,
    limits: CallLimits,
}

enum Upstream {
    Gemini {
        base: String,
    },
    Vertex {
        base: String,
        project: String,
        location: String,
    },
    OpenAi {
        base: String,
    },
}

/// A token and what it may do: the route, the process it was given to, the state of its
/// limits.
struct Grant {
    token: String,
    route: Arc<Route>,
    /// Who holds it: a confined process's label (its directory tree), or `unconfined`.
    label: String,
    revoked: AtomicBool,
    inflight: Arc<Semaphore>,
    /// The current minute's start and the calls started in it.
    minute: Mutex<(Instant, u32)>,
}

impl Grant {
    fn new(route: Arc<Route>, label: &str) -> Result<Self, ServerError> {
        let concurrent = route.limits.concurrent.max(1);
        Ok(Self {
            token: new_token()?,
            route,
            label: label.to_owned(),
            revoked: AtomicBool::new(false),
            inflight: Arc::new(Semaphore::new(concurrent)),
            minute: Mutex::new((Instant::now(), 0)),
        })
    }

    /// Counts a call against the per-minute limit; `false` when it is reached.
    fn admit_call(&self) -> bool {
        let mut minute = self.minute.lock();
        let now = Instant::now();
        if now.duration_since(minute.0) >= Duration::from_secs(60) {
            *minute = (now, 0);
        }
        if minute.1 >= self.route.limits.per_minute {
            return false;
        }
        minute.1 += 1;
        true
    }
}

/// Revokes a grant when dropped (its process stopped).
struct Revoke {
    grant: Arc<Grant>,
    serving: tokio::task::JoinHandle<()>,
    /// Dropped with the grant: ends the listener's graceful-shutdown wait, a task of its own
    /// that aborting `serving` does not reach (it would otherwise live until the server stops).
    _revoked: oneshot::Sender<()>,
}

impl Drop for Revoke {
    fn drop(&mut self) {
        self.grant.revoked.store(true, Ordering::SeqCst);
        self.serving.abort();
        tracing::debug!(agent = %self.grant.route.agent, sandbox = %self.grant.label, "model proxy: a sandbox's token is revoked");
    }
}

/// What a request is served with: the proxy's state, and, on a sandbox's listener, the only
/// grant that listener accepts.
#[derive(Clone)]
struct Entry {
    shared: Arc<Shared>,
    grant: Option<Arc<Grant>>,
}

/// One agent's model, as the sandboxes of its confined harness processes reach it.
#[derive(Clone)]
pub struct ModelChannel {
    shared: Arc<Shared>,
    route: Arc<Route>,
}

impl std::fmt::Debug for ModelChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelChannel")
            .field("agent", &self.route.agent)
            .finish_non_exhaustive()
    }
}

impl ModelChannel {
    /// Serves the model calls arriving on `listener` (opened inside the sandbox of the process
    /// `label`) with a token of that process alone, revoked when the grant is dropped.
    pub(crate) fn serve(
        &self,
        listener: std::net::TcpListener,
        label: &str,
    ) -> Result<ServiceGrant, String> {
        let grant = Arc::new(Grant::new(self.route.clone(), label).map_err(|e| e.to_string())?);
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpListener::from_std(listener))
            .map_err(|e| format!("cannot serve the sandbox's model listener: {e}"))?;
        let app = axum::Router::new().fallback(forward).with_state(Entry {
            shared: self.shared.clone(),
            grant: Some(grant.clone()),
        });
        let (revoke, revoked) = oneshot::channel();
        let mut stopped = self.shared.stopped.clone();
        let until = async move {
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => {}
                _ = revoked => {}
            }
        };
        let serving = tokio::spawn(serve(listener, app, until));
        tracing::debug!(agent = %self.route.agent, sandbox = %label, "model proxy: serving a sandbox");
        Ok(ServiceGrant {
            token: Some(grant.token.clone()),
            guard: Box::new(Revoke {
                grant,
                serving,
                _revoked: revoke,
            }),
        })
    }
}

/// Serves `app` on `listener` until `until` completes.
async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    until: impl std::future::Future<Output = ()> + Send + 'static,
) {
    // Each SSE event is a small write that must leave at once (no Nagle delay).
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(until)
        .await
    {
        tracing::error!(error = %e, "the model proxy failed");
    }
}

impl ModelProxy {
    /// Listens on `127.0.0.1:<port>` (0: any free port).
    pub async fn start(port: u16) -> Result<Self, ServerError> {
        let bind = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|source| ServerError::Io {
                action: format!("listen on {bind} for the model proxy"),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Io {
            action: "read the model proxy's address".into(),
            source,
        })?;
        let client = reqwest::Client::builder()
            .connect_timeout(defaults::MODEL_CONNECT_TIMEOUT)
            // Between two reads, not over the whole answer: a long stream is fine, a silent one
            // is not.
            .read_timeout(defaults::MODEL_READ_TIMEOUT)
            .tcp_nodelay(true)
            // Following a redirect would carry the key wherever it points: the harness gets the
            // 3xx answer instead.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(ServerError::ModelProxyClient)?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            host_grants: RwLock::new(Vec::new()),
            client,
            stopped: stopped.clone(),
            calls: ModelCalls::default(),
        });
        let app = axum::Router::new().fallback(forward).with_state(Entry {
            shared: shared.clone(),
            grant: None,
        });
        let mut until = stopped;
        tokio::spawn(serve(listener, app, async move {
            let _ = until.wait_for(|s| *s).await;
        }));
        tracing::info!(%addr, "model proxy listening (the harnesses' model endpoint)");
        Ok(Self { addr, shared, stop })
    }

    /// The loopback address unconfined harnesses call.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes over `endpoint` for `agent`, whose harnesses may call `models` (empty: any) within
    /// `limits`: returns the endpoint to give its harnesses (this proxy, a fresh token, no key,
    /// no headers) and the channel its confined processes' sandboxes are served through; what
    /// arrives is forwarded to `endpoint` with its key and headers, plus `extra_headers` (the
    /// `model_headers` of an OpenAI-compatible endpoint, which has no headers of its own).
    pub fn register(
        &self,
        agent: &str,
        endpoint: &ModelEndpoint,
        extra_headers: &BTreeMap<String, String>,
        models: BTreeSet<String>,
        limits: CallLimits,
    ) -> Result<(ModelEndpoint, ModelChannel), ServerError> {
        let token = new_token()?;
        let proxied_url = format!("http://{}/{token}", self.addr);
        let invalid = |what: &str, e: &dyn std::fmt::Display| {
            ServerError::config(
                ConfigProblem::Agent,
                format!("agent `{agent}`: {what}: {e}"),
            )
        };
        let mut headers = Vec::new();
        let own = match endpoint {
            ModelEndpoint::Gemini { headers, .. } | ModelEndpoint::Vertex { headers, .. } => {
                Some(headers)
            }
            ModelEndpoint::OpenAiCompatible { .. } => None,
        };
        for (name, value) in own.into_iter().flatten().chain(extra_headers) {
            let name = HeaderName::try_from(name.as_str())
                .map_err(|e| invalid(&format!("model header `{name}`"), &e))?;
            let mut value = HeaderValue::try_from(value.as_str())
                .map_err(|e| invalid(&format!("the value of model header `{name}`"), &e))?;
            // Gateways take credentials in headers too: kept out of debug output.
            value.set_sensitive(true);
            headers.push((name, value));
        }
        let key = match endpoint {
            ModelEndpoint::Gemini { api_key, .. } | ModelEndpoint::Vertex { api_key, .. } => {
                api_key.as_deref().filter(|k| !k.is_empty())
            }
            ModelEndpoint::OpenAiCompatible { .. } => None,
        };
        if let Some(key) = key {
            let mut value = HeaderValue::try_from(key).map_err(|e| invalid("the API key", &e))?;
            value.set_sensitive(true);
            headers.push((HeaderName::from_static("x-goog-api-key"), value));
        }
        let trimmed = |url: &str| url.trim_end_matches('/').to_owned();
        let (upstream, proxied) = match endpoint {
            ModelEndpoint::Gemini {
                base_url,
                thinking_level,
                ..
            } => (
                Upstream::Gemini {
                    base: trimmed(base_url.as_deref().unwrap_or(GEMINI_API_URL)),
                },
                ModelEndpoint::Gemini {
                    base_url: Some(proxied_url),
                    api_key: Some(token.clone()),
                    headers: Default::default(),
                    thinking_level: thinking_level.clone(),
                },
            ),
            ModelEndpoint::Vertex {
                project,
                location,
                base_url,
                ..
            } => (
                Upstream::Vertex {
                    base: trimmed(&base_url.clone().unwrap_or_else(|| vertex_url(location))),
                    project: project.clone(),
                    location: location.clone(),
                },
                ModelEndpoint::Vertex {
                    project: project.clone(),
                    location: location.clone(),
                    base_url: Some(proxied_url),
                    // With a base URL and no key the harness sends no credentials at all.
                    api_key: key.map(|_| token.clone()),
                    headers: Default::default(),
                },
            ),
            ModelEndpoint::OpenAiCompatible { base_url } => (
                Upstream::OpenAi {
                    base: trimmed(base_url),
                },
                ModelEndpoint::OpenAiCompatible {
                    base_url: proxied_url,
                },
            ),
        };
        let route = Arc::new(Route {
            agent: agent.to_owned(),
            upstream,
            headers,
            models,
            limits,
        });
        let grant = Arc::new(Grant {
            token,
            ..Grant::new(route.clone(), "unconfined")?
        });
        self.shared.host_grants.write().push(grant);
        let channel = ModelChannel {
            shared: self.shared.clone(),
            route,
        };
        Ok((proxied, channel))
    }

    /// The model calls so far, counted as they happen, for `/metrics`.
    pub(crate) fn calls(&self) -> ModelCalls {
        self.shared.calls.clone()
    }
}

impl ModelProxy {
    /// The warm-up endpoint of `proxied` (an endpoint [`ModelProxy::register`] returned): the
    /// same route, answered by the proxy itself at once with a canned reply, never by the
    /// model — what a harness started ahead of need talks to in its throwaway turn
    /// (`AgentOptions::warm_up_endpoint`). `None` for an OpenAI-compatible endpoint.
    pub fn warm_up_endpoint(&self, proxied: &ModelEndpoint) -> Option<ModelEndpoint> {
        warm_up::endpoint(&format!("http://{}/", self.addr), proxied)
    }

    /// Stops accepting, on every listener; requests in flight finish.
    pub(crate) fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for ModelProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `endpoint` is Vertex with ambient credentials (no key, no base URL): the harness then
/// authenticates itself (Application Default Credentials), which it does only when it calls
/// Vertex directly, so such an endpoint cannot go through the proxy.
pub fn uses_ambient_credentials(endpoint: &ModelEndpoint) -> bool {
    matches!(
        endpoint,
        ModelEndpoint::Vertex {
            api_key: None,
            base_url: None,
            ..
        }
    )
}

/// Vertex AI's endpoint for `location`, as Google's SDKs build it.
fn vertex_url(location: &str) -> String {
    if location == "global" {
        "https://aiplatform.googleapis.com".into()
    } else {
        format!("https://{location}-aiplatform.googleapis.com")
    }
}

/// 256 random bits, hex: what a harness shows as its model base URL and API key.
fn new_token() -> Result<String, ServerError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(ServerError::Randomness)?;
    Ok(hex::encode(bytes))
}

impl Shared {
    /// The host grant of `token`. Every one is compared, each in constant time, so the time
    /// taken tells nothing about how much of a token was right.
    fn host_grant(&self, token: &str) -> Option<Arc<Grant>> {
        let grants = self.host_grants.read();
        let mut found = None;
        for grant in grants.iter() {
            if bool::from(grant.token.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(grant.clone());
            }
        }
        found
    }

    fn count(&self, agent: &str, outcome: &'static str) {
        *self
            .calls
            .lock()
            .entry((agent.to_owned(), outcome))
            .or_default() += 1;
    }
}

impl Route {
    /// The upstream URL (without the query) of a request for `rest` (the path after the token),
    /// and the model it calls, if it is one of this endpoint's generation routes.
    fn target(&self, rest: &str) -> Option<(String, Option<String>)> {
        // The model of a Gemini or Vertex call, if `tail` is `<model>:<rpc>` of a forwarded
        // call. (An OpenAI-compatible call names its model in the body, unchecked here.)
        let call = |tail: Option<&str>| {
            tail.and_then(|t| t.split_once(':'))
                .filter(|(model, rpc)| {
                    !model.is_empty()
                        && model
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                        && RPCS.contains(rpc)
                })
                .map(|(model, _)| Some(model.to_owned()))
        };
        let (base, model) = match &self.upstream {
            Upstream::Gemini { base } => (base, call(rest.strip_prefix("/v1beta/models/"))),
            Upstream::Vertex {
                base,
                project,
                location,
            } => {
                let prefix = format!(
                    "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/"
                );
                (base, call(rest.strip_prefix(prefix.as_str())))
            }
            Upstream::OpenAi { base } => (base, (rest == "/v1/chat/completions").then_some(None)),
        };
        model.map(|model| (format!("{base}{rest}"), model))
    }

    /// Whether this route calls a Google API (Gemini or Vertex), with its query parameters and
    /// headers.
    fn is_google(&self) -> bool {
        !matches!(self.upstream, Upstream::OpenAi { .. })
    }

    /// The headers sent upstream: those of the harness's the API reads (an allow-list that
    /// leaves its credentials out), then this route's.
    fn upstream_headers(&self, incoming: &HeaderMap) -> HeaderMap {
        let mut headers = outgoing::headers(self.is_google(), incoming);
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

/// Handles every request: token, route, model and limits, then forwarding with the request
/// streamed up and the answer streamed back.
async fn forward(State(entry): State<Entry>, request: Request) -> Response {
    let shared = &entry.shared;
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    // `/<token>/<rest>`: `rest` keeps its leading slash.
    let after = path.strip_prefix('/').unwrap_or(path);
    let token = after.split('/').next().unwrap_or_default();
    let rest = &after[token.len()..];
    let grant = match &entry.grant {
        // A sandbox's listener accepts its own process's token, and only while it is valid.
        Some(grant) => (bool::from(grant.token.as_bytes().ct_eq(token.as_bytes()))
            && !grant.revoked.load(Ordering::SeqCst))
        .then(|| grant.clone()),
        None => shared.host_grant(token),
    };
    let Some(grant) = grant else {
        // The path is not logged: it may hold a mistyped token.
        let sandbox = entry.grant.as_ref().map(|g| g.label.as_str());
        tracing::warn!(method = %parts.method, sandbox, "model proxy: a request with an unknown token was refused");
        return google_error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "the model proxy does not know this token",
        );
    };
    let route = &grant.route;
    let warm_up = rest.strip_prefix(warm_up::PREFIX);
    let rest = warm_up.unwrap_or(rest);
    let target = if parts.method == Method::POST {
        route.target(rest)
    } else {
        None
    };
    let Some((mut url, model)) = target else {
        shared.count(&route.agent, "refused");
        tracing::warn!(agent = %route.agent, sandbox = %grant.label, method = %parts.method, path = %rest, "model proxy: not a model generation route");
        return google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!(
                "the model proxy forwards only model generation requests, not {} {rest}",
                parts.method
            ),
        );
    };
    if let Some(model) = &model
        && !route.models.is_empty()
        && !route.models.contains(model)
    {
        shared.count(&route.agent, "refused");
        tracing::warn!(agent = %route.agent, sandbox = %grant.label, %model, "model proxy: a call to a model that is not the agent's was refused");
        return google_error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            &format!("model `{model}` is not one of this agent's models"),
        );
    }
    if warm_up.is_some() {
        // Read so the connection can carry the next call.
        let _ = axum::body::to_bytes(body, WARM_UP_BODY_BYTES).await;
        return match (&route.upstream, warm_up::rpc_of(rest)) {
            (Upstream::OpenAi { .. }, _) | (_, None) => warm_up::not_offered(),
            (_, Some(rpc)) => warm_up::answer(rpc),
        };
    }
    let limit = route.limits.max_request_bytes;
    // The length the body was sent with (`Content-Length`), as the listener decodes it: none for
    // a chunked body.
    let declared = HttpBody::size_hint(&body).exact();
    if declared.is_some_and(|n| n > limit) {
        shared.count(&route.agent, "refused");
        tracing::warn!(agent = %route.agent, sandbox = %grant.label, bytes = declared, "model proxy: a request over the size limit was refused");
        return too_large(limit);
    }
    let Ok(permit) = grant.inflight.clone().try_acquire_owned() else {
        shared.count(&route.agent, "limited");
        tracing::warn!(agent = %route.agent, sandbox = %grant.label, limit = route.limits.concurrent, "model proxy: too many model calls at once");
        return over_limit(format_args!(
            "{} model calls at once",
            route.limits.concurrent
        ));
    };
    if !grant.admit_call() {
        shared.count(&route.agent, "limited");
        tracing::warn!(agent = %route.agent, sandbox = %grant.label, limit = route.limits.per_minute, "model proxy: the calls-per-minute limit was reached");
        return over_limit(format_args!(
            "{} model calls per minute",
            route.limits.per_minute
        ));
    }
    if let Some(query) = outgoing::query(route.is_google(), parts.uri.query()) {
        url = format!("{url}?{query}");
    }
    let (upload, cut) = outgoing::upload(body.into_data_stream(), limit, declared);
    let mut upstream = shared
        .client
        .post(&url)
        .headers(route.upstream_headers(&parts.headers));
    // Sent as it came: with its length (some model servers read no chunked body), or chunked.
    if let Some(declared) = declared {
        upstream = upstream.header(header::CONTENT_LENGTH, declared);
    }
    tracing::debug!(agent = %route.agent, sandbox = %grant.label, model = model.as_deref().unwrap_or("-"), bytes = declared, "model proxy: forwarding a model call");
    let sent = upstream
        .body(reqwest::Body::wrap_stream(upload))
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => {
            let reason = error_chain(&e.without_url());
            if let Some(&cut) = cut.get() {
                shared.count(&route.agent, "refused");
                tracing::warn!(agent = %route.agent, sandbox = %grant.label, ?cut, bytes = declared, error = %reason, "model proxy: a request body was cut off");
                return match cut {
                    outgoing::Cut::TooLarge => too_large(limit),
                    _ => google_error(
                        StatusCode::BAD_REQUEST,
                        "INVALID_ARGUMENT",
                        &format!(
                            "the model proxy did not forward the request: {}",
                            cut.message(limit, declared)
                        ),
                    ),
                };
            }
            shared.count(&route.agent, "unreachable");
            let host = reqwest::Url::parse(&url)
                .ok()
                .map(|u| {
                    let host = u.host_str().unwrap_or_default().to_owned();
                    u.port().map_or(host.clone(), |p| format!("{host}:{p}"))
                })
                .unwrap_or_default();
            tracing::warn!(agent = %route.agent, sandbox = %grant.label, %host, error = %reason, "model proxy: the model is unreachable");
            return google_error(
                StatusCode::BAD_GATEWAY,
                "UNAVAILABLE",
                &format!(
                    "model unreachable: the server's model proxy could not reach {host}: {reason}"
                ),
            );
        }
    };
    shared.count(&route.agent, "forwarded");
    let mut response = Response::builder().status(answer.status());
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(value) = answer.headers().get(&name) {
            response = response.header(name, value.clone());
        }
    }
    let agent = route.agent.clone();
    let stream = answer
        .bytes_stream()
        .inspect_err(move |e| {
            tracing::warn!(agent = %agent, error = %error_chain(e), "model proxy: the model's answer broke off");
        })
        // The call counts as in flight until its answer has been passed on.
        .map(move |chunk| {
            let _held = &permit;
            chunk
        });
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| {
            google_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                &format!("the model proxy could not answer: {e}"),
            )
        })
}

/// The largest warm-up request read (they are a few KiB).
const WARM_UP_BODY_BYTES: usize = 4 << 20;

fn too_large(limit: u64) -> Response {
    google_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "INVALID_ARGUMENT",
        &format!("the model request exceeds the model proxy's limit of {limit} bytes"),
    )
}

/// `e` and its sources, `: `-separated (reqwest's own text is only the outermost).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The 429 for a process past one of its call limits (`limit`: how many of what).
fn over_limit(limit: std::fmt::Arguments<'_>) -> Response {
    google_error(
        StatusCode::TOO_MANY_REQUESTS,
        "RESOURCE_EXHAUSTED",
        &format!("more than {limit} from this agent's process"),
    )
}

/// An error as Google's APIs word it, which the harness reports in its error step.
fn google_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "error": {"code": status.as_u16(), "message": message, "status": kind}
    });
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests;
