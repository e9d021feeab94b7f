//! `cargo xtask test`: the whole test suite, with everything it needs installed first.
//!
//! This is the README's test command and what CI runs: it installs the real harness (from the
//! wheel, into the project cache), installs the Node packages of the project's official-client
//! tests, then runs every Rust test of the workspace against the real harness, then the
//! end-to-end suite (`tests/e2e`, see `e2e.rs`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};
use harness_install::{Cache, DEFAULT_VERSION, Installer};

use crate::util::workspace_root;

/// Node packages (folders under the workspace root) the tests drive the official client from.
const NODE_PACKAGES: &[&str] = &["tests/agui-client", "tests/e2e"];

/// Arguments of `test`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Extra arguments for `cargo test` (e.g. `-p harness-client`, or `-- --nocapture` after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_args: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let root = workspace_root();
    let harness = Installer::new(Cache::from_env()?, DEFAULT_VERSION).install()?;
    eprintln!("xtask test: harness at {}", harness.display());
    for package in NODE_PACKAGES {
        install_node_package(&root.join(package))?;
    }
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .current_dir(&root)
        .env("ANTIGRAVITY_HARNESS_PATH", &harness)
        .arg("test");
    if !args
        .cargo_args
        .iter()
        .any(|a| a == "-p" || a.starts_with("--package"))
    {
        cargo.arg("--workspace");
    }
    cargo.args(&args.cargo_args);
    run_checked(&mut cargo, "cargo test")?;
    crate::e2e::run_suite(&harness)
}

/// `npm ci` in `dir` when it has a lockfile and its installed tree is missing or older.
pub(crate) fn install_node_package(dir: &Path) -> anyhow::Result<()> {
    let lock = dir.join("package-lock.json");
    if !lock.is_file() {
        return Ok(());
    }
    let installed = dir.join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&installed)) {
        (Ok(l), Ok(i)) => i.modified()? >= l.modified()?,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    eprintln!("xtask test: npm ci in {}", dir.display());
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir);
    run_checked(&mut npm, "npm ci").with_context(|| {
        format!(
            "installing the Node test packages in {} (needs Node.js >= 20 and npm)",
            dir.display()
        )
    })
}

fn run_checked(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}
