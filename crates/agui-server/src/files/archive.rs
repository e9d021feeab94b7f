//! `GET <dir>?archive=zip`: a directory of a workspace as a zip, written as it is walked
//! (through the door) and streamed to the client a few chunks ahead, whatever its size.
//! Regular files with a single link and directories only: links, special files and files
//! with several hard links are left out.

use std::io::Write;
use std::path::Path;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use harness_client::sandbox::{EntryKind, SandboxError};
use tokio::sync::mpsc;
use zip::write::SimpleFileOptions;

use super::{Target, civil, unix_secs};

/// How much of the archive is sent at once.
const CHUNK: usize = 64 * 1024;

/// Chunks written ahead of the client at most.
const AHEAD: usize = 4;

/// The archive of the target directory, streamed.
pub(super) fn zip(target: Target) -> Response {
    let name = target.rel.file_name().map_or_else(
        || target.thread_id.clone(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(AHEAD);
    let (workspace, rel, thread_id) = (
        target.workspace.clone(),
        target.rel.clone(),
        target.thread_id.clone(),
    );
    tokio::task::spawn_blocking(move || {
        let mut out = Sender {
            tx: tx.clone(),
            buffer: Vec::with_capacity(CHUNK),
        };
        let written = write_zip(workspace.dir(), &rel, &mut out);
        match written {
            Ok(entries) => {
                tracing::info!(%thread_id, path = %rel.display(), entries, "sent a workspace directory as a zip");
            }
            Err(e) => {
                // The body ends with an error: the client never takes a cut archive for whole.
                tracing::warn!(%thread_id, path = %rel.display(), error = %e, "a zip of a workspace directory was cut short");
                let _ = tx.blocking_send(Err(std::io::Error::other(
                    "the archive could not be completed",
                )));
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/zip")
        .header(
            header::CONTENT_DISPOSITION,
            super::download::disposition(&format!("{name}.zip"), false),
        )
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::CACHE_CONTROL, "no-store")
        .body(body)
        .unwrap_or_else(|e| target.failed("a response could not be made", &e))
}

/// Writes the zip of `rel` below `dir` to `out`; how many entries it holds.
fn write_zip(
    dir: &harness_client::sandbox::AgentDir,
    rel: &Path,
    out: &mut Sender,
) -> std::io::Result<usize> {
    let mut zip = zip::ZipWriter::new_stream(&mut *out);
    let mut entries = 0;
    for found in dir.walk(rel).map_err(std::io::Error::other)? {
        let found = found.map_err(std::io::Error::other)?;
        let name = found.rel.to_string_lossy().into_owned();
        let options = SimpleFileOptions::default()
            .last_modified_time(zip_time(found.entry.modified))
            .large_file(found.entry.len >= 0xFFFF_FFFF);
        match found.entry.kind {
            EntryKind::Dir => {
                zip.add_directory(name, options.unix_permissions(0o755))
                    .map_err(std::io::Error::other)?;
            }
            EntryKind::File if found.entry.links == 1 => {
                let mut file = match dir.open_file(&rel.join(&found.rel)) {
                    Ok((file, _)) => file,
                    // Replaced by a link, a FIFO or a hard link since the walk: left out too.
                    Err(SandboxError::Refused { .. }) => continue,
                    Err(SandboxError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        continue;
                    }
                    Err(e) => return Err(std::io::Error::other(e)),
                };
                zip.start_file(
                    name,
                    options
                        .compression_method(zip::CompressionMethod::Deflated)
                        .compression_level(Some(1))
                        .unix_permissions(0o644),
                )
                .map_err(std::io::Error::other)?;
                std::io::copy(&mut file, &mut zip)?;
            }
            _ => continue,
        }
        entries += 1;
    }
    zip.finish().map_err(std::io::Error::other)?;
    out.flush()?;
    Ok(entries)
}

/// A zip timestamp (local time as written, here UTC); 1980 for anything earlier.
fn zip_time(time: std::time::SystemTime) -> zip::DateTime {
    let (year, month, day, hour, minute, second, _) = civil(unix_secs(time));
    u16::try_from(year)
        .ok()
        .and_then(|year| {
            zip::DateTime::from_date_and_time(
                year,
                u8::try_from(month).ok()?,
                u8::try_from(day).ok()?,
                u8::try_from(hour).ok()?,
                u8::try_from(minute).ok()?,
                u8::try_from(second).ok()?,
            )
            .ok()
        })
        .unwrap_or_default()
}

/// The archive's bytes, handed to the response in chunks.
struct Sender {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    buffer: Vec<u8>,
}

impl Sender {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK));
        self.tx.blocking_send(Ok(Bytes::from(chunk))).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}

impl Write for Sender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(CHUNK - self.buffer.len());
        self.buffer
            .extend_from_slice(data.get(..n).unwrap_or_default());
        if self.buffer.len() >= CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
