//! Protobuf encoding (`application/vnd.ag-ui.event+proto`): each event is a 4-byte
//! big-endian length followed by a serialized `ag_ui.Event`.
//!
//! The mapping follows `@ag-ui/proto` 1.0: `base_event` is always present and its `type`
//! names the envelope arm; `timestamp`/`rawEvent`/`metadata` live in it; `RUN_FINISHED` and
//! `SUBAGENT_FINISHED` outcomes are flattened into a type string plus lists; string content
//! travels in `content` and part lists in `content_parts`; JSON payloads are
//! `google.protobuf.Value`s, so numbers become doubles (integers beyond 2^53 lose precision,
//! as in JavaScript).

mod content;
mod events;
mod messages;
mod value;

use bytes::{BufMut, BytesMut};
use prost::Message as _;

use crate::error::{Error, Result};
use crate::event_list::event_list;
use crate::events::*;
use crate::proto as pb;
use events::ProtoPayload;

/// Largest frame the decoder accepts (the client's limit).
pub const MAX_FRAME: usize = 10 * 1024 * 1024;

macro_rules! proto_dispatch {
    ($( $(#[$doc:meta])* $variant:ident($payload:ident) = $wire:literal, )*) => {
        /// The `ag_ui.Event` envelope of `event`.
        pub fn to_proto(event: &Event) -> pb::Event {
            let arm = match event {
                $( Event::$variant(e) => pb::event::Event::$variant(
                    e.to_proto(base_to_pb(&e.base, pb::EventType::$variant)),
                ), )*
            };
            pb::Event { event: Some(arm) }
        }

        fn arm_from_proto(arm: pb::event::Event) -> Result<Event> {
            Ok(match arm {
                $( pb::event::Event::$variant(mut p) => {
                    let base = base_from_pb(p.base_event.take(), pb::EventType::$variant)?;
                    Event::$variant(<$payload as ProtoPayload>::from_proto(p, base)?)
                } )*
            })
        }
    };
}

event_list!(proto_dispatch);

fn base_to_pb(base: &EventBase, event_type: pb::EventType) -> pb::BaseEvent {
    pb::BaseEvent {
        r#type: event_type as i32,
        timestamp: base.timestamp,
        raw_event: value::opt_to_pb(&base.raw_event),
        metadata: base.metadata.as_ref().map(value::to_pb_struct),
    }
}

fn base_from_pb(base: Option<pb::BaseEvent>, arm: pb::EventType) -> Result<EventBase> {
    let base =
        base.ok_or_else(|| Error::ProtoEvent(format!("{} without base_event", arm.as_str_name())))?;
    if base.r#type != arm as i32 {
        let declared = pb::EventType::try_from(base.r#type)
            .map_or_else(|_| base.r#type.to_string(), |t| t.as_str_name().to_owned());
        return Err(Error::ProtoEvent(format!(
            "envelope carries {} but base_event declares {declared}",
            arm.as_str_name()
        )));
    }
    Ok(EventBase {
        timestamp: base.timestamp,
        raw_event: value::opt_from_pb(base.raw_event),
        metadata: base.metadata.map(value::from_pb_struct),
    })
}

/// Converts a decoded `ag_ui.Event` envelope into an event.
pub fn from_proto(envelope: pb::Event) -> Result<Event> {
    match envelope.event {
        Some(arm) => arm_from_proto(arm),
        None => Err(Error::ProtoEvent(
            "the envelope carries no event".to_owned(),
        )),
    }
}

/// The serialized `ag_ui.Event` of `event`, without length prefix.
pub fn encode(event: &Event) -> Vec<u8> {
    to_proto(event).encode_to_vec()
}

/// Appends the length-prefixed frame of `event` to `out`.
pub fn encode_frame_into(event: &Event, out: &mut BytesMut) {
    let message = to_proto(event);
    let len = message.encoded_len();
    out.reserve(4 + len);
    put_frame(&message, len, out);
}

/// The length-prefixed frame of `event`.
pub fn encode_frame(event: &Event) -> Vec<u8> {
    let message = to_proto(event);
    let len = message.encoded_len();
    let mut out = Vec::with_capacity(4 + len);
    put_frame(&message, len, &mut out);
    out
}

/// Writes the prefix and the message straight into `out` (once per event a server sends, so
/// without an intermediate buffer); `len` is `message.encoded_len()`.
fn put_frame(message: &pb::Event, len: usize, out: &mut impl BufMut) {
    // A frame over 4 GiB cannot be produced from a sane event; saturating keeps the encoder
    // total, and every decoder rejects such a frame anyway (10 MiB limit).
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Fails only when `out` cannot grow, and Vec and BytesMut always can.
    message
        .encode(out)
        .expect("growable buffers have room for any message");
}

/// A payload that cannot be mapped to an AG-UI event.
fn bad(message: impl Into<String>) -> Error {
    Error::ProtoEvent(message.into())
}

/// Decodes one serialized `ag_ui.Event` (without length prefix).
///
/// An envelope whose only field is an arm this schema does not know (a newer protocol's
/// event) is [`Error::UnknownEventType`], which callers may skip.
pub fn decode(message: &[u8]) -> Result<Event> {
    let envelope = pb::Event::decode(message)?;
    if envelope.event.is_none() && !message.is_empty() {
        let mut rest = message;
        let field = prost::encoding::decode_key(&mut rest).map_or(0, |(tag, _)| tag);
        return Err(Error::UnknownEventType(format!(
            "protobuf envelope field {field}"
        )));
    }
    from_proto(envelope)
}

/// Decodes a whole body of length-prefixed frames; stops at the first error.
pub fn decode_all(body: &[u8]) -> Result<Vec<Event>> {
    let mut decoder = ProtoDecoder::new();
    decoder.push(body);
    let mut events = Vec::new();
    while let Some(event) = decoder.next_event() {
        events.push(event?);
    }
    decoder.finish()?;
    Ok(events)
}

/// Incremental decoder of length-prefixed frames: [`push`](Self::push) bytes, take events
/// with [`next_event`](Self::next_event), and call [`finish`](Self::finish) at end of stream.
///
/// An undecodable frame is reported and skipped; an oversized length prefix ends the stream
/// (framing is lost).
#[derive(Debug, Default)]
pub struct ProtoDecoder {
    buffer: BytesMut,
    broken: bool,
}

impl ProtoDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.broken {
            self.buffer.extend_from_slice(bytes);
        }
    }

    /// The next event if a whole frame is buffered.
    pub fn next_event(&mut self) -> Option<Result<Event>> {
        if self.broken || self.buffer.len() < 4 {
            return None;
        }
        let len = u32::from_be_bytes([
            self.buffer[0],
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
        ]);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > MAX_FRAME {
            self.broken = true;
            self.buffer.clear();
            return Some(Err(Error::ProtoFrame(format!(
                "frame of {len} bytes exceeds the {} MiB limit",
                MAX_FRAME / (1024 * 1024)
            ))));
        }
        if self.buffer.len() < 4 + len {
            return None;
        }
        let frame = self.buffer.split_to(4 + len);
        Some(decode(&frame[4..]))
    }

    /// Ends the stream; bytes left mid-frame are an error.
    pub fn finish(&mut self) -> Result<()> {
        let left = std::mem::take(&mut self.buffer);
        if left.is_empty() || self.broken {
            return Ok(());
        }
        Err(Error::ProtoFrame(format!(
            "{} bytes left mid-frame at end of stream",
            left.len()
        )))
    }
}
