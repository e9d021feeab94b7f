//! Extracting the serialized `FileDescriptorProto` from a protoc-generated `*_pb2.py`.

use anyhow::{Context as _, bail};

/// Returns the bytes of the `AddSerializedFile(b'…')` literal in a `*_pb2.py` module.
pub(crate) fn serialized_descriptor(source: &str) -> anyhow::Result<Vec<u8>> {
    const MARKER: &str = "AddSerializedFile(b";
    let start = source
        .find(MARKER)
        .context("no AddSerializedFile(b'…') call; not a protoc-generated _pb2.py?")?;
    let rest = &source[start + MARKER.len()..];
    let quote = rest
        .chars()
        .next()
        .context("truncated AddSerializedFile call")?;
    if quote != '\'' && quote != '"' {
        bail!("AddSerializedFile argument is not a plain bytes literal");
    }
    parse_bytes_literal(&rest[1..], quote)
}

/// Decodes the body of a Python bytes literal up to its closing `quote`.
///
/// protoc writes these with C-style escapes: `\xHH`, octal `\ooo`, and the usual single-letter ones.
fn parse_bytes_literal(body: &str, quote: char) -> anyhow::Result<Vec<u8>> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == quote as u8 {
            return Ok(out);
        }
        if b != b'\\' {
            if !b.is_ascii() {
                bail!("non-ASCII character in bytes literal at offset {i}");
            }
            out.push(b);
            i += 1;
            continue;
        }
        let esc = *bytes
            .get(i + 1)
            .context("bytes literal ends inside an escape")?;
        i += 2;
        match esc {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' => out.push(esc),
            b'x' => {
                let hex = body.get(i..i + 2).context("truncated \\x escape")?;
                out.push(
                    u8::from_str_radix(hex, 16)
                        .with_context(|| format!("bad \\x escape {hex:?}"))?,
                );
                i += 2;
            }
            b'0'..=b'7' => {
                let mut value = u32::from(esc - b'0');
                let mut digits = 1;
                while digits < 3 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    value = value * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    digits += 1;
                }
                out.push(u8::try_from(value).context("octal escape above 0o377")?);
            }
            other => bail!("unsupported escape \\{} in bytes literal", other as char),
        }
    }
    bail!("unterminated bytes literal")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(source: &str, expected: &[u8]) {
        assert_eq!(serialized_descriptor(source).unwrap(), expected, "{source}");
    }

    #[test]
    fn escapes_are_decoded() {
        check(
            r"x = AddSerializedFile(b'\n$abc\x12\x0cgenai')",
            b"\n$abc\x12\x0cgenai",
        );
        check(
            r#"AddSerializedFile(b'\222\003\000\"q\'\\')"#,
            b"\x92\x03\x00\"q'\\",
        );
        check(r#"AddSerializedFile(b"a'b")"#, b"a'b");
        check(r"AddSerializedFile(b'\18')", b"\x018");
    }

    #[test]
    fn malformed_literals_are_errors() {
        for bad in [
            r"nothing here",
            r"AddSerializedFile(b'\x1",
            r"AddSerializedFile(b'abc",
            r"AddSerializedFile(x)",
        ] {
            assert!(serialized_descriptor(bad).is_err(), "{bad}");
        }
    }
}
