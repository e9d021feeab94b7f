//! The reference sample of every AG-UI 1.0 event type (`tests/data/sample_events.json`, valid
//! per the official 1.0 schemas) round-trips through our types, both encoders and decoders,
//! and the verifier.

use std::collections::BTreeSet;

use agui_types::{Encoding, Event, EventType, StreamVerifier, protobuf, sse};
use pretty_assertions::assert_eq;
use serde_json::Value;

fn samples() -> Vec<Value> {
    let text = include_str!("data/sample_events.json");
    serde_json::from_str(text).expect("sample_events.json is a JSON array")
}

fn parsed() -> Vec<Event> {
    samples()
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            Event::from_value(value.clone()).unwrap_or_else(|e| panic!("sample #{i} {value}: {e}"))
        })
        .collect()
}

#[test]
fn samples_cover_all_31_event_types_and_outcomes() {
    let types: BTreeSet<EventType> = parsed().iter().map(Event::event_type).collect();
    let all: BTreeSet<EventType> = EventType::ALL.iter().copied().collect();
    assert_eq!(types, all);
    assert_eq!(all.len(), 31);
    let outcomes: BTreeSet<String> = samples()
        .iter()
        .filter_map(|v| {
            v.pointer("/outcome/type")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let expected = ["cancelled", "interrupt", "success", "suspended"];
    assert_eq!(outcomes, expected.iter().map(|s| s.to_string()).collect());
}

#[test]
fn every_sample_round_trips_through_json() {
    for (i, (value, event)) in samples().into_iter().zip(parsed()).enumerate() {
        let back = serde_json::to_value(&event).expect("serializes");
        assert_eq!(back, value, "sample #{i} {}", event.event_type());
        // The compact text form is what the SSE encoder writes.
        let reparsed = Event::from_json(&event.to_json()).expect("reparses");
        assert_eq!(reparsed, event, "sample #{i}");
    }
}

#[test]
fn every_sample_round_trips_through_protobuf() {
    for (i, event) in parsed().into_iter().enumerate() {
        let frame = protobuf::encode_frame(&event);
        let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
        assert_eq!(
            len,
            frame.len() - 4,
            "sample #{i}: big-endian length prefix"
        );
        let decoded = protobuf::decode(&frame[4..]).unwrap_or_else(|e| panic!("sample #{i}: {e}"));
        assert_eq!(decoded, event, "sample #{i} {}", event.event_type());
    }
}

/// Reads one length-delimited field at the start of `bytes`: (field number, payload).
fn first_field(bytes: &[u8]) -> (u32, &[u8]) {
    let mut cursor = bytes;
    let (tag, wire_type) = prost::encoding::decode_key(&mut cursor).expect("a field key");
    assert_eq!(wire_type, prost::encoding::WireType::LengthDelimited);
    let len = prost::encoding::decode_varint(&mut cursor).expect("a length") as usize;
    (tag, &cursor[..len])
}

#[test]
fn protobuf_frames_carry_a_base_event_whose_type_names_the_event() {
    use prost::Message as _;
    for event in parsed() {
        let bytes = protobuf::encode(&event);
        let (_arm, arm_bytes) = first_field(&bytes);
        // base_event is field 1 of every event message and is written even when empty.
        let (field, base_bytes) = first_field(arm_bytes);
        assert_eq!(field, 1, "{}: base_event first", event.event_type());
        let base = agui_types::proto::BaseEvent::decode(base_bytes).expect("a BaseEvent");
        let expected = agui_types::proto::EventType::from_str_name(event.event_type().as_str());
        assert_eq!(Some(base.r#type()), expected, "{}", event.event_type());
    }
}

#[test]
fn whole_stream_round_trips_through_both_encodings() {
    let events = parsed();
    for encoding in [Encoding::Sse, Encoding::Protobuf] {
        let body: Vec<u8> = events
            .iter()
            .flat_map(|e| encoding.encode(e).to_vec())
            .collect();
        let decoded = encoding.decode_all(&body).expect("decodes");
        assert_eq!(decoded, events, "{encoding:?}");
    }
}

#[test]
fn sse_frames_are_single_lf_terminated_data_lines() {
    for event in parsed() {
        let frame = sse::encode(&event);
        assert!(frame.starts_with("data: {"), "{frame}");
        assert!(frame.ends_with("}\n\n"), "{frame}");
        assert_eq!(frame.matches('\n').count(), 2, "{frame}");
        assert!(!frame.contains('\r'));
        assert!(!frame.contains("event:"));
    }
}

/// The encoder a server calls per event ([`Encoding::encode`], [`Encoding::encode_into`] on a
/// reused buffer) writes exactly the frames the standalone functions do.
#[test]
fn every_encoder_entry_point_writes_the_same_frames() {
    let mut appended = bytes::BytesMut::new();
    let mut expected = Vec::new();
    for event in parsed() {
        let sse_frame = sse::encode(&event);
        assert_eq!(
            Encoding::Sse.encode(&event),
            sse_frame.as_bytes(),
            "{}",
            event.event_type()
        );
        let message = protobuf::encode(&event);
        let mut proto_frame = u32::try_from(message.len())
            .expect("small")
            .to_be_bytes()
            .to_vec();
        proto_frame.extend(&message);
        assert_eq!(
            protobuf::encode_frame(&event),
            proto_frame,
            "{}",
            event.event_type()
        );
        assert_eq!(
            Encoding::Protobuf.encode(&event),
            proto_frame,
            "{}",
            event.event_type()
        );

        Encoding::Sse.encode_into(&event, &mut appended);
        Encoding::Protobuf.encode_into(&event, &mut appended);
        expected.extend(sse_frame.as_bytes());
        expected.extend(proto_frame);
    }
    assert_eq!(appended, expected);
}

#[test]
fn the_sample_stream_passes_the_verifier() {
    let events = parsed();
    StreamVerifier::verify_all(&events).expect("the sample stream is well ordered");
}
