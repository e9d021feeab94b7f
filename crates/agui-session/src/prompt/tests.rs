use agui_types::{BinaryPart, TextPart};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

/// One case: what goes in, rendered as lines by [`render`].
enum Input {
    /// A user message's `content`, default limits.
    Content(Value),
    /// A user message's `content` with `max_attachment_bytes`.
    Limited(usize, Value),
    /// A transcript and the ids already forwarded.
    Messages(Value, &'static [&'static str]),
    /// A tool message.
    Tool(Value),
}

/// Renders the outcome as lines: `id: …` for the chosen message (`none` if there is none),
/// `text: "…"` and `media: <mime> <hex bytes> ['description']` per harness part, `log: …`
/// per warning, `ok: "…"` / `err: "…"` for tool results.
fn run(input: Input) -> Vec<String> {
    match input {
        Input::Content(content) => render(&convert(content, &PromptLimits::default())),
        Input::Limited(max_attachment_bytes, content) => render(&convert(
            content,
            &PromptLimits {
                max_attachment_bytes,
            },
        )),
        Input::Messages(messages, forwarded) => {
            let messages: Vec<Message> = serde_json::from_value(messages).expect("transcript");
            match newest_unforwarded(&messages, |id| forwarded.contains(&id)) {
                None => vec!["none".to_owned()],
                Some(prompt) => {
                    let mut lines = vec![format!("id: {}", prompt.message_id)];
                    lines.extend(render(&Converted {
                        parts: prompt.input.parts,
                        notes: prompt.notes,
                        uploads: prompt.uploads,
                    }));
                    lines
                }
            }
        }
        Input::Tool(message) => {
            let message: ToolMessage = serde_json::from_value(message).expect("tool message");
            vec![match tool_result_text(&message) {
                ToolResultText::Ok(text) => format!("ok: {text:?}"),
                ToolResultText::Err(text) => format!("err: {text:?}"),
            }]
        }
    }
}

fn convert(content: Value, limits: &PromptLimits) -> Converted {
    let message: UserMessage =
        serde_json::from_value(json!({"id": "m", "content": content})).expect("user message");
    convert_user_message_with(&message, limits)
}

fn render(converted: &Converted) -> Vec<String> {
    let mut lines: Vec<String> = converted.parts.iter().map(render_part).collect();
    lines.extend(converted.notes.iter().map(|note| format!("log: {note}")));
    lines.extend(converted.uploads.iter().map(|upload| {
        format!(
            "upload: {} {} bytes, {}",
            upload.name,
            upload.data.len(),
            upload.what
        )
    }));
    lines
}

fn render_part(part: &user_input::Part) -> String {
    match &part.part {
        Some(user_input::part::Part::Text(text)) => format!("text: {text:?}"),
        Some(user_input::part::Part::Media(media)) => {
            let hex: String = media
                .data
                .iter()
                .flatten()
                .map(|byte| format!("{byte:02x}"))
                .collect();
            let mut line = format!("media: {} {hex}", media.mime_type.as_deref().unwrap_or("?"));
            if let Some(description) = &media.description {
                line.push_str(&format!(" '{description}'"));
            }
            line
        }
        other => format!("unexpected: {other:?}"),
    }
}

#[track_caller]
fn check(input: Input, expected: &[&str]) {
    assert_eq!(run(input), expected);
}

fn image(source: Value) -> Value {
    json!({"type": "image", "source": source})
}

fn data(mime_type: &str, value: &str) -> Value {
    json!({"type": "data", "mimeType": mime_type, "value": value})
}

fn url(value: &str) -> Value {
    json!({"type": "url", "value": value})
}

/// `AQID` is the bytes 01 02 03.
const BYTES: &str = "AQID";

#[test]
fn the_newest_unforwarded_user_message_is_the_prompt() {
    use Input::Messages;
    let user = |id: &str, content: Value| json!({"role": "user", "id": id, "content": content});
    let assistant = |id: &str| json!({"role": "assistant", "id": id, "content": "ok"});

    // Nothing to send without a user message.
    check(Messages(json!([]), &[]), &["none"]);
    check(Messages(json!([assistant("a1")]), &[]), &["none"]);
    // One new message.
    check(
        Messages(json!([user("m1", json!("hi"))]), &[]),
        &["id: m1", r#"text: "hi""#],
    );
    // Two new messages in one request: only the newest is sent, the older one never.
    check(
        Messages(
            json!([user("m1", json!("one")), user("m2", json!("two"))]),
            &[],
        ),
        &["id: m2", r#"text: "two""#],
    );
    // Already forwarded: a resent transcript sends nothing.
    check(
        Messages(json!([user("m1", json!("one")), assistant("a1")]), &["m1"]),
        &["none"],
    );
    // A forwarded message ends the scan even when older ones were never sent.
    check(
        Messages(
            json!([user("m1", json!("old")), user("m2", json!("sent"))]),
            &["m2"],
        ),
        &["none"],
    );
    // A trailing assistant message does not hide the prompt.
    check(
        Messages(json!([user("m1", json!("q")), assistant("a1")]), &[]),
        &["id: m1", r#"text: "q""#],
    );
    // Other roles are not prompts.
    check(
        Messages(
            json!([
                user("m1", json!("first")),
                assistant("a1"),
                {"role": "tool", "id": "t1", "toolCallId": "c1", "content": "result"},
                {"role": "system", "id": "s1", "content": "be nice"},
                {"role": "developer", "id": "d1", "content": "be terse"},
                {"role": "reasoning", "id": "r1", "content": "hmm"},
            ]),
            &[],
        ),
        &["id: m1", r#"text: "first""#],
    );
    check(
        Messages(
            json!([
                user("m1", json!("first")),
                assistant("a1"),
                user("m2", json!("second"))
            ]),
            &["m1"],
        ),
        &["id: m2", r#"text: "second""#],
    );
    // A blank newest message is skipped, not sent…
    check(
        Messages(
            json!([user("m1", json!("real")), user("m2", json!("  \n "))]),
            &[],
        ),
        &["id: m1", r#"text: "real""#],
    );
    check(
        Messages(
            json!([
                user("m1", json!("real")),
                user("m2", json!([{"type": "text", "text": " "}]))
            ]),
            &[],
        ),
        &["id: m1", r#"text: "real""#],
    );
    // …but the scan still stops at a forwarded one.
    check(
        Messages(
            json!([user("m1", json!("real")), user("m2", json!(" "))]),
            &["m1"],
        ),
        &["none"],
    );
    check(
        Messages(json!([user("m1", json!("")), user("m2", json!(" "))]), &[]),
        &["none"],
    );
    // A message with only an unforwardable attachment is a prompt (the note): it never
    // replays the older turn.
    check(
        Messages(
            json!([
                user("m1", json!("old")),
                user("m2", json!([image(url("https://x.test/cat.png"))])),
            ]),
            &[],
        ),
        &[
            "id: m2",
            r#"text: "[Attached image was not forwarded: only inline attachments reach this agent.]""#,
            "log: Not forwarding the attached image: it is a remote URL, and only inline \
             attachments reach the agent.",
        ],
    );
}

#[test]
fn text_content() {
    use Input::Content;
    check(Content(json!("  hello  ")), &[r#"text: "hello""#]);
    check(Content(json!("")), &[]);
    check(Content(json!(" \t\n ")), &[]);
    check(Content(json!([])), &[]);
    check(
        Content(json!("line one\nline two")),
        &[r#"text: "line one\nline two""#],
    );
    // Control characters are replaced, as the SDK does.
    check(Content(json!("a\u{7}b\u{0}c")), &[r#"text: "a b c""#]);
    // Parts: trimmed, blank ones dropped, adjacent ones joined with newlines.
    check(
        Content(json!([
            {"type": "text", "text": "  first "},
            {"type": "text", "text": "   "},
            {"type": "text", "text": ""},
            {"type": "text", "text": "second"},
        ])),
        &[r#"text: "first\nsecond""#],
    );
}

#[test]
fn media_keeps_its_position_among_the_text() {
    use Input::Content;
    check(
        Content(json!([
            {"type": "text", "text": "Compare"},
            image(data("image/png", BYTES)),
            {"type": "text", "text": "with"},
            {"type": "audio", "source": data("audio/wav", "AAE=")},
            {"type": "video", "source": data("video/mp4", "/w==")},
            {"type": "document", "source": data("application/pdf", "JVBE"),
             "metadata": {"filename": "spec.pdf"}},
            {"type": "text", "text": "please"},
        ])),
        &[
            r#"text: "Compare""#,
            "media: image/png 010203",
            r#"text: "with""#,
            "media: audio/wav 0001",
            "media: video/mp4 ff",
            "media: application/pdf 255044 'spec.pdf'",
            r#"text: "please""#,
        ],
    );
    // Media alone is a prompt.
    check(
        Content(json!([image(data("image/webp", BYTES))])),
        &["media: image/webp 010203"],
    );
    // The part kind is a label: a document part may carry an image.
    check(
        Content(json!([{"type": "document", "source": data("image/jpeg", BYTES)}])),
        &["media: image/jpeg 010203"],
    );
}

#[test]
fn unforwardable_attachments_become_notes_in_place() {
    use Input::Content;
    let not_forwarded = |kind: &str, name: &str| {
        format!(
            "text: \"[Attached {kind}{name} was not forwarded: only inline attachments reach \
             this agent.]\""
        )
    };
    // A remote URL, with the file name from the metadata.
    check(
        Content(json!([
            {"type": "text", "text": "Look"},
            {"type": "image", "source": url("https://x.test/cat.png"),
             "metadata": {"filename": "cat.png"}},
            {"type": "text", "text": "and tell me"},
        ])),
        &[
            "text: \"Look\\n[Attached image 'cat.png' was not forwarded: only inline \
             attachments reach this agent.]\\nand tell me\"",
            "log: Not forwarding the attached image 'cat.png': it is a remote URL, and only \
             inline attachments reach the agent.",
        ],
    );
    // A provider file reference.
    check(
        Content(json!([{"type": "document",
            "source": {"type": "file", "value": "file-123", "provider": "openai"}}])),
        &[
            &not_forwarded("document", ""),
            "log: Not forwarding the attached document: it is a provider file reference, and \
             only inline attachments reach the agent.",
        ],
    );
    check(
        Content(
            json!([{"type": "video", "source": {"type": "url", "value": "https://x.test/v.mp4",
            "mimeType": "video/mp4"}}]),
        ),
        &[
            &not_forwarded("video", ""),
            "log: Not forwarding the attached video: it is a remote URL, and only inline \
             attachments reach the agent.",
        ],
    );
    // Notes between media keep their place.
    check(
        Content(json!([
            image(data("image/png", BYTES)),
            {"type": "audio", "source": url("https://x.test/a.mp3")},
            image(data("image/png", "AA==")),
        ])),
        &[
            "media: image/png 010203",
            &not_forwarded("audio", ""),
            "media: image/png 00",
            "log: Not forwarding the attached audio: it is a remote URL, and only inline \
             attachments reach the agent.",
        ],
    );
}

#[test]
fn unreadable_attachments_say_why() {
    use Input::Content;
    let unreadable = |name: &str, reason: &str| {
        vec![
            format!("text: \"[Attached image{name} could not be read: {reason}]\""),
            format!("log: Dropping the attached image{name}: {reason}"),
        ]
    };
    let case = |content: Value, expected: Vec<String>| {
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        check(Content(content), &expected);
    };
    // GIF is not accepted by the SDK.
    case(
        json!([{"type": "image", "source": data("image/gif", BYTES),
            "metadata": {"filename": "dance.gif"}}]),
        unreadable(" 'dance.gif'", "the media type image/gif is not supported"),
    );
    case(
        json!([image(data("application/x-msdownload", BYTES))]),
        unreadable(
            "",
            "the media type application/x-msdownload is not supported",
        ),
    );
    // Missing media type.
    case(
        json!([image(data("", BYTES))]),
        unreadable("", "no media type was given"),
    );
    case(
        json!([image(data(" ; charset=x", BYTES))]),
        unreadable("", "no media type was given"),
    );
    // Bad base64.
    case(
        json!([image(data("image/png", "not base64!"))]),
        unreadable("", "its data is not valid base64"),
    );
    case(
        json!([image(data("image/png", "A"))]),
        unreadable("", "its data is not valid base64"),
    );
    case(
        json!([image(data("image/png", "AQ==AQ=="))]),
        unreadable("", "its data is not valid base64"),
    );
    case(
        json!([image(data("image/png", ""))]),
        unreadable("", "it is empty"),
    );
    case(
        json!([image(data("image/png", " == "))]),
        unreadable("", "it is empty"),
    );
    // A hostile file name stays on one line and is shortened.
    case(
        json!([{"type": "image", "source": data("image/gif", BYTES),
            "metadata": {"filename": "a\nb]\u{0}c"}}]),
        unreadable(" 'a b] c'", "the media type image/gif is not supported"),
    );
    let long = "x".repeat(500);
    let short = format!(" '{}…'", "x".repeat(119));
    case(
        json!([{"type": "image", "source": data("image/gif", BYTES),
            "metadata": {"filename": long}}]),
        unreadable(&short, "the media type image/gif is not supported"),
    );
    // Blank or non-string file names are ignored.
    case(
        json!([{"type": "image", "source": data("image/gif", BYTES),
            "metadata": {"filename": "  "}}]),
        unreadable("", "the media type image/gif is not supported"),
    );
    case(
        json!([{"type": "image", "source": data("image/gif", BYTES),
            "metadata": {"filename": 7}}]),
        unreadable("", "the media type image/gif is not supported"),
    );
}

#[test]
fn data_urls() {
    use Input::Content;
    let unreadable = |reason: &str| {
        vec![
            format!("text: \"[Attached image could not be read: {reason}]\""),
            format!("log: Dropping the attached image: {reason}"),
        ]
    };
    let case = |source: Value, expected: Vec<String>| {
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        check(Content(json!([image(source)])), &expected);
    };
    let media = |line: &str| vec![line.to_owned()];

    case(
        url("data:image/png;base64,AQID"),
        media("media: image/png 010203"),
    );
    // Scheme, type and the base64 marker are case-insensitive; the type is sent lowercase.
    case(
        url("DATA:IMAGE/PNG;BASE64,AQID"),
        media("media: image/png 010203"),
    );
    case(
        url("  data:image/png;base64,AQID"),
        media("media: image/png 010203"),
    );
    // Parameters are allowed and dropped.
    case(
        url("data:text/plain;charset=utf-8;base64,aGk="),
        media("media: text/plain 6869"),
    );
    // The part's type wins over the URL's; the URL's is used when the part has none.
    case(
        json!({"type": "url", "value": "data:image/png;base64,AQID", "mimeType": "image/jpeg"}),
        media("media: image/jpeg 010203"),
    );
    case(
        json!({"type": "url", "value": "data:image/png;base64,AQID", "mimeType": "  "}),
        media("media: image/png 010203"),
    );
    case(
        json!({"type": "url", "value": "data:image/gif;base64,AQID", "mimeType": "image/png"}),
        media("media: image/png 010203"),
    );
    // A data source holding a data: URL.
    case(
        data("", "data:image/png;base64,AQID"),
        media("media: image/png 010203"),
    );
    // Base64 variants: unpadded, URL-safe, wrapped lines, percent-encoded.
    case(
        url("data:image/png;base64,AQ"),
        media("media: image/png 01"),
    );
    case(
        url("data:image/png;base64,-_-_"),
        media("media: image/png fbffbf"),
    );
    case(
        url("data:image/png;base64,AQ\nID\r\n"),
        media("media: image/png 010203"),
    );
    case(
        url("data:image/png;base64,AQ%3D%3D"),
        media("media: image/png 01"),
    );
    case(
        url("data:image/png;base64,AQ%3"),
        unreadable("its data is not valid base64"),
    );
    case(
        url("data:image/png;base64,AQ%zz"),
        unreadable("its data is not valid base64"),
    );
    // Not base64-encoded, or not a data URL at all.
    case(
        url("data:image/png,AQID"),
        unreadable("its data: URL is not base64-encoded"),
    );
    case(
        url("data:image/png;base64"),
        unreadable("its data: URL is malformed (no comma before the data)"),
    );
    case(
        url("data:"),
        unreadable("its data: URL is malformed (no comma before the data)"),
    );
    case(
        url("data:image/png;base64,@@@@"),
        unreadable("its data is not valid base64"),
    );
    case(url("data:image/png;base64,"), unreadable("it is empty"));
    // Unknown or missing types.
    case(
        url("data:image/gif;base64,R0lG"),
        unreadable("the media type image/gif is not supported"),
    );
    case(
        url("data:;base64,AQID"),
        unreadable("no media type was given"),
    );
    case(
        url("data:;charset=x;base64,AQID"),
        unreadable("no media type was given"),
    );
    // Non-ASCII never splits a character.
    case(url("dätä:image/png;base64,AQID"), {
        let mut lines = vec![
            "text: \"[Attached image was not forwarded: only inline attachments reach this \
             agent.]\""
                .to_owned(),
        ];
        lines.push(
            "log: Not forwarding the attached image: it is a remote URL, and only inline \
             attachments reach the agent."
                .to_owned(),
        );
        lines
    });
    case(
        url("data:imäge/png;base64,AQID"),
        unreadable("the media type imäge/png is not supported"),
    );
}

#[test]
fn legacy_binary_parts_are_converted() {
    use Input::Content;
    let binary = |fields: Value| {
        let mut part = json!({"type": "binary"});
        part.as_object_mut()
            .expect("object")
            .extend(fields.as_object().expect("object").clone());
        part
    };
    check(
        Content(json!([
            {"type": "text", "text": "see"},
            binary(json!({"mimeType": "image/png", "data": BYTES, "filename": "a.png"})),
        ])),
        &[r#"text: "see""#, "media: image/png 010203 'a.png'"],
    );
    // The kind comes from the media type.
    check(
        Content(json!([binary(
            json!({"mimeType": "Audio/WAV", "data": "AA=="})
        )])),
        &["media: audio/wav 00"],
    );
    // Data wins over a URL; a data: URL in `url` is inline too.
    check(
        Content(json!([binary(
            json!({"mimeType": "image/png", "data": BYTES,
            "url": "https://x.test/a.png"})
        )])),
        &["media: image/png 010203"],
    );
    check(
        Content(json!([binary(
            json!({"mimeType": "", "url": "data:image/png;base64,AQID"})
        )])),
        &["media: image/png 010203"],
    );
    // A remote URL or a bare id is a note.
    check(
        Content(json!([binary(
            json!({"mimeType": "video/mp4", "url": "https://x.test/v.mp4",
            "filename": "v.mp4"})
        )])),
        &[
            "text: \"[Attached video 'v.mp4' was not forwarded: only inline attachments reach \
             this agent.]\"",
            "log: Not forwarding the attached video 'v.mp4': it is a remote URL, and only \
             inline attachments reach the agent.",
        ],
    );
    check(
        Content(json!([binary(
            json!({"mimeType": "application/pdf", "id": "upload-7"})
        )])),
        &[
            "text: \"[Attached document was not forwarded: only inline attachments reach this \
             agent.]\"",
            "log: Not forwarding the attached document: it is a file reference, and only \
             inline attachments reach the agent.",
        ],
    );
    // Unreadable ones say why.
    check(
        Content(json!([binary(
            json!({"mimeType": "image/gif", "data": BYTES})
        )])),
        &[
            "text: \"[Attached image could not be read: the media type image/gif is not \
             supported]\"",
            "log: Dropping the attached image: the media type image/gif is not supported",
        ],
    );
    check(
        Content(json!([binary(
            json!({"mimeType": "image/png", "data": "", "url": " "})
        )])),
        &[
            "text: \"[Attached image could not be read: it carries no data]\"",
            "log: Dropping the attached image: it carries no data",
        ],
    );
    check(
        Content(json!([binary(
            json!({"mimeType": "image/png", "data": "%%%"})
        )])),
        &[
            "text: \"[Attached image could not be read: its data is not valid base64]\"",
            "log: Dropping the attached image: its data is not valid base64",
        ],
    );
}

#[test]
fn attachments_over_the_size_cap_become_notes() {
    use Input::Limited;
    // AQID decodes to three bytes.
    check(
        Limited(3, json!([image(data("image/png", BYTES))])),
        &["media: image/png 010203"],
    );
    check(
        Limited(2, json!([image(data("image/png", BYTES))])),
        &[
            "text: \"[Attached image could not be read: it is larger than the 2 bytes limit \
             (3 bytes)]\"",
            "log: Dropping the attached image: it is larger than the 2 bytes limit (3 bytes)",
        ],
    );
    // The size is known before decoding, padding and whitespace aside.
    check(
        Limited(1, json!([image(url("data:image/png;base64,AQ%3D%3D"))])),
        &["media: image/png 01"],
    );
    check(
        Limited(1, json!([image(url("data:image/png;base64,AQI=\n"))])),
        &[
            "text: \"[Attached image could not be read: it is larger than the 1 byte limit \
             (2 bytes)]\"",
            "log: Dropping the attached image: it is larger than the 1 byte limit (2 bytes)",
        ],
    );
    let big = "A".repeat(4 * 1024);
    check(
        Limited(2048, json!([image(data("image/png", &big))])),
        &[
            "text: \"[Attached image could not be read: it is larger than the 2 KiB limit \
             (3 KiB)]\"",
            "log: Dropping the attached image: it is larger than the 2 KiB limit (3 KiB)",
        ],
    );
}

#[test]
fn sizes_read_well() {
    let cases = [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (crate::defaults::MAX_ATTACHMENT_BYTES, "20 MiB"),
        (
            crate::defaults::MAX_ATTACHMENT_BYTES + 300 * 1024,
            "20.2 MiB",
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(human_size(bytes), expected, "{bytes}");
    }
}

#[test]
fn tool_result_texts() {
    use Input::Tool;
    let tool = |content: Value, error: Option<&str>| {
        let mut message = json!({"role": "tool", "id": "t", "toolCallId": "c", "content": content});
        if let Some(error) = error {
            message["error"] = json!(error);
        }
        Tool(message)
    };
    // Strings pass unchanged, whitespace included.
    check(tool(json!("  42 \n"), None), &[r#"ok: "  42 \n""#]);
    check(tool(json!(""), None), &[r#"ok: """#]);
    check(tool(json!("{\"a\":1}"), None), &[r#"ok: "{\"a\":1}""#]);
    // Parts: text parts joined with newlines, media dropped.
    check(
        tool(
            json!([
                {"type": "text", "text": "a"},
                image(data("image/png", BYTES)),
                {"type": "text", "text": " b "},
            ]),
            None,
        ),
        &[r#"ok: "a\n b ""#],
    );
    check(tool(json!([]), None), &[r#"ok: """#]);
    // An error is an error, with the output after it when there is any.
    check(tool(json!(""), Some("boom")), &[r#"err: "boom""#]);
    check(tool(json!("  "), Some(" boom ")), &[r#"err: "boom""#]);
    check(tool(json!("boom"), Some("boom")), &[r#"err: "boom""#]);
    check(
        tool(json!("partial output\n"), Some("timed out")),
        &[r#"err: "timed out\npartial output""#],
    );
    // A blank error is no error.
    check(tool(json!("fine"), Some("  ")), &[r#"ok: "fine""#]);
}

#[test]
fn convert_user_message_uses_the_default_limits() {
    let message = UserMessage {
        id: "m".to_owned(),
        content: Content::Parts(vec![
            ContentPart::Text(TextPart {
                text: "hi".to_owned(),
                ..TextPart::default()
            }),
            ContentPart::Binary(BinaryPart {
                mime_type: "image/png".to_owned(),
                data: Some(BYTES.to_owned()),
                ..BinaryPart::default()
            }),
        ]),
        ..UserMessage::default()
    };
    let converted = convert_user_message(&message);
    assert_eq!(
        render(&converted),
        [r#"text: "hi""#, "media: image/png 010203"]
    );
    assert_eq!(converted.clone().into_input().parts, converted.parts);
}

#[test]
fn documents_and_binary_parts_over_the_size_cap_are_uploads_whose_note_says_where_they_are() {
    use Input::Limited;
    // AQID decodes to three bytes: over a 2-byte cap, a document (of any type) and a binary
    // part are saved, not dropped; an image over it is still a note.
    let mark = |i: usize| format!("{UPLOAD_MARK}upload {i}{UPLOAD_MARK}");
    check(
        Limited(
            2,
            json!([
                {"type": "text", "text": "read these"},
                {"type": "document", "source": data("application/zip", BYTES),
                 "metadata": {"filename": "../../etc/report.zip"}},
                {"type": "binary", "mimeType": "application/pdf", "data": BYTES},
            ]),
        ),
        &[
            &format!(
                "text: {:?}",
                format!("read these\n{}\n{}", mark(0), mark(1))
            ),
            "upload: report.zip 3 bytes, document '../../etc/report.zip' (3 bytes)",
            "upload: attachment.pdf 3 bytes, document (3 bytes)",
        ],
    );
    check(
        Limited(
            3,
            json!([{"type": "document", "source": data("application/pdf", BYTES)}]),
        ),
        &["media: application/pdf 010203"],
    );
}

#[test]
fn an_upload_note_names_the_saved_path_or_why_it_was_not_saved() {
    let message: UserMessage = serde_json::from_value(json!({"id": "m", "content": [
        {"type": "text", "text": "two files"},
        {"type": "document", "source": data("application/pdf", BYTES), "metadata": {"filename": "a.pdf"}},
        {"type": "document", "source": data("application/pdf", BYTES), "metadata": {"filename": "b.pdf"}},
    ]}))
    .unwrap();
    let Converted { parts, uploads, .. } = convert_user_message_with(
        &message,
        &PromptLimits {
            max_attachment_bytes: 1,
        },
    );
    let mut input = UserInput { parts };
    resolve_uploads(
        &mut input,
        &uploads,
        &[
            Ok("uploads/a-2.pdf".into()),
            Err("the workspace is full".into()),
        ],
    );
    assert_eq!(
        input.parts.iter().map(render_part).collect::<Vec<_>>(),
        [format!(
            "text: {:?}",
            "two files\n[Attached document 'a.pdf' (3 bytes) is too large to send inline; it is saved in your workspace as uploads/a-2.pdf]\n[Attached document 'b.pdf' (3 bytes) was too large to send inline and could not be saved in the workspace: the workspace is full]"
        )]
    );
}

#[test]
fn upload_names_are_one_safe_component_taken_from_the_client_s_name() {
    let cases = [
        (Some("report.pdf"), None, "report.pdf"),
        (Some("../../etc/passwd"), None, "passwd"),
        (Some("C:\\Users\\me\\notes.txt"), None, "notes.txt"),
        (Some(".."), Some("application/pdf"), "attachment.pdf"),
        (Some(".bashrc"), None, "bashrc"),
        (
            Some("dir/"),
            Some("text/plain; charset=utf-8"),
            "attachment.txt",
        ),
        (Some("a\u{0}b\nc"), None, "abc"),
        (None, None, "attachment.bin"),
        (None, Some("application/x-unknown"), "attachment.bin"),
    ];
    for (filename, mime, expected) in cases {
        assert_eq!(upload_name(filename, mime), expected, "{filename:?}");
    }
    let long = format!("{}.tar.gz", "x".repeat(300));
    let name = upload_name(Some(&long), None);
    assert_eq!(name.len(), 150);
    assert!(name.ends_with("x.gz"), "{name}");
    let wide = format!("{}.txt", "é".repeat(200));
    let name = upload_name(Some(&wide), None);
    assert!(name.len() <= 150 && name.ends_with("é.txt"), "{name}");
}
