//! `PUT` of a file: the body streamed to a new file under a temporary name beside the target,
//! then renamed over it (readers see the old content or the new, never a part), the missing
//! parent directories made on the way. The owner's tree stays within `workspace_max_mb`: an
//! upload that would take it past is refused (413), before anything is made when the body's
//! length says so, else as soon as it passes; either way nothing is left behind (the temporary
//! file and the directories the upload made are removed).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use harness_client::sandbox::{EntryKind, SandboxError, TempName};
use tokio::sync::mpsc;

use super::{Op, Target, Uploading, entry_json};
use crate::endpoint::reject;

/// Chunks of the body waiting for the writer at most.
const AHEAD: usize = 8;

/// How much of a refused body is read (and dropped) before the answer, so the client reads the
/// 413 instead of a reset connection; past it the connection is closed.
const DRAIN_BYTES: u64 = 64 << 20;

/// How long a refused body is read at most.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// The disk a file of `len` bytes takes, counted as whole 4 KiB blocks.
fn allocated(len: u64) -> u64 {
    len.div_ceil(4096) * 4096
}

/// What the writer is told.
enum Chunk {
    Data(Bytes),
    /// The body ended: make the file durable and publish it.
    Commit,
}

/// Where the upload stands before its body is read.
struct Prepared {
    /// What the target had (it is replaced), or nothing.
    existed: bool,
    /// What may be written at most (`None`: no cap).
    limit: Option<u64>,
}

/// Serves a `PUT`.
pub(super) async fn put(target: Target, headers: &HeaderMap, body: Body) -> Response {
    let metrics = target.files.metrics.clone();
    if target.rel.as_os_str().is_empty() {
        return reject(
            &metrics,
            StatusCode::CONFLICT,
            "conflict",
            "the workspace itself is a directory; name a file below it".into(),
        );
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    let prepared = match target.blocking(prepare).await {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(e)) => return target.door_error(Op::Write, e),
        Err(response) => return response,
    };
    // Counted from here until the upload is written or undone: the room is shared with the
    // other uploads in flight to the same tree.
    let mut uploading = Uploading::new(&target);
    let room = |uploading: &Uploading| {
        prepared
            .limit
            .map(|limit| limit.saturating_sub(uploading.others()))
    };
    if let (Some(limit), Some(declared)) = (room(&uploading), declared)
        && allocated(declared) > limit
    {
        tracing::info!(thread_id = %target.thread_id, declared, limit, "refused an upload past the disk cap before reading it");
        // A client waiting for `100 Continue` has sent nothing yet, and never will.
        let waits = headers
            .get(header::EXPECT)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim().eq_ignore_ascii_case("100-continue"));
        let rest = body
            .into_data_stream()
            .take(if waits { 0 } else { usize::MAX });
        return too_large(&target, rest, declared).await;
    }
    // The parents and the temporary file, made now; what is made is undone on any failure.
    let made = target
        .blocking(
            |ws, rel| -> Result<(Vec<PathBuf>, _), (Vec<PathBuf>, SandboxError)> {
                let made = make_parents(ws.dir(), rel)?;
                match ws.dir().create_temp_for(rel) {
                    Ok(temp) => Ok((made, temp)),
                    Err(e) => Err((made, e)),
                }
            },
        )
        .await;
    let (made, (file, temp)) = match made {
        Ok(Ok(made)) => made,
        Ok(Err((made, e))) => {
            undo(&target, made).await;
            return target.door_error(Op::Write, e);
        }
        Err(response) => return response,
    };
    let (tx, rx) = mpsc::channel::<Chunk>(AHEAD);
    let writer = tokio::task::spawn_blocking(move || write(file, |file| file.sync_all(), temp, rx));
    let mut data = body.into_data_stream();
    let mut written = 0u64;
    let outcome = loop {
        let Some(frame) = data.next().await else {
            break Ok(());
        };
        let chunk = match frame {
            Ok(chunk) => chunk,
            Err(e) => break Err(Stop::Body(e.to_string())),
        };
        written += chunk.len() as u64;
        uploading.grow(chunk.len() as u64);
        if room(&uploading).is_some_and(|limit| allocated(written) > limit) {
            break Err(Stop::TooLarge);
        }
        if tx.send(Chunk::Data(chunk)).await.is_err() {
            // The writer failed: its error says why.
            break Ok(());
        }
    };
    if matches!(outcome, Err(Stop::TooLarge)) {
        // Refused: its room goes back to the other uploads at once, not once its body is read.
        drop(uploading);
    }
    let committed = match outcome {
        Ok(()) => tx.send(Chunk::Commit).await.is_ok(),
        Err(_) => false,
    };
    drop(tx);
    let written_out = writer.await;
    match (outcome, written_out) {
        (Ok(()), Ok(Ok(Some(())))) if committed => {}
        (Err(Stop::TooLarge), _) => {
            undo(&target, made).await;
            tracing::info!(thread_id = %target.thread_id, written, "refused an upload past the disk cap");
            return too_large(&target, data, written).await;
        }
        (Err(Stop::Body(why)), _) => {
            undo(&target, made).await;
            return reject(
                &metrics,
                StatusCode::BAD_REQUEST,
                "incomplete body",
                format!(
                    "the upload's body could not be read to its end ({why}); nothing was written"
                ),
            );
        }
        (_, Ok(Err(e))) => {
            undo(&target, made).await;
            return target.door_error(Op::Write, e);
        }
        (_, Err(e)) => {
            undo(&target, made).await;
            return target.failed("the upload could not be written", &e);
        }
        (Ok(()), Ok(Ok(_))) => {
            undo(&target, made).await;
            return target.failed("the upload could not be written", &"the writer stopped");
        }
    }
    let stat = target.blocking(|ws, rel| ws.dir().stat(rel)).await;
    let entry = match stat {
        Ok(Ok(entry)) => entry,
        Ok(Err(e)) => return target.door_error(Op::Write, e),
        Err(response) => return response,
    };
    tracing::info!(thread_id = %target.thread_id, path = %target.rel.display(), bytes = written, replaced = prepared.existed, "wrote a file of a thread's workspace");
    target.workspace.changed();
    let status = if prepared.existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    (status, axum::Json(entry_json(&entry))).into_response()
}

/// Why the body stopped being written.
enum Stop {
    /// It would take the tree past its cap.
    TooLarge,
    /// It could not be read (the client went away).
    Body(String),
}

/// Measures the room left under the cap and looks at the target: a directory there, or a link
/// or a file on the way, is refused before anything is made.
fn prepare(ws: &agui_session::ThreadWorkspace, rel: &Path) -> Result<Prepared, SandboxError> {
    let room = match ws.max_bytes() {
        Some(cap) => {
            let usage = ws.tree_usage()?;
            // A tree too deep to measure counts as full.
            Some(if usage.too_deep {
                0
            } else {
                cap.saturating_sub(usage.bytes)
            })
        }
        None => None,
    };
    let (existed, freed) = match ws.dir().stat(rel) {
        Ok(entry) if entry.kind == EntryKind::Dir => {
            return Err(SandboxError::Refused {
                path: PathBuf::new(),
                why: harness_client::sandbox::Refusal::NotARegularFile,
            });
        }
        // Replaced: its blocks come back (a hard-linked file's stay with its other name).
        Ok(entry) if entry.kind == EntryKind::File && entry.links == 1 => (true, entry.disk_bytes),
        Ok(_) => (true, 0),
        Err(SandboxError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            (false, 0)
        }
        Err(e) => return Err(e),
    };
    Ok(Prepared {
        existed,
        limit: room.map(|room| room.saturating_add(freed)),
    })
}

/// Makes the missing directories on the way to `rel`, one component at a time (a link or a
/// file on the way is refused); the ones it made, outermost first.
fn make_parents(
    dir: &harness_client::sandbox::AgentDir,
    rel: &Path,
) -> Result<Vec<PathBuf>, (Vec<PathBuf>, SandboxError)> {
    let mut made = Vec::new();
    let mut prefix = PathBuf::new();
    let parents: Vec<_> = rel
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for component in parents {
        prefix.push(component);
        match dir.create_dir(&prefix) {
            Ok(true) => made.push(prefix.clone()),
            Ok(false) => {}
            Err(e) => return Err((made, e)),
        }
        // Something of that name was there: it must be a real directory.
        if let Err(e) = dir.dir(&prefix) {
            return Err((made, e));
        }
    }
    Ok(made)
}

/// Writes what arrives into `file`; on `Commit`, makes it durable (`sync`) and renames it to
/// its name. `Ok(None)` when the body stopped before its end (the temporary file is removed).
fn write<F: Write>(
    mut file: F,
    sync: impl FnOnce(&F) -> std::io::Result<()>,
    temp: TempName,
    mut rx: mpsc::Receiver<Chunk>,
) -> Result<Option<()>, SandboxError> {
    let io = |source| SandboxError::Io {
        action: "write the upload".into(),
        source,
    };
    while let Some(chunk) = rx.blocking_recv() {
        match chunk {
            Chunk::Data(data) => {
                if let Err(e) = file.write_all(&data) {
                    temp.discard();
                    return Err(io(e));
                }
            }
            Chunk::Commit => {
                if let Err(e) = file.flush().and_then(|()| sync(&file)) {
                    temp.discard();
                    return Err(io(e));
                }
                return temp.publish().map(Some);
            }
        }
    }
    temp.discard();
    Ok(None)
}

/// Removes the directories an upload made, innermost first (each only if still empty).
async fn undo(target: &Target, made: Vec<PathBuf>) {
    if made.is_empty() {
        return;
    }
    let _ = target
        .blocking(move |ws, _| {
            for dir in made.iter().rev() {
                if let Err(e) = ws.dir().remove_empty_dir(dir) {
                    tracing::debug!(dir = %dir.display(), error = %e, "left a directory an upload made");
                }
            }
        })
        .await;
}

/// 413, once the rest of the body is read (up to a bound) so the client gets the answer.
async fn too_large<E>(
    target: &Target,
    mut data: impl futures_util::Stream<Item = Result<Bytes, E>> + Unpin,
    size: u64,
) -> Response {
    let mut drained = 0u64;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while drained < DRAIN_BYTES
            && let Some(Ok(chunk)) = data.next().await
        {
            drained += chunk.len() as u64;
        }
    })
    .await;
    let cap = target.workspace.max_bytes().unwrap_or_default();
    reject(
        &target.files.metrics,
        StatusCode::PAYLOAD_TOO_LARGE,
        "workspace full",
        format!(
            "the upload ({} or more) would take the workspace past its {} MiB limit (workspace_max_mb); nothing was written",
            human(size),
            cap >> 20
        ),
    )
}

/// A size for people: bytes, or MiB with one decimal.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        let tenths = bytes * 10 / (1 << 20);
        format!("{}.{} MiB", tenths / 10, tenths % 10)
    } else {
        format!("{bytes} bytes")
    }
}
