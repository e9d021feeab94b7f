//! The HTTP surface: `POST <path>` runs, `GET <path>/capabilities`, `GET /healthz`,
//! `GET /metrics`, with the checks a request passes before a run starts; `GET <path>` from a
//! browser is the playground (`playground.rs`).

use std::sync::Arc;
use std::time::Duration;

use agui_session::Agent;
use agui_types::{AgentCapabilities, Encoding, RunAgentInput};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::build::MountedAgent;
use crate::metrics::Metrics;
use crate::stream::EventBody;

/// Longest accepted thread id.
pub const MAX_THREAD_ID: usize = 200;

/// Request handling settings.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Bearer token required on every route but `/healthz`.
    pub auth_token: Option<String>,
    /// CORS origins (`*` = any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// SSE keep-alive interval.
    pub keep_alive: Duration,
}

struct Endpoint {
    agent: Agent,
    capabilities: AgentCapabilities,
}

#[derive(Clone)]
struct AppState {
    options: Arc<HttpOptions>,
    metrics: Arc<Metrics>,
    agents: Arc<Vec<(String, Agent)>>,
}

/// The router serving `agents`.
pub fn router(agents: &[MountedAgent], options: HttpOptions, metrics: Arc<Metrics>) -> Router {
    let state = AppState {
        options: Arc::new(options.clone()),
        metrics: metrics.clone(),
        agents: Arc::new(
            agents
                .iter()
                .map(|a| (a.agent.options().name.clone(), a.agent.clone()))
                .collect(),
        ),
    };
    let mut app = Router::new();
    for mounted in agents {
        let endpoint = Arc::new(Endpoint {
            agent: mounted.agent.clone(),
            capabilities: crate::capabilities::derive(
                &mounted.agent,
                mounted.demo,
                &mounted.sandbox,
            ),
        });
        let run_endpoint = endpoint.clone();
        let caps_path = if mounted.path == "/" {
            "/capabilities".to_owned()
        } else {
            format!("{}/capabilities", mounted.path)
        };
        app = app
            .route(
                &mounted.path,
                post(move |State(state): State<AppState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>| {
                    let endpoint = run_endpoint.clone();
                    async move { run(state, endpoint, headers, body).await }
                }),
            )
            .route(&caps_path, get(move || async move { axum::Json(endpoint.capabilities.clone()).into_response() }));
    }
    let app = app
        .route("/metrics", get(metrics_route))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        // The playground page asks for the token itself, so it is outside authentication.
        .merge(crate::playground::router(
            &agents.iter().map(|a| a.path.as_str()).collect::<Vec<_>>(),
        ))
        .layer(DefaultBodyLimit::max(options.max_body_bytes))
        .with_state(state);
    match cors(&options.cors_origins) {
        Some(layer) => app.layer(layer),
        None => app,
    }
}

fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION])
            .max_age(Duration::from_secs(600)),
    )
}

/// An error before a run started: the status and a JSON body saying what to fix.
fn reject(metrics: &Metrics, status: StatusCode, error: &str, detail: String) -> Response {
    metrics.rejected(status.as_u16());
    tracing::info!(status = status.as_u16(), error, %detail, "request refused");
    (
        status,
        axum::Json(json!({"error": error, "detail": detail})),
    )
        .into_response()
}

async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &state.options.auth_token else {
        return next.run(request).await;
    };
    if request.method() == Method::OPTIONS {
        return next.run(request).await;
    }
    let presented = bearer_token(request.headers()).unwrap_or("");
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        return next.run(request).await;
    }
    let mut response = reject(
        &state.metrics,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "send `Authorization: Bearer <token>` with the server's token".into(),
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive,
/// RFC 9110 §11.1).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let (scheme, token) = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn run(
    state: AppState,
    endpoint: Arc<Endpoint>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let metrics = &state.metrics;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_type = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media_type != "application/json" {
        return reject(
            metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported media type",
            format!(
                "send the RunAgentInput as `Content-Type: application/json` (got `{content_type}`)"
            ),
        );
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            let detail = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!(
                    "the body is larger than the {}-byte limit (max_body_bytes)",
                    state.options.max_body_bytes
                )
            } else {
                rejection.body_text()
            };
            return reject(metrics, status, "unreadable body", detail);
        }
    };
    let input = match RunAgentInput::from_json(&body) {
        Ok(input) => input,
        Err(e) => {
            return reject(
                metrics,
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid RunAgentInput",
                e.to_string(),
            );
        }
    };
    if let Err(detail) = valid_thread_id(&input.thread_id) {
        return reject(
            metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid RunAgentInput",
            format!("threadId: {detail}"),
        );
    }
    let encoding = Encoding::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let agent = &endpoint.agent;
    let stream = EventBody::new(
        agent.run(input),
        encoding,
        state.options.keep_alive,
        metrics.clone(),
        agent.options().name.clone(),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, encoding.content_type())
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}

/// Thread ids name directories and files downstream; keep them to a safe alphabet.
pub fn valid_thread_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_THREAD_ID {
        return Err(format!("must be 1 to {MAX_THREAD_ID} characters"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')))
    {
        return Err(format!(
            "contains `{}`; use letters, digits and - _ . : @",
            c.escape_default()
        ));
    }
    if id.chars().all(|c| c == '.') {
        return Err("cannot be only dots".into());
    }
    Ok(())
}

async fn metrics_route(State(state): State<AppState>) -> Response {
    let stats: Vec<(String, agui_session::AgentStats)> = state
        .agents
        .iter()
        .map(|(name, agent)| (name.clone(), agent.stats()))
        .collect();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(&stats),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_are_checked() {
        for ok in ["t1", "3f2a-uuid-like_id", "user@example.com:thread.7"] {
            assert_eq!(valid_thread_id(ok), Ok(()), "{ok}");
        }
        for bad in ["", "../etc", "a/b", "x y", "..", "日本", &"a".repeat(201)] {
            assert!(valid_thread_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_whatever_the_scheme_case() {
        let token = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            bearer_token(&headers).map(str::to_owned)
        };
        assert_eq!(token("Bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("BEARER  s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("Basic czNjcmV0"), None);
        assert_eq!(token("Bearer"), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
