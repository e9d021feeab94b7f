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
pub fn encode_into(event: &Event, out: &mut BytesMut) {
    out.put_slice(b"data: ");
    // Compact JSON never contains a raw CR or LF (both are escaped in strings), so one
    // `data:` line always holds the whole event.
    out.put_slice(event.to_json().as_bytes());
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
        self.buffer.extend_from_slice(bytes);
        if self.pending_len() > MAX_BUFFER {
            return Err(Error::SseFrame(format!(
                "unterminated message exceeds the {} MiB buffer limit",
                MAX_BUFFER / (1024 * 1024)
            )));
        }
        Ok(())
    }

    /// Length of the buffered bytes after the last complete message.
    fn pending_len(&self) -> usize {
        let unread = &self.buffer[self.start..];
        let last_end = unread
            .windows(2)
            .rposition(|pair| pair == b"\n\n")
            .map_or(0, |at| at + 2);
        unread.len() - last_end
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
            let message = String::from_utf8_lossy(&self.buffer[self.start..end]).into_owned();
            self.start = end + 2;
            self.scanned = self.start;
            if let Some(result) = self.decode_message(&message) {
                return Some(result);
            }
        }
    }

    /// Ends the stream: an unterminated last message is decoded, as the client does when
    /// the connection closes.
    pub fn finish(&mut self) -> Option<Result<Event>> {
        let rest = String::from_utf8_lossy(&self.buffer[self.start..]).into_owned();
        self.buffer.clear();
        (self.start, self.scanned) = (0, 0);
        self.decode_message(&rest)
    }

    fn decode_message(&mut self, message: &str) -> Option<Result<Event>> {
        let data: Vec<&str> = message
            .split('\n')
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect();
        if data.is_empty() {
            return None;
        }
        Some(self.decode_data(&data.join("\n")))
    }

    fn decode_data(&mut self, data: &str) -> Result<Event> {
        let value: serde_json::Value = serde_json::from_str(data)
            .map_err(|error| Error::SseFrame(format!("data is not valid JSON: {error}")))?;
        match value.get("type") {
            _ if !value.is_object() => {
                Err(Error::SseFrame("the frame is not a JSON object".to_owned()))
            }
            Some(serde_json::Value::String(name)) if !name.is_empty() => {
                decode_value(value, &mut self.legacy)
            }
            _ => Err(Error::SseFrame(
                "the frame carries no event type".to_owned(),
            )),
        }
    }
}
