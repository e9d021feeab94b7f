//! `cargo xtask bench --baseline REV [--rounds N]`: the benchmark of record run against this
//! tree's release server and a pinned earlier one, in alternated rounds, with a side-by-side
//! table of medians, so a slow drift across many commits shows up (each change compared only
//! with the one before it hides a sum of small steps).
//!
//! The earlier server is built from a detached worktree of `REV` under
//! `<target>/bench-baseline/` (one target directory shared by every baseline, so a second run
//! builds little); the same `agui-bench`, scripted model and harness drive both servers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::util::{cargo, run_checked, target_dir, workspace_root};

/// What `--baseline` asks for.
#[derive(Debug)]
pub(crate) struct Baseline {
    /// The commit, as given.
    pub(crate) rev: String,
    /// How many alternated rounds (each runs both servers once).
    pub(crate) rounds: u32,
}

/// The figures compared, by what their path in a report ends with (latencies, CPU per turn,
/// throughput, memory); a raw-floor figure is never one.
const COMPARED: &[&str] = &[
    "terminal_ms/p50",
    "first_turn_ms/p50",
    "later_turn_ms/p99",
    "cpu/server_ms",
    "cpu/harness_ms",
    "throughput_turns_per_s",
    "peak_tree_rss_mb",
];

/// Takes `--baseline REV` (or `--baseline=REV`) and `--rounds N` out of `args`, which go on to
/// `agui-bench`.
pub(crate) fn take_baseline(args: &mut Vec<String>) -> anyhow::Result<Option<Baseline>> {
    let rev = take_option(args, "--baseline")?;
    let rounds = take_option(args, "--rounds")?;
    let Some(rev) = rev else {
        if rounds.is_some() {
            bail!("--rounds only goes with --baseline REV");
        }
        return Ok(None);
    };
    let rounds =
        match rounds {
            None => 3,
            Some(n) => n.parse::<u32>().ok().filter(|n| *n >= 1).with_context(|| {
                format!("--rounds must be a whole number of at least 1, not `{n}`")
            })?,
        };
    Ok(Some(Baseline { rev, rounds }))
}

fn take_option(args: &mut Vec<String>, name: &str) -> anyhow::Result<Option<String>> {
    let prefix = format!("{name}=");
    if let Some(i) = args.iter().position(|a| a.starts_with(&prefix)) {
        return Ok(Some(args.remove(i)[prefix.len()..].to_owned()));
    }
    let Some(i) = args.iter().position(|a| a == name) else {
        return Ok(None);
    };
    if i + 1 >= args.len() {
        bail!("{name} needs a value");
    }
    let value = args.remove(i + 1);
    args.remove(i);
    Ok(Some(value))
}

/// Builds the release server of `rev` and returns its binary (a copy named by the commit, so
/// a later baseline does not replace it).
pub(crate) fn build_server(rev: &str) -> anyhow::Result<(String, PathBuf)> {
    let root = workspace_root();
    let commit = git_output(
        &root,
        &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
    )
    .with_context(|| format!("`{rev}` names no commit of this repository"))?;
    let short = commit[..12].to_owned();
    let base = target_dir().join("bench-baseline");
    let binary = base.join(format!("agui-antigravity-{short}"));
    if binary.is_file() {
        return Ok((short, binary));
    }
    let tree = base.join(format!("src-{short}"));
    if !tree.join("Cargo.toml").is_file() {
        std::fs::create_dir_all(&base).with_context(|| format!("making {}", base.display()))?;
        run_checked(
            std::process::Command::new("git")
                .current_dir(&root)
                .args(["worktree", "add", "--detach", "--force"])
                .arg(&tree)
                .arg(&commit),
            "git worktree add (the baseline's sources)",
        )?;
    }
    eprintln!("xtask bench: building the baseline server of {short}");
    let build_target = base.join("target");
    run_checked(
        cargo()
            .current_dir(&tree)
            .env("CARGO_TARGET_DIR", &build_target)
            .args([
                "build",
                "--release",
                "-p",
                "agui-server",
                "--bin",
                "agui-antigravity",
            ]),
        "cargo build (the baseline server)",
    )?;
    let built = build_target.join("release").join("agui-antigravity");
    std::fs::copy(&built, &binary)
        .with_context(|| format!("copying {} to {}", built.display(), binary.display()))?;
    Ok((short, binary))
}

fn git_output(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The side-by-side table of `reports` (per server label, one report per round): each compared
/// figure's value per round and the ratio of the medians, this tree over the baseline.
pub(crate) fn table(
    labels: [&str; 2],
    reports: &BTreeMap<String, Vec<serde_json::Value>>,
) -> String {
    let mut rows: BTreeMap<String, [Vec<f64>; 2]> = BTreeMap::new();
    for (side, label) in labels.iter().enumerate() {
        for report in reports.get(*label).into_iter().flatten() {
            let mut figures = Vec::new();
            flatten(&report["workloads"], String::new(), &mut figures);
            for (path, value) in figures {
                if path.contains("/floor/") || !COMPARED.iter().any(|c| path.ends_with(c)) {
                    continue;
                }
                rows.entry(path).or_default()[side].push(value);
            }
        }
    }
    let mut out = format!(
        "| figure | {} (per round) | {} (per round) | {} / {} (medians) |\n|---|---|---|---|\n",
        labels[0], labels[1], labels[0], labels[1]
    );
    for (path, [ours, base]) in rows {
        if ours.is_empty() || base.is_empty() {
            continue;
        }
        let ratio = median(&base).filter(|b| *b != 0.0).zip(median(&ours));
        let ratio = ratio.map_or("–".to_owned(), |(b, o)| format!("{:.2}", o / b));
        out.push_str(&format!(
            "| {path} | {} | {} | {ratio} |\n",
            rounds(&ours),
            rounds(&base)
        ));
    }
    out
}

fn rounds(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Every number of `value`, by its path (`/W1[0]/ours/fresh/stats/terminal_ms/p50`).
fn flatten(value: &serde_json::Value, path: String, out: &mut Vec<(String, f64)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                flatten(v, format!("{path}/{key}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(v, format!("{path}[{i}]"), out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(f) = n.as_f64() {
                out.push((path, f));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn baseline_options_are_taken_out_and_the_rest_goes_to_the_bench() {
        let mut args: Vec<String> = [
            "--quick",
            "--baseline",
            "c0dce3e",
            "--rounds=2",
            "--workloads",
            "W1",
        ]
        .map(String::from)
        .to_vec();
        let baseline = take_baseline(&mut args).unwrap().unwrap();
        assert_eq!((baseline.rev.as_str(), baseline.rounds), ("c0dce3e", 2));
        assert_eq!(args, ["--quick", "--workloads", "W1"]);
        let mut bad: Vec<String> = vec!["--rounds".into(), "2".into()];
        assert!(
            take_baseline(&mut bad)
                .unwrap_err()
                .to_string()
                .contains("--baseline")
        );
        let mut zero: Vec<String> = vec![
            "--baseline".into(),
            "x".into(),
            "--rounds".into(),
            "0".into(),
        ];
        assert!(take_baseline(&mut zero).is_err());
        let mut none: Vec<String> = vec!["--baseline".into()];
        assert!(
            take_baseline(&mut none)
                .unwrap_err()
                .to_string()
                .contains("needs a value")
        );
    }

    #[test]
    fn the_table_compares_medians_of_the_compared_figures_and_skips_the_floor() {
        let report = |p50: f64, cpu: f64| {
            json!({"workloads": {"W1": [{
                "ours": {"fresh": {"stats": {"terminal_ms": {"p50": p50, "p90": 99.0}},
                                   "cost": {"cpu": {"server_ms": cpu}}}},
                "floor": {"fresh": {"stats": {"terminal_ms": {"p50": 1.0}}}}
            }]}})
        };
        let mut reports = BTreeMap::new();
        reports.insert(
            "HEAD".to_owned(),
            vec![report(40.0, 6.0), report(44.0, 6.0), report(42.0, 7.0)],
        );
        reports.insert(
            "base".to_owned(),
            vec![report(20.0, 3.0), report(21.0, 3.0), report(22.0, 4.0)],
        );
        let table = table(["HEAD", "base"], &reports);
        assert!(
            table.contains("| /W1[0]/ours/fresh/stats/terminal_ms/p50 | 40.0 / 44.0 / 42.0 | 20.0 / 21.0 / 22.0 | 2.00 |"),
            "{table}"
        );
        assert!(
            table.contains("cpu/server_ms | 6.0 / 6.0 / 7.0 | 3.0 / 3.0 / 4.0 | 2.00 |"),
            "{table}"
        );
        assert!(!table.contains("floor"), "{table}");
        assert!(!table.contains("p90"), "{table}");
    }
}
