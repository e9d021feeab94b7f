//! A thread's files over HTTP (issue 38): `GET`, `PUT` and `DELETE`
//! `<path>/threads/<id>/files[/<relative path>]`, and `GET <dir>?archive=zip`.
//!
//! What the agent can write, the server reaches only through the door
//! ([`harness_client::sandbox::AgentDir`], from [`agui_session::Agent::workspace_as`]): no link is
//! followed, no FIFO opened, no file with several hard links read, whatever the agent planted
//! anywhere on the way. The relative path is the client's: percent-decoded (by the router),
//! split on `/`, and refused (400) when a component is empty, `.` or `..`, or holds a NUL or a
//! backslash — before anything is touched. A thread of another owner is a 404, as an unknown
//! one; reading never claims a thread, writing makes a new one the caller's.
//!
//! Downloads (`download.rs`), uploads (`upload.rs`) and archives (`archive.rs`) stream: the
//! server holds a few chunks of a file at a time, whatever its size. Every blocking call of the
//! door runs off the async threads.

mod archive;
mod download;
mod upload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agui_session::{Agent, Owner, ThreadError, ThreadWorkspace};
use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path as RoutePath, Request};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use harness_client::sandbox::{Entry, EntryKind, Refusal, SandboxError};
use serde_json::json;

use crate::access::Caller;
use crate::endpoint::{claim_thread, error_ref, owner_of, reject};
use crate::ids::valid_thread_id;
use crate::metrics::Metrics;
use crate::routing::RoutedThread;

/// What the file routes of one agent work with.
pub(crate) struct Files {
    agent: Agent,
    /// How many threads one identity may hold, when callers have identities (and threads
    /// owners).
    max_threads: Option<usize>,
    metrics: Arc<Metrics>,
    /// The bytes uploads in flight have written, per tree (by its first root): the room under
    /// the disk cap is shared, so two uploads together cannot pass it.
    uploading: parking_lot::Mutex<HashMap<PathBuf, u64>>,
}

impl Files {
    pub(crate) fn new(
        agent: Agent,
        max_threads: Option<usize>,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        Arc::new(Self {
            agent,
            max_threads,
            metrics,
            uploading: parking_lot::Mutex::default(),
        })
    }

    /// What the uploads in flight to `tree` have written.
    fn uploading(&self, tree: &Path) -> u64 {
        self.uploading.lock().get(tree).copied().unwrap_or(0)
    }

    /// Counts `bytes` more written by an upload in flight to `tree`.
    fn add_uploading(&self, tree: &Path, bytes: u64) {
        *self.uploading.lock().entry(tree.to_owned()).or_default() += bytes;
    }

    /// An upload to `tree` that wrote `bytes` is over (written to disk, or undone).
    fn end_uploading(&self, tree: &Path, bytes: u64) {
        let mut uploading = self.uploading.lock();
        if let Some(left) = uploading.get_mut(tree) {
            *left = left.saturating_sub(bytes);
            if *left == 0 {
                uploading.remove(tree);
            }
        }
    }
}

/// An upload in flight, counted in [`Files::uploading`] until it is dropped.
struct Uploading {
    files: Arc<Files>,
    tree: PathBuf,
    written: u64,
}

impl Uploading {
    fn new(target: &Target) -> Self {
        Self {
            files: target.files.clone(),
            tree: target
                .workspace
                .tree_roots()
                .first()
                .cloned()
                .unwrap_or_default(),
            written: 0,
        }
    }

    /// What the other uploads to the same tree have written.
    fn others(&self) -> u64 {
        self.files
            .uploading(&self.tree)
            .saturating_sub(self.written)
    }

    fn grow(&mut self, bytes: u64) {
        self.written += bytes;
        self.files.add_uploading(&self.tree, bytes);
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        self.files.end_uploading(&self.tree, self.written);
    }
}

/// The file routes under `thread` (`<path>/threads/{thread_id}`): `…/files`, `…/files/` and
/// `…/files/<relative path>`, each for `GET` (and `HEAD`), `PUT` and `DELETE`.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(
    files: &Arc<Files>,
    thread: &str,
) -> Router<S> {
    let base = format!("{thread}/files");
    Router::new()
        .route(&base, method_router(files))
        .route(&format!("{base}/"), method_router(files))
        .route(&format!("{base}/{{*path}}"), method_router(files))
}

fn method_router<S: Clone + Send + Sync + 'static>(files: &Arc<Files>) -> MethodRouter<S> {
    let handler = {
        let files = files.clone();
        move |params: Result<RoutePath<HashMap<String, String>>, PathRejection>,
              Extension(caller): Extension<Caller>,
              request: Request| {
            let files = files.clone();
            async move { serve(files, params, caller, request).await }
        }
    };
    axum::routing::get(handler.clone())
        .put(handler.clone())
        .delete(handler)
}

/// One request of the file routes, checked, admitted and dispatched.
async fn serve(
    files: Arc<Files>,
    params: Result<RoutePath<HashMap<String, String>>, PathRejection>,
    caller: Caller,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let metrics = &files.metrics;
    let params = match params {
        Ok(RoutePath(params)) => params,
        Err(rejection) => {
            return reject(
                metrics,
                StatusCode::BAD_REQUEST,
                "invalid path",
                format!("the path could not be read: {}", rejection.body_text()),
            );
        }
    };
    let thread_id = params.get("thread_id").cloned().unwrap_or_default();
    if let Err(detail) = valid_thread_id(&thread_id) {
        return reject(
            metrics,
            StatusCode::BAD_REQUEST,
            "invalid thread id",
            format!("the thread id {detail}"),
        );
    }
    if let Err(detail) = RoutedThread::new(&parts.headers, Some(thread_id.clone())) {
        return reject(metrics, StatusCode::BAD_REQUEST, "thread mismatch", detail);
    }
    let rel = match relative_path(params.get("path").map(String::as_str)) {
        Ok(rel) => rel,
        Err(detail) => return reject(metrics, StatusCode::BAD_REQUEST, "invalid path", detail),
    };
    let archive = match archive_asked(parts.uri.query()) {
        Ok(archive) => archive,
        Err(detail) => return reject(metrics, StatusCode::BAD_REQUEST, "invalid query", detail),
    };
    let writes = parts.method == Method::PUT;
    let owner = match admit(&files, &caller, &thread_id, writes).await {
        Ok(owner) => owner,
        Err(response) => return response,
    };
    let workspace = match files.agent.workspace_as(&owner, &thread_id, writes).await {
        Ok(Some(workspace)) => Arc::new(workspace),
        Ok(None) => return not_found(metrics, &thread_id),
        Err(ThreadError::UnknownThread(_)) => return not_found(metrics, &thread_id),
        Err(ThreadError::Workspace(message)) => {
            return reject(
                metrics,
                StatusCode::SERVICE_UNAVAILABLE,
                "workspace unavailable",
                message,
            );
        }
    };
    let target = Target {
        files: files.clone(),
        workspace,
        rel,
        thread_id,
    };
    match parts.method {
        Method::PUT => upload::put(target, &parts.headers, body).await,
        Method::DELETE => delete(target).await,
        _ => get(target, &parts.headers, archive).await,
    }
}

/// What a request names: a path in a thread's workspace.
struct Target {
    files: Arc<Files>,
    workspace: Arc<ThreadWorkspace>,
    /// The path below the workspace (empty: the workspace itself).
    rel: PathBuf,
    thread_id: String,
}

impl Target {
    /// The path as the client named it (for messages; never a host path).
    fn shown(&self) -> String {
        if self.rel.as_os_str().is_empty() {
            "the workspace".to_owned()
        } else {
            format!("`{}`", self.rel.display())
        }
    }

    /// Runs door work on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&ThreadWorkspace, &Path) -> T + Send + 'static,
    ) -> Result<T, Response> {
        let (workspace, rel) = (self.workspace.clone(), self.rel.clone());
        tokio::task::spawn_blocking(move || work(&workspace, &rel))
            .await
            .map_err(|e| self.failed("a file operation failed", &e))
    }

    /// A failure the client cannot act on: 500, the detail logged under a reference.
    fn failed(&self, what: &str, detail: &dyn std::fmt::Display) -> Response {
        let error_ref = error_ref();
        tracing::error!(%error_ref, thread_id = %self.thread_id, path = %self.rel.display(), error = %detail, "{what}");
        reject(
            &self.files.metrics,
            StatusCode::INTERNAL_SERVER_ERROR,
            "file operation failed",
            format!("{what} (ref {error_ref})"),
        )
    }

    /// The response to a refusal or failure of the door while doing `op` on this target.
    fn door_error(&self, op: Op, error: SandboxError) -> Response {
        let metrics = &self.files.metrics;
        let shown = self.shown();
        match error {
            SandboxError::Refused { why, .. } => {
                let (status, error, detail) = match (why, op) {
                    (Refusal::BadPath, _) => (
                        StatusCode::BAD_REQUEST,
                        "invalid path",
                        format!("{shown} is not a plain relative path"),
                    ),
                    (Refusal::TooLarge, _) => (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "too large",
                        format!("{shown} is too large"),
                    ),
                    (Refusal::NotADirectory, Op::Read) => (
                        StatusCode::NOT_FOUND,
                        "not found",
                        format!("nothing is at {shown}: a component on the way is not a directory"),
                    ),
                    (Refusal::Symlink, Op::Read) => (
                        StatusCode::FORBIDDEN,
                        "not readable",
                        format!(
                            "{shown} is or goes through a symbolic link, which is never followed"
                        ),
                    ),
                    (Refusal::NotARegularFile | Refusal::HardLinked, Op::Read) => (
                        StatusCode::FORBIDDEN,
                        "not readable",
                        format!("{shown} is {why}, which is never read"),
                    ),
                    (Refusal::Symlink, Op::Write | Op::Delete) => (
                        StatusCode::CONFLICT,
                        "conflict",
                        format!(
                            "a component on the way to {shown} is a symbolic link, which is never followed"
                        ),
                    ),
                    (Refusal::NotADirectory, Op::Write | Op::Delete) => (
                        StatusCode::CONFLICT,
                        "conflict",
                        format!("a component on the way to {shown} is not a directory"),
                    ),
                    (Refusal::NotARegularFile | Refusal::HardLinked, Op::Write | Op::Delete) => (
                        StatusCode::CONFLICT,
                        "conflict",
                        format!("{shown} is {why}"),
                    ),
                };
                reject(metrics, status, error, detail)
            }
            SandboxError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                reject(
                    metrics,
                    StatusCode::NOT_FOUND,
                    "not found",
                    format!("nothing is at {shown}"),
                )
            }
            SandboxError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::DirectoryNotEmpty =>
            {
                reject(
                    metrics,
                    StatusCode::CONFLICT,
                    "conflict",
                    format!("{shown} is a directory that is not empty"),
                )
            }
            other => self.failed("a file operation failed", &other),
        }
    }
}

/// What a request does to its target, for the status of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Delete,
}

/// The caller as a thread owner, once allowed. A write claims the thread in the thread store
/// (which keeps who owns it and the per-identity count), as a run does; a read or a removal
/// claims nothing: the workspace is only opened for its recorded owner
/// ([`Agent::workspace_as`]), so another identity's thread is a 404 like an unknown one.
async fn admit(
    files: &Files,
    caller: &Caller,
    thread_id: &str,
    claim: bool,
) -> Result<Owner, Response> {
    if files.max_threads.is_none() {
        return Ok(Owner::local());
    }
    if claim || caller.identity.is_none() {
        claim_thread(
            &files.metrics,
            &files.agent,
            files.max_threads,
            caller,
            thread_id,
        )
        .await?;
    }
    Ok(owner_of(caller))
}

/// The client's path below the workspace: empty for the workspace itself; else components
/// split on `/`, none empty, `.` or `..`, none holding a NUL or a backslash.
fn relative_path(raw: Option<&str>) -> Result<PathBuf, String> {
    let Some(raw) = raw.filter(|raw| !raw.is_empty()) else {
        return Ok(PathBuf::new());
    };
    let mut rel = PathBuf::new();
    for component in raw.split('/') {
        let why = match component {
            "" => Some("an empty component (`//`, or a leading or trailing `/`)"),
            "." | ".." => Some("a `.` or `..` component"),
            c if c.contains('\0') => Some("a NUL character"),
            c if c.contains('\\') => Some("a backslash"),
            _ => None,
        };
        if let Some(why) = why {
            return Err(format!(
                "the file path holds {why}; name a path relative to the workspace"
            ));
        }
        rel.push(component);
    }
    Ok(rel)
}

/// Whether the query asks for an archive (`archive=zip`); another archive format is refused,
/// other keys (a client's cache-busting) are ignored.
fn archive_asked(query: Option<&str>) -> Result<bool, String> {
    let mut archive = false;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("archive", "zip") => archive = true,
            ("archive", other) => {
                return Err(format!("archive=`{other}` is not offered: use archive=zip"));
            }
            _ => {}
        }
    }
    Ok(archive)
}

/// `GET`: a directory's listing (or its archive), a file's bytes.
async fn get(target: Target, headers: &HeaderMap, archive: bool) -> Response {
    let stat = target.blocking(|ws, rel| ws.dir().stat(rel)).await;
    let entry = match stat {
        Ok(Ok(entry)) => entry,
        Ok(Err(e)) => return target.door_error(Op::Read, e),
        Err(response) => return response,
    };
    match (entry.kind, archive) {
        (EntryKind::Dir, true) => archive::zip(target),
        (EntryKind::Dir, false) => list(target).await,
        (EntryKind::File, false) => download::file(target, headers).await,
        (EntryKind::File, true) => reject(
            &target.files.metrics,
            StatusCode::BAD_REQUEST,
            "not a directory",
            format!("{} is a file: only a directory is archived", target.shown()),
        ),
        (EntryKind::Symlink, _) => target.door_error(
            Op::Read,
            SandboxError::Refused {
                path: PathBuf::new(),
                why: Refusal::Symlink,
            },
        ),
        (EntryKind::Other, _) => target.door_error(
            Op::Read,
            SandboxError::Refused {
                path: PathBuf::new(),
                why: Refusal::NotARegularFile,
            },
        ),
    }
}

/// A directory's entries, by name.
async fn list(target: Target) -> Response {
    let entries = match target.blocking(|ws, rel| ws.dir().entries(rel)).await {
        Ok(Ok(entries)) => entries,
        Ok(Err(e)) => return target.door_error(Op::Read, e),
        Err(response) => return response,
    };
    let entries: Vec<_> = entries.iter().map(entry_json).collect();
    axum::Json(json!({
        "path": target.rel.to_string_lossy(),
        "entries": entries,
    }))
    .into_response()
}

/// `DELETE`: a file, link or special file (the entry itself, nothing it leads to), or an empty
/// directory.
async fn delete(target: Target) -> Response {
    if target.rel.as_os_str().is_empty() {
        return reject(
            &target.files.metrics,
            StatusCode::CONFLICT,
            "conflict",
            "the workspace itself cannot be deleted; delete the thread instead".into(),
        );
    }
    let removed = target
        .blocking(|ws, rel| {
            let entry = ws.dir().stat(rel)?;
            if entry.kind == EntryKind::Dir {
                ws.dir().remove_empty_dir(rel)
            } else {
                ws.dir().remove_file(rel)
            }
        })
        .await;
    match removed {
        Ok(Ok(true)) => {
            tracing::info!(thread_id = %target.thread_id, path = %target.rel.display(), "removed a file of a thread's workspace");
            target.workspace.changed();
            axum::Json(json!({"deleted": true})).into_response()
        }
        Ok(Ok(false)) => target.door_error(
            Op::Delete,
            SandboxError::Io {
                action: String::new(),
                source: std::io::ErrorKind::NotFound.into(),
            },
        ),
        Ok(Err(e)) => target.door_error(Op::Delete, e),
        Err(response) => response,
    }
}

/// A directory entry as the client sees it: name, kind, size (0 for a directory), when it
/// last changed.
fn entry_json(entry: &Entry) -> serde_json::Value {
    json!({
        "name": entry.name.to_string_lossy(),
        "kind": entry.kind,
        "size": if entry.kind == EntryKind::Dir { 0 } else { entry.len },
        "modified": rfc3339(entry.modified),
    })
}

fn not_found(metrics: &Metrics, thread_id: &str) -> Response {
    reject(
        metrics,
        StatusCode::NOT_FOUND,
        "thread not found",
        format!("there is no thread `{thread_id}` for you"),
    )
}

/// Seconds since 1970 (0 before).
fn unix_secs(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// The civil date and time (UTC) of Unix seconds: year, month, day, hour, minute, second,
/// weekday (0 is Sunday).
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Howard Hinnant's days_from_civil, inverted.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = u32::try_from((days + 4).rem_euclid(7)).unwrap_or(0);
    let (hour, minute, second) = (
        u32::try_from(rest / 3600).unwrap_or(0),
        u32::try_from(rest / 60 % 60).unwrap_or(0),
        u32::try_from(rest % 60).unwrap_or(0),
    );
    (year, month, day, hour, minute, second, weekday)
}

/// RFC 3339, UTC, to the second: `2026-12-06T16:41:02Z`.
fn rfc3339(time: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(unix_secs(time));
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// An HTTP date (IMF-fixdate): `Sun, 06 Dec 2026 16:41:02 GMT`.
fn http_date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s, wd) = civil(unix_secs(time));
    let day = DAYS.get(wd as usize).copied().unwrap_or("Sun");
    let month = MONTHS
        .get((mo as usize).saturating_sub(1))
        .copied()
        .unwrap_or("Jan");
    format!("{day}, {d:02} {month} {y:04} {h:02}:{mi:02}:{s:02} GMT")
}

/// A body that answers nothing (a 304, a `HEAD`).
fn empty() -> Body {
    Body::empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_paths_are_plain_relative_paths_or_refused() {
        assert_eq!(relative_path(None).unwrap(), PathBuf::new());
        assert_eq!(relative_path(Some("")).unwrap(), PathBuf::new());
        assert_eq!(
            relative_path(Some("src/main.rs")).unwrap(),
            PathBuf::from("src/main.rs")
        );
        assert_eq!(
            relative_path(Some("a b/ü.txt")).unwrap(),
            PathBuf::from("a b/ü.txt")
        );
        for bad in [
            "..",
            "../x",
            "a/../b",
            ".",
            "./a",
            "/etc/passwd",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "a/..",
        ] {
            assert!(relative_path(Some(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_zip_archive_is_asked_for() {
        assert_eq!(archive_asked(None), Ok(false));
        assert_eq!(archive_asked(Some("archive=zip")), Ok(true));
        assert_eq!(archive_asked(Some("v=2&archive=zip")), Ok(true));
        assert!(archive_asked(Some("archive=tar")).is_err());
        assert_eq!(archive_asked(Some("v=1")), Ok(false));
    }

    #[test]
    fn dates_are_written_as_the_formats_ask() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_575_262);
        assert_eq!(rfc3339(t), "2026-12-06T16:41:02Z");
        assert_eq!(http_date(t), "Sun, 06 Dec 2026 16:41:02 GMT");
        assert_eq!(http_date(UNIX_EPOCH), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }
}
