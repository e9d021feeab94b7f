//! Callers' identities, in two namespaces that never meet: a caller with one of `auth_tokens` is
//! `token:<name>`, a user an authenticating proxy names in `user_header` is `user:<name>`. So a
//! proxy's user named like a token holder (`alice` beside `auth_tokens alice=…`) is someone
//! else, and owns none of the token holder's threads.
//!
//! Identities stored before the namespaces (bare, `alice`) are renamed once, at start, by
//! [`migrate`]: `x` becomes `token:x` when `x` is one of `auth_tokens`' names, else `user:x` —
//! what each caller could be then, the token's name winning where both were possible, as it did
//! in practice (a proxy's user named like a token holder could read that holder's threads).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{ConfigProblem, ServerError};

/// The identity of a caller with the `auth_tokens` entry `name`.
pub(crate) fn of_token(name: &str) -> String {
    format!("token:{name}")
}

/// The identity of a user an authenticating proxy names in `user_header`.
pub(crate) fn of_user(user: &str) -> String {
    format!("user:{user}")
}

/// What an identity stored before namespaces becomes: `token:<x>` when `x` is one of
/// `auth_tokens`' names, else `user:<x>`.
pub(crate) fn namespaced(bare: &str, auth_tokens: &BTreeMap<String, String>) -> String {
    if auth_tokens.contains_key(bare) {
        of_token(bare)
    } else {
        of_user(bare)
    }
}

/// Renames the identities stored under an agent's `save_dir` before namespaces (in its thread
/// owners, `owners/`, and in agui-session's records and trees), once: later starts find it done
/// and change nothing, whatever `auth_tokens` says by then.
pub(crate) async fn migrate(
    save_dir: &Path,
    auth_tokens: &BTreeMap<String, String>,
) -> Result<(), ServerError> {
    let (dir, tokens) = (save_dir.to_owned(), auth_tokens.clone());
    let migrated = tokio::task::spawn_blocking(move || {
        agui_session::migrate_identities(&dir, &|bare| namespaced(bare, &tokens))
    })
    .await
    .map_err(|e| {
        ServerError::config(
            ConfigProblem::Migration,
            format!("the identity migration stopped: {e}"),
        )
    })??;
    if migrated.migrated_now {
        tracing::info!(
            save_dir = %save_dir.display(),
            renamed = ?migrated.renamed,
            "threads stored before identities had namespaces now belong to `token:<name>` (a name in auth_tokens) or `user:<name>` (any other); kept in identities.json"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_identity_is_a_tokens_when_auth_tokens_name_it_else_a_users() {
        let tokens: BTreeMap<String, String> =
            [("alice".to_owned(), "a".repeat(16))].into_iter().collect();
        assert_eq!(namespaced("alice", &tokens), "token:alice");
        assert_eq!(namespaced("bob", &tokens), "user:bob");
        assert_eq!(namespaced("token:alice", &tokens), "user:token:alice");
        assert_ne!(of_token("alice"), of_user("alice"));
    }
}
