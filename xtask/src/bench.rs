//! `cargo xtask bench [name]`: benchmarks that report figures (never asserted in tests).
//!
//! With no name, the benchmark of record (`crates/agui-bench`): the release server over HTTP
//! next to the raw harness floor, workloads W1–W4 and W6 (W5 when asked for), tables on stdout and a JSON report under
//! `<target dir>/bench/`. xtask only builds the binaries and runs it (`cargo run --release -p
//! agui-bench`), so it stays free of generated code. `--baseline REV [--rounds N]` runs it
//! against an earlier release too (`bench_baseline.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use crate::bench_baseline::{build_server, table, take_baseline};
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

/// Builds the release server and scripted model, installs the harness, runs `agui-bench`
/// (against a pinned earlier server too, in alternated rounds, with `--baseline REV`).
fn suite(mut extra: Vec<String>) -> anyhow::Result<()> {
    let baseline = take_baseline(&mut extra)?;
    let root = workspace_root();
    let harness = install_harness()?;
    eprintln!("xtask bench: building the release server and scripted model");
    let (server, model) = build_binaries(&root, true)?;
    let bench = |server: &Path, out: Option<PathBuf>| {
        let mut command = cargo();
        command
            .current_dir(&root)
            .args(["run", "--release", "-p", "agui-bench", "--"])
            .arg("--server-bin")
            .arg(server)
            .arg("--model-bin")
            .arg(&model)
            .arg("--harness")
            .arg(&harness);
        if let Some(out) = out {
            command.arg("--out").arg(out);
        }
        command.args(&extra);
        run_checked(&mut command, "agui-bench")
    };
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let Some(baseline) = baseline else {
        let out_given = extra
            .iter()
            .any(|a| a == "--out" || a.starts_with("--out="));
        let out = (!out_given).then(|| target_dir().join(format!("bench/agui-bench-{stamp}.json")));
        return bench(&server, out);
    };
    if extra
        .iter()
        .any(|a| a == "--out" || a.starts_with("--out="))
    {
        bail!(
            "--out does not go with --baseline: each round writes its own report under <target>/bench/"
        );
    }
    let (short, earlier) = build_server(&baseline.rev)?;
    let labels = ["this tree", short.as_str()];
    let dir = target_dir().join(format!("bench/baseline-{short}-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
    let mut reports: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for round in 1..=baseline.rounds {
        // Alternated, so a drift of the machine's load weighs on both alike.
        let order = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for side in order {
            let (label, binary) = match side {
                0 => (labels[0], &server),
                _ => (labels[1], &earlier),
            };
            eprintln!("xtask bench: round {round} of {}: {label}", baseline.rounds);
            let out = dir.join(format!(
                "r{round}-{}.json",
                if side == 0 { "tree" } else { &short }
            ));
            bench(binary, Some(out.clone()))?;
            let report = std::fs::read(&out)
                .with_context(|| format!("reading {}", out.display()))
                .and_then(|bytes| Ok(serde_json::from_slice(&bytes)?))?;
            reports.entry(label.to_owned()).or_default().push(report);
        }
    }
    let table = table(labels, &reports);
    std::fs::write(dir.join("comparison.md"), &table)
        .with_context(|| format!("writing {}", dir.display()))?;
    println!(
        "\n### This tree against {short} ({} alternated rounds)\n\n{table}",
        baseline.rounds
    );
    eprintln!(
        "xtask bench: reports and comparison.md in {}",
        dir.display()
    );
    Ok(())
}
