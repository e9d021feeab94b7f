//! Hand-written protobuf for the stdio handshake: the host writes a length-prefixed
//! `InputConfig` to the harness's stdin, and the harness answers with a length-prefixed
//! `OutputConfig` (its WebSocket port and API key) on stdout. Only the fields the tests need:
//! `InputConfig.storage_directory` (1) and `client_info` (4); `OutputConfig.port` (1) and
//! `api_key` (2).

fn varint(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A length-delimited field (wire type 2).
fn bytes_field(number: u64, payload: &[u8], out: &mut Vec<u8>) {
    varint((number << 3) | 2, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// The stdin frame: u32 little-endian length, then the `InputConfig` bytes.
pub(crate) fn input_config_frame(storage_directory: &str) -> Vec<u8> {
    let mut client_info = Vec::new();
    for (number, value) in [
        (1, "rust"),
        (2, env!("CARGO_PKG_VERSION")),
        (3, "test"),
        (4, std::env::consts::OS),
        (5, "test"),
    ] {
        bytes_field(number, value.as_bytes(), &mut client_info);
    }
    let mut message = Vec::new();
    bytes_field(1, storage_directory.as_bytes(), &mut message);
    bytes_field(4, &client_info, &mut message);
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut frame = len.to_le_bytes().to_vec();
    frame.extend(message);
    frame
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint too long".into())
}

/// Decodes `OutputConfig` into (port, api_key).
pub(crate) fn decode_output_config(buf: &[u8]) -> Result<(u16, String), String> {
    let (mut port, mut api_key) = (None, None);
    let mut pos = 0;
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos)?;
        match (key >> 3, key & 7) {
            (1, 0) => port = u16::try_from(read_varint(buf, &mut pos)?).ok(),
            (2, 2) => {
                let len =
                    usize::try_from(read_varint(buf, &mut pos)?).map_err(|e| e.to_string())?;
                let bytes = buf.get(pos..pos + len).ok_or("truncated api_key")?;
                api_key = Some(String::from_utf8_lossy(bytes).into_owned());
                pos += len;
            }
            (_, 0) => {
                read_varint(buf, &mut pos)?;
            }
            (_, 2) => {
                let len =
                    usize::try_from(read_varint(buf, &mut pos)?).map_err(|e| e.to_string())?;
                pos += len;
            }
            (field, wire) => return Err(format!("unexpected field {field} wire type {wire}")),
        }
    }
    Ok((port.ok_or("no port")?, api_key.ok_or("no api_key")?))
}

#[test]
fn handshake_encoding_round_trips() {
    let frame = input_config_frame("/tmp/x");
    assert_eq!(
        usize::try_from(u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]])).ok(),
        Some(frame.len() - 4)
    );
    assert_eq!(&frame[4..6], &[0x0a, 6]);
    // An OutputConfig as the harness writes it: port 38307 and a 32-character key.
    let mut output = vec![0x08, 0xa3, 0xab, 0x02, 0x12, 0x20];
    output.extend_from_slice(b"a10a1c85b33f66aea654cc246e48491a");
    assert_eq!(
        decode_output_config(&output),
        Ok((38307, "a10a1c85b33f66aea654cc246e48491a".to_owned()))
    );
    assert!(decode_output_config(&[0x08]).is_err());
}
