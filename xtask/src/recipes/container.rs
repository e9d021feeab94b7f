//! The recipes' confinement settings, measured: `agui-antigravity serve` in a runc container
//! shaped like Docker's defaults (Docker's capability set, its masked and read-only `/proc`
//! paths, a non-root user) on the host's network, once per setting, reading `/readyz`:
//!
//! - Docker's default seccomp profile (`deploy/seccomp-agui.json` without its `agui-antigravity`
//!   rules): not ready, `unshare` refused;
//! - no seccomp filter at all (`seccomp=unconfined`, what the compose file once set) with
//!   Docker's masked `/proc`: not ready, the sandbox's `/proc` mount refused;
//! - `deploy/seccomp-agui.json` with Docker's masked `/proc`: not ready, the same — why the
//!   recipes unmask it (`systempaths=unconfined`, `procMount: Unmasked`);
//! - `deploy/seccomp-agui.json` with `/proc` unmasked, no-new-privileges: ready.
//!
//! The profile is turned into the runtime spec's form as Docker and containerd do (rules kept or
//! dropped by the container's capabilities and architecture). AppArmor is not measured: it needs
//! a host with AppArmor.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::http;
use crate::util::workspace_root;

/// The recipes' seccomp profile.
pub(crate) const PROFILE: &str = "deploy/seccomp-agui.json";

/// What the profile adds to Docker's: the rules whose comment starts so.
const OUR_RULES: &str = "agui-antigravity";

/// The user the recipes run the server as.
const USER: u32 = 10001;

/// Docker's default capabilities (the bounding set; a non-root user holds none of them).
const DOCKER_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// One measured setting and what it must give.
struct Case {
    name: &'static str,
    /// No seccomp filter.
    unconfined: bool,
    docker_default_profile: bool,
    masked_proc: bool,
    ready: bool,
    /// Words the start log must hold (why the sandbox is unavailable).
    log_says: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "Docker's default seccomp profile",
        unconfined: false,
        docker_default_profile: true,
        masked_proc: false,
        ready: false,
        log_says: "unshare(",
    },
    Case {
        name: "no seccomp filter, /proc masked as Docker masks it",
        unconfined: true,
        docker_default_profile: false,
        masked_proc: true,
        ready: false,
        log_says: "\"/proc\"",
    },
    Case {
        name: "seccomp-agui.json, /proc masked as Docker masks it",
        unconfined: false,
        docker_default_profile: false,
        masked_proc: true,
        ready: false,
        log_says: "\"/proc\"",
    },
    Case {
        name: "seccomp-agui.json, /proc unmasked (the recipes' settings)",
        unconfined: false,
        docker_default_profile: false,
        masked_proc: false,
        ready: true,
        log_says: "",
    },
];

/// Runs every case; fails on the first that does not give what it must.
pub(crate) fn check(agui_bin: &Path, harness: &Path) -> anyhow::Result<()> {
    let runc = ["/usr/sbin/runc", "/usr/bin/runc"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .context("runc is not installed (`apt-get install runc`; `cargo xtask test` installs it as root)")?;
    let profile_text = std::fs::read_to_string(workspace_root().join(PROFILE))
        .with_context(|| format!("reading {PROFILE}"))?;
    let profile: Value = serde_json::from_str(&profile_text).context(PROFILE)?;
    for case in CASES {
        let (ready, log) = run_case(&runc, agui_bin, harness, &profile, case)?;
        let verdict = if ready { "ready" } else { "not ready" };
        eprintln!("xtask recipes: container, {}: {verdict}", case.name);
        if ready != case.ready || !log.contains(case.log_says) {
            bail!(
                "container, {}: {verdict}, expected {} (with `{}` in the log); the server's log:\n{log}",
                case.name,
                if case.ready { "ready" } else { "not ready" },
                case.log_says
            );
        }
    }
    Ok(())
}

/// One container: whether `/readyz` answered 200, and the server's log.
fn run_case(
    runc: &Path,
    agui_bin: &Path,
    harness: &Path,
    profile: &Value,
    case: &Case,
) -> anyhow::Result<(bool, String)> {
    let bundle = tempfile::Builder::new()
        .prefix("agui-recipes-runc-")
        .tempdir()?;
    let rootfs = bundle.path().join("rootfs");
    let data = bundle.path().join("data");
    for dir in [
        "usr",
        "etc",
        "opt/agui",
        "opt/harness",
        "data",
        "tmp",
        "proc",
        "dev",
        "sys",
    ] {
        std::fs::create_dir_all(rootfs.join(dir))?;
    }
    std::fs::set_permissions(rootfs.join("tmp"), std::fs::Permissions::from_mode(0o1777))?;
    std::fs::create_dir_all(&data)?;
    std::os::unix::fs::chown(&data, Some(USER), Some(USER))?;
    let mut mounts = vec![
        bind("/usr", Path::new("/usr"), false),
        bind("/etc", Path::new("/etc"), false),
        bind("/opt/agui", parent(agui_bin)?, false),
        bind("/opt/harness", parent(harness)?, false),
        bind("/data", &data, true),
    ];
    // A merged-/usr host links these into /usr; another has them as directories.
    for dir in ["bin", "sbin", "lib", "lib64"] {
        let host = Path::new("/").join(dir);
        if let Ok(target) = std::fs::read_link(&host) {
            std::os::unix::fs::symlink(target, rootfs.join(dir))?;
        } else if host.is_dir() {
            std::fs::create_dir_all(rootfs.join(dir))?;
            mounts.push(bind(&format!("/{dir}"), &host, false));
        }
    }
    let port = super::free_port()?;
    let mut profile = profile.clone();
    if case.docker_default_profile {
        let rules = profile["syscalls"]
            .as_array_mut()
            .context("no syscalls in the profile")?;
        rules.retain(|rule| {
            !rule["comment"]
                .as_str()
                .unwrap_or("")
                .starts_with(OUR_RULES)
        });
    }
    let status = Command::new(runc)
        .args(["spec", "--bundle"])
        .arg(bundle.path())
        .status()
        .context("starting runc spec")?;
    if !status.success() {
        bail!("runc spec failed ({status})");
    }
    let spec_path = bundle.path().join("config.json");
    let mut spec: Value = serde_json::from_str(&std::fs::read_to_string(&spec_path)?)?;
    let harness_name = harness
        .file_name()
        .context("the harness path has no file name")?;
    let agui_name = agui_bin
        .file_name()
        .context("the binary path has no file name")?;
    spec["root"] = json!({"path": "rootfs", "readonly": false});
    spec["process"]["terminal"] = json!(false);
    spec["process"]["user"] = json!({"uid": USER, "gid": USER});
    spec["process"]["args"] = json!([
        format!("/opt/agui/{}", agui_name.to_string_lossy()),
        "serve",
        "--demo",
        "--bind",
        format!("127.0.0.1:{port}"),
        "--save-dir",
        "/data/save",
        "--workspace-root",
        "/data/w",
    ]);
    spec["process"]["env"] = json!([
        "PATH=/usr/local/bin:/usr/bin:/bin",
        "HOME=/data",
        format!(
            "ANTIGRAVITY_HARNESS_PATH=/opt/harness/{}",
            harness_name.to_string_lossy()
        ),
    ]);
    spec["process"]["cwd"] = json!("/data");
    spec["process"]["noNewPrivileges"] = json!(true);
    spec["process"]["capabilities"] = json!({
        "bounding": DOCKER_CAPS, "permitted": DOCKER_CAPS, "effective": DOCKER_CAPS,
    });
    let linux = &mut spec["linux"];
    if let Some(namespaces) = linux["namespaces"].as_array_mut() {
        // The host's network, so the check reaches /readyz on loopback.
        namespaces.retain(|ns| ns["type"] != "network");
    }
    if !case.masked_proc {
        linux["maskedPaths"] = json!([]);
        linux["readonlyPaths"] = json!([]);
    }
    if !case.unconfined {
        linux["seccomp"] = to_runtime_spec(&profile, DOCKER_CAPS)?;
    }
    if let Some(object) = linux.as_object_mut() {
        // cgroups are the host's business here (v1 or v2, delegated or not).
        object.remove("resources");
    }
    spec["mounts"]
        .as_array_mut()
        .context("no mounts in runc's spec")?
        .extend(mounts);
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec)?)?;
    let name = bundle
        .path()
        .file_name()
        .context("the bundle has no name")?
        .to_string_lossy()
        .into_owned();
    let log_path = bundle.path().join("server.log");
    let log_file = std::fs::File::create(&log_path)?;
    let mut child = Command::new(runc)
        .args(["run", "--bundle"])
        .arg(bundle.path())
        .arg(&name)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .context("starting runc run")?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ready = None;
    while ready.is_none() && Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        if let Ok(answer) = http::request(addr, "GET", "/readyz", &[], None, Duration::from_secs(5))
        {
            ready = Some(answer.status == 200);
        }
    }
    let _ = Command::new(runc).args(["kill", &name, "KILL"]).status();
    let _ = child.wait();
    let _ = Command::new(runc)
        .args(["delete", "--force", &name])
        .stderr(Stdio::null())
        .status();
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    match ready {
        Some(ready) => Ok((ready, log)),
        None => bail!(
            "container, {}: the server never answered /readyz; its log:\n{log}",
            case.name
        ),
    }
}

fn parent(path: &Path) -> anyhow::Result<&Path> {
    path.parent()
        .with_context(|| format!("{} has no parent directory", path.display()))
}

/// A bind mount of the runtime spec.
fn bind(destination: &str, source: &Path, writable: bool) -> Value {
    json!({
        "destination": destination,
        "type": "bind",
        "source": source,
        "options": ["rbind", if writable { "rw" } else { "ro" }],
    })
}

/// A Docker seccomp profile as the runtime spec's `linux.seccomp`, for a container with `caps`
/// on x86_64 (Docker's and containerd's rules: a rule is kept when the container holds every
/// capability it `includes` and none it `excludes`, and when it names this architecture, if it
/// names any).
fn to_runtime_spec(profile: &Value, caps: &[&str]) -> anyhow::Result<Value> {
    const ARCH: &str = "amd64";
    const NATIVE: &str = "SCMP_ARCH_X86_64";
    let has = |list: &Value, item: &str| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(item)))
    };
    let all_caps = |list: &Value| {
        list.as_array().is_none_or(|l| {
            l.iter()
                .all(|c| caps.iter().any(|have| c.as_str() == Some(have)))
        })
    };
    let any_cap = |list: &Value| {
        list.as_array().is_some_and(|l| {
            l.iter()
                .any(|c| caps.iter().any(|have| c.as_str() == Some(have)))
        })
    };
    let mut architectures = Vec::new();
    for map in profile["archMap"]
        .as_array()
        .context("the profile has no archMap")?
    {
        if map["architecture"] == NATIVE {
            architectures.push(map["architecture"].clone());
            architectures.extend(
                map["subArchitectures"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
        }
    }
    let mut syscalls = Vec::new();
    for rule in profile["syscalls"]
        .as_array()
        .context("the profile has no syscalls")?
    {
        let (includes, excludes) = (&rule["includes"], &rule["excludes"]);
        if includes["arches"].is_array() && !has(&includes["arches"], ARCH) {
            continue;
        }
        if has(&excludes["arches"], ARCH)
            || !all_caps(&includes["caps"])
            || any_cap(&excludes["caps"])
        {
            continue;
        }
        // minKernel: every rule's is far below the kernels this runs on.
        let mut out = json!({"names": rule["names"], "action": rule["action"]});
        if let Some(errno) = rule.get("errnoRet") {
            out["errnoRet"] = errno.clone();
        }
        if let Some(args) = rule["args"].as_array().filter(|a| !a.is_empty()) {
            out["args"] = Value::Array(
                args.iter()
                    .map(|arg| {
                        let mut kept = serde_json::Map::new();
                        for key in ["index", "value", "valueTwo", "op"] {
                            if let Some(v) = arg.get(key) {
                                kept.insert(key.into(), v.clone());
                            }
                        }
                        Value::Object(kept)
                    })
                    .collect(),
            );
        }
        syscalls.push(out);
    }
    let mut spec = json!({
        "defaultAction": profile["defaultAction"],
        "architectures": architectures,
        "syscalls": syscalls,
    });
    if let Some(errno) = profile.get("defaultErrnoRet") {
        spec["defaultErrnoRet"] = errno.clone();
    }
    Ok(spec)
}
