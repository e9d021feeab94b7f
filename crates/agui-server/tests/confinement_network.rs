//! The attacks of issue 27 on the network and on the harness itself, against a real
//! `agui-antigravity serve` under the default `sandbox = "owner"` with two owners (see
//! `support/served.rs`): a confined harness's only network is its own loopback; the model and
//! the egress proxy are reached through listeners the server serves; its commands cannot reach
//! the model listener, read or trace or signal their harness, or reach anything on the host.
//!
//! Needs the harness binary (`ANTIGRAVITY_HARNESS_PATH` or `cargo xtask fetch-harness`).

mod support;

use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use support::served::{Served, Start, descendants};

#[tokio::test]
async fn commands_cannot_signal_or_connect_to_the_server() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "signal",
            &format!(
                "kill -0 {pid} && echo SIGNALLED; (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo CONNECTED; echo tried",
                pid = served.pid(),
                port = served.port()
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(!out.contains("SIGNALLED"), "signalled the server: {out}");
    assert!(
        !out.contains("CONNECTED"),
        "connected to the server's port: {out}"
    );
}

/// Host services on loopback (any port: the old allow-list opened 80, 443 and 53), the cloud
/// metadata address and UDP are all out of reach: the sandbox has a network of its own.
#[tokio::test]
async fn loopback_services_the_metadata_address_and_udp_are_out_of_reach() {
    let served = Served::start(Start::default()).await;
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let (tcp_port, udp_port) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );
    let out = served
        .say(
            "alice",
            "net",
            &format!(
                "(exec 3<>/dev/tcp/127.0.0.1/{tcp_port}) && echo REACHED-TCP; \
                 (timeout 5 bash -c 'exec 3<>/dev/tcp/169.254.169.254/80') && echo REACHED-METADATA; \
                 echo escaped > /dev/udp/127.0.0.1/{udp_port} && echo SENT-UDP; \
                 cat /proc/net/tcp /proc/net/udp; echo tried"
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(
        !out.contains("REACHED-TCP"),
        "reached a host service: {out}"
    );
    assert!(
        !out.contains("REACHED-METADATA"),
        "reached the metadata address: {out}"
    );
    let mut buf = [0u8; 64];
    assert!(
        udp.recv(&mut buf).is_err(),
        "a datagram reached the host: {out}"
    );
    assert!(tcp.accept().is_err(), "the host listener saw a connection");
    // /proc/net shows the sandbox's own sockets only.
    for port in [tcp_port, served.port().parse().unwrap()] {
        let hex = format!(":{port:04X} ");
        assert!(
            !out.contains(&hex),
            "/proc/net shows the host's port {port}: {out}"
        );
    }
}

#[tokio::test]
async fn a_listener_inside_is_not_reachable_from_outside() {
    let served = Served::start(Start::default()).await;
    // A port no test uses, listened on inside (all addresses) by a command left running.
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let out = served
        .say(
            "alice",
            "listen",
            &format!(
                "(timeout 20 python3 -c 'import socket,time; s=socket.socket(); s.bind((\"0.0.0.0\",{port})); s.listen(); time.sleep(20)' &) ; \
                 sleep 1; grep -c ':{port:04X} ' /proc/net/tcp; echo listening"
            ),
        )
        .await;
    assert!(out.contains("listening"), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "1"),
        "the listener runs inside: {out}"
    );
    assert!(
        std::net::TcpStream::connect_timeout(
            &format!("127.0.0.1:{port}").parse().unwrap(),
            Duration::from_millis(500)
        )
        .is_err(),
        "the host reached a listener inside the sandbox"
    );
}

/// A command cannot read its harness's memory or environment (where the model token and the
/// WebSocket key live), trace it, signal it, or connect to its sockets (to forge a frame or
/// call the model with its token).
#[tokio::test]
async fn commands_cannot_read_trace_signal_or_connect_to_their_harness() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "harness",
            "h=$PPID; echo harness=$(cat /proc/$h/comm); \
             (exec 3</proc/$h/mem) && echo READ-MEM; \
             cat /proc/$h/environ > /dev/null && echo READ-ENV; \
             kill -0 $h && echo SIGNALLED; \
             for x in $(awk 'NR>1 && $4==\"0A\" {split($2,a,\":\"); print a[2]}' /proc/net/tcp); do \
               p=$((16#$x)); echo listening-$p; [ $p = 3128 ] && continue; \
               (exec 3<>/dev/tcp/127.0.0.1/$p) && echo CONNECTED-$p; done; \
             echo tried",
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(
        out.contains("harness=localharness"),
        "the parent is the harness: {out}"
    );
    assert!(
        out.contains("listening-1\n"),
        "the model listener was tried: {out}"
    );
    assert!(
        out.matches("listening-").count() >= 3,
        "the harness's socket was tried: {out}"
    );
    for got in ["READ-MEM", "READ-ENV", "SIGNALLED", "CONNECTED-"] {
        assert!(!out.contains(got), "{got}: {out}");
    }
}

/// Landlock's network rules cover TCP alone: a command's socket of any other kind — MPTCP
/// (protocol 262) above all, which reached the model listener and the harness's own socket —
/// must not be creatable. Every family 0..=45, type and protocol is tried, and every socket
/// made is aimed at every listener inside (the model's, the harness's, the egress proxy's): only
/// the egress proxy may be reached, by plain TCP.
#[tokio::test]
async fn commands_can_make_only_plain_sockets_and_none_reaches_the_model_or_the_harness() {
    let served = Served::start(Start::default()).await;
    let script: String = include_str!("support/sockets.py")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let out = served
        .say(
            "alice",
            "sockets",
            &format!("python3 -c \"exec(bytes.fromhex('{script}').decode())\"; echo tried"),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    let listening: Vec<u16> = out
        .lines()
        .find_map(|l| l.strip_prefix("LISTENING "))
        .unwrap_or_else(|| panic!("the script ran: {out}"))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        listening.contains(&1) && listening.contains(&3128) && listening.len() >= 3,
        "the model's, the egress proxy's and the harness's listeners were tried: {out}"
    );
    for family in [2, 10] {
        let mptcp = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("MPTCP {family} ")))
            .unwrap_or_else(|| panic!("MPTCP was tried: {out}"));
        assert!(
            mptcp.starts_with("refused"),
            "an MPTCP socket of family {family} was created: {out}"
        );
    }
    let reached: Vec<&str> = out.lines().filter(|l| l.starts_with("REACHED ")).collect();
    // What proves the attempts can succeed: plain TCP reaches the egress proxy.
    assert!(
        reached
            .iter()
            .any(|l| l.starts_with("REACHED 2 STREAM 0 3128 ")),
        "plain TCP reaches the egress proxy: {out}"
    );
    let escaped: Vec<&&str> = reached
        .iter()
        .filter(|l| l.split_whitespace().nth(4) != Some("3128"))
        .collect();
    assert!(
        escaped.is_empty(),
        "sockets reached the model or the harness: {escaped:#?}\n{out}"
    );
    let created: Vec<&str> = out.lines().filter(|l| l.starts_with("CREATED ")).collect();
    for line in &created {
        let family: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(
            [1, 2, 10, 16].contains(&family),
            "a socket of family {family} was created: {line}\n{out}"
        );
    }
}

/// The model is reached only by the harness, only with its process's token, only for the
/// agent's own models; the egress proxy refuses what `egress_allow` does not list (nothing by
/// default), naming the setting.
#[tokio::test]
async fn the_model_is_the_harnesss_alone_and_the_web_is_closed_by_default() {
    let served = Served::start(Start::default()).await;
    let out = served
        .say(
            "alice",
            "proxy",
            &format!(
                "(exec 3<>/dev/tcp/127.0.0.1/1) && echo REACHED-MODEL; {} {} echo tried",
                through_proxy("CONNECT example.com:443 HTTP/1.1"),
                through_proxy("GET http://example.com/ HTTP/1.1"),
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    assert!(
        !out.contains("REACHED-MODEL"),
        "a command reached the model listener: {out}"
    );
    assert!(
        out.contains("egress_allow"),
        "the proxy names the setting: {out}"
    );
    // Every model call the harness made went through with the process's token, for model `m`.
    let requests = served.model.requests();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(request.path.contains("/models/m:"), "{}", request.path);
    }
}

#[tokio::test]
async fn the_egress_proxy_lets_the_agent_reach_only_allowed_hosts() {
    let served = Served::start(Start {
        args: &["--egress-allow", "allowed.invalid"],
        ..Start::default()
    })
    .await;
    let caps = served.capabilities().await;
    assert_eq!(
        caps["custom"]["sandbox"]["egressAllow"],
        serde_json::json!(["allowed.invalid"]),
        "{caps}"
    );
    let out = served
        .say(
            "alice",
            "egress",
            &format!(
                "{} {} echo tried",
                through_proxy("GET http://allowed.invalid/ HTTP/1.1"),
                through_proxy("GET http://other.invalid/ HTTP/1.1"),
            ),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    // The allowed host passes the allow-list and fails only at resolution (no network here);
    // the other is refused by the list.
    assert!(out.contains("cannot resolve allowed.invalid"), "{out}");
    assert!(
        out.contains("egress to other.invalid:80 is not allowed"),
        "{out}"
    );
}

/// With every host allowed on a port of the server's host, the agent still reaches nothing on
/// that host's loopback through the egress proxy, however it writes the address: IPv6 forms that
/// carry `127.0.0.1` (compatible, translated, mapped, NAT64, 6to4, Teredo, ISATAP) or numbers.
/// Each is refused before any connection is tried.
#[tokio::test]
async fn the_egress_proxy_reaches_no_loopback_address_however_it_is_written() {
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let port = host.local_addr().unwrap().port();
    let allow = format!("*:{port}");
    let served = Served::start(Start {
        args: &["--egress-allow", &allow],
        ..Start::default()
    })
    .await;
    let targets = [
        "[::127.0.0.1]",
        "[::ffff:0:7f00:1]",
        "[::ffff:127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::1]",
        "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
        "[2001:4860:0:1::5efe:7f00:1]",
        "2130706433",
        "0x7f.1",
        "127.1",
    ];
    // All at once, each given 5 s to be answered: the harness sends a command still running
    // after 10 s to the background.
    let asks: String = targets
        .iter()
        .enumerate()
        .map(|(i, target)| {
            format!(
                "(echo '== {target}'; exec 3<>/dev/tcp/127.0.0.1/3128 && \
                 printf 'CONNECT {target}:{port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3 && \
                 timeout 5 cat <&3) > /tmp/egress-{i} 2>&1 & "
            )
        })
        .collect();
    let out = served
        .say(
            "alice",
            "egress-forms",
            &format!("{asks} wait; cat /tmp/egress-*; echo tried"),
        )
        .await;
    assert!(out.contains("tried"), "{out}");
    for target in targets {
        let answer = out
            .split(&format!("== {target}\n"))
            .nth(1)
            .and_then(|rest| rest.split("== ").next())
            .unwrap_or_else(|| panic!("no answer for {target}: {out}"));
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains("does not reach"),
            "{target} was not refused as an address the proxy does not reach: {answer}"
        );
    }
    assert!(
        host.accept().is_err(),
        "the host's loopback listener saw a connection"
    );
}

/// Each harness process of an owner sits in a cgroup of its own (where the machine lets the
/// server make cgroups), which the launcher joined before anything else started.
#[tokio::test]
async fn a_confined_harness_runs_in_a_cgroup_of_its_own_where_the_machine_delegates_one() {
    let served = Served::start(Start::default()).await;
    let caps = served.capabilities().await;
    let limits = &caps["custom"]["sandbox"]["limits"];
    served.say("alice", "cg", "echo hello").await;
    let harness = descendants(served.pid(), "localharness");
    assert_eq!(harness.len(), 1, "{harness:?}");
    let mut own = String::new();
    std::fs::File::open(format!("/proc/{}/cgroup", harness[0]))
        .unwrap()
        .read_to_string(&mut own)
        .unwrap();
    match limits["cgroups"].as_str() {
        Some(_) => assert!(own.contains("agui-sandboxes-"), "{own}"),
        None => assert!(
            limits["cgroupsUnavailable"].as_str().is_some(),
            "the reason is given: {caps}"
        ),
    }
}

/// A shell snippet sending `request_line` to the sandbox's egress proxy and printing its answer
/// (bash alone: no curl needed inside).
fn through_proxy(request_line: &str) -> String {
    format!(
        "(exec 3<>/dev/tcp/127.0.0.1/3128 && printf '{request_line}\\r\\nHost: x\\r\\n\\r\\n' >&3 && timeout 15 cat <&3); echo;"
    )
}
