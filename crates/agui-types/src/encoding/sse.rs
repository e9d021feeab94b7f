//! SSE encoding: `data: <compact JSON>\n\n` per event.
//!
//! The decoder frames messages exactly like `@ag-ui/client`: messages end at `"\n\n"` only
//! (a CRLF-framed stream is not split), `data:` lines are joined with `\n`, other fields and
//! `:` comments are ignored, and a message buffer over 10 MiB fails the stream.

use bytes::{BufMut, BytesMut};

use crate::error::{Error, Result};
use crate::events::{Event, LegacyThinking, decode_value};

/// Largest unterminated message buffer the decoder accepts (the client's limit).
pub const MAX_BUFFER: usize = 10 * 1024 * 1024;

/// The SSE message carrying `event`: `data: {…}\n\n`.
pub fn encode(event: &Event) -> String {
    format!("data: {}\n\n", event.to_json())
}

/// Appends the SSE message carrying `event` to `out`.
///
/// The JSON is written straight into `out` (no intermediate string): this runs once per
/// event a server sends.
pub fn encode_into(event: &Event, out: &mut BytesMut) {
    out.put_slice(b"data: ");
    // Compact JSON never contains a raw CR or LF (both are escaped in strings), so one
    // `data:` line always holds the whole event. Writing to a BytesMut cannot fail, and
    // neither can serializing an event (see `Event::to_json`).
    serde_json::to_writer(out.writer(), event).expect("AG-UI events always serialize to JSON");
    out.put_slice(b"\n\n");
}

/// Decodes a whole SSE body (see [`SseDecoder`]); stops at the first error.
pub fn decode_all(body: &[u8]) -> Result<Vec<Event>> {
    let mut decoder = SseDecoder::new();
    decoder.push(body)?;
    let mut events = Vec::new();
    while let Some(event) = decoder.next_event() {
        events.push(event?);
    }
    if let Some(event) = decoder.finish() {
        events.push(event?);
    }
    Ok(events)
}

/// Incremental SSE decoder: feed bytes with [`push`](Self::push), take events with
/// [`next_event`](Self::next_event), call [`finish`](Self::finish) at end of stream.
///
/// Errors about one message ([`Error::UnknownEventType`], an invalid event) do not poison the
/// decoder; the next call moves on to the next message.
#[derive(Debug)]
pub struct SseDecoder {
    buffer: Vec<u8>,
    /// Start of the first message not yet returned.
    start: usize,
    /// Everything before this index (and after `start`) holds no message terminator.
    scanned: usize,
    /// Bytes after the last message terminator pushed: the unterminated message checked
    /// against [`MAX_BUFFER`], kept up to date by each push so none rescans the buffer.
    unterminated: usize,
    legacy: LegacyThinking,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self {
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            unterminated: 0,
            legacy: LegacyThinking::streaming(),
        }
    }

    /// Appends received bytes. Fails when an unterminated message exceeds [`MAX_BUFFER`].
    pub fn push(&mut self, bytes: &[u8]) -> Result<()> {
        // Returned messages are dropped lazily so that taking events stays linear.
        if self.start > 0 && self.start * 2 >= self.buffer.len() {
            self.buffer.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        // Only the new bytes (and the one before them, for a terminator split across
        // pushes) can hold a new terminator.
        let from = self.buffer.len().saturating_sub(1).max(self.start);
        self.buffer.extend_from_slice(bytes);
        self.unterminated = match self.buffer[from..]
            .windows(2)
            .rposition(|pair| pair == b"\n\n")
        {
            Some(at) => self.buffer.len() - (from + at + 2),
            None => self.unterminated + bytes.len(),
        };
        if self.unterminated > MAX_BUFFER {
            return Err(Error::SseFrame(format!(
                "unterminated message exceeds the {} MiB buffer limit",
                MAX_BUFFER / (1024 * 1024)
            )));
        }
        Ok(())
    }

    /// The next complete event, if a whole message is buffered. Messages without `data:`
    /// lines (comments, keep-alives) are skipped.
    pub fn next_event(&mut self) -> Option<Result<Event>> {
        loop {
            // A terminator may straddle the previous scan's end.
            let from = self.start.max(self.scanned.saturating_sub(1));
            let Some(offset) = self.buffer[from..].windows(2).position(|p| p == b"\n\n") else {
                self.scanned = self.buffer.len();
                return None;
            };
            let end = from + offset;
            let message = &self.buffer[self.start..end];
            let decoded = decode_message(message, &mut self.legacy);
            self.start = end + 2;
            self.scanned = self.start;
            if let Some(result) = decoded {
                return Some(result);
            }
        }
    }

    /// Ends the stream: an unterminated last message is decoded, as the client does when
    /// the connection closes.
    pub fn finish(&mut self) -> Option<Result<Event>> {
        let decoded = decode_message(&self.buffer[self.start..], &mut self.legacy);
        self.buffer.clear();
        (self.start, self.scanned, self.unterminated) = (0, 0, 0);
        decoded
    }
}

/// Decodes one message (the bytes between terminators); `None` when it has no `data:` line.
fn decode_message(message: &[u8], legacy: &mut LegacyThinking) -> Option<Result<Event>> {
    let message = String::from_utf8_lossy(message);
    let data: Vec<&str> = message
        .split('\n')
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| data.strip_prefix(' ').unwrap_or(data))
        .collect();
    match data.as_slice() {
        [] => None,
        // One `data:` line per event is what servers send; only more lines need joining.
        [line] => Some(decode_data(line, legacy)),
        lines => Some(decode_data(&lines.join("\n"), legacy)),
    }
}

fn decode_data(data: &str, legacy: &mut LegacyThinking) -> Result<Event> {
    let value: serde_json::Value = serde_json::from_str(data)
        .map_err(|error| Error::SseFrame(format!("data is not valid JSON: {error}")))?;
    match value.get("type") {
        _ if !value.is_object() => {
            Err(Error::SseFrame("the frame is not a JSON object".to_owned()))
        }
        Some(serde_json::Value::String(name)) if !name.is_empty() => decode_value(value, legacy),
        _ => Err(Error::SseFrame(
            "the frame carries no event type".to_owned(),
        )),
    }
}
