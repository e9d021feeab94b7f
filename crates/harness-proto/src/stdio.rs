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
