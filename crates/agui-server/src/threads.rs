//! Threads as resources of their owner: `GET <path>/threads` (a page of the caller's threads,
//! newest activity first), `GET <path>/threads/<id>`, `PATCH <path>/threads/<id>` (title,
//! archiving) and `GET <path>/threads/events` (the caller's thread changes, as server-sent
//! events, for live lists). Lists and single threads are read from the shared thread store, so
//! every replica answers them; a change goes through the thread's task. Another owner's thread
//! is a 404, as for runs.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agui_session::threads::{
    ArchivedFilter, DEFAULT_PAGE, ThreadChange, ThreadPatch, ThreadQuery, ThreadState,
    ThreadSummary, ThreadsError, WaitingFor,
};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::access::Caller;
use crate::endpoint::{AppState, Endpoint, owner_of, reject};

/// `GET <path>/threads`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListParams {
    limit: Option<usize>,
    cursor: Option<String>,
    archived: Option<String>,
}

/// `PATCH <path>/threads/<id>`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    title: Option<String>,
    archived: Option<bool>,
    branch: Option<String>,
}

/// A thread as the routes show it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    id: String,
    title: String,
    created_at: String,
    updated_at: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_for: Option<&'static str>,
    archived: bool,
    message_count: u32,
    workspace_bytes: u64,
    /// The current branch's id.
    branch: String,
    /// The other branches, oldest first.
    branches: Vec<Branch>,
}

/// One of a thread's other branches, as the routes show it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Branch {
    id: String,
    /// The message where the thread left it (edited, or whose answer was regenerated); empty
    /// when the thread switched away from it.
    left_at: String,
    left_when: String,
    message_count: u32,
}

impl From<ThreadSummary> for Summary {
    fn from(thread: ThreadSummary) -> Self {
        let (status, waiting_for) = match thread.state {
            ThreadState::Running => ("running", None),
            ThreadState::Waiting(what) => (
                "waiting",
                Some(match what {
                    WaitingFor::Question => "question",
                    WaitingFor::Approval => "approval",
                    WaitingFor::FrontendTool => "frontend_tool",
                }),
            ),
            ThreadState::Idle => ("idle", None),
            ThreadState::Hibernated => ("hibernated", None),
        };
        Self {
            id: thread.id,
            title: thread.title,
            created_at: rfc3339(thread.created_at),
            updated_at: rfc3339(thread.updated_at),
            status,
            waiting_for,
            archived: thread.archived,
            message_count: thread.message_count,
            workspace_bytes: thread.workspace_bytes,
            branch: thread.branch,
            branches: thread
                .branches
                .into_iter()
                .map(|b| Branch {
                    id: b.id,
                    left_at: b.left_at,
                    left_when: rfc3339(b.left_when),
                    message_count: b.message_count,
                })
                .collect(),
        }
    }
}

/// `GET <path>/threads`.
pub(crate) async fn list(
    endpoint: Arc<Endpoint>,
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    params: Result<Query<ListParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let bad = |detail: String| {
        reject(
            state.metrics(),
            StatusCode::BAD_REQUEST,
            "bad query",
            detail,
        )
    };
    let Query(params) = match params {
        Ok(params) => params,
        Err(e) => return bad(e.body_text()),
    };
    let archived = match params.archived.as_deref() {
        None | Some("false") => ArchivedFilter::Exclude,
        Some("true") => ArchivedFilter::Only,
        Some("all") => ArchivedFilter::Include,
        Some(other) => {
            return bad(format!(
                "archived must be `true`, `false` or `all`, not `{other}`"
            ));
        }
    };
    let query = ThreadQuery {
        limit: params.limit.unwrap_or(DEFAULT_PAGE),
        cursor: params.cursor,
        archived,
    };
    match endpoint
        .agent()
        .list_threads_as(&owner_of(&caller), &query)
        .await
    {
        Ok(page) => Json(json!({
            "threads": page.threads.into_iter().map(Summary::from).collect::<Vec<_>>(),
            "nextCursor": page.next_cursor,
        }))
        .into_response(),
        Err(e) => bad(e.to_string()),
    }
}

/// `GET <path>/threads/<id>`.
pub(crate) async fn get_one(
    endpoint: Arc<Endpoint>,
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread_id): Path<String>,
) -> Response {
    match endpoint
        .agent()
        .thread_as(&owner_of(&caller), &thread_id)
        .await
    {
        Some(thread) => Json(Summary::from(thread)).into_response(),
        None => not_found(&state, &thread_id),
    }
}

/// `PATCH <path>/threads/<id>`.
pub(crate) async fn patch(
    endpoint: Arc<Endpoint>,
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Response {
    let invalid = |detail: String| {
        reject(
            state.metrics(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid change",
            detail,
        )
    };
    let body: PatchBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => return invalid(format!("the body is not a thread change: {e}")),
    };
    let patch = ThreadPatch {
        title: body.title,
        archived: body.archived,
        branch: body.branch,
    };
    match endpoint
        .agent()
        .update_thread_as(&owner_of(&caller), &thread_id, patch)
        .await
    {
        Ok(Some(thread)) => Json(Summary::from(thread)).into_response(),
        Ok(None) => not_found(&state, &thread_id),
        Err(e @ ThreadsError::CannotSwitch(_)) => reject(
            state.metrics(),
            StatusCode::CONFLICT,
            "thread busy",
            e.to_string(),
        ),
        Err(e) => invalid(e.to_string()),
    }
}

/// `GET <path>/threads/events`: the caller's thread changes from now on, with a keep-alive
/// comment every `keep_alive_secs`.
pub(crate) async fn events(
    endpoint: Arc<Endpoint>,
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let changes = endpoint.agent().watch_threads_as(&owner_of(&caller));
    let keep_alive = state.keep_alive().max(Duration::from_secs(1));
    let events = changes.map(|change| Ok::<_, std::convert::Infallible>(sse(&change)));
    let ticks = tokio_stream_ticks(keep_alive);
    let body = futures_util::stream::select(events, ticks);
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A keep-alive comment every `every`.
fn tokio_stream_ticks(
    every: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> {
    futures_util::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some((Ok(Bytes::from_static(b": keep-alive\n\n")), ()))
    })
}

/// One change as a server-sent event.
fn sse(change: &ThreadChange) -> Bytes {
    let data = match change {
        ThreadChange::Created(t) => json!({"type": "created", "thread": Summary::from(t.clone())}),
        ThreadChange::Updated(t) => json!({"type": "updated", "thread": Summary::from(t.clone())}),
        ThreadChange::Status(t) => json!({"type": "status", "thread": Summary::from(t.clone())}),
        ThreadChange::Deleted { id } => json!({"type": "deleted", "thread": {"id": id}}),
    };
    Bytes::from(format!("event: thread\ndata: {data}\n\n"))
}

fn not_found(state: &AppState, thread_id: &str) -> Response {
    reject(
        state.metrics(),
        StatusCode::NOT_FOUND,
        "thread not found",
        format!("there is no thread `{thread_id}` for you"),
    )
}

/// `time` as RFC 3339 in UTC, to the second (`2026-12-06T16:39:34Z`).
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian), after Howard Hinnant.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_796_575_933, "2026-12-06T16:52:13Z"),
            (4_102_444_799, "2099-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(secs)), text);
        }
    }
}
