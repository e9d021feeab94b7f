//! The harness's stderr: read line by line, logged by severity, its tail kept for errors and
//! its "no space left on device" lines counted.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::broadcast;

/// The harness's stderr: every line goes to `tracing`, the last ones are kept for errors, and
/// listeners can watch new lines (init failures are only explained there).
pub(super) struct StderrLog {
    lines: Mutex<VecDeque<String>>,
    capacity: usize,
    live: broadcast::Sender<String>,
    /// Lines saying a write of the harness failed for want of room (`ENOSPC`).
    pub(super) storage_full: std::sync::atomic::AtomicU64,
}

/// How the harness reports a write that failed for want of room (Go's text for `ENOSPC`).
const NO_SPACE: &str = "no space left on device";

impl StderrLog {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            lines: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            live: broadcast::channel(256).0,
            storage_full: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(super) fn push(&self, line: String) {
        if line.contains(NO_SPACE) {
            self.storage_full
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let mut lines = self.lines.lock();
        if lines.len() == self.capacity {
            lines.pop_front();
        }
        lines.push_back(line.clone());
        drop(lines);
        let _ = self.live.send(line);
    }

    /// The kept lines, oldest first.
    pub(super) fn tail(&self) -> String {
        let lines = self.lines.lock();
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// New lines from now on.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<String> {
        self.live.subscribe()
    }
}

pub(super) async fn drain_stderr(stderr: tokio::process::ChildStderr, log: Arc<StderrLog>) {
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                if let Some(known) = crate::known_lines::recognise(&line) {
                    tracing::debug!(target: "localharness", known, "{line}");
                    log.push(line);
                    continue;
                }
                match glog_severity(&line) {
                    Some('I') => tracing::debug!(target: "localharness", "{line}"),
                    Some('E' | 'F') => tracing::warn!(target: "localharness", "{line}"),
                    // Plain lines carry the harness's own explanations (`Failed to create
                    // agent: …`); glog warnings are mostly tool failures the model also sees.
                    _ => tracing::info!(target: "localharness", "{line}"),
                }
                log.push(line);
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "stopped reading harness stderr");
                break;
            }
        }
    }
}

/// The glog severity letter (`I`, `W`, `E`, `F`) of a harness stderr line, if it is a glog line.
/// Most carry the prefix "ERROR: logging before google.Init: " whatever their real severity, so
/// the letter after it is what counts; plain lines are not glog output.
fn glog_severity(line: &str) -> Option<char> {
    let line = line
        .strip_prefix("ERROR: logging before google.Init: ")
        .unwrap_or(line);
    let mut chars = line.chars();
    let level = chars
        .next()
        .filter(|c| matches!(c, 'I' | 'W' | 'E' | 'F'))?;
    let date = chars.take(4).filter(char::is_ascii_digit).count();
    (date == 4).then_some(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_lines_saying_a_write_met_a_full_disk_are_counted() {
        let log = StderrLog::new(2);
        for line in [
            "E1206 10:01:02.1 41 errorreport.go:224] write /save/x.db-wal: no space left on device",
            "I1206 10:01:02.2 41 server.go:10] serving",
            "W1206 10:01:03.0 41 log.go:5] open /home/.gemini/log: no space left on device",
        ] {
            log.push(line.to_owned());
        }
        assert_eq!(
            log.storage_full.load(std::sync::atomic::Ordering::SeqCst),
            2
        );
    }

    #[test]
    fn stderr_lines_are_classified_by_their_glog_letter() {
        let cases = [
            (
                "ERROR: logging before google.Init: I1130 06:15:56.424380      28 auth_store.go:136] Using file-based secret storage",
                Some('I'),
            ),
            (
                "ERROR: logging before google.Init: E1130 06:16:55.707498      39 stream_handler.go:107] error encountered",
                Some('E'),
            ),
            (
                "W1130 06:27:39.493502     116 executor.go:234] error executing",
                Some('W'),
            ),
            ("Invalid policy config: rule ask", None),
            (
                "Failed to create agent: conversation \"f\" not found (cannot resume)",
                None,
            ),
            ("I", None),
            ("", None),
        ];
        for (line, expected) in cases {
            assert_eq!(glog_severity(line), expected, "{line}");
        }
    }
}
