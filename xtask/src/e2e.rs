//! `cargo xtask e2e`: the end-to-end suite in `tests/e2e/`.
//!
//! The suite (Node, `node:test`) starts the real `agui-antigravity` binary with the real harness
//! and the scripted model (`gemini-script`) and drives it with the official `@ag-ui/client`
//! `HttpAgent`. This step builds the two binaries, installs the harness and the suite's Node
//! packages when missing or stale, and runs every `tests/e2e/*.test.mjs` with the paths the
//! suite reads from its environment (`AGUI_BIN`, `GEMINI_SCRIPT_BIN`, `ANTIGRAVITY_HARNESS_PATH`).
//! `cargo xtask test` runs it after `cargo test`; `cargo xtask live-gate` runs it with more.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use crate::util::{cargo, install_harness, install_node_package, workspace_root};
use crate::validate;

/// The suite's folder, relative to the workspace root.
pub(crate) const SUITE_DIR: &str = "tests/e2e";

/// Arguments of `e2e`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Extra arguments for `node --test` (e.g. `--test-name-pattern=demo`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    node_args: Vec<OsString>,
}

/// What the suite needs: the built binaries and the harness.
pub(crate) struct Prepared {
    root: PathBuf,
    agui_bin: PathBuf,
    gemini_script_bin: PathBuf,
    harness: PathBuf,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let harness = install_harness()?;
    install_node_package(&workspace_root().join(SUITE_DIR))?;
    run_suite(&harness, args.node_args)
}

/// The suite with the spec reporter and `extra` options for `node --test`, once the harness and
/// the Node packages are installed (`cargo xtask test` runs it after `cargo test`).
pub(crate) fn run_suite(
    harness: &Path,
    extra: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<()> {
    let prepared = prepare(harness)?;
    let mut options = vec![OsString::from("--test-reporter=spec")];
    options.extend(extra);
    let files = test_files(&prepared.root.join(SUITE_DIR))?;
    // Every stream the suite's client receives is kept and checked by an independent
    // validator afterwards (also when the suite failed: its findings may say why).
    let streams = validate::streams_dir()?;
    let suite = run_node(
        prepared
            .node_test(&options, &files)
            .env("E2E_STREAMS_DIR", &streams),
        SUITE_DIR,
    );
    let validated = validate::check(&streams);
    suite.and(validated)
}

/// Builds the two binaries the suite starts and checks the suite's Node packages are there.
pub(crate) fn prepare(harness: &Path) -> anyhow::Result<Prepared> {
    let root = workspace_root();
    if !root
        .join(SUITE_DIR)
        .join("node_modules/@ag-ui/client")
        .is_dir()
    {
        bail!("{SUITE_DIR}/node_modules is missing; run `npm ci --prefix {SUITE_DIR}`");
    }
    build(harness)
}

/// Builds the two binaries a Node suite starts (this one, or the browser suite).
pub(crate) fn build(harness: &Path) -> anyhow::Result<Prepared> {
    let root = workspace_root();
    let (agui_bin, gemini_script_bin) = build_binaries(&root, false)?;
    Ok(Prepared {
        agui_bin,
        gemini_script_bin,
        harness: harness.to_owned(),
        root,
    })
}

impl Prepared {
    /// `node --test <options> <files>` in the workspace root, with the suite's environment set.
    pub(crate) fn node_test<S: AsRef<OsStr>>(&self, options: &[S], files: &[PathBuf]) -> Command {
        let mut node = Command::new("node");
        node.current_dir(&self.root)
            .env("AGUI_BIN", &self.agui_bin)
            .env("GEMINI_SCRIPT_BIN", &self.gemini_script_bin)
            .env("ANTIGRAVITY_HARNESS_PATH", &self.harness)
            // The scripted model unless a caller (the live gate) says otherwise.
            .env("E2E_MODEL", "scripted")
            .arg("--test")
            .args(options)
            // Files listed explicitly: Node 20 and Node 22+ expand directory arguments differently.
            .args(files);
        node
    }
}

/// The test files of a suite folder (`<dir>/*.test.mjs`, e.g. `tests/e2e`), sorted.
pub(crate) fn test_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".test.mjs"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no *.test.mjs files in {}", dir.display());
    }
    Ok(files)
}

/// Runs `node` on the suite in `suite` (a folder, for messages), failing when it fails.
pub(crate) fn run_node(node: &mut Command, suite: &str) -> anyhow::Result<()> {
    eprintln!("xtask: node --test {suite}");
    let status = node
        .status()
        .with_context(|| format!("starting node (the suite in {suite} needs Node.js >= 20)"))?;
    if !status.success() {
        bail!("the suite in {suite} failed ({status})");
    }
    Ok(())
}

/// `cargo build` (`--release` when asked) of the server and scripted-model binaries; returns
/// their executables (`agui-antigravity`, `gemini-script`) as cargo reports them, so a custom
/// target directory is found too.
pub(crate) fn build_binaries(root: &Path, release: bool) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut child = cargo()
        .current_dir(root)
        .args([
            "build",
            "-p",
            "agui-server",
            "--bin",
            "agui-antigravity",
            "-p",
            "gemini-script",
            "--bin",
            "gemini-script",
            "--message-format=json-render-diagnostics",
        ])
        .args(release.then_some("--release"))
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo build")?;
    let stdout = child.stdout.take().context("cargo build stdout")?;
    let mut built = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo build output")?;
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        if let (Some(name), Some(exe)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            built.push((name.to_owned(), PathBuf::from(exe)));
        }
    }
    let status = child.wait().context("waiting for cargo build")?;
    if !status.success() {
        bail!("building the server and scripted-model binaries failed ({status})");
    }
    let find = |name: &str| {
        built
            .iter()
            .find(|(target, _)| target == name)
            .map(|(_, path): &(String, PathBuf)| path.clone())
            .with_context(|| format!("cargo build did not report the `{name}` binary"))
    };
    Ok((find("agui-antigravity")?, find("gemini-script")?))
}
