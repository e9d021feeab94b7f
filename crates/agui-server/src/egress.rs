//! The egress proxy: the only way out of a confined harness's sandbox to the web, for the agent's
//! tools and commands (its `HTTP_PROXY`/`HTTPS_PROXY`), served on a listener the sandbox's
//! launcher opened inside. It forwards `CONNECT host:port` (HTTPS) and absolute-form HTTP
//! requests to the hosts of an allow-list (`egress_allow`; empty, the default, allows none), on
//! ports 80 and 443 unless the entry names one, and refuses an address on loopback, a private
//! or link-local network, the cloud metadata address or any other non-public range, whatever the
//! name resolves to: the name is resolved here, checked, and the checked address is the one
//! connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use harness_client::sandbox::ServiceGrant;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

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
                .write_all(&request.origin_form(&head.bytes[..head.end]))
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
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Head {
                bytes,
                end: end + 4,
            });
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
}

impl Request {
    fn parse(head: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(head).map_err(|_| "a request head that is not text")?;
        let line = text.lines().next().unwrap_or_default();
        let mut words = line.split(' ');
        let (Some(method), Some(target), Some(version)) =
            (words.next(), words.next(), words.next())
        else {
            return Err(format!("not a proxy request: `{line}`"));
        };
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = split_host_port(target, 443)?;
            return Ok(Self {
                connect: true,
                host,
                port,
                method: method.to_owned(),
                path: String::new(),
                version: version.to_owned(),
            });
        }
        let Some(rest) = target.strip_prefix("http://") else {
            return Err(
                "only CONNECT (HTTPS) and absolute http:// requests go through this proxy".into(),
            );
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority, 80)?;
        Ok(Self {
            connect: false,
            host,
            port,
            method: method.to_owned(),
            path: path.to_owned(),
            version: version.to_owned(),
        })
    }

    /// The head sent upstream for an absolute-form request: origin-form, no proxy headers, and
    /// one request per connection.
    fn origin_form(&self, head: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(head);
        let mut out = format!("{} {} {}\r\n", self.method, self.path, self.version);
        for line in text.lines().skip(1) {
            let name = line.split(':').next().unwrap_or_default().trim();
            if line.is_empty()
                || name.eq_ignore_ascii_case("proxy-connection")
                || name.eq_ignore_ascii_case("proxy-authorization")
                || name.eq_ignore_ascii_case("connection")
            {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("a malformed address `{authority}`"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port
            .parse()
            .map_err(|_| format!("a malformed port in `{authority}`"))?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(format!("no host in `{authority}`"));
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// The first public address of `host` (resolved here); an error naming why there is none.
async fn public_address(host: &str, port: u16) -> Result<SocketAddr, String> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    addresses
        .iter()
        .copied()
        .find(|a| is_public(a.ip()))
        .ok_or_else(|| {
            format!("{host} resolves only to addresses this proxy does not reach (loopback, private, link-local or reserved networks)")
        })
}

/// Whether `ip` is a public unicast address (not loopback, private, link-local — the cloud
/// metadata address among them —, shared, multicast, documentation or otherwise reserved).
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(ip),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || first == 0x2001 && ip.segments()[1] == 0x0db8
        || first == 0x0064)
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
    fn non_public_addresses_are_never_reached() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["8.8.8.8", "142.250.1.1", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
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
        let head = b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n\r\n";
        let sent = String::from_utf8(get.origin_form(head)).unwrap();
        assert!(
            sent.starts_with("GET /a?b HTTP/1.1\r\nHost: example.com\r\n"),
            "{sent}"
        );
        assert!(!sent.contains("Proxy-Connection") && sent.ends_with("Connection: close\r\n\r\n"));
        assert!(Request::parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(
            Request::parse(b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n")
                .unwrap()
                .host
                == "::1"
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
