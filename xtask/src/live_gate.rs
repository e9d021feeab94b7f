//! `cargo xtask live-gate`: the end-to-end suite plus the parking gate, against real Gemini when
//! `GEMINI_API_KEY` is set (`ANTIGRAVITY_TEST_MODEL` picks the model), otherwise against the
//! scripted model; prints a pass/fail table.
//!
//! The parking gate (`tests/e2e/gates/parking.gate.mjs`) parks a frontend tool call for
//! `PARK_SECONDS` (default 45) with no client attached, then resumes it. With Gemini, the
//! scenarios only a scripted model can stage (429, 400, scripted questions) are reported as
//! skipped; the demo scenarios run on the binary's embedded demo model in both modes.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::e2e::{self, SUITE_DIR};
use crate::util::{install_harness, install_node_package, workspace_root};

/// Default seconds the parking gate keeps a turn parked.
const DEFAULT_PARK_SECONDS: u64 = 45;

/// Arguments of `live-gate`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Seconds the parking gate keeps the turn parked [env: PARK_SECONDS; default: 45].
    #[arg(long)]
    park_seconds: Option<u64>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let park_seconds = match args.park_seconds {
        Some(secs) => secs,
        None => match std::env::var("PARK_SECONDS") {
            Ok(text) => text
                .trim()
                .parse()
                .with_context(|| format!("PARK_SECONDS={text} is not a number of seconds"))?,
            Err(_) => DEFAULT_PARK_SECONDS,
        },
    };
    let gemini = std::env::var("GEMINI_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    let mode = if gemini { "gemini" } else { "scripted" };
    if gemini {
        let model = std::env::var("ANTIGRAVITY_TEST_MODEL")
            .unwrap_or_else(|_| "the server's default".into());
        eprintln!("live-gate: real Gemini ({model}), parking {park_seconds} s");
    } else {
        eprintln!(
            "live-gate: GEMINI_API_KEY is not set; running against the scripted model, parking {park_seconds} s"
        );
    }

    let harness = install_harness()?;
    let root = workspace_root();
    install_node_package(&root.join(SUITE_DIR))?;
    let prepared = e2e::prepare(&harness)?;
    let mut files = e2e::test_files(&root.join(SUITE_DIR))?;
    files.push(root.join(SUITE_DIR).join("gates/parking.gate.mjs"));

    let rows_dir = tempfile::tempdir().context("creating a temporary directory")?;
    let rows_file = rows_dir.path().join("rows.jsonl");
    let reporter = root.join(SUITE_DIR).join("lib/table-reporter.mjs");
    let options = [
        "--test-reporter=spec".to_owned(),
        "--test-reporter-destination=stdout".to_owned(),
        format!("--test-reporter={}", reporter.display()),
        format!("--test-reporter-destination={}", rows_file.display()),
    ];
    let mut node = prepared.node_test(&options, &files);
    node.env("PARK_SECONDS", park_seconds.to_string())
        .env("E2E_MODEL", mode);
    let suite = e2e::run_node(&mut node, SUITE_DIR);

    let rows = read_rows(&rows_file)?;
    print_table(&rows);
    let failed = rows.iter().filter(|r| r.result == "fail").count();
    match suite {
        Err(e) if failed == 0 => Err(e.context("the suite failed outside any scenario")),
        _ if failed > 0 => bail!("live gate: {failed} scenario(s) failed ({mode} mode)"),
        _ if rows.is_empty() => bail!("live gate: no scenario ran"),
        _ => {
            eprintln!("live gate: passed ({mode} mode)");
            Ok(())
        }
    }
}

/// One line of the table, as `tests/e2e/lib/table-reporter.mjs` writes it.
struct Row {
    scenario: String,
    mode: String,
    result: String,
    seconds: f64,
    error: Option<String>,
}

/// The reporter's rows; none when it never wrote its file (node failed before any test ran).
fn read_rows(file: &Path) -> anyhow::Result<Vec<Row>> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .with_context(|| format!("a malformed reporter line: {line}"))?;
            let field = |name: &str| v[name].as_str().unwrap_or_default().to_owned();
            Ok(Row {
                scenario: field("scenario"),
                mode: field("mode"),
                result: field("result"),
                seconds: v["seconds"].as_f64().unwrap_or_default(),
                error: v["error"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

fn print_table(rows: &[Row]) {
    let width =
        |f: fn(&Row) -> usize, title: &str| rows.iter().map(f).max().unwrap_or(0).max(title.len());
    let (ws, wm, wr) = (
        width(|r| r.scenario.chars().count(), "scenario"),
        width(|r| r.mode.len(), "mode"),
        width(|r| r.result.len(), "result"),
    );
    println!();
    println!(
        "{:<ws$}  {:<wm$}  {:<wr$}  {:>7}",
        "scenario", "mode", "result", "seconds"
    );
    println!("{}", "-".repeat(ws + wm + wr + 13));
    for row in rows {
        println!(
            "{:<ws$}  {:<wm$}  {:<wr$}  {:>7.1}",
            row.scenario, row.mode, row.result, row.seconds
        );
        if let Some(error) = row.error.as_deref().filter(|e| !e.is_empty()) {
            println!("    {error}");
        }
    }
    let count = |result: &str| rows.iter().filter(|r| r.result == result).count();
    let skipped = rows
        .iter()
        .filter(|r| r.result.starts_with("skipped"))
        .count();
    println!(
        "\n{} passed, {} failed, {skipped} skipped",
        count("pass"),
        count("fail")
    );
}
