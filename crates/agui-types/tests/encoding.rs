//! Transport details: `Accept` negotiation, SSE framing as the client splits it, protobuf
//! framing and the decoders' error handling.

use agui_types::proto as pb;
use agui_types::sse::SseDecoder;
use agui_types::{Encoding, Error, Event, PROTO_CONTENT_TYPE, SSE_CONTENT_TYPE, protobuf, sse};
use pretty_assertions::assert_eq;
use prost::Message as _;
use serde_json::json;

#[test]
fn accept_negotiation_picks_binary_only_when_asked_explicitly() {
    let cases = [
        (None, Encoding::Sse),
        (Some(""), Encoding::Sse),
        (Some("*/*"), Encoding::Sse),
        (Some("application/*"), Encoding::Sse),
        (Some("text/event-stream"), Encoding::Sse),
        (Some("garbage;;q=="), Encoding::Sse),
        (
            Some("application/vnd.ag-ui.event+proto"),
            Encoding::Protobuf,
        ),
        (
            Some("Application/VND.AG-UI.Event+Proto"),
            Encoding::Protobuf,
        ),
        (
            Some(" application/vnd.ag-ui.event+proto ; q=0.8"),
            Encoding::Protobuf,
        ),
        (Some("application/vnd.ag-ui.event+proto;q=0"), Encoding::Sse),
        (
            Some("application/vnd.ag-ui.event+proto;q=0.0, */*"),
            Encoding::Sse,
        ),
        (
            Some("application/vnd.ag-ui.event+proto;q=nope"),
            Encoding::Sse,
        ),
        (
            Some("text/event-stream, application/vnd.ag-ui.event+proto"),
            Encoding::Protobuf,
        ),
        (
            Some("text/event-stream, application/vnd.ag-ui.event+proto;q=0.5"),
            Encoding::Sse,
        ),
        (
            Some("text/event-stream;q=0.4, application/vnd.ag-ui.event+proto;q=0.5"),
            Encoding::Protobuf,
        ),
        (
            Some("application/json, application/vnd.ag-ui.event+proto"),
            Encoding::Protobuf,
        ),
    ];
    for (accept, expected) in cases {
        assert_eq!(Encoding::negotiate(accept), expected, "Accept: {accept:?}");
    }
    assert_eq!(Encoding::Protobuf.keep_alive(), None);
    let keep_alive = Encoding::Sse.keep_alive().expect("SSE has comments");
    assert_eq!(sse::decode_all(keep_alive).expect("a comment"), []);
    assert_eq!(Encoding::Sse.content_type(), SSE_CONTENT_TYPE);
    assert_eq!(SSE_CONTENT_TYPE, "text/event-stream");
    assert_eq!(Encoding::Protobuf.content_type(), PROTO_CONTENT_TYPE);
    assert_eq!(PROTO_CONTENT_TYPE, "application/vnd.ag-ui.event+proto");
}

fn run() -> Vec<Event> {
    vec![
        Event::run_started("t", "r"),
        Event::text_message_start("m"),
        Event::text_message_content("m", "line one\nline two\r\n\"quoted\" \u{2028} ✓"),
        Event::text_message_end("m"),
        Event::state_snapshot(
            json!({ "n": 42, "f": 1.5, "big": 9_007_199_254_740_991_i64, "neg": -3 }),
        ),
        Event::run_finished("t", "r"),
    ]
}

#[test]
fn sse_text_with_newlines_stays_on_one_data_line() {
    let frame = sse::encode(&run()[2]);
    let line = frame.strip_suffix("\n\n").expect("blank-line terminated");
    assert!(
        line.starts_with("data: {") && !line.contains(['\n', '\r']),
        "{frame:?}"
    );
}

/// Decodes `body` pushed in pieces of `step` bytes.
fn decode_sse_in_steps(body: &[u8], step: usize) -> Vec<Result<Event, String>> {
    let mut decoder = SseDecoder::new();
    let mut out = Vec::new();
    for piece in body.chunks(step) {
        decoder.push(piece).expect("under the buffer limit");
        while let Some(event) = decoder.next_event() {
            out.push(event.map_err(|e| e.to_string()));
        }
    }
    if let Some(event) = decoder.finish() {
        out.push(event.map_err(|e| e.to_string()));
    }
    out
}

#[test]
fn sse_decoder_splits_like_the_client_whatever_the_chunking() {
    let events = run();
    let body: Vec<u8> = events
        .iter()
        .flat_map(|e| sse::encode(e).into_bytes())
        .collect();
    for step in [1, 2, 3, 7, 64, body.len()] {
        let decoded: Vec<Event> = decode_sse_in_steps(&body, step)
            .into_iter()
            .map(|r| r.expect("valid"))
            .collect();
        assert_eq!(decoded, events, "step {step}");
    }
}

#[test]
fn sse_decoder_handles_the_fields_the_client_handles() {
    let end = r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#;
    let cases: Vec<(String, Vec<Result<&str, &str>>)> = vec![
        // Comments and keep-alives are skipped; other fields are ignored.
        (
            format!(": keep-alive\n\nevent: x\nid: 7\nretry: 10\ndata: {end}\n\n"),
            vec![Ok("m")],
        ),
        // No space after the colon, and a payload split over several data lines.
        (format!("data:{end}\n\n"), vec![Ok("m")]),
        (
            "data: {\"type\":\"TEXT_MESSAGE_END\",\ndata: \"messageId\":\"m\"}\n\n".to_owned(),
            vec![Ok("m")],
        ),
        // An unterminated last message is parsed when the stream ends.
        (format!("data: {end}"), vec![Ok("m")]),
        // Frames the client rejects.
        ("data: [1]\n\n".to_owned(), vec![Err("not a JSON object")]),
        (
            "data: {\"messageId\":\"m\"}\n\n".to_owned(),
            vec![Err("no event type")],
        ),
        (
            "data: {\"type\":\"\"}\n\n".to_owned(),
            vec![Err("no event type")],
        ),
        ("data: {oops\n\n".to_owned(), vec![Err("not valid JSON")]),
        // An unknown type is reported and decoding goes on.
        (
            format!("data: {{\"type\":\"FUTURE\"}}\n\ndata: {end}\n\n"),
            vec![Err("unknown event type `FUTURE`"), Ok("m")],
        ),
        // CRLF framing is never split, as in the client: the whole body is one bad message.
        (
            format!("data: {end}\r\n\r\ndata: {end}\r\n\r\n"),
            vec![Err("not valid JSON")],
        ),
    ];
    for (body, expected) in cases {
        let got = decode_sse_in_steps(body.as_bytes(), 5);
        assert_eq!(got.len(), expected.len(), "{body:?}: {got:?}");
        for (got, want) in got.iter().zip(&expected) {
            match (got, want) {
                (Ok(Event::TextMessageEnd(e)), Ok(id)) => assert_eq!(&e.message_id, id),
                (Err(error), Err(fragment)) => assert!(error.contains(fragment), "{error}"),
                _ => panic!("{body:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}

#[test]
fn sse_decoder_caps_an_unterminated_message() {
    let mut decoder = SseDecoder::new();
    let big = vec![b'x'; sse::MAX_BUFFER + 1];
    assert!(matches!(decoder.push(&big), Err(Error::SseFrame(m)) if m.contains("10 MiB")));
}

/// The limit applies to the bytes after the last terminator, however the body is pushed:
/// a terminator (even one split across pushes) starts the count again.
#[test]
fn sse_decoder_limit_counts_the_unterminated_tail_across_pushes() {
    let piece = vec![b'x'; 64 * 1024];
    // One byte short of the limit, in many pushes.
    let fill = |decoder: &mut SseDecoder| {
        for _ in 1..sse::MAX_BUFFER / piece.len() {
            decoder.push(&piece).expect("within the limit");
        }
        decoder.push(&piece[1..]).expect("within the limit");
    };
    let mut decoder = SseDecoder::new();
    fill(&mut decoder);
    decoder.push(b"\n").expect("within the limit");
    decoder.push(b"\n").expect("a terminator ends the message");
    fill(&mut decoder);
    decoder
        .push(b"\n\n")
        .expect("a terminator ends the message");
    fill(&mut decoder);
    let error = decoder.push(b"xx").expect_err("over the limit");
    assert!(
        matches!(&error, Error::SseFrame(m) if m.contains("10 MiB")),
        "{error}"
    );
}

#[test]
fn protobuf_decoder_reassembles_frames_whatever_the_chunking() {
    let events = run();
    let body: Vec<u8> = events.iter().flat_map(protobuf::encode_frame).collect();
    for step in [1, 3, 4, 5, 100, body.len()] {
        let mut decoder = protobuf::ProtoDecoder::new();
        let mut decoded = Vec::new();
        for piece in body.chunks(step) {
            decoder.push(piece);
            while let Some(event) = decoder.next_event() {
                decoded.push(event.expect("valid frame"));
            }
        }
        decoder.finish().expect("no bytes left over");
        assert_eq!(decoded, events, "step {step}");
    }
}

#[test]
fn protobuf_numbers_come_back_as_json_numbers() {
    let event = &run()[4];
    let decoded = protobuf::decode(&protobuf::encode(event)).expect("decodes");
    let Event::StateSnapshot(snapshot) = decoded else {
        panic!("{decoded:?}")
    };
    assert_eq!(
        snapshot.snapshot.to_string(),
        r#"{"big":9007199254740991,"f":1.5,"n":42,"neg":-3}"#
    );
}

/// Serializes an envelope built by hand.
fn frame_of(envelope: &pb::Event) -> Vec<u8> {
    let message = envelope.encode_to_vec();
    let mut frame = (message.len() as u32).to_be_bytes().to_vec();
    frame.extend(message);
    frame
}

fn step_started(base_event: Option<pb::BaseEvent>) -> pb::Event {
    pb::Event {
        event: Some(pb::event::Event::StepStarted(pb::StepStartedEvent {
            base_event,
            step_name: "s".into(),
            subagent_run_id: None,
        })),
    }
}

#[test]
fn protobuf_decoder_rejects_what_the_official_decoder_rejects() {
    let typed = |t: pb::EventType| {
        Some(pb::BaseEvent {
            r#type: t as i32,
            ..Default::default()
        })
    };
    // Field 99 (key (99 << 3) | 2 = varint 0x9a 0x06), empty: an event from a future schema.
    let unknown_arm = vec![0, 0, 0, 3, 0x9a, 0x06, 0x00];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            frame_of(&step_started(None)),
            "STEP_STARTED without base_event",
        ),
        (
            frame_of(&step_started(typed(pb::EventType::StepFinished))),
            "envelope carries STEP_STARTED but base_event declares STEP_FINISHED",
        ),
        (
            frame_of(&pb::Event { event: None }),
            "the envelope carries no event",
        ),
        (
            unknown_arm,
            "unknown event type `protobuf envelope field 99`",
        ),
        (vec![0, 0, 0, 2, 0xff, 0xff], "protobuf decode"),
        (
            frame_of(&pb::Event {
                event: Some(pb::event::Event::RunFinished(pb::RunFinishedEvent {
                    base_event: typed(pb::EventType::RunFinished),
                    outcome: "interrupt".into(),
                    ..Default::default()
                })),
            }),
            "interrupt outcome without interrupts",
        ),
        (
            frame_of(&pb::Event {
                event: Some(pb::event::Event::TextMessageStart(
                    pb::TextMessageStartEvent {
                        base_event: typed(pb::EventType::TextMessageStart),
                        role: Some("tool".into()),
                        ..Default::default()
                    },
                )),
            }),
            "invalid text message role \"tool\"",
        ),
    ];
    for (frame, fragment) in cases {
        let error = protobuf::decode_all(&frame).expect_err(fragment);
        assert!(
            error.to_string().contains(fragment),
            "{error} lacks {fragment}"
        );
    }
    // The envelope with an empty base_event of type 0 is TEXT_MESSAGE_START, as in proto3.
    let empty_base = pb::Event {
        event: Some(pb::event::Event::TextMessageStart(
            pb::TextMessageStartEvent {
                base_event: Some(pb::BaseEvent::default()),
                message_id: "m".into(),
                ..Default::default()
            },
        )),
    };
    assert!(protobuf::decode_all(&frame_of(&empty_base)).is_ok());
}

#[test]
fn protobuf_framing_errors() {
    let frame = protobuf::encode_frame(&Event::step_started("s"));
    let truncated = &frame[..frame.len() - 1];
    let error = protobuf::decode_all(truncated).expect_err("truncated");
    assert!(error.to_string().contains("left mid-frame"), "{error}");

    let oversized = [0x7f, 0xff, 0xff, 0xff, 0, 0];
    let mut decoder = protobuf::ProtoDecoder::new();
    decoder.push(&oversized);
    let error = decoder
        .next_event()
        .expect("a result")
        .expect_err("oversized");
    assert!(
        error.to_string().contains("exceeds the 10 MiB limit"),
        "{error}"
    );
    assert!(
        decoder.next_event().is_none(),
        "framing is lost after an oversized prefix"
    );
}

/// The exact bytes a client receives for a small run (keys in a stable order, optional
/// fields absent, LF framing).
#[test]
fn sse_wire_format_of_a_run() {
    let body: String = run().iter().map(sse::encode).collect();
    insta::assert_snapshot!(body);
}

#[test]
fn long_streams_decode_completely() {
    let mut events = vec![Event::run_started("t", "r"), Event::text_message_start("m")];
    events.extend((0..20_000).map(|i| Event::text_message_content("m", format!("token {i} "))));
    events.extend([Event::text_message_end("m"), Event::run_finished("t", "r")]);
    for encoding in [Encoding::Sse, Encoding::Protobuf] {
        let body: Vec<u8> = events
            .iter()
            .flat_map(|e| encoding.encode(e).to_vec())
            .collect();
        assert_eq!(
            encoding.decode_all(&body).expect("decodes"),
            events,
            "{encoding:?}"
        );
    }
}
