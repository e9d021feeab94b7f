//! Who a thread belongs to: the boundary of its confinement. Threads of one owner may share a
//! harness process and see each other's workspaces; threads of different owners never share a
//! process, a directory tree or a sandbox.

use std::sync::Arc;

/// The owner of a thread: an authenticated identity, or the one local owner of a server
/// without identities. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(Option<Arc<str>>);

impl Owner {
    /// The one owner of a server whose callers have no identities.
    pub fn local() -> Self {
        Self(None)
    }

    /// The owner named by an identity (agui-server's `token:<name>` for an `auth_tokens` name,
    /// `user:<name>` for a user named by a proxy). An empty identity is the local owner.
    pub fn named(identity: &str) -> Self {
        if identity.is_empty() {
            Self::local()
        } else {
            Self(Some(Arc::from(identity)))
        }
    }

    /// The identity; `None` for the local owner.
    pub fn identity(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Whether this is the local owner.
    pub fn is_local(&self) -> bool {
        self.0.is_none()
    }
}

impl Default for Owner {
    fn default() -> Self {
        Self::local()
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(identity) => f.write_str(identity),
            None => f.write_str("(local)"),
        }
    }
}

/// As its identity, the local owner as `""` (so that an absent owner, `null`, stays
/// distinguishable from the local one).
impl serde::Serialize for Owner {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.identity().unwrap_or_default().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Owner {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let identity: String = serde::Deserialize::deserialize(d)?;
        Ok(Self::named(&identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_owner_is_no_identity_and_survives_serialisation() {
        assert!(Owner::named("").is_local());
        assert_eq!(Owner::named("alice").identity(), Some("alice"));
        for owner in [Owner::local(), Owner::named("alice")] {
            let json = serde_json::to_string(&owner).unwrap();
            assert_eq!(serde_json::from_str::<Owner>(&json).unwrap(), owner);
        }
        assert_ne!(Owner::local(), Owner::named("local"));
        let recorded: Option<Owner> = serde_json::from_str("\"\"").unwrap();
        assert_eq!(
            recorded,
            Some(Owner::local()),
            "the local owner is not a missing one"
        );
    }
}
