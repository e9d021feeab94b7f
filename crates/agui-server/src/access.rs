//! Who may use the server: the decisions every request passes before a handler runs — its
//! `Host`, its `Origin`, its credentials — and the identity they give the caller. `http.rs`
//! applies them as layers over the routes; `owners.rs` binds threads to identities.
//!
//! - **Host** (against DNS rebinding, where a web page's own name is made to resolve to this
//!   server): loopback names (`localhost`, `127.0.0.1`, `[::1]`) and the bind address, with any
//!   port; any IP address when bound to all addresses (`0.0.0.0`, `[::]`) — a page cannot rebind
//!   an address, only a name; plus `allowed_hosts`. HTTP/1.1 and HTTP/2 requests without a host
//!   are refused.
//! - **Origin** (against other web pages): a request from a browser page (it carries `Origin`)
//!   must come from `cors_origins` or from this server's own origin (the playground).
//! - **Credentials**: the bearer token(s), compared in constant time; the caller's identity is
//!   its token's name (`auth_tokens`) or, with `user_header`, the user an authenticating proxy
//!   names.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::str::FromStr;

use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderName, StatusCode, Uri, Version, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ServerConfig;
use crate::error::ServerError;

/// Longest identity taken from `user_header`.
const MAX_IDENTITY: usize = 256;

/// Why a request is refused: the status, a short error and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// A short error name.
    pub(crate) error: &'static str,
    /// What the caller or the operator can do about it.
    pub(crate) detail: String,
}

/// The caller of a request, as its credentials tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    /// Who it is, when the server tells callers apart (`auth_tokens`, `user_header`).
    pub(crate) identity: Option<String>,
}

/// A secret kept as its SHA-256 digest. Comparing hashes both sides to 32 bytes and compares
/// the digests in constant time, so the time taken tells nothing of the secret's bytes or
/// length.
#[derive(Clone)]
struct Secret([u8; 32]);

impl Secret {
    fn new(text: &str) -> Self {
        Self(Sha256::digest(text.as_bytes()).into())
    }

    fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(&self.0).into()
    }
}

/// A bearer token and the identity it gives (none for `auth_token`).
#[derive(Clone)]
struct Token {
    secret: Secret,
    identity: Option<String>,
}

/// What requests the server accepts: for which host names, from which pages, with which
/// credentials.
#[derive(Clone)]
pub(crate) struct AccessPolicy {
    bind: IpAddr,
    any_host: bool,
    /// `allowed_hosts`: lower-case names, each with the one port it allows (none: any).
    allowed_hosts: Vec<(String, Option<u16>)>,
    any_origin: bool,
    /// `cors_origins`, lower case, without a trailing slash.
    cors_origins: Vec<String>,
    /// Empty: no token needed.
    tokens: Vec<Token>,
    /// `user_header`, and its name as configured (for messages).
    user_header: Option<(HeaderName, String)>,
}

impl std::fmt::Debug for AccessPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessPolicy")
            .field("bind", &self.bind)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("cors_origins", &self.cors_origins)
            .field("tokens", &self.tokens.len())
            .field("user_header", &self.user_header)
            .finish_non_exhaustive()
    }
}

impl AccessPolicy {
    /// The policy of `config`. Refuses what would expose the agent — a non-loopback bind with
    /// no token (unless `insecure_no_auth`), `cors_origins = ["*"]` with no token — and
    /// malformed hosts, tokens and header names, each naming the fix.
    pub(crate) fn new(config: &ServerConfig) -> Result<Self, ServerError> {
        let bad = |m: String| Err(ServerError::Config(m));
        let mut tokens: Vec<Token> = config
            .auth_token
            .iter()
            .map(|t| Token {
                secret: Secret::new(t),
                identity: None,
            })
            .collect();
        if !tokens.is_empty() && !config.auth_tokens.is_empty() {
            return bad("set either auth_token or auth_tokens, not both (give the single token a name in auth_tokens)".into());
        }
        let mut seen = BTreeMap::new();
        for (name, token) in &config.auth_tokens {
            if name.trim().is_empty() || token.is_empty() {
                return bad(
                    "auth_tokens: every entry needs a name and a non-empty token (`name=token`)"
                        .into(),
                );
            }
            if let Some(other) = seen.insert(token.as_str(), name) {
                return bad(format!(
                    "auth_tokens: `{other}` and `{name}` have the same token; give each identity its own"
                ));
            }
            tokens.push(Token {
                secret: Secret::new(token),
                identity: Some(name.clone()),
            });
        }
        if let Some(proxy) = &config.proxy_token {
            if config.user_header.is_none() {
                return bad("proxy_token is the token of the proxy that names users in user_header; set user_header too, or drop proxy_token".into());
            }
            if tokens.iter().any(|t| t.secret.matches(proxy.as_bytes())) {
                return bad(
                    "proxy_token must differ from every auth_token and auth_tokens entry".into(),
                );
            }
            // Like a single auth_token: a request with it names its user in the header.
            tokens.push(Token {
                secret: Secret::new(proxy),
                identity: None,
            });
        }
        if config.user_header.is_some()
            && !config.auth_tokens.is_empty()
            && config.proxy_token.is_none()
        {
            return bad("auth_tokens together with user_header would let any token holder name any user in the header; set proxy_token (the token only the authenticating proxy presents: the header is trusted from it alone), or use one of the two".into());
        }
        let user_header = match &config.user_header {
            Some(name) => match HeaderName::from_str(name.trim()) {
                Ok(header) => Some((header, name.trim().to_owned())),
                Err(_) => {
                    return bad(format!("user_header `{name}` is not an HTTP header name"));
                }
            },
            None => None,
        };
        let mut allowed_hosts = Vec::new();
        let mut any_host = false;
        for entry in &config.allowed_hosts {
            let entry = entry.trim();
            if entry == "*" {
                any_host = true;
                continue;
            }
            match Authority::from_str(entry) {
                Ok(authority) if !entry.contains('@') => {
                    allowed_hosts.push((host_name(authority.host()), authority.port_u16()));
                }
                _ => {
                    return bad(format!(
                        "allowed_hosts: `{entry}` is not a host name; write `name` (any port) or `name:port`, without a scheme or path"
                    ));
                }
            }
        }
        let any_origin = config.cors_origins.iter().any(|o| o.trim() == "*");
        let bind = config.bind.ip().to_canonical();
        if tokens.is_empty() {
            if any_origin {
                return bad(
                    "cors_origins = [\"*\"] lets every web page drive the agent; set auth_token (or auth_tokens), or list the origins that may use it".into(),
                );
            }
            if !bind.is_loopback() && !config.insecure_no_auth {
                return bad(format!(
                    "bind {} is not a loopback address and no auth_token is set, so anyone who reaches it could run commands through the agent; set auth_token (or auth_tokens), bind to 127.0.0.1, or — only if something in front authenticates every request — set insecure_no_auth = true (--insecure-no-auth)",
                    config.bind
                ));
            }
        }
        Ok(Self {
            bind,
            any_host,
            allowed_hosts,
            any_origin,
            cors_origins: config
                .cors_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| o != "*")
                .collect(),
            tokens,
            user_header,
        })
    }

    /// Whether a non-loopback bind is served with no token (`insecure_no_auth`).
    pub(crate) fn is_exposed_without_auth(&self) -> bool {
        self.tokens.is_empty() && !self.bind.is_loopback()
    }

    /// The origins of `cors_origins`, lower case, and whether any origin may (`*`).
    pub(crate) fn cors_origins(&self) -> (bool, &[String]) {
        (self.any_origin, &self.cors_origins)
    }

    /// Whether callers have identities, so threads have owners (`auth_tokens`, `user_header`).
    pub(crate) fn has_identities(&self) -> bool {
        self.user_header.is_some() || self.tokens.iter().any(|t| t.identity.is_some())
    }

    /// The Host and Origin checks every route but `/healthz` passes.
    pub(crate) fn check_site(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
        version: Version,
    ) -> Result<(), Refusal> {
        let host = self.check_host(headers, uri, version)?;
        self.check_origin(headers, host.as_deref())
    }

    /// Checks the request's host (its `Host`, and the authority of an absolute URI); returns
    /// it, lower case, when there is one.
    fn check_host(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
        version: Version,
    ) -> Result<Option<String>, Refusal> {
        let named: Vec<String> = headers
            .get_all(header::HOST)
            .iter()
            .map(|v| v.to_str().unwrap_or("\u{fffd}").to_owned())
            .chain(uri.authority().map(|a| a.as_str().to_owned()))
            .collect();
        if named.is_empty() {
            if version == Version::HTTP_10 || version == Version::HTTP_09 {
                return Ok(None);
            }
            return Err(Refusal {
                status: StatusCode::MISDIRECTED_REQUEST,
                error: "host not allowed",
                detail: "the request names no host; send `Host`".into(),
            });
        }
        for host in &named {
            if !self.host_allowed(host) {
                return Err(Refusal {
                    status: StatusCode::MISDIRECTED_REQUEST,
                    error: "host not allowed",
                    detail: format!(
                        "this server answers to localhost, its loopback and bind addresses and allowed_hosts, not to `{}`; if clients reach it by that name, add it to allowed_hosts (--allowed-hosts)",
                        shown(host)
                    ),
                });
            }
        }
        Ok(Some(named[0].to_ascii_lowercase()))
    }

    fn host_allowed(&self, host: &str) -> bool {
        if self.any_host {
            return true;
        }
        let Ok(authority) = Authority::from_str(host) else {
            return false;
        };
        if host.contains('@') {
            return false;
        }
        let name = host_name(authority.host());
        let ip = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok()
            .map(|ip| ip.to_canonical());
        let builtin = match ip {
            Some(ip) => ip.is_loopback() || ip == self.bind || self.bind.is_unspecified(),
            None => name == "localhost",
        };
        builtin
            || self.allowed_hosts.iter().any(|(allowed, port)| {
                *allowed == name && port.is_none_or(|p| Some(p) == authority.port_u16())
            })
    }

    /// A browser's request (it carries `Origin`) must come from `cors_origins` or from this
    /// server's own origin (`http://<host>` or `https://<host>`: the playground's requests).
    fn check_origin(&self, headers: &HeaderMap, host: Option<&str>) -> Result<(), Refusal> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin
            .to_str()
            .unwrap_or("\u{fffd}")
            .trim_end_matches('/')
            .to_ascii_lowercase();
        let same_origin = host.is_some_and(|host| {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host)
        });
        if same_origin || self.any_origin || self.cors_origins.contains(&origin) {
            return Ok(());
        }
        Err(Refusal {
            status: StatusCode::FORBIDDEN,
            error: "origin not allowed",
            detail: format!(
                "pages from `{}` may not use this server; to let them, add that origin to cors_origins (--cors-origins)",
                shown(&origin)
            ),
        })
    }

    /// The caller of a request with these headers, or why it is refused (401): the bearer token
    /// when tokens are configured, and with `needs_identity`, the `user_header` when one is.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        needs_identity: bool,
    ) -> Result<Caller, Refusal> {
        let mut caller = Caller::default();
        if !self.tokens.is_empty() {
            let presented = bearer_token(headers).unwrap_or("").as_bytes();
            // Every token is compared, so the time taken does not tell which one matched.
            let mut matched = None;
            for token in &self.tokens {
                if token.secret.matches(presented) {
                    matched = Some(token);
                }
            }
            let Some(token) = matched else {
                return Err(Refusal {
                    status: StatusCode::UNAUTHORIZED,
                    error: "unauthorized",
                    detail: "send `Authorization: Bearer <token>` with the server's token".into(),
                });
            };
            caller.identity = token.identity.clone();
            if let (Some((header, name)), Some(_)) = (&self.user_header, &token.identity)
                && headers.contains_key(header)
            {
                // A caller with a token of its own is that token's identity: naming another
                // user is the proxy's alone.
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    error: "forbidden",
                    detail: format!(
                        "`{name}` is accepted only from the authenticating proxy; a caller with its own token must not send it"
                    ),
                });
            }
            if token.identity.is_some() {
                return Ok(caller);
            }
        }
        if needs_identity && let Some((header, name)) = &self.user_header {
            let user = headers
                .get(header)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|u| !u.is_empty() && u.len() <= MAX_IDENTITY);
            let Some(user) = user else {
                return Err(Refusal {
                    status: StatusCode::UNAUTHORIZED,
                    error: "unauthorized",
                    detail: format!(
                        "requests must come through the authenticating proxy, which names the user in `{name}`; this one did not"
                    ),
                });
            };
            caller.identity = Some(user.to_owned());
        }
        Ok(caller)
    }
}

/// A host name as compared: lower case, without the trailing dot of a fully qualified name.
fn host_name(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// A request's value, shown in a refusal: printable ASCII, at most 100 characters.
fn shown(value: &str) -> String {
    value
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(100)
        .collect()
}

/// The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive,
/// RFC 9110 §11.1).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let (scheme, token) = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy(toml: &str) -> Result<AccessPolicy, String> {
        let file: crate::FileConfig = toml::from_str(toml).map_err(|e| e.to_string())?;
        let config = ServerConfig::merge(file, &crate::cli::ServeArgs::default())
            .map_err(|e| e.to_string())?;
        AccessPolicy::new(&config).map_err(|e| e.to_string())
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                HeaderName::from_str(name).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    fn site(policy: &AccessPolicy, pairs: &[(&str, &str)]) -> Result<(), u16> {
        policy
            .check_site(&headers(pairs), &Uri::from_static("/"), Version::HTTP_11)
            .map_err(|r| r.status.as_u16())
    }

    #[test]
    fn secrets_match_only_themselves_whatever_their_length() {
        let secret = Secret::new("s3cret-token");
        assert!(secret.matches(b"s3cret-token"));
        assert!(!secret.matches(b"s3cret-tokeN"), "same length");
        assert!(!secret.matches(b"s3cret-token2"), "longer");
        assert!(!secret.matches(b"s3cret"), "a prefix");
        assert!(!secret.matches(b""), "empty");
        assert!(Secret::new("").matches(b""));
    }

    #[test]
    fn bearer_tokens_are_read_whatever_the_scheme_case() {
        let token =
            |value: &str| bearer_token(&headers(&[("authorization", value)])).map(str::to_owned);
        assert_eq!(token("Bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("bearer s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("BEARER  s3cret").as_deref(), Some("s3cret"));
        assert_eq!(token("Basic czNjcmV0"), None);
        assert_eq!(token("Bearer"), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn loopback_names_and_the_bind_address_are_answered_with_any_port() {
        let p = policy("").unwrap();
        for host in [
            "localhost",
            "localhost:8027",
            "LOCALHOST:1",
            "127.0.0.1:8027",
            "127.0.0.2",
            "[::1]:8027",
            "[::1]",
        ] {
            assert_eq!(site(&p, &[("host", host)]), Ok(()), "{host}");
        }
        for host in [
            "rebind.attacker.example",
            "localhost.attacker.example:8027",
            "10.0.0.5:8027",
            "user@localhost",
        ] {
            assert_eq!(site(&p, &[("host", host)]), Err(421), "{host}");
        }
        assert_eq!(site(&p, &[]), Err(421), "HTTP/1.1 without Host");
        assert_eq!(
            p.check_site(&HeaderMap::new(), &Uri::from_static("/"), Version::HTTP_10),
            Ok(()),
            "HTTP/1.0 had no Host"
        );
        assert_eq!(
            p.check_site(
                &headers(&[("host", "localhost")]),
                &Uri::from_static("http://evil.example/"),
                Version::HTTP_11
            )
            .map_err(|r| r.status.as_u16()),
            Err(421),
            "an absolute URI's authority is checked too"
        );
        // Bound to one address: that one; to every address: any address, never a name.
        let one = policy("bind = \"10.0.0.5:8027\"\nauth_token = \"t\"").unwrap();
        assert_eq!(site(&one, &[("host", "10.0.0.5:8027")]), Ok(()));
        assert_eq!(site(&one, &[("host", "10.0.0.6:8027")]), Err(421));
        let all = policy("bind = \"0.0.0.0:8027\"\nauth_token = \"t\"").unwrap();
        assert_eq!(site(&all, &[("host", "10.0.0.6:8027")]), Ok(()));
        assert_eq!(site(&all, &[("host", "[2001:db8::1]")]), Ok(()));
        assert_eq!(site(&all, &[("host", "rebind.attacker.example")]), Err(421));
    }

    #[test]
    fn allowed_hosts_extend_the_names_answered() {
        let p = policy("allowed_hosts = [\"agents.example.com\", \"Intranet:9000\"]").unwrap();
        assert_eq!(site(&p, &[("host", "agents.example.com")]), Ok(()));
        assert_eq!(site(&p, &[("host", "agents.example.com.:443")]), Ok(()));
        assert_eq!(site(&p, &[("host", "intranet:9000")]), Ok(()));
        assert_eq!(site(&p, &[("host", "intranet:9001")]), Err(421));
        assert_eq!(site(&p, &[("host", "other.example.com")]), Err(421));
        let any = policy("allowed_hosts = [\"*\"]").unwrap();
        assert_eq!(site(&any, &[("host", "anything.example")]), Ok(()));
        let bad = policy("allowed_hosts = [\"https://agents.example.com/\"]").unwrap_err();
        assert!(bad.contains("allowed_hosts"), "{bad}");
    }

    #[test]
    fn browser_pages_need_an_allowed_or_their_own_origin() {
        let p = policy("cors_origins = [\"https://app.example/\"]").unwrap();
        let host = ("host", "127.0.0.1:8027");
        assert_eq!(site(&p, &[host]), Ok(()), "not a browser");
        assert_eq!(site(&p, &[host, ("origin", "https://app.example")]), Ok(()));
        assert_eq!(
            site(&p, &[host, ("origin", "http://127.0.0.1:8027")]),
            Ok(())
        );
        assert_eq!(
            site(&p, &[host, ("origin", "https://127.0.0.1:8027")]),
            Ok(())
        );
        for foreign in [
            "http://evil.example",
            "http://127.0.0.1:9999",
            "http://127.0.0.1:8027.evil.example",
            "null",
        ] {
            assert_eq!(
                site(&p, &[host, ("origin", foreign)]),
                Err(403),
                "{foreign}"
            );
        }
    }

    #[test]
    fn exposing_the_agent_without_a_token_is_refused_at_start() {
        let open = policy("bind = \"0.0.0.0:8027\"").unwrap_err();
        assert!(
            open.contains("auth_token") && open.contains("insecure_no_auth"),
            "{open}"
        );
        let p = policy("bind = \"0.0.0.0:8027\"\ninsecure_no_auth = true").unwrap();
        assert!(p.is_exposed_without_auth());
        assert!(!policy("").unwrap().is_exposed_without_auth());
        assert!(policy("bind = \"[::]:8027\"\nauth_token = \"t\"").is_ok());
        let star = policy("cors_origins = [\"*\"]").unwrap_err();
        assert!(star.contains("auth_token"), "{star}");
        assert!(policy("cors_origins = [\"*\"]\nauth_token = \"t\"").is_ok());
    }

    #[test]
    fn callers_are_named_by_their_token_or_by_the_proxy() {
        let p = policy("auth_tokens = { alice = \"a-token\", bob = \"b-token\" }").unwrap();
        assert!(p.has_identities());
        let who = |pairs: &[(&str, &str)]| {
            p.authenticate(&headers(pairs), true)
                .map(|c| c.identity)
                .map_err(|r| r.status.as_u16())
        };
        assert_eq!(
            who(&[("authorization", "Bearer a-token")]),
            Ok(Some("alice".into()))
        );
        assert_eq!(
            who(&[("authorization", "Bearer b-token")]),
            Ok(Some("bob".into()))
        );
        assert_eq!(who(&[("authorization", "Bearer c-token")]), Err(401));
        assert_eq!(who(&[]), Err(401));
        let list = policy("auth_tokens = [\"x-token\"]").unwrap();
        let named = list
            .authenticate(&headers(&[("authorization", "Bearer x-token")]), true)
            .unwrap();
        assert_eq!(
            named.identity,
            Some(crate::config::unnamed_token_identity("x-token"))
        );
        assert!(!named.identity.unwrap().contains("x-token"));

        let proxied = policy("user_header = \"X-Forwarded-User\"").unwrap();
        assert!(proxied.has_identities());
        assert_eq!(
            proxied
                .authenticate(&headers(&[("x-forwarded-user", "carol")]), true)
                .map(|c| c.identity),
            Ok(Some("carol".into()))
        );
        assert_eq!(
            proxied
                .authenticate(&headers(&[]), true)
                .map_err(|r| r.status.as_u16()),
            Err(401)
        );
        assert_eq!(
            proxied.authenticate(&headers(&[]), false),
            Ok(Caller::default()),
            "routes without threads need no user"
        );
        assert!(!policy("auth_token = \"t\"").unwrap().has_identities());
        assert!(policy("auth_token = \"t\"\nauth_tokens = { a = \"u\" }").is_err());
        assert!(policy("auth_tokens = { a = \"u\", b = \"u\" }").is_err());
        assert!(policy("user_header = \"not a header\"").is_err());
    }
}
