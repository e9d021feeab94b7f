//! The launcher against attacks, on this machine's kernel: this test binary is the launcher (its
//! `main` hands launcher invocations to `run_if_launcher`) and also the "harness" it confines
//! (with `FAKE_HARNESS` set), which attacks from the harness's own domain and from a command it
//! starts through the sandbox's shell, and reports what got through. A real harness is confined
//! the same way; `agui-server`'s confinement tests attack through it.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_sandbox::{
    Confinement, Launcher, NetworkServices, ProcessLabel, ServiceGrant, Services,
};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};

const MARKER: &str = "__sandbox-exec";

/// A test: its name and its body.
type Test = (&'static str, fn(&tokio::runtime::Runtime));

fn main() -> ExitCode {
    if let Some(code) = harness_sandbox::run_if_launcher(MARKER) {
        return code;
    }
    if std::env::var_os("FAKE_HARNESS").is_some() {
        return fake_harness();
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let tests: [Test; 4] = [
        (
            "the_probe_finds_a_private_network_and_isolated_commands",
            the_probe_finds_a_private_network_and_isolated_commands,
        ),
        (
            "attacks_from_the_harness_and_its_commands_fail_and_the_services_work",
            attacks_from_the_harness_and_its_commands_fail_and_the_services_work,
        ),
        (
            "the_harness_ends_when_its_stdin_closes_and_the_host_sees_its_status",
            the_harness_ends_when_its_stdin_closes_and_the_host_sees_its_status,
        ),
        (
            "the_host_counts_the_commands_measures_what_they_hold_unlinked_and_stops_them_but_not_the_harness",
            the_host_counts_the_commands_measures_what_they_hold_unlinked_and_stops_them_but_not_the_harness,
        ),
    ];
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let mut failed = 0;
    for (name, test) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(&runtime)));
        match outcome {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn launcher() -> Launcher {
    Launcher::new(std::env::current_exe().unwrap(), [MARKER])
}

fn the_probe_finds_a_private_network_and_isolated_commands(runtime: &tokio::runtime::Runtime) {
    // As the host's own identity, and (on a root host) as the identity it runs sandboxes as.
    for run_as in [None, harness_sandbox::sandbox_identity()] {
        let support = runtime.block_on(harness_sandbox::probe(&launcher(), run_as));
        assert!(support.available, "{run_as:?}: {support:?}");
        assert!(support.commands_isolated, "{run_as:?}: {support:?}");
        assert!(support.seccomp, "{run_as:?}: {support:?}");
    }
}

/// Services that answer every connection with their name, and count them.
#[derive(Default)]
struct Echo {
    accepted: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl Echo {
    fn serve(
        &self,
        name: &'static str,
        listener: std::net::TcpListener,
    ) -> Result<ServiceGrant, String> {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let accepted = self.accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                *accepted.lock().unwrap().entry(name).or_default() += 1;
                let _ = socket.write_all(format!("{name}\n").as_bytes()).await;
            }
        });
        Ok(ServiceGrant {
            token: Some(format!("{name}-token")),
            guard: Box::new(Abort(task)),
        })
    }
}

struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl NetworkServices for Echo {
    fn model(&self, listener: TcpListener, _: &ProcessLabel) -> Result<ServiceGrant, String> {
        self.serve("model", listener)
    }

    fn egress(&self, listener: TcpListener, _: &ProcessLabel) -> Result<ServiceGrant, String> {
        self.serve("egress", listener)
    }
}

/// A confined fake harness, started; what it reports, by check.
struct Run {
    results: BTreeMap<String, String>,
    /// The host owner of the file a command wrote in the workspace.
    written_by: Option<u32>,
    status: std::process::ExitStatus,
    model_token: Option<String>,
    accepted: BTreeMap<&'static str, usize>,
    udp_received: bool,
}

/// The directories a sandbox run as `run_as` writes, made and given to it, as the host does.
fn make_writable(dirs: &[&Path], run_as: Option<harness_sandbox::SandboxIdentity>) {
    for dir in dirs {
        std::fs::create_dir_all(dir).unwrap();
        if let Some(identity) = run_as {
            std::os::unix::fs::chown(dir, Some(identity.uid), Some(identity.gid)).unwrap();
        }
    }
}

fn run_fake_harness(
    runtime: &tokio::runtime::Runtime,
    close_early: bool,
    run_as: Option<harness_sandbox::SandboxIdentity>,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let rw = dir.path().join("workspace");
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("key"), "s3cr3t").unwrap();
    // A read-only path holding a file only its owner (the host's user) may read.
    let readable = dir.path().join("readable");
    std::fs::create_dir_all(&readable).unwrap();
    let private = readable.join("private");
    std::fs::write(&private, "owner only").unwrap();
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let storage = dir.path().join("save");
    let home = dir.path().join("home");
    make_writable(&[&rw, &storage, &home], run_as);
    // A host service on loopback, and a UDP one: the sandbox must reach neither.
    let host_tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    host_udp
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let echo = Echo::default();
    let accepted = echo.accepted.clone();
    let services = Services(Arc::new(echo));
    let mut confinement = Confinement::new(launcher(), "test");
    confinement.read_write.push(rw.clone());
    confinement.read_only.push(readable.clone());
    confinement.run_as = run_as;
    confinement.services = Some(services.clone());
    confinement.limits.tmp_bytes = 2 << 20;
    confinement.limits.file_bytes = Some(1 << 20);
    let program = std::env::current_exe().unwrap();
    let mut launch = confinement.prepare(&program, &storage, &home).unwrap();
    runtime.block_on(async {
        launch
            .command()
            .env_clear()
            .env("FAKE_HARNESS", "1")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .current_dir(&storage)
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        let started = launch.spawn().expect("the launcher starts");
        let mut child = started.child;
        let mut stdin = started.stdin;
        let mut stdout = tokio::io::BufReader::new(started.stdout);
        let go = format!(
            "go {} {} {} {} {}\n",
            host_tcp.local_addr().unwrap().port(),
            host_udp.local_addr().unwrap().port(),
            rw.display(),
            secret.display(),
            private.display()
        );
        stdin.write_all(go.as_bytes()).await.unwrap();
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut line))
            .await
            .expect("the fake harness answers")
            .unwrap();
        let port: u16 = line
            .trim()
            .strip_prefix("port ")
            .unwrap_or_else(|| panic!("a port line: {line:?}"))
            .parse()
            .unwrap();
        let mut results = BTreeMap::new();
        if !close_early {
            let mut socket = started
                .control
                .connect(port)
                .await
                .expect("connected inside");
            let mut text = String::new();
            tokio::time::timeout(Duration::from_secs(60), socket.read_to_string(&mut text))
                .await
                .expect("the checks finish")
                .unwrap();
            for line in text.lines() {
                if let Some((name, value)) = line.split_once('=') {
                    results.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        let model_token = started.control.model_token();
        stdin.close().await;
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .expect("the launcher exits once the harness's stdin closes")
            .unwrap();
        let mut buf = [0u8; 64];
        let udp_received = host_udp.recv(&mut buf).is_ok();
        let accepted = accepted.lock().unwrap().clone();
        let written_by = std::fs::metadata(rw.join("written"))
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m));
        Run {
            results,
            written_by,
            status,
            model_token,
            accepted,
            udp_received,
        }
    })
}

fn attacks_from_the_harness_and_its_commands_fail_and_the_services_work(
    runtime: &tokio::runtime::Runtime,
) {
    // On a root host, as the identity it runs sandboxes as (what a server as root does).
    let run_as = harness_sandbox::sandbox_identity();
    let run = run_fake_harness(runtime, false, run_as);
    let results = &run.results;
    let not_root = if run_as.is_some() {
        "blocked"
    } else {
        // The host's own user owns the file: its sandbox may read it.
        "reached"
    };
    let expected = [
        // The harness's own view.
        ("harness: /etc/shadow is not there", "blocked"),
        ("harness: the secret directory is not there", "blocked"),
        ("harness: a host TCP port", "blocked"),
        ("harness: /proc/net/tcp shows no host listener", "blocked"),
        ("harness: the model listener", "reached"),
        ("harness: the egress listener", "reached"),
        // Its commands.
        ("command: runs through the sandbox's shell", "reached"),
        ("command: writes the workspace", "reached"),
        ("command: writes /usr", "blocked"),
        ("command: reads the harness's memory", "blocked"),
        ("command: reads the harness's environment", "blocked"),
        ("command: signals the harness", "blocked"),
        ("command: the model listener", "blocked"),
        ("command: the egress listener", "reached"),
        ("command: a host TCP port", "blocked"),
        ("command: fills /tmp past its size", "blocked"),
        ("command: writes a file past the size limit", "blocked"),
        ("command: finds unshare", "reached"),
        ("command: makes a user namespace", "blocked"),
        // Sockets: plain ones only (seccomp), whatever Landlock's TCP rules do not cover.
        ("harness: makes a TCP socket", "reached"),
        ("harness: makes an MPTCP socket", "blocked"),
        ("command: makes a TCP socket", "reached"),
        ("command: makes a UDP socket", "reached"),
        ("command: makes a Unix socket pair", "reached"),
        ("command: makes a routing netlink socket", "reached"),
        ("command: makes an MPTCP socket", "blocked"),
        ("command: makes an SCTP socket", "blocked"),
        ("command: makes a raw socket", "blocked"),
        ("command: makes a packet socket", "blocked"),
        ("command: makes a vsock socket", "blocked"),
        ("command: makes an AF_ALG socket", "blocked"),
        ("command: makes another netlink socket", "blocked"),
        ("command: makes an IPv4 socket pair", "blocked"),
        // Another identity than the host's: its user's own files are closed to it.
        (
            "harness: reads a file only the host's user may read",
            not_root,
        ),
        (
            "command: reads a file only the host's user may read",
            not_root,
        ),
    ];
    let mut wrong = Vec::new();
    for (check, want) in expected {
        let got = results.get(check).map(String::as_str).unwrap_or("missing");
        if got != want {
            wrong.push(format!("{check}: {got}, expected {want}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}\nall results: {results:#?}");
    let etc = results
        .get("harness: /etc holds")
        .cloned()
        .unwrap_or_default();
    for secret in ["shadow", "gshadow", "ssh", "sudoers"] {
        assert!(
            !etc.split(',').any(|e| e == secret),
            "/etc/{secret} is visible: {etc}"
        );
    }
    assert!(!run.udp_received, "a UDP datagram left the sandbox");
    let map = results.get("harness: uid_map").cloned().unwrap_or_default();
    match run_as {
        Some(identity) => {
            assert_eq!(run.written_by, Some(identity.uid), "uid_map: {map}");
            assert_eq!(
                map.split_whitespace().collect::<Vec<_>>(),
                ["0", &identity.uid.to_string(), "1"],
                "inside 0 is the identity, nothing else is mapped"
            );
        }
        None => assert_eq!(run.written_by, Some(nix::unistd::geteuid().as_raw())),
    }
    assert_eq!(run.model_token.as_deref(), Some("model-token"));
    assert!(
        run.accepted.get("model").copied().unwrap_or(0) >= 1,
        "{:?}",
        run.accepted
    );
    assert!(run.status.success(), "{:?}", run.status);
}

fn the_harness_ends_when_its_stdin_closes_and_the_host_sees_its_status(
    runtime: &tokio::runtime::Runtime,
) {
    let run = run_fake_harness(runtime, true, None);
    assert!(run.status.success(), "{:?}", run.status);
}

/// A fake harness that starts two commands and keeps them running: one appending to a file of
/// the workspace without end, one holding a 5 MB file of the workspace (and a 1 MB one of
/// `/tmp`) open after unlinking it. The host measures the unlinked disk, stops the commands,
/// and the harness goes on.
fn the_host_counts_the_commands_measures_what_they_hold_unlinked_and_stops_them_but_not_the_harness(
    runtime: &tokio::runtime::Runtime,
) {
    let dir = tempfile::tempdir().unwrap();
    let rw = dir.path().join("workspace");
    let storage = dir.path().join("save");
    let home = dir.path().join("home");
    let run_as = harness_sandbox::sandbox_identity();
    make_writable(&[&rw, &storage, &home], run_as);
    let mut confinement = Confinement::new(launcher(), "control");
    confinement.run_as = run_as;
    confinement.read_write.push(rw.clone());
    confinement.limits.tmp_bytes = 4 << 20;
    let program = std::env::current_exe().unwrap();
    let mut launch = confinement.prepare(&program, &storage, &home).unwrap();
    runtime.block_on(async {
        launch
            .command()
            .env_clear()
            .env("FAKE_HARNESS", "1")
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .current_dir(&storage)
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        let started = launch.spawn().expect("the launcher starts");
        let mut child = started.child;
        let mut stdin = started.stdin;
        let mut stdout = tokio::io::BufReader::new(started.stdout);
        let mut line = String::new();
        let mut read_line = async |line: &mut String| {
            line.clear();
            tokio::time::timeout(Duration::from_secs(20), stdout.read_line(line))
                .await
                .expect("the fake harness answers")
                .unwrap();
        };
        stdin
            .write_all(format!("hold {}\n", rw.display()).as_bytes())
            .await
            .unwrap();
        read_line(&mut line).await;
        assert_eq!(line.trim(), "holding", "{line:?}");
        let control = started.control.clone();
        let unlinked = control.unlinked_bytes().await.unwrap();
        assert!(
            (5_000_000..5_500_000).contains(&unlinked),
            "the 5 MB unlinked file of the workspace counts, the 1 MB one of /tmp does not: \
             {unlinked} bytes"
        );
        let ticks = rw.join("ticks");
        let size = || std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
        let before = size();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(size() > before, "the writing command runs");
        assert!(
            control.running_commands().await.unwrap() >= 2,
            "both commands are counted"
        );
        let killed = control.stop_commands().await.unwrap();
        assert!(killed >= 2, "both commands were killed: {killed}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stopped = size();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(size(), stopped, "the writing command was stopped");
        assert_eq!(
            control.unlinked_bytes().await.unwrap(),
            0,
            "the unlinked file went with its holder"
        );
        assert_eq!(control.stop_commands().await.unwrap(), 0, "nothing is left");
        assert_eq!(
            control.running_commands().await.unwrap(),
            0,
            "no command runs (the harness is not one)"
        );
        // The harness goes on.
        stdin.write_all(b"ping\n").await.unwrap();
        read_line(&mut line).await;
        assert_eq!(line.trim(), "pong", "{line:?}");
        stdin.close().await;
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .expect("the launcher exits once the harness's stdin closes")
            .unwrap();
        assert!(status.success(), "{status:?}");
        assert!(
            control.stop_commands().await.is_err(),
            "an ended sandbox answers with an error"
        );
        assert!(control.running_commands().await.is_err());
    });
}

// ---------------------------------------------------------------- the fake harness, inside

fn fake_harness() -> ExitCode {
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    if stdin.read_line(&mut line).is_err() {
        return ExitCode::from(3);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if let ["hold", rw] = words.as_slice() {
        return hold(Path::new(rw), stdin);
    }
    let [_, host_tcp, host_udp, rw, secret, private] = words.as_slice() else {
        return ExitCode::from(4);
    };
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("port {}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    let (host_tcp, host_udp, rw, secret, private) = (
        host_tcp.to_string(),
        host_udp.to_string(),
        rw.to_string(),
        secret.to_string(),
        private.to_string(),
    );
    std::thread::spawn(move || {
        if let Ok((mut socket, _)) = listener.accept() {
            let report = checks(
                &host_tcp,
                &host_udp,
                Path::new(&rw),
                Path::new(&secret),
                Path::new(&private),
            );
            let _ = socket.write_all(report.as_bytes());
        }
    });
    // Until the host closes stdin, the harness's signal to shut down.
    let mut rest = Vec::new();
    let _ = stdin.read_to_end(&mut rest);
    ExitCode::SUCCESS
}

/// Starts the two commands of the control test (through the sandbox's shell), says `holding`
/// once the unlinked files are held, then answers each `ping` with `pong` until stdin closes.
fn hold(rw: &Path, mut stdin: BufReader<std::io::Stdin>) -> ExitCode {
    let start = |script: String| {
        std::process::Command::new("bash")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
    };
    let rw = rw.display();
    let writer = start(format!(
        "while :; do echo tick >> {rw}/ticks; sleep 0.05; done"
    ));
    let holder = start(format!(
        "exec 3>{rw}/big 4>/tmp/small; head -c 5000000 /dev/zero >&3; \
         head -c 1000000 /dev/zero >&4; rm {rw}/big /tmp/small; touch {rw}/held; exec sleep 600"
    ));
    if writer.is_err() || holder.is_err() {
        return ExitCode::from(5);
    }
    let held = Path::new(&rw.to_string()).join("held");
    while !held.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("holding");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.read_line(&mut line) {
            Ok(0) | Err(_) => return ExitCode::SUCCESS,
            Ok(_) if line.trim() == "ping" => {
                println!("pong");
                std::io::stdout().flush().unwrap();
            }
            Ok(_) => {}
        }
    }
}

fn checks(host_tcp: &str, host_udp: &str, rw: &Path, secret: &Path, private: &Path) -> String {
    let mut out = String::new();
    let mut put = |name: &str, reached: bool| {
        out.push_str(&format!(
            "{name}={}\n",
            if reached { "reached" } else { "blocked" }
        ));
    };
    let tcp = |port: &str| {
        TcpStream::connect_timeout(
            &format!("127.0.0.1:{port}").parse().unwrap(),
            Duration::from_millis(500),
        )
        .is_ok()
    };
    put(
        "harness: /etc/shadow is not there",
        Path::new("/etc/shadow").exists(),
    );
    put(
        "harness: the secret directory is not there",
        secret.exists(),
    );
    put("harness: a host TCP port", tcp(host_tcp));
    let net = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let hex = format!(":{:04X}", host_tcp.parse::<u16>().unwrap());
    put(
        "harness: /proc/net/tcp shows no host listener",
        net.contains(&hex),
    );
    put("harness: the model listener", tcp("1"));
    put("harness: the egress listener", tcp("3128"));
    let _ = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.send_to(b"escaped", format!("127.0.0.1:{host_udp}")));
    let me = std::process::id();
    let shell = |script: &str| {
        std::process::Command::new("bash")
            .args(["-c", script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    put(
        "command: runs through the sandbox's shell",
        shell("test -z \"$AGUI_SANDBOX_COMMAND_RULES\" && ! echo \"$PATH\" | grep -q agui"),
    );
    put(
        "command: writes the workspace",
        shell(&format!("echo x > {}/written", rw.display())),
    );
    put("command: writes /usr", shell("echo x > /usr/agui-test"));
    put(
        "command: reads the harness's memory",
        shell(&format!("exec 3< /proc/{me}/mem")),
    );
    put(
        "command: reads the harness's environment",
        shell(&format!("cat /proc/{me}/environ > /dev/null")),
    );
    put(
        "command: signals the harness",
        shell(&format!("kill -0 {me}")),
    );
    put(
        "command: the model listener",
        shell("exec 3<>/dev/tcp/127.0.0.1/1"),
    );
    put(
        "command: the egress listener",
        shell("exec 3<>/dev/tcp/127.0.0.1/3128"),
    );
    put(
        "command: a host TCP port",
        shell(&format!("exec 3<>/dev/tcp/127.0.0.1/{host_tcp}")),
    );
    put(
        "command: fills /tmp past its size",
        shell("head -c 3000000 /dev/zero > /tmp/fill"),
    );
    put(
        "command: writes a file past the size limit",
        shell(&format!("head -c 2000000 /dev/zero > {}/big", rw.display())),
    );
    put("command: finds unshare", shell("command -v unshare"));
    put("command: makes a user namespace", shell("unshare -U true"));
    // (family, type, protocol) of each socket tried, made by python3 (`socket(2)` as is).
    let socket = |family: i32, kind: i32, protocol: i32| {
        format!("python3 -c 'import socket; socket.socket({family}, {kind}, {protocol})'")
    };
    let in_harness = |script: &str| {
        std::process::Command::new("bash")
            .args(["-c", script])
            .env("PATH", "/usr/bin:/bin")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    put("harness: makes a TCP socket", in_harness(&socket(2, 1, 6)));
    put(
        "harness: makes an MPTCP socket",
        in_harness(&socket(2, 1, 262)),
    );
    put("command: makes a TCP socket", shell(&socket(10, 1, 0)));
    put("command: makes a UDP socket", shell(&socket(2, 2, 17)));
    put(
        "command: makes a Unix socket pair",
        shell("python3 -c 'import socket; socket.socketpair(1, 5)'"),
    );
    put(
        "command: makes a routing netlink socket",
        shell(&socket(16, 3, 0)),
    );
    put("command: makes an MPTCP socket", shell(&socket(10, 1, 262)));
    put("command: makes an SCTP socket", shell(&socket(2, 5, 132)));
    put("command: makes a raw socket", shell(&socket(2, 3, 255)));
    put("command: makes a packet socket", shell(&socket(17, 3, 0)));
    put("command: makes a vsock socket", shell(&socket(40, 1, 0)));
    put("command: makes an AF_ALG socket", shell(&socket(38, 5, 0)));
    put(
        "command: makes another netlink socket",
        shell(&socket(16, 3, 9)),
    );
    put(
        "command: makes an IPv4 socket pair",
        shell("python3 -c 'import socket; socket.socketpair(2, 1)'"),
    );
    put(
        "harness: reads a file only the host's user may read",
        std::fs::read(private).is_ok(),
    );
    put(
        "command: reads a file only the host's user may read",
        shell(&format!("cat {}", private.display())),
    );
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    out.push_str(&format!("harness: uid_map={}\n", map.trim()));
    let etc: Vec<String> = std::fs::read_dir("/etc")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.push_str(&format!("harness: /etc holds={}\n", etc.join(",")));
    out
}
