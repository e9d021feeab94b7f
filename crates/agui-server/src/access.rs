//! Who may use the server: the decisions every request passes before a handler runs — its
//! `Host`, its `Origin`, its credentials — and the identity they give the caller. `http.rs`
//! applies them as layers over the routes; agui-session's thread store binds threads to identities.
//!
//! - **Host** (against DNS rebinding, where a web page's own name is made to resolve to this
//!   server): loopback names (`localhost`, `127.0.0.1`, `[::1]`) and the bind address, with any
//!   port; any IP address when bound to all addresses (`0.0.0.0`, `[::]`) — a page cannot rebind
//!   an address, only a name; plus `allowed_hosts`. HTTP/1.1 and HTTP/2 requests without a host
//!   are refused.
//! - **Origin** (against other web pages): a request from a browser page (it carries `Origin`)
//!   must come from `cors_origins` or from this server's own origin (the playground).
//! - **Credentials**: the bearer token(s), compared in constant time; the caller's identity is
//!   its token's name (`auth_tokens`, as `token:<name>`) or, with `user_header`, the user an
//!   authenticating proxy names (`user:<name>`: `identities.rs`). A request that names its token
//!   or its user twice — two `Authorization` or user headers, or a list of users in one — is
//!   refused (400): which one counts would depend on the proxy, and a proxy that appends to what
//!   the client sent would let the client choose. Tokens shorter than [`MIN_TOKEN_CHARS`] are
//!   refused at start.
//! - **`/metrics`**: `metrics_token` or a token of the server; closed (401) on a server with
//!   identities and no token at all (`user_header` alone) until `metrics_token` is set.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::str::FromStr;

use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderName, StatusCode, Uri, Version, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ServerConfig;
use crate::error::{ConfigProblem, ServerError};
use crate::identities;

/// Longest identity taken from `user_header`.
const MAX_IDENTITY: usize = 256;

/// The shortest token accepted (`auth_token`, `auth_tokens`, `proxy_token`, `metrics_token`).
pub(crate) const MIN_TOKEN_CHARS: usize = 16;

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
    /// `metrics_token`: a token for `/metrics` alone.
    metrics: Option<Secret>,
}

impl std::fmt::Debug for AccessPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessPolicy")
            .field("bind", &self.bind)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("cors_origins", &self.cors_origins)
            .field("tokens", &self.tokens.len())
            .field("user_header", &self.user_header)
            .field("metrics_token", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

impl AccessPolicy {
    /// The policy of `config`. Refuses what would expose the agent — a non-loopback bind with
    /// no token (unless `insecure_no_auth`), `cors_origins = ["*"]` with no token — and
    /// malformed hosts, tokens (shorter than [`MIN_TOKEN_CHARS`], or one given twice) and header
    /// names, each naming the fix.
    pub(crate) fn new(config: &ServerConfig) -> Result<Self, ServerError> {
        let bad = |m: String| Err(ServerError::config(ConfigProblem::Access, m));
        if let Some(token) = &config.auth_token {
            long_enough("auth_token", token)?;
        }
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
            // A token of a list is named after its digest, which would help guess a short one.
            let entry = if *name == crate::config::unnamed_token_identity(token) {
                "an entry of the auth_tokens list".to_owned()
            } else {
                format!("auth_tokens entry `{name}`")
            };
            long_enough(&format!("the token of {entry}"), token)?;
            if let Some(other) = seen.insert(token.as_str(), name) {
                return bad(format!(
                    "auth_tokens: `{other}` and `{name}` have the same token; give each identity its own"
                ));
            }
            tokens.push(Token {
                secret: Secret::new(token),
                identity: Some(identities::of_token(name)),
            });
        }
        if let Some(proxy) = &config.proxy_token {
            long_enough("proxy_token", proxy)?;
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
        let metrics = match &config.metrics_token {
            Some(token) => {
                long_enough("metrics_token", token)?;
                if tokens.iter().any(|t| t.secret.matches(token.as_bytes())) {
                    return bad(
                        "metrics_token must differ from every other token: it opens /metrics alone"
                            .into(),
                    );
                }
                Some(Secret::new(token))
            }
            None => None,
        };
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
            metrics,
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

    /// Whether `/metrics` refuses every request: callers have identities, and no token (nor
    /// `metrics_token`) could open it.
    pub(crate) fn metrics_closed(&self) -> bool {
        self.user_header.is_some() && self.tokens.is_empty() && self.metrics.is_none()
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

    /// The caller of a request with these headers, or why it is refused: 400 when it names its
    /// token or its user twice, 401 without the bearer token when tokens are configured or
    /// without the `user_header` when one is, 403 for a token holder naming a user.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let named = self.named_user(headers)?;
        let mut caller = Caller::default();
        if !self.tokens.is_empty() {
            let presented = presented_token(headers)?;
            // Every token is compared, so the time taken does not tell which one matched.
            let mut matched = None;
            for token in &self.tokens {
                if token.secret.matches(presented) {
                    matched = Some(token);
                }
            }
            let Some(token) = matched else {
                return Err(unauthorized(
                    "send `Authorization: Bearer <token>` with the server's token".into(),
                ));
            };
            if let Some(identity) = &token.identity {
                if let Some((header, name)) = &self.user_header
                    && headers.contains_key(header)
                {
                    // A caller with a token of its own is that token's identity: naming a
                    // user is the proxy's alone.
                    return Err(Refusal {
                        status: StatusCode::FORBIDDEN,
                        error: "forbidden",
                        detail: format!(
                            "`{name}` is accepted only from the authenticating proxy; a caller with its own token must not send it"
                        ),
                    });
                }
                caller.identity = Some(identity.clone());
                return Ok(caller);
            }
        }
        if let Some((_, name)) = &self.user_header {
            let Some(user) = named else {
                return Err(unauthorized(format!(
                    "requests must come through the authenticating proxy, which names the user in `{name}`; this one did not"
                )));
            };
            caller.identity = Some(identities::of_user(user));
        }
        Ok(caller)
    }

    /// The user `user_header` names, if it names one; 400 when it appears twice or holds a
    /// list (`a, b`, as a proxy appending to the client's header makes): which user counts
    /// would then depend on the proxy, and a client could choose.
    fn named_user<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, Refusal> {
        let Some((header, name)) = &self.user_header else {
            return Ok(None);
        };
        let mut values = headers.get_all(header).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(ambiguous(format!(
                "`{name}` appears more than once; the authenticating proxy must set it exactly once, replacing any the client sent"
            )));
        }
        let Ok(user) = value.to_str().map(str::trim) else {
            return Ok(None);
        };
        if user.contains(',') {
            return Err(ambiguous(format!(
                "`{name}` names several users (a list, as a proxy that appends to the client's header makes); the authenticating proxy must set it to one user, replacing any the client sent"
            )));
        }
        Ok(Some(user).filter(|u| !u.is_empty() && u.len() <= MAX_IDENTITY))
    }

    /// Whether a request may read `/metrics`: with `metrics_token` or one of the server's
    /// tokens; on a server with no token, freely unless callers have identities
    /// (`user_header`), where it is closed until `metrics_token` is set.
    pub(crate) fn authenticate_metrics(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if self.tokens.is_empty() && self.metrics.is_none() {
            if self.user_header.is_none() {
                return Ok(());
            }
            return Err(unauthorized(
                "/metrics needs a credential on a server whose callers have identities, and this one has no token for it: the operator sets metrics_token (--metrics-token, AGUI_METRICS_TOKEN), then send `Authorization: Bearer <metrics_token>`".into(),
            ));
        }
        let presented = presented_token(headers)?;
        // Every token is compared, so the time taken does not tell which one matched.
        let mut matched = self.metrics.as_ref().is_some_and(|m| m.matches(presented));
        for token in &self.tokens {
            matched |= token.secret.matches(presented);
        }
        if matched {
            Ok(())
        } else {
            Err(unauthorized(
                "send `Authorization: Bearer <token>` with metrics_token or the server's token"
                    .into(),
            ))
        }
    }
}

/// Refuses a token shorter than [`MIN_TOKEN_CHARS`], naming `key` and the length, never the
/// token.
fn long_enough(key: &str, token: &str) -> Result<(), ServerError> {
    let length = token.chars().count();
    if length < MIN_TOKEN_CHARS {
        return Err(ServerError::config(
            ConfigProblem::Access,
            format!(
                "{key} is {length} characters long; a token needs at least {MIN_TOKEN_CHARS} so that it cannot be guessed (make one with `openssl rand -hex 32`)"
            ),
        ));
    }
    Ok(())
}

fn unauthorized(detail: String) -> Refusal {
    Refusal {
        status: StatusCode::UNAUTHORIZED,
        error: "unauthorized",
        detail,
    }
}

fn ambiguous(detail: String) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
        error: "ambiguous credentials",
        detail,
    }
}

/// The bearer token presented (empty when none); 400 for two `Authorization` headers, of which
/// a proxy and the client might each count another.
fn presented_token(headers: &HeaderMap) -> Result<&[u8], Refusal> {
    if headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
    {
        return Err(ambiguous(
            "`Authorization` appears more than once; send exactly one".into(),
        ));
    }
    Ok(bearer_token(headers).unwrap_or("").as_bytes())
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
mod tests;
