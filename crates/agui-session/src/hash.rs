//! Short, safe names from client-supplied text.

/// The first `bytes` bytes of the SHA-256 of `data`, in lowercase hex: how client-supplied ids
/// become short, safe names (workspace directories, record files, contract signatures).
pub(crate) fn sha256_hex(data: &[u8], bytes: usize) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(data);
    hex::encode(&digest[..bytes.min(digest.len())])
}
