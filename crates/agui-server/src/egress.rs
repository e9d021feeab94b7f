//! The egress proxy: the only way out of a confined harness's sandbox to the web, for the agent's
//! tools and commands (its `HTTP_PROXY`/`HTTPS_PROXY`), served on a listener the sandbox's
//! launcher opened inside. It forwards `CONNECT host:port` (HTTPS) and absolute-form HTTP
//! requests to the hosts of an allow-list (`egress_allow`; empty, the default, allows none), on
//! ports 80 and 443 unless the entry names one, and refuses an address on loopback, a private
//! or link-local network, the cloud metadata address or any other non-public range, whatever the
//! name resolves to and however the address is written (`address`: IPv6 forms that carry an
//! IPv4 address are judged by it, numbers such as `2130706433` are the address they name): the
//! name is resolved here, checked, and the checked address is the one connected to.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use harness_client::sandbox::ServiceGrant;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use address::{ipv4_number, is_public};

mod address;

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// The most headers a proxied request may have.
const MAX_HEADERS: usize = 64;

/// How long a client may take to send its request head, and an upstream to accept.
const TIMEOUT: Duration = Duration::from_secs(15);

/// One allowed host: exact (`pypi.org`), its subdomains (`*.pythonhosted.org`) or any public host
/// (`*`); with an optional port (default: 80 and 443).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllowedHost {
    host: String,
    subdomains: bool,
    port: Option<u16>,
}

impl AllowedHost {
    /// Parses an `egress_allow` entry.
    pub(crate) fn parse(entry: &str) -> Result<Self, String> {
        let entry = entry.trim().to_ascii_lowercase();
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() => (
                host.to_owned(),
                Some(
                    port.parse::<u16>()
                        .map_err(|_| format!("egress_allow `{entry}`: not a port: `{port}`"))?,
                ),
            ),
            _ => (entry.clone(), None),
        };
        let (host, subdomains) = match host.strip_prefix("*.") {
            Some(rest) => (rest.to_owned(), true),
            None if host == "*" => (String::new(), true),
            None => (host, false),
        };
        let valid = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if !valid || (host.is_empty() && !subdomains) {
            return Err(format!(
                "egress_allow `{entry}`: a host name (`example.com`), its subdomains \
                 (`*.example.com`) or `*`, with an optional `:port`"
            ));
        }
        Ok(Self {
            host,
            subdomains,
            port,
        })
    }

    fn allows(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => port == 80 || port == 443,
        };
        let host_ok = if self.host.is_empty() {
            true
        } else if self.subdomains {
            host.strip_suffix(&self.host)
                .is_some_and(|prefix| prefix.ends_with('.'))
        } else {
            host == self.host
        };
        port_ok && host_ok
    }
}

/// An agent's egress proxy.
#[derive(Debug)]
pub(crate) struct EgressProxy {
    agent: String,
    allow: Vec<AllowedHost>,
}

impl EgressProxy {
    /// The proxy of `agent`, allowing `allow`.
    pub(crate) fn new(agent: &str, allow: Vec<AllowedHost>) -> Arc<Self> {
        Arc::new(Self {
            agent: agent.to_owned(),
            allow,
        })
    }

    /// Serves the sandbox of `label` on `listener`, until the grant is dropped.
    pub(crate) fn serve(
        self: &Arc<Self>,
        listener: std::net::TcpListener,
        label: &str,
    ) -> Result<ServiceGrant, String> {
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|e| format!("cannot serve the sandbox's egress listener: {e}"))?;
        let proxy = self.clone();
        let label = label.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (proxy, label) = (proxy.clone(), label.clone());
                tokio::spawn(async move { proxy.handle(client, &label).await });
            }
        });
        Ok(ServiceGrant {
            token: None,
            guard: Box::new(Abort(task)),
        })
    }

    async fn handle(&self, mut client: TcpStream, label: &str) {
        let head = match tokio::time::timeout(TIMEOUT, read_head(&mut client)).await {
            Ok(Ok(head)) => head,
            _ => return,
        };
        let request = match Request::parse(&head.bytes[..head.end]) {
            Ok(request) => request,
            Err(why) => {
                let _ = respond(&mut client, 400, &why).await;
                return;
            }
        };
        let (host, port) = (request.host.as_str(), request.port);
        if !self.allow.iter().any(|a| a.allows(host, port)) {
            tracing::info!(agent = %self.agent, sandbox = %label, %host, port, "egress refused: not in egress_allow");
            let _ = respond(
                &mut client,
                403,
                &format!(
                    "egress to {host}:{port} is not allowed by this server (its egress_allow setting)"
                ),
            )
            .await;
            return;
        }
        let address = match public_address(host, port).await {
            Ok(address) => address,
            Err(why) => {
                tracing::warn!(agent = %self.agent, sandbox = %label, %host, port, %why, "egress refused");
                let _ = respond(&mut client, 403, &why).await;
                return;
            }
        };
        let mut upstream = match tokio::time::timeout(TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(upstream)) => upstream,
            Ok(Err(e)) => {
                let _ = respond(
                    &mut client,
                    502,
                    &format!("cannot reach {host}:{port}: {e}"),
                )
                .await;
                return;
            }
            Err(_) => {
                let _ = respond(&mut client, 504, &format!("{host}:{port} did not answer")).await;
                return;
            }
        };
        tracing::debug!(agent = %self.agent, sandbox = %label, %host, port, "egress allowed");
        let rest = &head.bytes[head.end..];
        let sent = if request.connect {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await
                .and(upstream.write_all(rest).await)
        } else {
            upstream
                .write_all(&request.origin_form())
                .await
                .and(upstream.write_all(rest).await)
        };
        if sent.is_ok() {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    }
}

struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A request head as read: the bytes, where the head ends.
struct Head {
    bytes: Vec<u8>,
    end: usize,
}

async fn read_head(client: &mut TcpStream) -> std::io::Result<Head> {
    let mut bytes = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        bytes.extend_from_slice(&chunk[..n]);
        // The parser says where the head ends (and refuses what is no HTTP/1 request head); the
        // head is parsed again, whole, by `Request::parse`.
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::Request::new(&mut headers).parse(&bytes) {
            Ok(httparse::Status::Complete(end)) => return Ok(Head { bytes, end }),
            Ok(httparse::Status::Partial) => {}
            Err(e) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
            }
        }
        if bytes.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// What a proxy request asks for.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    connect: bool,
    host: String,
    port: u16,
    /// For an absolute-form request: the method, the path and query, the version.
    method: String,
    path: String,
    version: String,
    /// The request's headers but the hop-by-hop ones and `Host`, as sent.
    headers: Vec<(String, Vec<u8>)>,
}

/// Headers a proxy does not pass on: they are about the client's hop (RFC 9110 7.6.1), and
/// `Host` is the proxy's to set.
const NOT_FORWARDED: &[&str] = &[
    "host",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "te",
    "upgrade",
];

impl Request {
    /// The request of a complete head, read by an HTTP/1 parser (httparse): the request line,
    /// then the headers, each checked for the characters a header may hold.
    fn parse(head: &[u8]) -> Result<Self, String> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err("an incomplete request head".into()),
            Err(e) => return Err(format!("not a proxy request: {e}")),
        }
        let (Some(method), Some(target), Some(minor)) =
            (parsed.method, parsed.path, parsed.version)
        else {
            return Err("not a proxy request: no request line".into());
        };
        let version = format!("HTTP/1.{minor}");
        let headers = parsed
            .headers
            .iter()
            .filter(|h| !NOT_FORWARDED.iter().any(|n| h.name.eq_ignore_ascii_case(n)))
            .map(|h| (h.name.to_owned(), h.value.to_vec()))
            .collect();
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(target, 443)?;
            return Ok(Self {
                connect: true,
                host,
                port,
                method: method.to_owned(),
                path: String::new(),
                version,
                headers,
            });
        }
        let scheme = target
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"));
        let (Some(_), Some(rest)) = (scheme, target.get(7..)) else {
            return Err(
                "only CONNECT (HTTPS) and absolute http:// requests go through this proxy".into(),
            );
        };
        // The authority ends at the path, the query or the fragment (RFC 3986); the fragment is
        // not sent.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, rest) = rest.split_at(end);
        let path = rest.split('#').next().unwrap_or_default();
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        let (host, port) = split_host_port(authority, 80)?;
        Ok(Self {
            connect: false,
            host,
            port,
            method: method.to_owned(),
            path,
            version,
            headers,
        })
    }

    /// The head sent upstream for an absolute-form request: origin-form, no proxy or hop-by-hop
    /// headers, one request per connection, and the `Host` of the host connected to (RFC 9112
    /// 3.2.2: a proxy replaces the client's), so that a server behind the allowed address is
    /// not asked for another site by name.
    fn origin_form(&self) -> Vec<u8> {
        let mut out = format!("{} {} {}\r\n", self.method, self.path, self.version).into_bytes();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        out.extend_from_slice(
            match self.port {
                80 => format!("Host: {host}\r\n"),
                port => format!("Host: {host}:{port}\r\n"),
            }
            .as_bytes(),
        );
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out
    }
}

/// The host and port of an authority (`host[:port]`, `[IPv6][:port]`), the host in the one form
/// it is matched against `egress_allow` and resolved in: a name in lower case without its
/// trailing dot; an address as its canonical text, also when written as a number (`2130706433`,
/// `0x7f.1` and `127.1` are `127.0.0.1`), so the address checked is the one any resolver would
/// have read. Refused as malformed: a user name (`allowed.example@elsewhere`), percent-encoding,
/// an IPv6 address out of brackets or with a zone (`fe80::1%eth0`), anything no host name holds.
fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let malformed = |why: &str| format!("a malformed host in `{authority}`: {why}");
    if authority.contains('@') {
        return Err(malformed("a user name is not accepted"));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| malformed("no closing bracket"))?;
        let ip: Ipv6Addr = host
            .parse()
            .map_err(|_| malformed("not an IPv6 address (zone ids are not accepted)"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| malformed("text after the address"))?,
            ),
        };
        (ip.to_string(), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if host.contains(':') {
            return Err(malformed("an IPv6 address goes in brackets"));
        }
        if host.contains('%') {
            return Err(malformed("percent-encoding is not accepted"));
        }
        if !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        {
            return Err(malformed("not a host name"));
        }
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        let host = match ipv4_number(host).map_err(|why| malformed(&why))? {
            Some(ip) => ip.to_string(),
            None => host.to_owned(),
        };
        (host, port)
    };
    let port = match port {
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => port
            .parse()
            .map_err(|_| format!("a malformed port in `{authority}`"))?,
        Some(_) => return Err(format!("a malformed port in `{authority}`")),
        None => default_port,
    };
    if host.is_empty() {
        return Err(format!("no host in `{authority}`"));
    }
    Ok((host, port))
}

/// The first public address of `host` (resolved here); an error naming why there is none.
async fn public_address(host: &str, port: u16) -> Result<SocketAddr, String> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    first_public(host, &addresses)
}

/// The first public address of `addresses`, which `host` resolved to.
fn first_public(host: &str, addresses: &[SocketAddr]) -> Result<SocketAddr, String> {
    addresses
        .iter()
        .copied()
        .find(|a| is_public(a.ip()))
        .ok_or_else(|| {
            let what = if host.parse::<std::net::IpAddr>().is_ok() {
                "is an address"
            } else {
                "resolves only to addresses"
            };
            format!("{host} {what} this proxy does not reach (loopback, private, link-local or reserved networks)")
        })
}

async fn respond(client: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Gateway Timeout",
    };
    let body = format!("{message}\n");
    let answer = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(answer.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_entries_match_hosts_and_ports() {
        let exact = AllowedHost::parse("PyPI.org").unwrap();
        assert!(exact.allows("pypi.org", 443) && exact.allows("pypi.org", 80));
        assert!(!exact.allows("pypi.org", 8080) && !exact.allows("evil-pypi.org", 443));
        let sub = AllowedHost::parse("*.pythonhosted.org").unwrap();
        assert!(sub.allows("files.pythonhosted.org", 443));
        assert!(!sub.allows("pythonhosted.org", 443) && !sub.allows("xpythonhosted.org", 443));
        let port = AllowedHost::parse("registry.example:8443").unwrap();
        assert!(port.allows("registry.example", 8443) && !port.allows("registry.example", 443));
        assert!(
            AllowedHost::parse("*")
                .unwrap()
                .allows("anything.example", 443)
        );
        for bad in ["", "a b", "host:port", "ex ample.com"] {
            assert!(AllowedHost::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn proxy_requests_parse_and_rewrite_to_origin_form() {
        let connect =
            Request::parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\n\r\n").unwrap();
        assert!(connect.connect && connect.host == "pypi.org" && connect.port == 443);
        let get = Request::parse(
            b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (get.host.as_str(), get.port, get.path.as_str()),
            ("example.com", 80, "/a?b")
        );
        let sent = String::from_utf8(get.origin_form()).unwrap();
        assert!(
            sent.starts_with("GET /a?b HTTP/1.1\r\nHost: example.com\r\n"),
            "{sent}"
        );
        assert!(!sent.contains("Proxy-Connection") && sent.ends_with("Connection: close\r\n\r\n"));
        // The Host sent is the host connected to, never the client's.
        let head =
            b"GET http://allowed.example:8080?q#frag HTTP/1.1\r\nHost: internal.example\r\n\r\n";
        let get = Request::parse(head).unwrap();
        let sent = String::from_utf8(get.origin_form()).unwrap();
        assert_eq!(
            sent,
            "GET /?q HTTP/1.1\r\nHost: allowed.example:8080\r\nConnection: close\r\n\r\n"
        );
        assert!(Request::parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(
            Request::parse(b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n")
                .unwrap()
                .host
                == "::1"
        );
        // A name is matched and resolved in one form: lower case, no trailing dot.
        let fqdn = Request::parse(b"CONNECT PyPI.org.:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(fqdn.host, "pypi.org");
        assert!(
            AllowedHost::parse("pypi.org")
                .unwrap()
                .allows(&fqdn.host, 443)
        );
    }

    /// A head an HTTP/1 parser refuses is refused, never passed on as the text between its
    /// line breaks: a header line without a colon, a space before the colon, a control
    /// character in a value, a folded line, a bare LF inside a header, garbage as the method.
    #[test]
    fn malformed_request_heads_are_refused() {
        for head in [
            &b"GET http://example.com/ HTTP/1.1\r\nno colon here\r\n\r\n"[..],
            b"GET http://example.com/ HTTP/1.1\r\nHost : example.com\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nX-A: a\x00b\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nX-A: a\r\n folded\r\n\r\n",
            b"GET http://example.com/ HTTP/1.1\r\nX-A: a\rX-B: b\r\n\r\n",
            b"G(T http://example.com/ HTTP/1.1\r\n\r\n",
            b"GET http://example.com/ HTTP/2.0\r\n\r\n",
        ] {
            assert!(
                Request::parse(head).is_err(),
                "{}",
                String::from_utf8_lossy(head)
            );
        }
        // Headers pass through as sent, the hop-by-hop ones left out.
        let get = Request::parse(
            b"POST http://example.com/p HTTP/1.0\r\nContent-Length: 2\r\nKeep-Alive: 5\r\nTE: trailers\r\nX-A: \"b\"\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(get.origin_form()).unwrap(),
            "POST /p HTTP/1.0\r\nHost: example.com\r\nContent-Length: 2\r\nX-A: \"b\"\r\nConnection: close\r\n\r\n"
        );
    }

    /// The answer of a proxy allowing every host (`*`) to `head`.
    async fn answer_to(head: &str) -> String {
        let proxy = EgressProxy::new("a", vec![AllowedHost::parse("*").unwrap()]);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _grant = proxy.serve(listener, "t").unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(TIMEOUT, client.read_to_string(&mut answer))
            .await
            .expect("the proxy answers")
            .unwrap();
        answer
    }

    /// Every way a request can name a non-public address — IPv6 forms that carry an IPv4
    /// address, numbers, trailing dots, zones, percent-encoding, user names — is refused even
    /// with every host allowed: 403 for an address it does not reach, 400 for a host it does
    /// not read.
    #[tokio::test]
    async fn no_way_of_writing_a_non_public_address_gets_through() {
        const UNREACHED: &str = "403 Forbidden";
        const MALFORMED: &str = "400 Bad Request";
        for (target, refused) in [
            ("CONNECT [::127.0.0.1]:443", UNREACHED),
            ("CONNECT [::ffff:0:7f00:1]:443", UNREACHED),
            ("CONNECT [::ffff:0:a9fe:a9fe]:443", UNREACHED),
            ("CONNECT [::ffff:127.0.0.1]:443", UNREACHED),
            ("CONNECT [64:ff9b::7f00:1]:443", UNREACHED),
            ("CONNECT [64:ff9b:1::a9fe:a9fe]:443", UNREACHED),
            ("CONNECT [2002:7f00:1::1]:443", UNREACHED),
            ("CONNECT [2002:a9fe:a9fe::1]:443", UNREACHED),
            (
                "CONNECT [2001:0:4136:e378:8000:63bf:80ff:fffe]:443",
                UNREACHED,
            ),
            ("CONNECT [2001:0:7f00:1:8000:63bf:f7f7:f7f7]:443", UNREACHED),
            ("CONNECT [2001:4860:0:1::5efe:7f00:1]:443", UNREACHED),
            ("CONNECT [fec0::1]:443", UNREACHED),
            ("CONNECT [::]:443", UNREACHED),
            ("CONNECT 0:443", UNREACHED),
            ("CONNECT 2130706433:443", UNREACHED),
            ("CONNECT 0xa9fea9fe:80", UNREACHED),
            ("GET http://2130706433/", UNREACHED),
            ("GET http://0x7f.1/", UNREACHED),
            ("GET http://127.1/", UNREACHED),
            ("GET http://0177.0.0.1/", UNREACHED),
            ("GET http://127.0.0.1./", UNREACHED),
            ("GET HTTP://127.1:80/", UNREACHED),
            ("GET http://[::ffff:0:7f00:1]/", UNREACHED),
            ("GET http://[2002:7f00:1::1]:80/", UNREACHED),
            ("CONNECT localhost.:443", UNREACHED),
            ("CONNECT [fe80::1%eth0]:443", MALFORMED),
            ("CONNECT [fe80::1%25eth0]:443", MALFORMED),
            ("CONNECT fe80::1%eth0:443", MALFORMED),
            ("CONNECT ::1:443", MALFORMED),
            ("GET http://%31%32%37.0.0.1/", MALFORMED),
            ("GET http://%6c%6fcalhost/", MALFORMED),
            ("GET http://allowed.example@127.0.0.1/", MALFORMED),
            ("CONNECT 127.0.0.1:+443", MALFORMED),
            ("GET http://256.0.0.1/", MALFORMED),
            ("GET http://127.0.0.1.0x1g.1/", MALFORMED),
        ] {
            let answer = answer_to(&format!("{target} HTTP/1.1\r\nHost: x\r\n\r\n")).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {refused}")),
                "{target}: {answer}"
            );
            if refused == UNREACHED {
                assert!(answer.contains("does not reach"), "{target}: {answer}");
            }
        }
    }

    /// A name that resolves only to such addresses is refused like the address itself.
    #[test]
    fn a_name_is_refused_when_it_resolves_only_to_non_public_addresses() {
        let resolved = |addresses: &[&str]| -> Vec<SocketAddr> {
            addresses.iter().map(|a| a.parse().unwrap()).collect()
        };
        let embedded = resolved(&[
            "[::ffff:0:7f00:1]:443",
            "[::127.0.0.1]:443",
            "[2002:a9fe:a9fe::1]:443",
            "[2001:0:4136:e378:8000:63bf:80ff:fffe]:443",
            "127.0.0.1:443",
        ]);
        let why = first_public("evil.example", &embedded).unwrap_err();
        assert!(why.contains("resolves only to addresses"), "{why}");
        let mixed = resolved(&["[::ffff:0:7f00:1]:443", "[2002:808:808::1]:443"]);
        assert_eq!(
            first_public("mixed.example", &mixed),
            Ok("[2002:808:808::1]:443".parse().unwrap()),
            "the first public address is the one connected to"
        );
    }

    #[tokio::test]
    async fn a_refused_host_gets_a_403_that_names_the_setting() {
        let proxy = EgressProxy::new("a", vec![AllowedHost::parse("allowed.example").unwrap()]);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _grant = proxy.serve(listener, "t").unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"CONNECT elsewhere.example:443 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(answer.contains("egress_allow"), "{answer}");
        // Allowed by name, but loopback whatever it resolves to.
        let proxy = EgressProxy::new("a", vec![AllowedHost::parse("localhost").unwrap()]);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _grant = proxy.serve(listener, "t").unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"CONNECT localhost:443 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(answer.contains("does not reach"), "{answer}");
    }
}
