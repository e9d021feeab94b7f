//! Properties of the conversion over generated content: it is total and well-formed.

use agui_types::BinaryPart;
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".*",
        "[ \t\n]*",
        "(?i)data:[a-z/;=,+%0-9 -]*",
        "[A-Za-z0-9+/=%_ \n-]*",
        "(image|audio|text|video|application)/[a-z0-9+.-]*(;[a-z]+=[a-z0-9-]*)?",
    ]
}

fn arb_source() -> impl Strategy<Value = PartSource> {
    prop_oneof![
        (arb_text(), arb_text())
            .prop_map(|(value, mime_type)| PartSource::Data { value, mime_type }),
        (arb_text(), proptest::option::of(arb_text()))
            .prop_map(|(value, mime_type)| PartSource::Url { value, mime_type }),
        (
            arb_text(),
            proptest::option::of(arb_text()),
            proptest::option::of(arb_text())
        )
            .prop_map(|(value, provider, mime_type)| PartSource::File {
                value,
                provider,
                mime_type
            }),
    ]
}

fn arb_media() -> impl Strategy<Value = MediaPart> {
    (arb_source(), proptest::option::of(arb_text())).prop_map(|(source, name)| MediaPart {
        source,
        id: None,
        metadata: name.map(|name| json!({ "filename": name })),
    })
}

fn arb_part() -> impl Strategy<Value = ContentPart> {
    prop_oneof![
        arb_text().prop_map(ContentPart::text),
        arb_media().prop_map(ContentPart::Image),
        arb_media().prop_map(ContentPart::Audio),
        arb_media().prop_map(ContentPart::Video),
        arb_media().prop_map(ContentPart::Document),
        (
            arb_text(),
            proptest::option::of(arb_text()),
            proptest::option::of(arb_text()),
            proptest::option::of(arb_text()),
            proptest::option::of(arb_text()),
        )
            .prop_map(|(mime_type, id, url, data, filename)| {
                ContentPart::Binary(BinaryPart {
                    mime_type,
                    id,
                    url,
                    data,
                    filename,
                })
            }),
    ]
}

proptest! {
    /// Any content converts without panicking, and what comes out is well-formed: no blank
    /// text part, only supported media types, one part per attachment at most, and a prompt
    /// whenever there was an attachment or non-blank text.
    #[test]
    fn conversion_is_total(parts in proptest::collection::vec(arb_part(), 0..6), limit in 0usize..64) {
        let message = UserMessage {
            id: "m".to_owned(),
            content: Content::Parts(parts.clone()),
            ..UserMessage::default()
        };
        let converted = convert_user_message_with(&message, &PromptLimits { max_attachment_bytes: limit });
        let attachments = parts.iter().filter(|part| !matches!(part, ContentPart::Text(_))).count();
        let has_text = parts.iter().any(|part| {
            matches!(part, ContentPart::Text(t) if !t.text.chars().all(|c| c.is_whitespace() || c.is_control()))
        });
        let mut media = 0;
        for part in &converted.parts {
            match &part.part {
                Some(user_input::part::Part::Text(text)) => prop_assert!(!text.trim().is_empty()),
                Some(user_input::part::Part::Media(m)) => {
                    media += 1;
                    let mime = m.mime_type.as_deref().unwrap_or_default();
                    prop_assert!(SUPPORTED_MIME_TYPES.contains(&mime), "{mime}");
                    prop_assert!(m.data.as_ref().is_some_and(|d| !d.is_empty() && d.len() <= limit));
                }
                other => prop_assert!(false, "unexpected part {other:?}"),
            }
        }
        prop_assert_eq!(media + converted.notes.len() + converted.uploads.len(), attachments);
        prop_assert_eq!(converted.is_empty(), attachments == 0 && !has_text);
    }

    /// Any string content converts without panicking.
    #[test]
    fn string_content_is_total(text in ".*") {
        let converted = convert_user_message(&UserMessage {
            id: "m".to_owned(),
            content: Content::Text(text.clone()),
            ..UserMessage::default()
        });
        let blank = text.chars().all(|c| c.is_whitespace() || c.is_control());
        prop_assert_eq!(converted.is_empty(), blank);
        prop_assert!(converted.notes.is_empty());
    }

    /// Inline bytes of a supported type arrive exactly, however the URL spells the type.
    #[test]
    fn inline_bytes_round_trip(
        bytes in proptest::collection::vec(any::<u8>(), 1..64),
        mime in proptest::sample::select(SUPPORTED_MIME_TYPES),
        upper in any::<bool>(),
    ) {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let spelled = if upper { mime.to_ascii_uppercase() } else { mime.to_owned() };
        let message = UserMessage {
            id: "m".to_owned(),
            content: Content::Parts(vec![ContentPart::Image(MediaPart::new(PartSource::Url {
                value: format!("data:{spelled};base64,{encoded}"),
                mime_type: None,
            }))]),
            ..UserMessage::default()
        };
        let converted = convert_user_message(&message);
        let expected = vec![media_part(mime, bytes, "")];
        prop_assert_eq!(converted.parts, expected);
    }
}
