//! The HTTP surface: `POST <path>` runs, `GET <path>/capabilities`, `GET /healthz`,
//! `GET /readyz`, `GET /metrics`, with the checks a request passes before a run starts;
//! `GET <path>` from a browser is the playground (`playground.rs`).
//!
//! Every request passes two layers before its handler (decisions in `access.rs`):
//! [`check_site`] (Host and Origin) on every route but `/healthz` and `/readyz`, then
//! [`authenticate`] (token, and the caller's identity) on every agent route, or
//! [`authenticate_metrics`] on `/metrics` — the playground's page and assets are public, it
//! asks for the token itself. A route added to [`agent_routes`] gets both. Handlers that take a thread id call
//! [`admit_thread`] once the id is valid.

use std::sync::Arc;
use std::time::Duration;

use agui_session::Agent;
use agui_types::{Encoding, RunAgentInput};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use axum::{Extension, middleware};
use serde_json::json;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::access::{AccessPolicy, Caller, Refusal};
use crate::build::MountedAgent;
use crate::endpoint::{
    AppState, Endpoint, HttpOptions, RunSlot, RunsInFlight, claim_thread, owner_of, reject,
};
use crate::ids::valid_thread_id;
use crate::metrics::Metrics;
use crate::routing::RoutedThread;
use crate::stream::EventBody;

/// A run's events with its slot held until the stream ends.
struct Counted<S> {
    events: S,
    _slot: Option<RunSlot>,
}

impl<S: futures_util::Stream + Unpin> futures_util::Stream for Counted<S> {
    type Item = S::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<S::Item>> {
        std::pin::Pin::new(&mut self.events).poll_next(cx)
    }
}

/// The router serving `agents`.
pub(crate) fn router(
    agents: &[MountedAgent],
    options: HttpOptions,
    metrics: Arc<Metrics>,
) -> Router {
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
    let mut api = Router::new();
    for mounted in agents {
        api = api.merge(agent_routes(mounted, &options.access, &metrics));
    }
    let api = api.route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let operator = Router::new()
        .route("/metrics", get(metrics_route))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            authenticate_metrics,
        ));
    let site = api
        .merge(operator)
        // The playground page asks for the token itself, so it is outside authentication.
        .merge(crate::playground::router(
            &agents.iter().map(|a| a.path.as_str()).collect::<Vec<_>>(),
        ))
        .layer(DefaultBodyLimit::max(options.max_body_bytes));
    let site = match cors(&options.access) {
        Some(layer) => site.layer(layer),
        None => site,
    };
    // Outermost, so a refused page's preflight is refused too.
    let site = site.layer(middleware::from_fn_with_state(state.clone(), check_site));
    // Liveness and readiness for load balancers and orchestrators, which probe by any name or
    // address; each answers what was settled at start and does nothing, so it needs no check.
    let (ready, readiness) = readiness(agents, options.ready_without_sandbox);
    Router::new()
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .route(
            "/readyz",
            get(move || {
                let readiness = readiness.clone();
                async move { (ready, axum::Json(readiness)) }
            }),
        )
        .merge(site)
        .with_state(state)
}

/// What `GET /readyz` answers: 503 while an agent meant to be confined (`sandbox = "owner"` or
/// `"thread"`) cannot be, so its command and write tools are withheld — unless the operator
/// opted out (`ready_without_sandbox`); 200 otherwise. Decided once: the sandbox is probed at
/// start. The body says why without the probe's details (paths, launcher output), which go to
/// the log and `/capabilities` only: anyone may probe this route.
fn readiness(
    agents: &[MountedAgent],
    ready_without_sandbox: bool,
) -> (StatusCode, serde_json::Value) {
    let unavailable = agents.iter().filter(|a| a.sandbox.is_unavailable()).count();
    if unavailable == 0 {
        return (StatusCode::OK, json!({"status": "ready"}));
    }
    let reason = format!(
        "the sandbox is unavailable on this machine: {unavailable} of {} agents withhold their command and write tools (the start log's SANDBOX UNAVAILABLE line and <path>/capabilities say why and what fixes it)",
        agents.len()
    );
    if ready_without_sandbox {
        tracing::warn!(
            unavailable,
            "GET /readyz answers 200 although the sandbox is unavailable (ready_without_sandbox)"
        );
        return (
            StatusCode::OK,
            json!({"status": "ready", "sandbox": "unavailable", "reason": reason, "readyWithoutSandbox": true}),
        );
    }
    tracing::error!(
        unavailable,
        "NOT READY: GET /readyz answers 503 while the sandbox is unavailable; make it available, or set ready_without_sandbox = true to serve without the command and write tools"
    );
    (
        StatusCode::SERVICE_UNAVAILABLE,
        json!({
            "status": "unavailable",
            "reason": reason,
            "fix": "make the sandbox available (see the log), or set ready_without_sandbox = true (--ready-without-sandbox, AGUI_READY_WITHOUT_SANDBOX) to serve without those tools",
        }),
    )
}

/// Every route of one agent: `POST <path>` (a run), `POST <path>/connect` (a thread restated,
/// then its live turn), `POST <path>/stop` (`{threadId}`: stop its turn),
/// `GET <path>/capabilities` and a thread's files (`<path>/threads/<id>/files…`, `files.rs`).
/// The router puts them behind [`check_site`] and [`authenticate`].
fn agent_routes(
    mounted: &MountedAgent,
    access: &AccessPolicy,
    metrics: &Arc<Metrics>,
) -> Router<AppState> {
    let endpoint = Arc::new(Endpoint {
        agent: mounted.agent.clone(),
        capabilities: crate::capabilities::derive(&mounted.agent, mounted.demo, &mounted.sandbox),
        max_threads: access
            .has_identities()
            .then_some(mounted.owner_limits.max_threads),
        runs: access
            .has_identities()
            .then(|| RunsInFlight::new(mounted.owner_limits.max_runs)),
    });
    let sub_path = |name: &str| {
        if mounted.path == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", mounted.path)
        }
    };
    // Each route also under `<path>/threads/<threadId>`, the routing key in the path.
    let threads = |name: &str| sub_path(&format!("threads/{{thread_id}}{name}"));
    let files =
        crate::files::Files::new(mounted.agent.clone(), endpoint.max_threads, metrics.clone());
    Router::new()
        .merge(crate::files::routes(&files, &threads("")))
        .route(&mounted.path, post_route(&endpoint, run))
        .route(&threads(""), post_route(&endpoint, run))
        .route(&sub_path("connect"), post_route(&endpoint, connect))
        .route(&threads("/connect"), post_route(&endpoint, connect))
        .route(&sub_path("stop"), post_route(&endpoint, stop))
        .route(&threads("/stop"), post_route(&endpoint, stop))
        .route(&sub_path("delete"), post_route(&endpoint, delete))
        .route(
            &threads(""),
            method_route(&endpoint, axum::routing::MethodFilter::DELETE, delete),
        )
        .route(&sub_path("threads"), {
            let endpoint = endpoint.clone();
            get(move |state, caller, query| crate::threads::list(endpoint, state, caller, query))
        })
        .route(&sub_path("threads/events"), {
            let endpoint = endpoint.clone();
            get(move |state, caller| crate::threads::events(endpoint, state, caller))
        })
        .route(&threads(""), {
            let (one, change) = (endpoint.clone(), endpoint.clone());
            get(move |state, caller, path| crate::threads::get_one(one, state, caller, path)).patch(
                move |state, caller, path, body| {
                    crate::threads::patch(change, state, caller, path, body)
                },
            )
        })
        .route(
            &sub_path("capabilities"),
            get(move || async move { axum::Json(endpoint.capabilities.clone()).into_response() }),
        )
}

/// What every POST handler of an agent gets: the thread its path names, if any.
struct PostRequest {
    state: AppState,
    endpoint: Arc<Endpoint>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
    path_thread: Option<String>,
}

/// A POST route of `endpoint` served by `handler`.
fn post_route<F, Fut>(endpoint: &Arc<Endpoint>, handler: F) -> MethodRouter<AppState>
where
    F: Fn(PostRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    method_route(endpoint, axum::routing::MethodFilter::POST, handler)
}

/// A route of `endpoint` for `method`, served by `handler`.
fn method_route<F, Fut>(
    endpoint: &Arc<Endpoint>,
    method: axum::routing::MethodFilter,
    handler: F,
) -> MethodRouter<AppState>
where
    F: Fn(PostRequest) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let endpoint = endpoint.clone();
    axum::routing::on(
        method,
        move |State(state): State<AppState>,
              path: Option<Path<String>>,
              Extension(caller): Extension<Caller>,
              headers: HeaderMap,
              body: Result<Bytes, BytesRejection>| {
            handler(PostRequest {
                state,
                endpoint: endpoint.clone(),
                caller,
                headers,
                body,
                path_thread: path.map(|Path(thread)| thread),
            })
        },
    )
}

fn cors(access: &AccessPolicy) -> Option<CorsLayer> {
    let (any, origins) = access.cors_origins();
    let allow = if any {
        AllowOrigin::any()
    } else if origins.is_empty() {
        return None;
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers([
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::AUTHORIZATION,
                header::RANGE,
                header::IF_NONE_MATCH,
                header::HeaderName::from_static(crate::routing::THREAD_HEADER),
            ])
            // What a page reading a thread's files needs to see.
            .expose_headers([
                header::CONTENT_DISPOSITION,
                header::CONTENT_RANGE,
                header::ETAG,
                header::LAST_MODIFIED,
            ])
            .max_age(Duration::from_secs(600)),
    )
}

fn refused(metrics: &Metrics, refusal: Refusal) -> Response {
    reject(metrics, refusal.status, refusal.error, refusal.detail)
}

/// The Host and Origin checks (see `access.rs`), on every route but `/healthz` and `/readyz`.
async fn check_site(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match state
        .options
        .access
        .check_site(request.headers(), request.uri(), request.version())
    {
        Ok(()) => next.run(request).await,
        Err(refusal) => refused(&state.metrics, refusal),
    }
}

/// The credentials check of the agent routes: sets the request's [`Caller`].
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if request.method() == Method::OPTIONS {
        return next.run(request).await;
    }
    match state.options.access.authenticate(request.headers()) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => refused(&state.metrics, refusal),
    }
}

/// The credentials check of `/metrics` (`metrics_token`, or a token of the server).
async fn authenticate_metrics(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match state.options.access.authenticate_metrics(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refused(&state.metrics, refusal),
    }
}

/// Lets `caller` use `thread_id`, claiming it when nobody owns it; another identity's thread
/// gets 404, as if it did not exist. Every handler that takes a thread id calls this once the
/// id is valid (run; connect and stop too). Does nothing when callers have no identities.
pub(crate) async fn admit_thread(
    state: &AppState,
    endpoint: &Endpoint,
    caller: &Caller,
    thread_id: &str,
) -> Result<(), Response> {
    claim_thread(
        &state.metrics,
        &endpoint.agent,
        endpoint.max_threads,
        caller,
        thread_id,
    )
    .await
}

async fn run(mut request: PostRequest) -> Response {
    let (input, slot) = match admitted_run(&mut request).await {
        Ok(admitted) => admitted,
        Err(response) => return *response,
    };
    let agent = &request.endpoint.agent;
    let owner = owner_of(&request.caller);
    stream_response(
        &request.state,
        agent,
        &request.headers,
        Counted {
            events: agent.run_as(&owner, input),
            _slot: slot,
        },
    )
}

/// The input of a run or connect, admitted, with the caller's slot for it; or the response
/// refusing it.
async fn admitted_run(
    request: &mut PostRequest,
) -> Result<(RunAgentInput, Option<RunSlot>), Box<Response>> {
    let input = admitted_input(request).await.map_err(Box::new)?;
    Ok((input, run_slot(request)?))
}

/// A slot for one more run of the caller, or the 429 refusing it at its limit.
fn run_slot(request: &PostRequest) -> Result<Option<RunSlot>, Box<Response>> {
    let (Some(runs), Some(identity)) = (&request.endpoint.runs, request.caller.identity.as_deref())
    else {
        return Ok(None);
    };
    match runs.take(identity) {
        Some(slot) => Ok(Some(slot)),
        None => Err(Box::new(reject(
            &request.state.metrics,
            StatusCode::TOO_MANY_REQUESTS,
            "run limit reached",
            format!(
                "you have {} runs in flight, as many as one caller may (max_runs_per_owner); retry when one ends",
                runs.max
            ),
        ))),
    }
}

/// `POST <path>/connect`: the thread restated, then its live turn; 404 for a thread the agent
/// does not know (which the official client reads as "no history").
async fn connect(mut request: PostRequest) -> Response {
    let (input, slot) = match admitted_run(&mut request).await {
        Ok(admitted) => admitted,
        Err(response) => return *response,
    };
    let PostRequest {
        state,
        endpoint,
        headers,
        caller,
        ..
    } = request;
    let agent = &endpoint.agent;
    match agent.connect_as(&owner_of(&caller), input).await {
        Ok(events) => stream_response(
            &state,
            agent,
            &headers,
            Counted {
                events,
                _slot: slot,
            },
        ),
        Err(agui_session::ThreadError::UnknownThread(thread)) => reject(
            &state.metrics,
            StatusCode::NOT_FOUND,
            "thread not found",
            format!("there is no thread `{thread}` on this agent"),
        ),
        Err(agui_session::ThreadError::Workspace(message)) => {
            workspace_unavailable(&state.metrics, message)
        }
    }
}

/// `POST <path>/stop` with `{"threadId": …}`: stops the thread's turn in flight; the runs
/// following it end with `RUN_FINISHED` `outcome: cancelled`. Answers `{"stopped": bool}`
/// (false: no turn was in flight), 404 for an unknown thread. Under `<path>/threads/<id>/stop`
/// the body may leave `threadId` out.
async fn stop(mut request: PostRequest) -> Response {
    let thread_id = match admitted_thread(&mut request, "stop").await {
        Ok(thread_id) => thread_id,
        Err(response) => return response,
    };
    match request.endpoint.agent.stop(&thread_id).await {
        Ok(stopped) => axum::Json(json!({"stopped": stopped})).into_response(),
        Err(agui_session::ThreadError::UnknownThread(thread)) => unknown_thread(&request, &thread),
        Err(agui_session::ThreadError::Workspace(message)) => {
            workspace_unavailable(&request.state.metrics, message)
        }
    }
}

/// `DELETE <path>/threads/<id>`, or `POST <path>/delete` with `{"threadId": …}`: deletes the
/// caller's thread — its turn stops (its runs end `cancelled`), its record, workspace,
/// transcripts and conversation are removed, and its id is free again. Answers
/// `{"deleted": true}`, or 404 for a thread that is unknown or someone else's.
async fn delete(mut request: PostRequest) -> Response {
    let thread_id = match admitted_thread(&mut request, "delete").await {
        Ok(thread_id) => thread_id,
        Err(response) => return response,
    };
    let owner = owner_of(&request.caller);
    match request.endpoint.agent.delete_as(&owner, &thread_id).await {
        Ok(true) => axum::Json(json!({"deleted": true})).into_response(),
        Ok(false) => unknown_thread(&request, &thread_id),
        Err(agui_session::ThreadError::UnknownThread(thread)) => unknown_thread(&request, &thread),
        Err(agui_session::ThreadError::Workspace(message)) => {
            workspace_unavailable(&request.state.metrics, message)
        }
    }
}

/// A thread whose workspace could not be reached or made: 503 with the session's message
/// (it names no host path; the detail is logged under the reference it gives).
fn workspace_unavailable(metrics: &Metrics, message: String) -> Response {
    reject(
        metrics,
        StatusCode::SERVICE_UNAVAILABLE,
        "workspace unavailable",
        message,
    )
}

fn unknown_thread(request: &PostRequest, thread: &str) -> Response {
    reject(
        &request.state.metrics,
        StatusCode::NOT_FOUND,
        "thread not found",
        format!("there is no thread `{thread}` on this agent"),
    )
}

/// The thread a stop or delete names — in a `{"threadId": …}` body, or the routing key alone
/// (the path or `X-Thread-Id`, with an empty body) — checked and admitted for the caller.
async fn admitted_thread(request: &mut PostRequest, what: &str) -> Result<String, Response> {
    let body = std::mem::replace(&mut request.body, Ok(Bytes::new()));
    let PostRequest {
        state,
        endpoint,
        caller,
        headers,
        path_thread,
        ..
    } = &*request;
    let metrics = &state.metrics;
    let invalid = |detail: String| {
        reject(
            metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            if what == "stop" {
                "invalid stop request"
            } else {
                "invalid delete request"
            },
            detail,
        )
    };
    let routed = RoutedThread::new(headers, path_thread.clone())
        .map_err(|detail| reject(metrics, StatusCode::BAD_REQUEST, "thread mismatch", detail))?;
    let empty = body.as_ref().is_ok_and(|b| b.is_empty());
    let thread_id = if empty && routed.thread_id().is_some() {
        routed.thread_id().unwrap_or_default().to_owned()
    } else {
        let body = json_body(state, headers, body).map_err(|response| *response)?;
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct ThreadRequest {
            thread_id: Option<String>,
        }
        match serde_json::from_slice::<ThreadRequest>(&body) {
            Ok(ThreadRequest {
                thread_id: Some(thread_id),
            }) => thread_id,
            Ok(ThreadRequest { thread_id: None }) if routed.thread_id().is_some() => {
                routed.thread_id().unwrap_or_default().to_owned()
            }
            Ok(ThreadRequest { thread_id: None }) => {
                return Err(invalid(
                    "send `{\"threadId\": \"…\"}`: missing field `threadId`".to_owned(),
                ));
            }
            Err(e) => return Err(invalid(format!("send `{{\"threadId\": \"…\"}}`: {e}"))),
        }
    };
    if let Err(detail) = routed.agrees_with(&thread_id) {
        return Err(reject(
            metrics,
            StatusCode::BAD_REQUEST,
            "thread mismatch",
            detail,
        ));
    }
    valid_thread_id(&thread_id).map_err(|detail| invalid(format!("threadId: {detail}")))?;
    if what == "stop" {
        admit_thread(state, endpoint, caller, &thread_id).await?;
    }
    // A delete claims nothing: `delete_as` reaches only the caller's own thread, and claiming an
    // unknown id first would make deleting it (again) a success.
    Ok(thread_id)
}

/// The body of a JSON request, or the response refusing it (wrong content type, too large).
fn json_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, Box<Response>> {
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
        return Err(Box::new(reject(
            metrics,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported media type",
            format!("send the body as `Content-Type: application/json` (got `{content_type}`)"),
        )));
    }
    body.map_err(|rejection| {
        let status = rejection.status();
        let detail = if status == StatusCode::PAYLOAD_TOO_LARGE {
            format!(
                "the body is larger than the {}-byte limit (max_body_bytes)",
                state.options.max_body_bytes
            )
        } else {
            rejection.body_text()
        };
        Box::new(reject(metrics, status, "unreadable body", detail))
    })
}

/// A `RunAgentInput` that passed every check (JSON, schema, thread id, the thread's owner), or
/// the response refusing it.
async fn admitted_input(request: &mut PostRequest) -> Result<RunAgentInput, Response> {
    // Taken: the handler needs the rest of the request, never the body again.
    let body = std::mem::replace(&mut request.body, Ok(Bytes::new()));
    let PostRequest {
        state,
        endpoint,
        caller,
        headers,
        ..
    } = &*request;
    let metrics = &state.metrics;
    let mismatch = |detail| reject(metrics, StatusCode::BAD_REQUEST, "thread mismatch", detail);
    let routed = RoutedThread::new(headers, request.path_thread.clone()).map_err(mismatch)?;
    let body = json_body(state, headers, body).map_err(|response| *response)?;
    let input = RunAgentInput::from_json(&body).map_err(|e| {
        reject(
            metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid RunAgentInput",
            e.to_string(),
        )
    })?;
    if let Err(detail) = valid_thread_id(&input.thread_id) {
        return Err(reject(
            metrics,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid RunAgentInput",
            format!("threadId: {detail}"),
        ));
    }
    routed.agrees_with(&input.thread_id).map_err(mismatch)?;
    admit_thread(state, endpoint, caller, &input.thread_id).await?;
    Ok(input)
}

/// The streamed response of a run or a connect, in the encoding `Accept` asks for.
fn stream_response(
    state: &AppState,
    agent: &Agent,
    headers: &HeaderMap,
    events: Counted<agui_session::RunStream>,
) -> Response {
    let encoding = Encoding::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let stream = EventBody::new(
        events,
        encoding,
        state.options.keep_alive,
        state.metrics.clone(),
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
}
