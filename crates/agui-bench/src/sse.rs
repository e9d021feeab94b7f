//! The AG-UI HTTP client: POST a `RunAgentInput`, read the SSE stream, time its events.
//!
//! Timing follows the reference benchmark: the clock starts before the request is sent; each
//! event is stamped with the arrival of the network chunk that completed it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agui::{ToolCall, is_terminal, validate};

/// Splits an SSE byte stream into the `data` of its events (pure).
///
/// Events end at a blank line (`\n\n`, after `\r\n` is normalised); the `data:` lines of an
/// event are joined with `\n`; events without data (comments, keep-alives) are skipped.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Feeds a chunk; returns the data of every event it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        if self.buf.contains(&b'\r') {
            self.buf = normalise_newlines(&self.buf);
        }
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(end) = find(&self.buf[start..], b"\n\n") {
            let block = &self.buf[start..start + end];
            start += end + 2;
            let datas: Vec<&[u8]> = block
                .split(|b| *b == b'\n')
                .filter_map(|line| line.strip_prefix(b"data:"))
                .map(|d| d.strip_prefix(b" ").unwrap_or(d))
                .collect();
            if !datas.is_empty() {
                out.push(datas.join(&b'\n'));
            }
        }
        self.buf.drain(..start);
        out
    }

    /// Whether bytes are left that no blank line ended.
    pub(crate) fn has_trailing_bytes(&self) -> bool {
        self.buf.iter().any(|b| !b.is_ascii_whitespace())
    }
}

fn normalise_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // A lone `\r` at the end may be the first half of `\r\n`: keep it for the next chunk.
        if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// How a run ended, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Ok,
    /// The stream broke a rule of [`validate`].
    Invalid,
    RunError,
    HttpError,
    Timeout,
    Exception,
}

/// One run as the client saw it; times are from the start of the request.
#[derive(Debug, Clone)]
pub(crate) struct RunResult {
    pub(crate) status: Status,
    pub(crate) error: Option<String>,
    pub(crate) headers: Option<Duration>,
    pub(crate) first_byte: Option<Duration>,
    pub(crate) run_started: Option<Duration>,
    pub(crate) first_content: Option<Duration>,
    pub(crate) tool_end: Option<Duration>,
    pub(crate) terminal: Option<Duration>,
    pub(crate) terminal_type: Option<String>,
    pub(crate) text: String,
    pub(crate) content_events: usize,
    pub(crate) bytes: usize,
    pub(crate) problems: Vec<String>,
    pub(crate) tool_call: Option<ToolCall>,
    /// `RUN_FINISHED.outcome.pendingToolCallIds`.
    pub(crate) pending_tool_call_ids: Vec<String>,
    /// `RUN_FINISHED.outcome.type`.
    pub(crate) outcome: Option<String>,
}

impl RunResult {
    /// An empty, successful result, for tests that fill in its times.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self::new()
    }

    fn new() -> Self {
        Self {
            status: Status::Ok,
            error: None,
            headers: None,
            first_byte: None,
            run_started: None,
            first_content: None,
            tool_end: None,
            terminal: None,
            terminal_type: None,
            text: String::new(),
            content_events: 0,
            bytes: 0,
            problems: Vec::new(),
            tool_call: None,
            pending_tool_call_ids: Vec::new(),
            outcome: None,
        }
    }

    /// Whether the run succeeded.
    pub(crate) fn ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// A one-line reason for a failed run.
    pub(crate) fn failure(&self) -> String {
        match self.status {
            Status::Ok => "ok".into(),
            Status::Invalid => format!("invalid stream: {}", self.problems.join("; ")),
            _ => self
                .error
                .clone()
                .unwrap_or_else(|| format!("{:?}", self.status)),
        }
    }

    /// Takes note of one event that arrived `at`.
    fn observe(&mut self, event: &Value, at: Duration) {
        let kind = event["type"].as_str().unwrap_or("");
        match kind {
            "RUN_STARTED" => {
                self.run_started.get_or_insert(at);
            }
            "TEXT_MESSAGE_CONTENT" => {
                self.content_events += 1;
                self.text.push_str(event["delta"].as_str().unwrap_or(""));
                self.first_content.get_or_insert(at);
            }
            "TOOL_CALL_START" if self.tool_call.is_none() => {
                self.tool_call = Some(ToolCall {
                    id: event["toolCallId"].as_str().unwrap_or("").into(),
                    name: event["toolCallName"].as_str().unwrap_or("").into(),
                    args: String::new(),
                });
            }
            "TOOL_CALL_ARGS" => {
                if let Some(call) = &mut self.tool_call
                    && event["toolCallId"] == call.id.as_str()
                {
                    call.args.push_str(event["delta"].as_str().unwrap_or(""));
                }
            }
            "TOOL_CALL_END" => {
                self.tool_end.get_or_insert(at);
            }
            kind if is_terminal(kind) => {
                self.terminal.get_or_insert(at);
                self.terminal_type = Some(kind.to_owned());
                if kind == "RUN_ERROR" {
                    self.error = Some(format!(
                        "{}: {}",
                        event["code"].as_str().unwrap_or("-"),
                        truncate(event["message"].as_str().unwrap_or(""), 300)
                    ));
                } else {
                    let outcome = &event["outcome"];
                    self.outcome = outcome["type"].as_str().map(str::to_owned);
                    self.pending_tool_call_ids = outcome["pendingToolCallIds"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                }
            }
            _ => {}
        }
    }
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The HTTP client every workload shares (keep-alive, no Nagle delay, like aiohttp's).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .expect("an HTTP client")
}

/// The owners threads are spread over (`--owners`): their tokens, `o<i>-token`.
static OWNERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Spreads the threads of every run over `owners` owners (0: none).
pub(crate) fn set_owners(owners: usize) {
    let _ = OWNERS.set(owners);
}

/// The servers' `--auth-tokens` value, when threads have owners.
pub(crate) fn owner_tokens() -> Option<String> {
    let owners = OWNERS.get().copied().unwrap_or(0);
    (owners > 0).then(|| {
        (0..owners)
            .map(|i| format!("o{i}={}", token_of(i as u64)))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The token of the first owner, when threads have owners (for workloads that act as one).
pub(crate) fn one_owner_token() -> Option<String> {
    (OWNERS.get().copied().unwrap_or(0) > 0).then(|| token_of(0))
}

fn token_of(owner: u64) -> String {
    format!("o{owner}-bench-token-0123")
}

/// The token of the owner of `thread_id` (a stable choice from its id), when threads have
/// owners.
fn owner_token(thread_id: &str) -> Option<String> {
    let owners = OWNERS.get().copied().unwrap_or(0);
    if owners == 0 {
        return None;
    }
    // FNV-1a: stable across runs and platforms.
    let hash = thread_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    Some(token_of(hash % owners as u64))
}

/// POSTs `body` to `url` and consumes the SSE stream, within `timeout`.
pub(crate) async fn run(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    timeout: Duration,
) -> RunResult {
    let thread_id = body["threadId"].as_str().unwrap_or("").to_owned();
    let run_id = body["runId"].as_str().unwrap_or("").to_owned();
    let data = serde_json::to_vec(body).expect("a JSON body");
    let mut r = RunResult::new();
    let mut events = Vec::new();
    let t0 = Instant::now();
    let outcome = tokio::time::timeout(timeout, async {
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        if let Some(token) = owner_token(&thread_id) {
            request = request.bearer_auth(token);
        }
        let response = request.body(data).send().await?;
        r.headers = Some(t0.elapsed());
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            r.status = Status::HttpError;
            r.error = Some(format!(
                "HTTP {}: {}",
                status.as_u16(),
                truncate(&text, 300)
            ));
            return Ok(());
        }
        let mut parser = SseParser::default();
        let mut response = response;
        while let Some(chunk) = response.chunk().await? {
            let at = t0.elapsed();
            r.first_byte.get_or_insert(at);
            r.bytes += chunk.len();
            for data in parser.push(&chunk) {
                match serde_json::from_slice::<Value>(&data) {
                    Ok(event) => {
                        r.observe(&event, at);
                        events.push(event);
                    }
                    Err(_) => r.problems.push("unparseable SSE data".into()),
                }
            }
        }
        if parser.has_trailing_bytes() {
            r.problems
                .push("trailing bytes without a blank line".into());
        }
        Ok::<(), reqwest::Error>(())
    })
    .await;
    match outcome {
        Err(_) => {
            r.status = Status::Timeout;
            r.error = Some(format!("timeout after {} s", timeout.as_secs_f64()));
        }
        Ok(Err(e)) => {
            r.status = Status::Exception;
            r.error = Some(truncate(&format!("{e:#}"), 300));
        }
        Ok(Ok(())) if r.status == Status::Ok => {
            r.problems.extend(validate(&events, &thread_id, &run_id));
            r.status = if !r.problems.is_empty() {
                Status::Invalid
            } else if r.terminal_type.as_deref() == Some("RUN_ERROR") {
                Status::RunError
            } else {
                Status::Ok
            };
        }
        Ok(Ok(())) => {}
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(parser: &mut SseParser, chunk: &str) -> Vec<String> {
        parser
            .push(chunk.as_bytes())
            .into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect()
    }

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let mut p = SseParser::default();
        assert!(texts(&mut p, "data: {\"a\"").is_empty());
        assert_eq!(texts(&mut p, ":1}\n\ndata: 2\n"), ["{\"a\":1}"]);
        assert!(p.has_trailing_bytes());
        assert_eq!(texts(&mut p, "\n"), ["2"]);
        assert!(!p.has_trailing_bytes());
    }

    #[test]
    fn comments_crlf_and_multiline_data() {
        let mut p = SseParser::default();
        assert_eq!(
            texts(
                &mut p,
                ": keep-alive\n\nevent: x\ndata: a\ndata:b\r\n\r\ndata: c\r"
            ),
            ["a\nb"]
        );
        // The `\r` of a split `\r\n` waits for its `\n`.
        assert_eq!(texts(&mut p, "\n\r\n"), ["c"]);
    }

    #[test]
    fn events_fill_the_run_result() {
        let mut r = RunResult::new();
        let at = Duration::from_millis;
        r.observe(&json!({"type": "RUN_STARTED"}), at(1));
        r.observe(
            &json!({"type": "TEXT_MESSAGE_CONTENT", "delta": "a "}),
            at(5),
        );
        r.observe(
            &json!({"type": "TEXT_MESSAGE_CONTENT", "delta": "b"}),
            at(6),
        );
        r.observe(
            &json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "t"}),
            at(7),
        );
        r.observe(
            &json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"}),
            at(7),
        );
        r.observe(
            &json!({"type": "TOOL_CALL_ARGS", "toolCallId": "x", "delta": "no"}),
            at(7),
        );
        r.observe(&json!({"type": "TOOL_CALL_END", "toolCallId": "c"}), at(8));
        r.observe(
            &json!({"type": "RUN_FINISHED", "outcome": {"type": "success", "pendingToolCallIds": ["c"]}}),
            at(9),
        );
        assert_eq!(r.run_started, Some(at(1)));
        assert_eq!(r.first_content, Some(at(5)));
        assert_eq!(r.text, "a b");
        assert_eq!(r.content_events, 2);
        assert_eq!(r.tool_call.as_ref().unwrap().args, "{}");
        assert_eq!(r.tool_end, Some(at(8)));
        assert_eq!(r.terminal, Some(at(9)));
        assert_eq!(r.pending_tool_call_ids, ["c"]);
        assert_eq!(r.outcome.as_deref(), Some("success"));
        let mut e = RunResult::new();
        e.observe(
            &json!({"type": "RUN_ERROR", "code": "X", "message": "m"}),
            at(2),
        );
        assert_eq!(e.error.as_deref(), Some("X: m"));
    }
}
