//! What every route of the server shares: its state ([`AppState`]), each mounted agent as its
//! routes see it ([`Endpoint`], with the runs each identity has in flight), the caller's owner,
//! and how a request is refused before anything runs.

use std::sync::Arc;
use std::time::Duration;

use agui_session::{Admission, Agent};
use agui_types::AgentCapabilities;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::access::{AccessPolicy, Caller};
use crate::metrics::Metrics;

/// Request handling settings.
#[derive(Debug, Clone)]
pub(crate) struct HttpOptions {
    /// Which hosts, pages (also the CORS headers) and credentials are accepted.
    pub(crate) access: AccessPolicy,
    /// Largest request body.
    pub(crate) max_body_bytes: usize,
    /// SSE keep-alive interval.
    pub(crate) keep_alive: Duration,
    /// `GET /readyz` answers 200 even while a confined agent's sandbox is unavailable.
    pub(crate) ready_without_sandbox: bool,
}

/// One mounted agent, as its routes see it.
pub(crate) struct Endpoint {
    pub(crate) agent: Agent,
    pub(crate) capabilities: AgentCapabilities,
    /// The threads one identity may own, when callers have identities (who owns which
    /// thread is the agent's to say: `Agent::admit_as`).
    pub(crate) max_threads: Option<usize>,
    /// Runs in flight per identity (bounded), when callers have identities.
    pub(crate) runs: Option<Arc<RunsInFlight>>,
}

impl Endpoint {
    /// The agent it serves.
    pub(crate) fn agent(&self) -> &Agent {
        &self.agent
    }
}

/// The runs (and connects) each identity has in flight, at most `max` each.
pub(crate) struct RunsInFlight {
    pub(crate) max: usize,
    counts: parking_lot::Mutex<std::collections::HashMap<String, usize>>,
}

/// One run counted against its identity until dropped (its stream ended).
pub(crate) struct RunSlot {
    runs: Arc<RunsInFlight>,
    identity: String,
}

impl RunsInFlight {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            counts: Default::default(),
        })
    }

    /// A slot for one more run of `identity`; `None` at its limit.
    pub(crate) fn take(self: &Arc<Self>, identity: &str) -> Option<RunSlot> {
        let mut counts = self.counts.lock();
        let n = counts.entry(identity.to_owned()).or_default();
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(RunSlot {
            runs: self.clone(),
            identity: identity.to_owned(),
        })
    }
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let mut counts = self.runs.counts.lock();
        if let Some(n) = counts.get_mut(&self.identity) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.identity);
            }
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) options: Arc<HttpOptions>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) agents: Arc<Vec<(String, Agent)>>,
}

impl AppState {
    /// The request metrics (refusals are counted there).
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// How often a stream with nothing to send says so.
    pub(crate) fn keep_alive(&self) -> Duration {
        self.options.keep_alive
    }
}

/// An error before a run started: the status and a JSON body saying what to fix.
pub(crate) fn reject(
    metrics: &Metrics,
    status: StatusCode,
    error: &str,
    detail: String,
) -> Response {
    metrics.rejected(status.as_u16());
    tracing::info!(status = status.as_u16(), error, %detail, "request refused");
    let mut response = (
        status,
        axum::Json(json!({"error": error, "detail": detail})),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The owner a caller's threads belong to: its identity, or the local owner.
pub(crate) fn owner_of(caller: &Caller) -> agui_session::Owner {
    caller
        .identity
        .as_deref()
        .map_or_else(agui_session::Owner::local, agui_session::Owner::named)
}

/// Lets `caller` use `thread_id`, claiming it when nobody owns it; another identity's thread
/// gets 404, as if it did not exist. The run routes (run, connect, stop) and a file upload call this
/// once the id is valid. Does nothing when callers have no identities.
pub(crate) async fn claim_thread(
    metrics: &Metrics,
    agent: &Agent,
    max_threads: Option<usize>,
    caller: &Caller,
    thread_id: &str,
) -> Result<(), Response> {
    let Some(max_threads) = max_threads else {
        return Ok(());
    };
    let Some(identity) = caller.identity.as_deref() else {
        // `authenticate` gives every caller an identity when threads have owners.
        return Err(reject(
            metrics,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs to know who is calling".into(),
        ));
    };
    let owner = owner_of(caller);
    match agent.admit_as(&owner, thread_id, max_threads).await {
        Ok(Admission::Yours) => Ok(()),
        Ok(Admission::LimitReached(limit)) => Err(reject(
            metrics,
            StatusCode::TOO_MANY_REQUESTS,
            "thread limit reached",
            format!(
                "you have {limit} threads, as many as one caller may (max_threads_per_owner); delete one to start another"
            ),
        )),
        Ok(Admission::NotYours) => {
            tracing::info!(
                thread_id,
                identity,
                "a thread of another identity was asked for"
            );
            Err(reject(
                metrics,
                StatusCode::NOT_FOUND,
                "thread not found",
                format!(
                    "there is no thread `{thread_id}` for you; start one with another threadId"
                ),
            ))
        }
        Err(e) => {
            let error_ref = error_ref();
            tracing::error!(%error_ref, thread_id, error = %e, "could not read or record a thread's owner");
            Err(reject(
                metrics,
                StatusCode::SERVICE_UNAVAILABLE,
                "owner store unavailable",
                format!("the thread's owner could not be checked (ref {error_ref})"),
            ))
        }
    }
}

/// A short random reference joining a client's error to the log line with its detail.
pub(crate) fn error_ref() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}
