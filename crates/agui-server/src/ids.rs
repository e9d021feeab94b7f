//! Ids that clients and operators choose (thread ids, a replica's id): they name directories,
//! files and lease records downstream, so they keep to a safe alphabet.

/// Longest accepted thread id.
pub(crate) const MAX_THREAD_ID: usize = 200;

/// Thread ids name directories and files downstream; keep them to a safe alphabet.
pub(crate) fn valid_thread_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_THREAD_ID {
        return Err(format!("must be 1 to {MAX_THREAD_ID} characters"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')))
    {
        return Err(format!(
            "contains `{}`; use letters, digits and - _ . : @",
            c.escape_default()
        ));
    }
    if id.chars().all(|c| c == '.') {
        return Err("cannot be only dots".into());
    }
    Ok(())
}
