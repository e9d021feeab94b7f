//! The independent check of the end-to-end suite's streams: every response the suite's client
//! received (kept by `tests/e2e/lib/client.mjs` in `E2E_STREAMS_DIR`) goes through
//! `ag-ui-validate` (PyPI), which must report no finding at all (no error, warning or info).
//!
//! The validator is `AG_UI_VALIDATE` if set, else `ag-ui-validate` on `PATH`, else the package
//! in `<target dir>/ag-ui-validate-<version>` (`pip install --target`, which `.ci/run` does and
//! this does when it is missing; the package has no dependencies). Every finding fails the
//! check, info-level ones too (e.g. AGUI902, events without their optional `timestamp`): the
//! streams are ours, and a hygiene note today is a client's surprise tomorrow.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util::{run_checked, target_dir};

/// The validator version the check is written against.
const VERSION: &str = "0.4.0";

/// What the validator found over every stream.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    streams: usize,
    events: u64,
    errors: u64,
    warnings: u64,
    info: u64,
    /// `file: rule message` of every error and warning.
    findings: Vec<String>,
}

/// A fresh, empty directory for the suite's streams (under the target directory).
pub(crate) fn streams_dir() -> anyhow::Result<PathBuf> {
    let dir = target_dir().join("e2e-streams");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Validates every stream in `dir`; fails on any error or warning, on a stream the validator
/// read no event from, or when there is no stream at all.
pub(crate) fn check(dir: &Path) -> anyhow::Result<()> {
    let validator = Validator::find()?;
    let mut streams: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("sse" | "jsonl")
            )
        })
        .collect();
    streams.sort();
    if streams.is_empty() {
        bail!("the suite kept no stream in {} to validate", dir.display());
    }
    let mut tally = Tally::default();
    for stream in &streams {
        validate(&validator, stream, &mut tally)?;
    }
    eprintln!(
        "xtask: ag-ui-validate {VERSION}: {} streams, {} events: {} errors, {} warnings ({} info)",
        tally.streams, tally.events, tally.errors, tally.warnings, tally.info
    );
    if !tally.findings.is_empty() {
        bail!(
            "ag-ui-validate found {} errors, {} warnings and {} info:\n- {}",
            tally.errors,
            tally.warnings,
            tally.info,
            tally.findings.join("\n- ")
        );
    }
    Ok(())
}

/// One stream: `ag-ui-validate --json-file <report> <stream>`, its report added to `tally`.
fn validate(validator: &Validator, stream: &Path, tally: &mut Tally) -> anyhow::Result<()> {
    let report_path = stream.with_extension("report.json");
    let output = validator
        .command()
        .arg("--json-file")
        .arg(&report_path)
        .args(["--max-warnings", "0"])
        .arg(stream)
        .output()
        .context("running ag-ui-validate")?;
    let name = stream.file_name().unwrap_or_default().to_string_lossy();
    let report: Value = std::fs::read_to_string(&report_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .with_context(|| {
            format!(
                "ag-ui-validate wrote no report for {name} (exit {}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    let count = |key: &str| report["summary"][key].as_u64().unwrap_or(0);
    let events = report["eventCount"].as_u64().unwrap_or(0);
    tally.streams += 1;
    tally.events += events;
    tally.errors += count("errors");
    tally.warnings += count("warnings");
    tally.info += count("info");
    if events == 0 {
        tally
            .findings
            .push(format!("{name}: the validator read no event"));
    }
    for finding in report["diagnostics"].as_array().into_iter().flatten() {
        let severity = finding["severity"].as_str().unwrap_or_default();
        if matches!(severity, "error" | "warning" | "info") {
            tally.findings.push(format!(
                "{name}: {} {} (event {}): {}",
                severity,
                finding["rule"].as_str().unwrap_or("?"),
                finding["eventIndex"],
                finding["message"].as_str().unwrap_or_default()
            ));
        }
    }
    if !output.status.success() && tally.findings.is_empty() {
        bail!(
            "ag-ui-validate failed on {name} ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// How to run the validator.
enum Validator {
    /// An executable.
    Program(PathBuf),
    /// The package installed with `pip install --target` into this directory.
    Package(PathBuf),
}

impl Validator {
    /// The validator, installed if needed.
    fn find() -> anyhow::Result<Self> {
        if let Some(path) = std::env::var_os("AG_UI_VALIDATE") {
            return Ok(Self::Program(path.into()));
        }
        if let Some(found) = on_path("ag-ui-validate") {
            return Ok(Self::Program(found));
        }
        let dir = target_dir().join(format!("ag-ui-validate-{VERSION}"));
        if !dir.join("ag_ui_validate").is_dir() {
            eprintln!(
                "xtask: installing ag-ui-validate {VERSION} into {}",
                dir.display()
            );
            let mut pip = Command::new("python3");
            pip.args(["-m", "pip", "install", "--quiet", "--target"])
                .arg(&dir)
                .arg(format!("ag-ui-validate=={VERSION}"));
            run_checked(&mut pip, "pip install ag-ui-validate")
                .context("installing the stream validator (needs Python 3 with pip)")?;
        }
        Ok(Self::Package(dir))
    }

    /// A command running the validator; arguments follow.
    fn command(&self) -> Command {
        match self {
            Self::Program(path) => Command::new(path),
            Self::Package(dir) => {
                // The package's console script, without the script pip wrote for it (whose
                // interpreter line need not be this `python3`).
                let mut python = Command::new("python3");
                python.env("PYTHONPATH", dir).args([
                    "-c",
                    "import sys; from ag_ui_validate.cli import main; sys.exit(main())",
                ]);
                python
            }
        }
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
