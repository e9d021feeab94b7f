//! The harness's model endpoint: a loopback proxy that keeps the model credentials in the server.
//!
//! Every agent's harness is configured with `http://127.0.0.1:<port>/<token>` as its model base
//! URL and the token as its API key ([`ModelProxy::register`]), never with the real endpoint's
//! key or `model_headers`. A request must carry a registered token and name a generation route
//! of that agent's kind of endpoint; the proxy then drops the harness's credentials, adds the
//! real key and headers, and streams the answer back as it arrives. Neither the harness nor
//! anything the agent runs holds the key: a stolen token only reaches the model through this
//! proxy, which the agent can do anyway.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use futures_util::TryStreamExt as _;
use harness_client::ModelEndpoint;
use tokio::sync::watch;

use crate::defaults;
use crate::error::ServerError;

mod warm_up;

/// Google's Gemini API, where a Gemini endpoint without `gemini_base_url` goes.
pub const GEMINI_API_URL: &str = "https://generativelanguage.googleapis.com";

/// The model calls the proxy forwards: the harness's streaming call, and the two others of the
/// same API surface it may make.
const RPCS: [&str; 3] = ["streamGenerateContent", "generateContent", "countTokens"];

/// Request headers never forwarded: the harness's credentials (replaced by the real ones),
/// hop-by-hop headers, and `accept-encoding`, so that the answer arrives uncompressed and is
/// passed on event by event.
const DROPPED_HEADERS: [HeaderName; 11] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::AUTHORIZATION,
    HeaderName::from_static("x-goog-api-key"),
    header::ACCEPT_ENCODING,
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The loopback model endpoint of every agent of a server; stops when dropped.
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
    routes: RwLock<Vec<Arc<Route>>>,
    client: reqwest::Client,
}

/// Where one agent's model calls go, and with which credentials.
struct Route {
    token: String,
    agent: String,
    upstream: Upstream,
    /// The configured `model_headers`, then the real key's header: added in this order, so the
    /// key wins over a header of the same name.
    headers: Vec<(HeaderName, HeaderValue)>,
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
            .map_err(|e| ServerError::ModelProxy(format!("cannot build its HTTP client: {e}")))?;
        let shared = Arc::new(Shared {
            routes: RwLock::new(Vec::new()),
            client,
        });
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(shared.clone());
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            // Each SSE event is a small write that must leave at once (no Nagle delay).
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let graceful = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(graceful)
                .await
            {
                tracing::error!(error = %e, "the model proxy failed");
            }
        });
        tracing::info!(%addr, "model proxy listening (the harnesses' model endpoint)");
        Ok(Self { addr, shared, stop })
    }

    /// The loopback address the harnesses call (the only model address they need to reach).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes over `endpoint` for `agent`: returns the endpoint to give its harness (this proxy,
    /// a fresh token, no key, no headers) and forwards what arrives with that token to
    /// `endpoint`, with its key and headers, plus `extra_headers` (the `model_headers` of an
    /// OpenAI-compatible endpoint, which has no headers of its own).
    pub fn register(
        &self,
        agent: &str,
        endpoint: &ModelEndpoint,
        extra_headers: &BTreeMap<String, String>,
    ) -> Result<ModelEndpoint, ServerError> {
        let token = new_token()?;
        let proxied_url = format!("http://{}/{token}", self.addr);
        let invalid = |what: &str, e: &dyn std::fmt::Display| {
            ServerError::Config(format!("agent `{agent}`: {what}: {e}"))
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
        let route = Route {
            token,
            agent: agent.to_owned(),
            upstream,
            headers,
        };
        self.shared
            .routes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::new(route));
        Ok(proxied)
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

    /// Stops accepting; requests in flight finish.
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
    getrandom::fill(&mut bytes)
        .map_err(|e| ServerError::ModelProxy(format!("no randomness for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Shared {
    /// The route of `token`. Every registered token is compared, each in constant time, so the
    /// time taken tells nothing about how much of a token was right.
    fn route(&self, token: &str) -> Option<Arc<Route>> {
        let routes = self.routes.read().unwrap_or_else(|e| e.into_inner());
        let mut found = None;
        for route in routes.iter() {
            if constant_time_eq::constant_time_eq(route.token.as_bytes(), token.as_bytes()) {
                found = Some(route.clone());
            }
        }
        found
    }
}

impl Route {
    /// The upstream URL (without the query) of a request for `rest` (the path after the token),
    /// if it is one of this endpoint's generation routes.
    fn target(&self, rest: &str) -> Option<String> {
        let call = |tail: Option<&str>| {
            tail.and_then(|t| t.split_once(':'))
                .is_some_and(|(model, rpc)| {
                    !model.is_empty()
                        && model
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                        && RPCS.contains(&rpc)
                })
        };
        let (base, allowed) = match &self.upstream {
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
            Upstream::OpenAi { base } => (base, rest == "/v1/chat/completions"),
        };
        allowed.then(|| format!("{base}{rest}"))
    }

    /// The headers sent upstream: the harness's, less its credentials and hop-by-hop headers,
    /// plus this route's.
    fn upstream_headers(&self, incoming: &HeaderMap) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in incoming {
            if !DROPPED_HEADERS.contains(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        headers
    }
}

/// Handles every request: token, route, then forwarding with the answer streamed back.
async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    // `/<token>/<rest>`: `rest` keeps its leading slash.
    let after = path.strip_prefix('/').unwrap_or(path);
    let token = after.split('/').next().unwrap_or_default();
    let rest = &after[token.len()..];
    let Some(route) = shared.route(token) else {
        // The path is not logged: it may hold a mistyped token.
        tracing::warn!(method = %parts.method, "model proxy: a request with an unknown token was refused");
        return google_error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "the model proxy does not know this token",
        );
    };
    let warm_up = rest.strip_prefix(warm_up::PREFIX);
    let rest = warm_up.unwrap_or(rest);
    let target = if parts.method == Method::POST {
        route.target(rest)
    } else {
        None
    };
    let Some(mut url) = target else {
        tracing::warn!(agent = %route.agent, method = %parts.method, path = %rest, "model proxy: not a model generation route");
        return google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!(
                "the model proxy forwards only model generation requests, not {} {rest}",
                parts.method
            ),
        );
    };
    if warm_up.is_some() {
        // Read so the connection can carry the next call.
        let _ = axum::body::to_bytes(body, defaults::MODEL_PROXY_MAX_BODY_BYTES).await;
        return match (&route.upstream, warm_up::rpc_of(rest)) {
            (Upstream::OpenAi { .. }, _) | (_, None) => warm_up::not_offered(),
            (_, Some(rpc)) => warm_up::answer(rpc),
        };
    }
    if let Some(query) = parts.uri.query() {
        url = format!("{url}?{query}");
    }
    let body = match axum::body::to_bytes(body, defaults::MODEL_PROXY_MAX_BODY_BYTES).await {
        Ok(body) => body,
        Err(e) => {
            tracing::warn!(agent = %route.agent, error = %e, "model proxy: the request body could not be read");
            return google_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "INVALID_ARGUMENT",
                &format!(
                    "the model request could not be read or exceeds the model proxy's limit of {} bytes: {e}",
                    defaults::MODEL_PROXY_MAX_BODY_BYTES
                ),
            );
        }
    };
    let sent = shared
        .client
        .post(&url)
        .headers(route.upstream_headers(&parts.headers))
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => {
            let reason = error_chain(&e.without_url());
            let host = reqwest::Url::parse(&url)
                .ok()
                .map(|u| {
                    let host = u.host_str().unwrap_or_default().to_owned();
                    u.port().map_or(host.clone(), |p| format!("{host}:{p}"))
                })
                .unwrap_or_default();
            tracing::warn!(agent = %route.agent, %host, error = %reason, "model proxy: the model is unreachable");
            return google_error(
                StatusCode::BAD_GATEWAY,
                "UNAVAILABLE",
                &format!(
                    "model unreachable: the server's model proxy could not reach {host}: {reason}"
                ),
            );
        }
    };
    let mut response = Response::builder().status(answer.status());
    for name in [header::CONTENT_TYPE, header::RETRY_AFTER] {
        if let Some(value) = answer.headers().get(&name) {
            response = response.header(name, value.clone());
        }
    }
    let agent = route.agent.clone();
    let stream = answer.bytes_stream().inspect_err(move |e| {
        tracing::warn!(agent = %agent, error = %error_chain(e), "model proxy: the model's answer broke off");
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

/// An error as Google's APIs word it, which the harness reports in its error step.
fn google_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "error": {"code": status.as_u16(), "message": message, "status": kind}
    });
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(upstream: Upstream) -> Route {
        Route {
            token: "t".into(),
            agent: "a".into(),
            upstream,
            headers: Vec::new(),
        }
    }

    #[test]
    fn only_the_generation_routes_of_the_endpoint_are_forwarded() {
        let gemini = route(Upstream::Gemini {
            base: "https://g.example/p".into(),
        });
        assert_eq!(
            gemini.target("/v1beta/models/gemini-3-flash-preview:streamGenerateContent"),
            Some(
                "https://g.example/p/v1beta/models/gemini-3-flash-preview:streamGenerateContent"
                    .into()
            )
        );
        assert!(gemini.target("/v1beta/models/m:countTokens").is_some());
        assert!(gemini.target("/v1beta/models/m:generateContent").is_some());
        for refused in [
            "/v1beta/models/m",
            "/v1beta/models/m:embedContent",
            "/v1beta/models/../files:streamGenerateContent",
            "/v1beta/files",
            "/v1/chat/completions",
            "",
        ] {
            assert_eq!(gemini.target(refused), None, "{refused}");
        }
        let vertex = route(Upstream::Vertex {
            base: "https://v.example".into(),
            project: "p".into(),
            location: "l".into(),
        });
        let call =
            "/v1beta1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent";
        assert_eq!(
            vertex.target(call),
            Some(format!("https://v.example{call}"))
        );
        assert_eq!(
            vertex.target(
                "/v1beta1/projects/other/locations/l/publishers/google/models/m:generateContent"
            ),
            None,
            "another project is refused"
        );
        let openai = route(Upstream::OpenAi {
            base: "http://o.example".into(),
        });
        assert_eq!(
            openai.target("/v1/chat/completions"),
            Some("http://o.example/v1/chat/completions".into())
        );
        assert_eq!(openai.target("/v1/models"), None);
    }

    #[test]
    fn tokens_are_long_random_and_distinct() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn vertex_urls_follow_the_location() {
        assert_eq!(vertex_url("global"), "https://aiplatform.googleapis.com");
        assert_eq!(
            vertex_url("us-central1"),
            "https://us-central1-aiplatform.googleapis.com"
        );
    }
}
