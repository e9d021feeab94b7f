//! The control routes under `/_script/`: replace or extend the script at run
//! time and read the request log, so one server can serve many tests (or
//! processes that only speak HTTP).
//!
//! | route | body | effect / answer |
//! |---|---|---|
//! | `POST /_script/load` | a script (list or object form) | replaces the script, keeps the log; `{"entries": n}` |
//! | `POST /_script/push` | one entry or a list of entries | appends them; `{"entries": n}` (entries now live) |
//! | `POST /_script/reset` | — | empties the script and the log; `{"entries": 0}` |
//! | `GET /_script/requests` | — | the request log, a JSON list of [`LoggedRequest`](crate::LoggedRequest) |
//! | `DELETE /_script/requests` | — | empties the log |
//! | `POST /_script/requests/take` | — | the request log, emptied in the same step (a reader that polls a long run neither misses nor rereads a request) |
//! | `GET /_script/state` | — | `{"entries": [EntryState], "default": reply or null, "requests": n, "served": n}` (`requests`: in the log; `served`: answered in all) |
//!
//! A malformed script or entry gets HTTP 400 with `{"error": "<what and where>"}`.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};

use crate::{
    engine::Engine,
    script::{self, Script},
    shared::Shared,
};

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/_script/load", post(load))
        .route("/_script/push", post(push))
        .route("/_script/reset", post(reset))
        .route("/_script/requests", get(requests).delete(clear_requests))
        .route("/_script/requests/take", post(take_requests))
        .route("/_script/state", get(state))
}

fn bad_request(error: &crate::Error) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error.to_string()})),
    )
        .into_response()
}

/// The answer of the routes that change the script: how many entries are now live.
fn live_count(engine: &Engine) -> Json<Value> {
    Json(json!({"entries": engine.entry_count()}))
}

async fn load(State(shared): State<Arc<Shared>>, body: String) -> Response {
    match Script::from_json(&body) {
        Ok(script) => {
            let mut engine = shared.engine();
            engine.load(script);
            live_count(&engine).into_response()
        }
        Err(e) => bad_request(&e),
    }
}

async fn push(State(shared): State<Arc<Shared>>, body: String) -> Response {
    match script::parse_entries(&body) {
        Ok(entries) => {
            let mut engine = shared.engine();
            for entry in entries {
                engine.push(entry);
            }
            live_count(&engine).into_response()
        }
        Err(e) => bad_request(&e),
    }
}

async fn reset(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let mut engine = shared.engine();
    engine.reset();
    live_count(&engine)
}

async fn requests(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.engine().requests().to_vec()).into_response()
}

async fn take_requests(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.engine().take_requests()).into_response()
}

async fn clear_requests(State(shared): State<Arc<Shared>>) -> StatusCode {
    shared.engine().clear_requests();
    StatusCode::NO_CONTENT
}

async fn state(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let engine = shared.engine();
    let default = engine
        .default_reply()
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or(Value::Null);
    Json(json!({
        "entries": engine.state(),
        "default": default,
        "requests": engine.requests().len(),
        "served": engine.served(),
    }))
}
