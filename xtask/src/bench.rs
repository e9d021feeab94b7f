//! `cargo xtask bench [name]`: benchmarks that report figures (never asserted in tests).
//!
//! With no name, the benchmark of record (`crates/agui-bench`): the release server over HTTP
//! next to the raw harness floor, workloads W1–W4 and W6 (W5 when asked for), tables on stdout and a JSON report under
//! `<target dir>/bench/`. xtask only builds the binaries and runs it (`cargo run --release -p
//! agui-bench`), so it stays free of generated code.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::bail;

use crate::e2e::build_binaries;
use crate::util::{cargo, install_harness, run_checked, target_dir, workspace_root};

/// The named benchmarks, as (name, package, bench target, what it reports).
const BENCHES: &[(&str, &str, &str, &str)] = &[(
    "translate",
    "agui-translate",
    "translate",
    "steps/second and events/second over the recorded fixtures",
)];

/// Arguments of `bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A named benchmark (`translate`); none runs the whole suite (`agui-bench`), to which
    /// every argument is passed (`--quick`, `--workloads W1,W4`, `--out FILE`, …; see
    /// `cargo run -p agui-bench -- --help`).
    #[arg(allow_hyphen_values = true)]
    name: Option<String>,
    /// Extra arguments for the benchmark binary.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    extra: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let mut extra = args.extra;
    let name = match args.name {
        Some(name) if name.starts_with('-') => {
            extra.insert(0, name);
            None
        }
        other => other,
    };
    let Some(name) = name else {
        return suite(extra);
    };
    let Some((_, package, target, what)) = BENCHES.iter().find(|(n, ..)| *n == name) else {
        let known: Vec<&str> = BENCHES.iter().map(|(n, ..)| *n).collect();
        bail!(
            "unknown benchmark `{name}`; known: {} (or no name for the whole suite)",
            known.join(", ")
        );
    };
    eprintln!("xtask bench {name}: {what}");
    run_checked(
        cargo()
            .current_dir(workspace_root())
            .args(["bench", "-p", package, "--bench", target, "--"])
            .args(&extra),
        "cargo bench",
    )
}

/// Builds the release server and scripted model, installs the harness, runs `agui-bench`.
fn suite(extra: Vec<String>) -> anyhow::Result<()> {
    let root = workspace_root();
    let harness = install_harness()?;
    eprintln!("xtask bench: building the release server and scripted model");
    let (server, model) = build_binaries(&root, true)?;
    let mut command = cargo();
    command
        .current_dir(&root)
        .args(["run", "--release", "-p", "agui-bench", "--"])
        .arg("--server-bin")
        .arg(&server)
        .arg("--model-bin")
        .arg(&model)
        .arg("--harness")
        .arg(&harness);
    if !extra
        .iter()
        .any(|a| a == "--out" || a.starts_with("--out="))
    {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        command
            .arg("--out")
            .arg(target_dir().join(format!("bench/agui-bench-{stamp}.json")));
    }
    command.args(&extra);
    run_checked(&mut command, "agui-bench")
}
