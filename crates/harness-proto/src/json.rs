use serde::{Serialize, de::DeserializeOwned};

use crate::error::{ProtoError, Result};

/// Serialises a message as the compact protojson text the harness reads.
pub fn to_json<T: Serialize>(message: &T) -> String {
    // Serialising generated messages into a String cannot fail: every map key is a string and
    // no custom Serialize impl returns an error.
    serde_json::to_string(message)
        .unwrap_or_else(|e| unreachable!("protojson serialisation failed: {e}"))
}

/// Parses protojson text into `T`, naming the message type in the error.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|source| ProtoError::Json {
        message: crate::error::short_type_name::<T>(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lh::{InputEvent, OutputEvent, input_event, output_event};

    #[test]
    fn reading_is_lenient_for_version_skew() {
        // An unknown field and an unknown enum value from a newer harness do not fail the frame.
        let event: OutputEvent = from_json(
            r#"{"trajectoryStateUpdate":{"trajectoryId":"t","state":"STATE_FROM_THE_FUTURE","newField":1},"seqNum":"7"}"#,
        )
        .unwrap();
        assert_eq!(event.seq_num, Some(7));
        let Some(output_event::Event::TrajectoryStateUpdate(update)) = event.event else {
            panic!("{event:?}")
        };
        assert_eq!(update.trajectory_id.as_deref(), Some("t"));
        assert_eq!(
            update.state,
            Some(0),
            "unknown enum values read as UNSPECIFIED"
        );
    }

    #[test]
    fn writing_uses_camel_case_and_string_int64() {
        let input = InputEvent {
            event: Some(input_event::Event::HaltRequest(true)),
        };
        assert_eq!(to_json(&input), r#"{"haltRequest":true}"#);
        let event: OutputEvent = from_json(r#"{"seq_num": 3, "timestamp_micros": "17"}"#).unwrap();
        assert_eq!(to_json(&event), r#"{"seqNum":"3","timestampMicros":"17"}"#);
    }

    #[test]
    fn errors_name_the_message() {
        let err = from_json::<OutputEvent>(r#"{"seqNum": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid OutputEvent JSON"), "{err}");
    }
}
