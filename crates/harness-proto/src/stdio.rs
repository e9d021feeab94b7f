//! The stdio handshake framing: a little-endian `u32` length, then binary protobuf.

use prost::Message;

use crate::error::{ProtoError, Result};

/// The largest stdio frame accepted (the real ones are a few hundred bytes).
pub const MAX_STDIO_FRAME: usize = 1 << 20;

/// Encodes `message` as one stdio frame (`InputConfig` on the harness's stdin).
pub fn encode_stdio_frame<M: Message>(message: &M) -> Vec<u8> {
    let body = message.encode_to_vec();
    let len = u32::try_from(body.len()).expect("a protobuf message over 4 GiB is not a config");
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Decodes one complete stdio frame (length prefix included); trailing bytes are an error.
pub fn decode_stdio_frame<M: Message + Default>(frame: &[u8]) -> Result<M> {
    let Some((len, body)) = frame.split_first_chunk::<4>() else {
        return Err(ProtoError::Frame(format!(
            "{} bytes is shorter than the 4-byte length prefix",
            frame.len()
        )));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if body.len() != len {
        return Err(ProtoError::Frame(format!(
            "length prefix says {len} bytes but {} follow",
            body.len()
        )));
    }
    decode::<M>(body)
}

/// Reads one stdio frame from `reader` (`OutputConfig` from the harness's stdout).
pub fn read_stdio_frame<M: Message + Default>(reader: &mut impl std::io::Read) -> Result<M> {
    let mut len = [0u8; 4];
    reader.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_STDIO_FRAME {
        return Err(ProtoError::Frame(format!(
            "length prefix {len} exceeds the {MAX_STDIO_FRAME}-byte limit"
        )));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    decode::<M>(&body)
}

fn decode<M: Message + Default>(body: &[u8]) -> Result<M> {
    M::decode(body).map_err(|source| ProtoError::Protobuf {
        message: crate::error::short_type_name::<M>(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lh::{ClientInfo, InputConfig, OutputConfig};

    #[test]
    fn input_config_matches_the_sdk_bytes() {
        // Same layout as the bytes the Python SDK wrote in capture a_text (shorter path).
        let config = InputConfig {
            storage_directory: Some("/tmp/s".into()),
            client_info: Some(ClientInfo {
                language: Some("python".into()),
                version: Some("0.1.22".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let frame = encode_stdio_frame(&config);
        let expected: &[u8] = b"\x1a\x00\x00\x00\x0a\x06/tmp/s\x22\x10\x0a\x06python\x12\x060.1.22";
        assert_eq!(frame, expected);
        assert_eq!(decode_stdio_frame::<InputConfig>(&frame).unwrap(), config);
        assert_eq!(
            read_stdio_frame::<InputConfig>(&mut &frame[..]).unwrap(),
            config
        );
    }

    #[test]
    fn malformed_frames_are_errors() {
        let good = encode_stdio_frame(&OutputConfig {
            port: Some(38307),
            api_key: Some("k".into()),
        });
        let cases: [(&[u8], &str); 4] = [
            (&good[..3], "shorter than the 4-byte length prefix"),
            (&good[..good.len() - 1], "follow"),
            (&[good.as_slice(), b"x"].concat(), "follow"),
            (b"\x02\x00\x00\x00\xff\xff", "invalid OutputConfig protobuf"),
        ];
        for (bytes, expected) in cases {
            let err = decode_stdio_frame::<OutputConfig>(bytes)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(expected),
                "{err:?} should mention {expected:?}"
            );
        }
        let huge = (MAX_STDIO_FRAME as u32 + 1).to_le_bytes();
        let err = read_stdio_frame::<OutputConfig>(&mut &huge[..])
            .unwrap_err()
            .to_string();
        assert!(err.contains("exceeds"), "{err}");
        let err = read_stdio_frame::<OutputConfig>(&mut &good[..5]).unwrap_err();
        assert!(matches!(err, ProtoError::Io(_)), "{err}");
    }
}
