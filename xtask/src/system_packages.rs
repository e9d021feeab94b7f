//! The Debian packages the test suites need beside the harness and the Node packages: headless
//! Chromium and its driver (the browser suite and the CopilotKit example's tests), a font for
//! its screenshots, nginx (the replicas end-to-end test and `cargo xtask recipes`), runc (the
//! recipes' confinement settings, measured in containers) and libfaketime (a server started days
//! later, for the retention tests).
//!
//! `cargo xtask test` installs what is missing with apt-get when it runs as root, as it installs
//! the harness with pip and the Node packages with npm, so the README's test command works on a
//! fresh Debian machine. Not root, it stops before any test with the exact command to run.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util::run_checked;

/// One Debian package and a file whose presence says it is installed.
struct Package {
    name: &'static str,
    installs: &'static [&'static str],
}

/// Every package a test suite needs; a package is present when any of its files is.
const PACKAGES: &[Package] = &[
    Package {
        name: "chromium",
        installs: &["/usr/bin/chromium"],
    },
    Package {
        name: "chromium-driver",
        installs: &["/usr/bin/chromedriver"],
    },
    Package {
        name: "fonts-dejavu-core",
        installs: &["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"],
    },
    Package {
        name: "faketime",
        installs: &["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"],
    },
    Package {
        name: "runc",
        installs: &["/usr/sbin/runc", "/usr/bin/runc"],
    },
    Package {
        name: "nginx-light",
        installs: &["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"],
    },
];

/// Installs the missing packages (apt-get, as root) or fails naming the command that would.
pub(crate) fn ensure() -> anyhow::Result<()> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|p| !p.installs.iter().any(|f| Path::new(f).exists()))
        .map(|p| p.name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root()? {
        bail!(
            "the test suites need Debian packages that are missing: {list}; install them with \
             `sudo apt-get install -y {list}` (or run `cargo xtask test` as root, which installs them)"
        );
    }
    eprintln!("xtask: apt-get install {list}");
    let apt = |args: &[&str]| {
        let mut command = Command::new("apt-get");
        command.env("DEBIAN_FRONTEND", "noninteractive").args(args);
        command
    };
    run_checked(&mut apt(&["update", "-qq"]), "apt-get update")
        .context("refreshing the package lists for the test suites' Debian packages")?;
    let mut install = apt(&["install", "-y", "-qq"]);
    install.args(&missing);
    run_checked(&mut install, "apt-get install")
        .with_context(|| format!("installing the test suites' Debian packages: {list}"))
}

/// Whether this process runs as root (its effective uid, from `/proc/self/status`).
fn is_root() -> anyhow::Result<bool> {
    let status = std::fs::read_to_string("/proc/self/status")
        .context("reading /proc/self/status to learn whether xtask runs as root")?;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .context("no effective uid in /proc/self/status")?;
    Ok(effective == "0")
}
