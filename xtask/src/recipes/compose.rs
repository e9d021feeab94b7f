//! `deploy/compose.yaml`'s configuration on this machine without containers: its replicas as
//! processes with the same command-line flags and environment, sharing one save dir and
//! workspace root with their replica ids, behind the real nginx running
//! `deploy/nginx-compose.conf`, and a stand-in for oauth2-proxy. Then two users behind it must
//! be two owners. The replicas start at once on a fresh volume, as `docker compose up` starts
//! them.
//!
//! Only what containers would supply is rewritten, mechanically, so what runs is what ships:
//! - container paths (the volumes' mount points) become directories of a temporary folder, in
//!   the flags, the environment and the bound files (`agents.toml`);
//! - service addresses (`agui-0:8027`, `oauth2-proxy:4180`) and nginx's `listen 80` become
//!   loopback ports, and the replicas' `AGUI_BIND` the same ports;
//! - `${VAR}` in the compose file and nginx's `${AGUI_PROXY_TOKEN}` (the nginx image's template)
//!   get this check's values: a fresh proxy token, and no `GEMINI_API_KEY` (the replicas serve
//!   the embedded demo model, `AGUI_DEMO=true`, the one variable added).
//! - The replicas run as this user (root on CI: the sandbox then takes its root path), not as
//!   the compose file's user 10001 in a container; the confinement settings are measured apart
//!   (`container.rs`).
//!
//! The stand-in for oauth2-proxy is a server of the same nginx answering `/oauth2/auth` as
//! oauth2-proxy does: 202 with `X-Auth-Request-User` naming the user of the request's session
//! (here the cookie `agui_test_user`), 401 without one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use super::http::{self, Answer};
use super::{PythonTools, free_port};
use crate::util::workspace_root;

/// The compose file and nginx's configuration in it.
const COMPOSE: &str = "deploy/compose.yaml";
const NGINX_CONF: &str = "deploy/nginx-compose.conf";

/// The cookie the stand-in reads the user from.
const USER_COOKIE: &str = "agui_test_user";

/// One replica of the compose file, started.
struct Replica {
    name: String,
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
}

/// Everything started, stopped when dropped.
#[derive(Default)]
struct Running {
    replicas: Vec<Replica>,
    nginx: Option<Child>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let children = self
            .replicas
            .iter_mut()
            .map(|r| &mut r.child)
            .chain(self.nginx.as_mut());
        for child in children {
            // SIGTERM, so each server stops its harness processes and sandboxes itself.
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(15);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts the compose file's configuration and checks that two users are two owners.
pub(crate) fn check(agui_bin: &Path, harness: &Path, python: &PythonTools) -> anyhow::Result<()> {
    let root = workspace_root();
    let deploy = root.join("deploy");
    let compose = python.yaml_to_json(&root.join(COMPOSE))?;
    let services = compose["services"]
        .as_object()
        .context("compose.yaml has no services")?;
    let dir = tempfile::Builder::new()
        .prefix("agui-recipes-compose-")
        .tempdir()?;
    let token = proxy_token();
    let variables = BTreeMap::from([("AGUI_PROXY_TOKEN", token.as_str()), ("GEMINI_API_KEY", "")]);
    // The replicas: the services that name a replica id.
    let replicas: Vec<(&String, &Value)> = services
        .iter()
        .filter(|(_, s)| s["environment"]["AGUI_REPLICA_ID"].is_string())
        .collect();
    ensure!(
        replicas.len() >= 2,
        "compose.yaml has {} replicas (services with AGUI_REPLICA_ID); the check needs at least 2",
        replicas.len()
    );
    let mut running = Running::default();
    let mut addresses = BTreeMap::new();
    for (name, service) in &replicas {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        addresses.insert(name.to_string(), addr);
        let mounts = mounts(service, &deploy, dir.path())?;
        let command = service["command"]
            .as_array()
            .context("a replica has no command")?;
        let mut args = Vec::new();
        for arg in command.iter().skip(1) {
            args.push(rewrite(
                arg.as_str().context("a command argument is not text")?,
                &mounts,
            ));
        }
        let mut env = BTreeMap::new();
        for (key, value) in service["environment"]
            .as_object()
            .context("no environment")?
        {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let value = interpolate(&value, &variables)?;
            if !value.is_empty() {
                env.insert(key.clone(), rewrite(&value, &mounts));
            }
        }
        env.insert("AGUI_BIND".into(), addr.to_string());
        env.insert("AGUI_DEMO".into(), "true".into());
        let home = dir.path().join(format!("home-{name}"));
        std::fs::create_dir_all(&home)?;
        let log = dir.path().join(format!("{name}.log"));
        let log_file = std::fs::File::create(&log)?;
        eprintln!(
            "xtask recipes: compose, {name}: agui-antigravity {}",
            args.join(" ")
        );
        let child = Command::new(agui_bin)
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("ANTIGRAVITY_HARNESS_PATH", harness)
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        running.replicas.push(Replica {
            name: name.to_string(),
            addr,
            child,
            log,
        });
    }
    for replica in &mut running.replicas {
        healthy(replica, &services[&replica.name]["healthcheck"])?;
    }
    let auth = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let front = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    running.nginx = Some(start_nginx(
        &deploy,
        dir.path(),
        &addresses,
        &services["nginx"],
        &variables,
        auth,
        front,
    )?);
    wait_for(front)?;
    two_users_are_two_owners(front, &running, &token)
}

/// The checks, through nginx.
fn two_users_are_two_owners(
    front: SocketAddr,
    running: &Running,
    token: &str,
) -> anyhow::Result<()> {
    let as_user = |user: &str| format!("{USER_COOKIE}={user}");
    let get = |user: Option<&str>, path: &str, extra: &[(&str, &str)]| -> anyhow::Result<Answer> {
        let cookie = user.map(as_user);
        let mut headers: Vec<(&str, &str)> = extra.to_vec();
        if let Some(cookie) = &cookie {
            headers.push(("Cookie", cookie));
        }
        http::request(front, "GET", path, &headers, None, Duration::from_secs(30))
    };
    let alice_thread = "recipes-alice-thread";
    let bob_thread = "recipes-bob-thread";
    for (user, thread) in [("alice", alice_thread), ("bob", bob_thread)] {
        let body = json!({
            "threadId": thread,
            "runId": format!("{thread}-run-1"),
            "messages": [{"id": format!("{thread}-m1"), "role": "user", "content": format!("hello from {user}")}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {},
        })
        .to_string();
        let cookie = as_user(user);
        let answer = http::request(
            front,
            "POST",
            "/",
            &[
                ("Cookie", &cookie),
                ("X-Thread-Id", thread),
                ("Accept", "text/event-stream"),
            ],
            Some(&body),
            Duration::from_secs(120),
        )?;
        ensure!(
            answer.status == 200
                && answer.body.contains("RUN_FINISHED")
                && !answer.body.contains("RUN_ERROR"),
            "{user}'s run through nginx did not finish: {} {}",
            answer.status,
            tail(&answer.body)
        );
        eprintln!("xtask recipes: compose, {user}'s run on {thread}: RUN_FINISHED");
    }
    let listed = |user: &str, extra: &[(&str, &str)]| -> anyhow::Result<Vec<String>> {
        let answer = get(Some(user), "/threads", extra)?;
        ensure!(
            answer.status == 200,
            "{user}'s GET /threads: {} {}",
            answer.status,
            answer.body
        );
        thread_ids(&answer)
    };
    // A replica writes a thread's record to the shared volume just after the run ends (off the
    // run's path, with an fsync), and the other replicas list what the volume holds: wait until
    // every replica lists each user's thread, and never another's.
    let bearer = format!("Bearer {token}");
    let settling = Instant::now();
    'settle: loop {
        let mut settled = true;
        let mut seen = Vec::new();
        for replica in &running.replicas {
            for (user, own, other) in [
                ("alice", alice_thread, bob_thread),
                ("bob", bob_thread, alice_thread),
            ] {
                let answer = http::request(
                    replica.addr,
                    "GET",
                    "/threads",
                    &[("X-Auth-Request-User", user), ("Authorization", &bearer)],
                    None,
                    Duration::from_secs(30),
                )?;
                let ids = thread_ids(&answer)?;
                ensure!(
                    !ids.iter().any(|t| t == other),
                    "{} lists {other} to {user}: {ids:?}",
                    replica.name
                );
                settled &= ids.iter().any(|t| t == own);
                seen.push(format!("{} lists {ids:?} to {user}", replica.name));
            }
        }
        if settled {
            break 'settle;
        }
        ensure!(
            settling.elapsed() < Duration::from_secs(10),
            "the replicas do not all list each user's thread 10 s after the runs: {}\n{}",
            seen.join("; "),
            warnings(running)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "xtask recipes: compose, every replica lists each user's thread {} ms after the runs ended",
        settling.elapsed().as_millis()
    );
    let alice_sees = listed("alice", &[])?;
    let bob_sees = listed("bob", &[])?;
    ensure!(
        alice_sees == [alice_thread] && bob_sees == [bob_thread],
        "each user must list only their own thread: alice lists {alice_sees:?}, bob {bob_sees:?}"
    );
    // The user header a client sends is replaced by the one the auth proxy names.
    let bob_claiming_alice = listed("bob", &[("X-Auth-Request-User", "alice")])?;
    ensure!(
        bob_claiming_alice == [bob_thread],
        "bob sending `X-Auth-Request-User: alice` must still be bob: lists {bob_claiming_alice:?}"
    );
    let thread_path = format!("/threads/{alice_thread}");
    let bob_get = get(Some("bob"), &thread_path, &[("X-Thread-Id", alice_thread)])?;
    ensure!(
        bob_get.status == 404,
        "bob's GET of alice's thread: {} {}",
        bob_get.status,
        bob_get.body
    );
    let alice_get = get(
        Some("alice"),
        &thread_path,
        &[("X-Thread-Id", alice_thread)],
    )?;
    ensure!(
        alice_get.status == 200,
        "alice's GET of her thread: {} {}",
        alice_get.status,
        alice_get.body
    );
    let connect = json!({
        "threadId": alice_thread, "runId": "recipes-bob-connect",
        "messages": [], "tools": [], "context": [], "state": {}, "forwardedProps": {},
    })
    .to_string();
    let bob_connect = http::request(
        front,
        "POST",
        &format!("{thread_path}/connect"),
        &[("Cookie", &as_user("bob")), ("X-Thread-Id", alice_thread)],
        Some(&connect),
        Duration::from_secs(60),
    )?;
    ensure!(
        bob_connect.status == 404,
        "bob's connect to alice's thread: {} {}",
        bob_connect.status,
        tail(&bob_connect.body)
    );
    // Without a session the auth proxy refuses, and nothing reaches a replica.
    let anonymous = get(None, "/threads", &[])?;
    ensure!(
        anonymous.status == 401,
        "GET /threads without a session: {} {}",
        anonymous.status,
        anonymous.body
    );
    // A replica reached past nginx trusts no user header without the proxy token.
    let replica = &running.replicas[0];
    let direct = http::request(
        replica.addr,
        "GET",
        "/threads",
        &[("X-Auth-Request-User", "alice")],
        None,
        Duration::from_secs(30),
    )?;
    ensure!(
        direct.status == 401,
        "{} reached directly with `X-Auth-Request-User: alice` and no token: {} {}",
        replica.name,
        direct.status,
        direct.body
    );
    let with_token = http::request(
        replica.addr,
        "GET",
        "/threads",
        &[("X-Auth-Request-User", "alice"), ("Authorization", &bearer)],
        None,
        Duration::from_secs(30),
    )?;
    ensure!(
        with_token.status == 200,
        "{} with the proxy token: {} {}",
        replica.name,
        with_token.status,
        with_token.body
    );
    eprintln!(
        "xtask recipes: compose, two users are two owners: each lists only their own thread ({alice_sees:?}, {bob_sees:?}), \
         bob's GET and connect of alice's thread are 404, a client's X-Auth-Request-User is replaced, \
         no session is 401, a replica without the proxy token is 401"
    );
    Ok(())
}

/// The warnings and errors in the replicas' logs, for a failure's message.
fn warnings(running: &Running) -> String {
    let mut out = String::new();
    for replica in &running.replicas {
        let log = std::fs::read_to_string(&replica.log).unwrap_or_default();
        for line in log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        {
            out.push_str(&format!("{}: {line}\n", replica.name));
        }
    }
    out
}

/// The ids a `GET /threads` answer lists.
fn thread_ids(answer: &Answer) -> anyhow::Result<Vec<String>> {
    ensure!(
        answer.status == 200,
        "GET /threads: {} {}",
        answer.status,
        answer.body
    );
    let page: Value = serde_json::from_str(&answer.body).context("GET /threads")?;
    Ok(page["threads"]
        .as_array()
        .context("GET /threads without threads")?
        .iter()
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect())
}

/// Waits until the compose file's healthcheck (its command, with the replica's address) passes.
fn healthy(replica: &mut Replica, healthcheck: &Value) -> anyhow::Result<()> {
    let test = healthcheck["test"]
        .as_array()
        .context("a replica has no healthcheck")?;
    ensure!(
        test.first().and_then(Value::as_str) == Some("CMD"),
        "the healthcheck is not a CMD list"
    );
    let mut words: Vec<String> = test
        .iter()
        .skip(1)
        .map(|w| {
            w.as_str()
                .unwrap_or_default()
                .replace("127.0.0.1:8027", &replica.addr.to_string())
        })
        .collect();
    ensure!(
        words.iter().any(|w| w.contains(&replica.addr.to_string())),
        "the healthcheck does not ask 127.0.0.1:8027: {test:?}"
    );
    let program = words.remove(0);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = replica.child.try_wait()? {
            bail!(
                "{} exited ({status}); its log:\n{}",
                replica.name,
                read(&replica.log)
            );
        }
        let status = Command::new(&program)
            .args(&words)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .with_context(|| format!("running the healthcheck ({program})"))?;
        if status.success() {
            eprintln!(
                "xtask recipes: compose, {}: healthy (/readyz)",
                replica.name
            );
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} not healthy after 90 s; its log:\n{}",
                replica.name,
                read(&replica.log)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// nginx with `nginx-compose.conf`, its addresses made this machine's, and the auth stand-in.
fn start_nginx(
    deploy: &Path,
    dir: &Path,
    replicas: &BTreeMap<String, SocketAddr>,
    service: &Value,
    variables: &BTreeMap<&str, &str>,
    auth: SocketAddr,
    front: SocketAddr,
) -> anyhow::Result<Child> {
    let mut conf =
        std::fs::read_to_string(deploy.join("nginx-compose.conf")).context(NGINX_CONF)?;
    let mut replace = |from: &str, to: &str| -> anyhow::Result<()> {
        ensure!(
            conf.contains(from),
            "{NGINX_CONF} no longer has `{from}`: update this check"
        );
        conf = conf.replace(from, to);
        Ok(())
    };
    for (name, addr) in replicas {
        replace(&format!("{name}:8027"), &addr.to_string())?;
    }
    replace("oauth2-proxy:4180", &auth.to_string())?;
    replace("listen 80;", &format!("listen {front};"))?;
    // The nginx image's templates: each variable of the service's environment, written in.
    let environment = service["environment"]
        .as_object()
        .context("nginx has no environment")?;
    for (key, value) in environment {
        let value = interpolate(value.as_str().unwrap_or_default(), variables)?;
        replace(&format!("${{{key}}}"), &value)?;
    }
    let site = dir.join("default.conf");
    std::fs::write(&site, conf)?;
    let nginx_dir = dir.join("nginx");
    std::fs::create_dir_all(&nginx_dir)?;
    let temp: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("  {t}_temp_path {};\n", nginx_dir.join(t).display()))
        .collect();
    let main = format!(
        "daemon off;\npid {pid};\nerror_log {err} info;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n{temp}  include {site};\n  # The stand-in for oauth2-proxy: the user of the request's session, or 401.\n  server {{\n    listen {auth};\n    location = /oauth2/auth {{\n      if ($cookie_{USER_COOKIE} = \"\") {{ return 401; }}\n      add_header X-Auth-Request-User $cookie_{USER_COOKIE} always;\n      return 202;\n    }}\n    location /oauth2/ {{ return 401; }}\n  }}\n}}\n",
        pid = nginx_dir.join("nginx.pid").display(),
        err = nginx_dir.join("error.log").display(),
        site = site.display(),
    );
    let main_path = nginx_dir.join("nginx.conf");
    std::fs::write(&main_path, main)?;
    let nginx = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .context("nginx is not installed (`apt-get install nginx-light`; `cargo xtask test` installs it as root)")?;
    Command::new(nginx)
        .arg("-c")
        .arg(&main_path)
        .arg("-p")
        .arg(&nginx_dir)
        .stdin(Stdio::null())
        .spawn()
        .context("starting nginx")
}

/// The volumes of `service` as (container path, host path), longest container path first: a
/// named volume becomes a directory of `dir`, a bound file a copy in `dir` with the container
/// paths in it rewritten.
fn mounts(service: &Value, deploy: &Path, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut named = Vec::new();
    let mut files = Vec::new();
    for volume in service["volumes"]
        .as_array()
        .context("a replica has no volumes")?
    {
        let volume = volume.as_str().context("a volume is not text")?;
        let mut parts = volume.split(':');
        let (Some(source), Some(target)) = (parts.next(), parts.next()) else {
            bail!("volume `{volume}` is not source:target");
        };
        if let Some(relative) = source.strip_prefix("./") {
            files.push((target.to_owned(), deploy.join(relative)));
        } else {
            let host = dir.join("volumes").join(source);
            std::fs::create_dir_all(&host)?;
            named.push((target.to_owned(), host.display().to_string()));
        }
    }
    named.sort_by_key(|(target, _)| std::cmp::Reverse(target.len()));
    let mut all = named.clone();
    for (target, source) in files {
        let text =
            std::fs::read_to_string(&source).with_context(|| source.display().to_string())?;
        let copy = dir.join("bound").join(target.trim_start_matches('/'));
        std::fs::create_dir_all(copy.parent().context("a bound file without a folder")?)?;
        // Written once: rewriting it for the next replica (truncating it) while a started one
        // reads it would hand that one an empty configuration.
        let rewritten = rewrite(&text, &named);
        if std::fs::read_to_string(&copy).ok().as_deref() != Some(rewritten.as_str()) {
            std::fs::write(&copy, rewritten)?;
        }
        all.push((target, copy.display().to_string()));
    }
    all.sort_by_key(|(target, _)| std::cmp::Reverse(target.len()));
    Ok(all)
}

/// `text` with every container path of `mounts` made its host path.
fn rewrite(text: &str, mounts: &[(String, String)]) -> String {
    // One pass, longest container path first, so a host path is never rewritten again.
    let mut out = String::new();
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for (target, host) in mounts {
            if let Some(after) = rest.strip_prefix(target.as_str()) {
                out.push_str(host);
                rest = after;
                continue 'scan;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// Compose's interpolation: `${NAME}`, `${NAME:?message}` (the variable must be set) and
/// `${NAME:-default}`, from `variables`.
fn interpolate(text: &str, variables: &BTreeMap<&str, &str>) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').context("`${` without `}`")? + start;
        let inner = &rest[start + 2..end];
        let (name, fallback) = match inner.find(':') {
            Some(i) if inner[i..].starts_with(":-") => (&inner[..i], Some(&inner[i + 2..])),
            Some(i) => (&inner[..i], None),
            None => (inner, None),
        };
        let value = variables.get(name).copied().or(fallback).with_context(|| {
            format!("compose.yaml uses `${{{name}}}`, which this check does not set")
        })?;
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A fresh token, as `openssl rand -hex 32` makes one.
fn proxy_token() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    (0..4)
        .map(|_| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(Instant::now().elapsed().as_nanos());
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

fn wait_for(addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            bail!("nginx did not listen on {addr} within 20 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn read(path: &Path) -> String {
    tail(&std::fs::read_to_string(path).unwrap_or_default()).to_owned()
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(4000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}
