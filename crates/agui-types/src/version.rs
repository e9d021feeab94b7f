//! Protocol version negotiation (`basic/versioning.mdx`): a consumer declares the version it
//! speaks on `RunAgentInput.protocolVersion`, a producer declares what its stream speaks on
//! `RUN_STARTED.protocolVersion` — its own version, never an echo.
//!
//! This crate speaks [`PROTOCOL_VERSION`] (1.1, which only adds `encryptedValueType` to 1.0).
//! A producer serves every 1.x consumer: a newer minor is served as 1.1 (with a warning for
//! the developer), an undeclared or unreadable version is treated as current (1.1), and a 1.0
//! consumer gets a stream downgraded to 1.0 — a pure transformation that drops what 1.1 added
//! ([`Event::downgrade_to_1_0`](crate::Event::downgrade_to_1_0)), so the client does not warn about a newer producer.

/// The protocol version this crate implements, as declared in `protocolVersion`.
pub const PROTOCOL_VERSION: &str = "1.1";

/// The previous minor, which a 1.0 consumer is served.
pub const PROTOCOL_VERSION_1_0: &str = "1.0";

/// What a producer does about a consumer's declared version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The version the run's stream speaks (its `RUN_STARTED.protocolVersion`).
    pub speaks: &'static str,
    /// Why the developer should be warned, if at all: the consumer declared a newer version
    /// than this producer's, or one that cannot be read.
    pub warning: Option<&'static str>,
}

impl Negotiated {
    /// Whether the stream is downgraded to 1.0 ([`crate::Event::downgrade_to_1_0`] on every
    /// event).
    pub fn is_1_0(&self) -> bool {
        self.speaks == PROTOCOL_VERSION_1_0
    }
}

/// The version to answer a consumer that declared `declared` with.
pub fn negotiate(declared: Option<&str>) -> Negotiated {
    let current = Negotiated {
        speaks: PROTOCOL_VERSION,
        warning: None,
    };
    let Some(declared) = declared else {
        // "Where it does not [know the peer's version], it MUST behave as though the peer
        // were current."
        return current;
    };
    let parsed: Option<Vec<u64>> = declared.split('.').map(|p| p.parse().ok()).collect();
    match parsed.as_deref() {
        Some([1, 0]) => Negotiated {
            speaks: PROTOCOL_VERSION_1_0,
            warning: None,
        },
        Some([1, 1]) => current,
        Some([major, minor]) if (*major, *minor) > (1, 1) => Negotiated {
            warning: Some("the client speaks a newer AG-UI version; serving it as 1.1"),
            ..current
        },
        Some([_, _]) => Negotiated {
            warning: Some("the client speaks an older AG-UI major version; serving it as 1.1"),
            ..current
        },
        _ => Negotiated {
            warning: Some("unreadable AG-UI protocol version; serving the run as 1.1"),
            ..current
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_1_x_client_is_served() {
        let speaks = |v: Option<&str>| negotiate(v).speaks;
        assert_eq!(speaks(Some("1.0")), "1.0", "a lossless downgrade for 1.0");
        assert_eq!(speaks(Some("1.1")), "1.1");
        assert_eq!(
            speaks(None),
            "1.1",
            "an undeclared peer is treated as current"
        );
        for newer in ["1.2", "1.10"] {
            let n = negotiate(Some(newer));
            assert_eq!(n.speaks, "1.1", "answered with our own version");
            assert!(n.warning.is_some(), "and the developer is warned");
        }
        for odd in ["1", "1.0.0", "x", "2.0"] {
            let n = negotiate(Some(odd));
            assert_eq!(n.speaks, "1.1");
            assert!(n.warning.is_some(), "{odd}");
        }
        assert!(negotiate(Some("1.0")).warning.is_none());
    }
}
