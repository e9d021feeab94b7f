//! The two wire encodings of an event stream and how to choose between them.
//!
//! * [`sse`]: `text/event-stream`, one `data: <compact JSON>\n\n` message per event (LF only,
//!   no `event:` lines) — what `HttpAgent` asks for.
//! * [`protobuf`]: `application/vnd.ag-ui.event+proto`, each event a 4-byte big-endian length
//!   followed by an `ag_ui.Event` message.

pub mod protobuf;
pub mod sse;

use bytes::{Bytes, BytesMut};

use crate::events::Event;

/// Content type of an SSE response.
pub const SSE_CONTENT_TYPE: &str = "text/event-stream";

/// Content type of a protobuf response. The client selects its binary parser only on this
/// exact string, so send it without parameters.
pub const PROTO_CONTENT_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// Initial buffer of one SSE frame: most events (text and argument deltas) fit.
const SSE_INITIAL_CAPACITY: usize = 256;

/// A wire encoding of an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// Server-sent events (the default).
    #[default]
    Sse,
    /// Length-prefixed protobuf.
    Protobuf,
}

impl Encoding {
    /// Picks the encoding for a request's `Accept` header.
    ///
    /// Protobuf only when the header explicitly lists [`PROTO_CONTENT_TYPE`] with `q > 0` and
    /// at least the weight it gives `text/event-stream`; everything else — no header, `*/*`,
    /// `application/*`, SSE, garbage — gets SSE. This is deliberately stricter than
    /// `@ag-ui/encoder`, which answers binary to `*/*` (curl's default).
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Self::Sse;
        };
        let mut proto_q: Option<f32> = None;
        let mut sse_q: f32 = 0.0;
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|param| param.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, value)| value.trim().parse::<f32>().ok())
                .filter(|q| q.is_finite());
            let Some(q) = q else { continue };
            if media.eq_ignore_ascii_case(PROTO_CONTENT_TYPE) {
                proto_q = Some(proto_q.map_or(q, |seen| seen.max(q)));
            } else if media.eq_ignore_ascii_case(SSE_CONTENT_TYPE) {
                sse_q = sse_q.max(q);
            }
        }
        match proto_q {
            Some(q) if q > 0.0 && q >= sse_q => Self::Protobuf,
            _ => Self::Sse,
        }
    }

    /// The response `Content-Type`.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::Sse => SSE_CONTENT_TYPE,
            Self::Protobuf => PROTO_CONTENT_TYPE,
        }
    }

    /// Bytes that keep an idle connection open without carrying an event: an SSE comment
    /// (ignored by the client). Protobuf streams have no such frame.
    pub const fn keep_alive(self) -> Option<&'static [u8]> {
        match self {
            Self::Sse => Some(b": keep-alive\n\n"),
            Self::Protobuf => None,
        }
    }

    /// Appends one encoded event to `out`.
    pub fn encode_into(self, event: &Event, out: &mut BytesMut) {
        match self {
            Self::Sse => sse::encode_into(event, out),
            Self::Protobuf => protobuf::encode_frame_into(event, out),
        }
    }

    /// One encoded event, ready to write to the response body.
    pub fn encode(self, event: &Event) -> Bytes {
        match self {
            // Room for a typical event up front (the JSON is written in small pieces);
            // a protobuf frame reserves its exact size itself.
            Self::Sse => {
                let mut out = BytesMut::with_capacity(SSE_INITIAL_CAPACITY);
                sse::encode_into(event, &mut out);
                out.freeze()
            }
            Self::Protobuf => Bytes::from(protobuf::encode_frame(event)),
        }
    }

    /// Decodes a complete response body in this encoding.
    pub fn decode_all(self, body: &[u8]) -> crate::Result<Vec<Event>> {
        match self {
            Self::Sse => sse::decode_all(body),
            Self::Protobuf => protobuf::decode_all(body),
        }
    }
}
