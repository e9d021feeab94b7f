//! `cargo xtask soak --minutes N [--seed S] [--users M] [--replicas R] [--faults K,K…]`: the release server (or
//! R replicas of it behind nginx, configured as `deploy/nginx.conf` routes), the real harness
//! and the scripted model under simulated users and injected faults for N minutes
//! (`tests/soak/soak.mjs` says what it does and checks). It prints a table, writes a JSON report
//! (`target/soak/`), and fails on any violation.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::e2e::{SUITE_DIR, build_binaries};
use crate::util::{install_harness, install_node_package, workspace_root};

/// Arguments of `soak`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// How long the users act, in minutes.
    #[arg(long, default_value_t = 3.0)]
    minutes: f64,
    /// The seed of the users' and the faults' choices (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// How many users act at once.
    #[arg(long, default_value_t = 4)]
    users: u32,
    /// How many replicas (sharing one save dir and workspace root, leases on, behind nginx);
    /// 1: one server alone.
    #[arg(long, default_value_t = 1)]
    replicas: u32,
    /// Only these kinds of fault, comma-separated (to replay a finding; `tests/soak/lib/faults.mjs`
    /// lists them). A chosen restart may come at any time, not after a third of the soak.
    #[arg(long)]
    faults: Option<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if args.minutes.is_nan() || args.minutes <= 0.0 || args.users == 0 || args.replicas == 0 {
        bail!("--minutes must be above 0, --users and --replicas at least 1");
    }
    let harness = install_harness()?;
    let root = workspace_root();
    // The soak reuses the e2e suite's process and stream helpers (and its Node packages).
    install_node_package(&root.join(SUITE_DIR))?;
    let (agui_bin, gemini_script_bin) = build_binaries(&root, true)?;
    let mut node = Command::new("node");
    node.current_dir(&root)
        .env("AGUI_BIN", &agui_bin)
        .env("GEMINI_SCRIPT_BIN", &gemini_script_bin)
        .env("ANTIGRAVITY_HARNESS_PATH", &harness)
        .arg("tests/soak/soak.mjs")
        .args(["--minutes", &args.minutes.to_string()])
        .args(["--users", &args.users.to_string()])
        .args(["--replicas", &args.replicas.to_string()]);
    if let Some(seed) = args.seed {
        node.args(["--seed", &seed.to_string()]);
    }
    if let Some(faults) = &args.faults {
        node.args(["--faults", faults]);
    }
    let status = node
        .status()
        .context("starting node (the soak needs Node.js >= 20)")?;
    if !status.success() {
        bail!("the soak found violations or failed ({status}); its report says which");
    }
    Ok(())
}
