//! Building `userInput` messages.

use harness_proto::lh::{UserInput, user_input};

/// A text prompt. Control characters other than tab and newlines become spaces, and a blank
/// prompt is sent as a single space (what the Python SDK does; the harness rejects neither, but
/// the model API misbehaves on raw control bytes and empty turns).
pub fn text(text: &str) -> UserInput {
    UserInput {
        parts: vec![text_part(text)],
    }
}

/// A text part, sanitised as in [`text`].
pub fn text_part(text: &str) -> user_input::Part {
    let mut clean: String = text
        .chars()
        .map(|c| {
            if c.is_control() && !matches!(c, '\t' | '\n' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    if clean.trim().is_empty() {
        clean = " ".to_owned();
    }
    user_input::Part {
        part: Some(user_input::part::Part::Text(clean)),
    }
}

/// An inline media part (image, audio, video, document); the model receives it as inline data.
pub fn media_part(mime_type: &str, data: Vec<u8>, description: &str) -> user_input::Part {
    user_input::Part {
        part: Some(user_input::part::Part::Media(user_input::Media {
            mime_type: Some(mime_type.to_owned()),
            description: (!description.is_empty()).then(|| description.to_owned()),
            data: Some(data),
        })),
    }
}

/// A prompt made of several parts, in order.
pub fn parts(parts: impl IntoIterator<Item = user_input::Part>) -> UserInput {
    UserInput {
        parts: parts.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        let Some(user_input::part::Part::Text(got)) = text_part(input).part else {
            panic!()
        };
        assert_eq!(got, expected, "{input:?}");
    }

    #[test]
    fn prompts_are_sanitised() {
        check("hello", "hello");
        check("a\u{0}b\u{7}c", "a b c");
        check("line\nnext\ttab\r", "line\nnext\ttab\r");
        check("   ", " ");
        check("", " ");
    }
}
