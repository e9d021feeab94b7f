//! Short, safe names from client-supplied text.

/// The first `bytes` bytes of the SHA-256 of `data`, in lowercase hex: how client-supplied ids
/// become short, safe names (workspace directories, record files, contract signatures).
pub(crate) fn sha256_hex(data: &[u8], bytes: usize) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    let digest = sha2::Sha256::digest(data);
    let mut hex = String::with_capacity(bytes.min(digest.len()) * 2);
    for byte in digest.iter().take(bytes) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}
