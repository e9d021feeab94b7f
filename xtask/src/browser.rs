//! `cargo xtask browser`: the playground in a real browser (`tests/browser/`).
//!
//! The suite (Node, `node:test`) starts the debug-built `agui-antigravity` (the offline demo,
//! and agents on the `gemini-script` model) with the real harness, opens the playground in
//! headless Chromium (Debian's `chromium`; Playwright's own browser download is not used) with
//! `playwright-core`, and clicks and types as a person would; every test saves a screenshot
//! under `tests/browser/screenshots/`. Tests waiting for server features that are not built yet
//! live in `tests/browser/pending/` (none at the moment) and run only with `--pending`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::e2e;
use crate::util::{install_harness, install_node_package, workspace_root};

/// The suite's folder, relative to the workspace root.
pub(crate) const SUITE_DIR: &str = "tests/browser";
/// The browser the suite drives unless `CHROMIUM_PATH` says otherwise.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// Arguments of `browser`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Run the tests waiting for server support (`tests/browser/pending/`) instead of the suite.
    #[arg(long)]
    pending: bool,
    /// Extra arguments for `node --test` (e.g. `--test-name-pattern=approval`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    node_args: Vec<OsString>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let harness = install_harness()?;
    install_node_package(&workspace_root().join(SUITE_DIR))?;
    run_suite(&harness, args.pending, args.node_args)
}

/// The browser suite (or its pending tests), once the harness and Node packages are installed.
pub(crate) fn run_suite(
    harness: &Path,
    pending: bool,
    extra: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<()> {
    let dir = workspace_root().join(SUITE_DIR);
    let pending_dir = dir.join("pending");
    if pending && !pending_dir.is_dir() {
        // Every test that waited for the server has moved into the suite.
        eprintln!(
            "xtask: no browser test is waiting for server support ({SUITE_DIR}/pending/ is empty)"
        );
        return Ok(());
    }
    let chromium = chromium()?;
    let prepared = e2e::build(harness)?;
    let files = e2e::test_files(&if pending { pending_dir } else { dir })?;
    let mut options = vec![
        OsString::from("--test-reporter=spec"),
        // One browser and one set of servers at a time on a small machine.
        OsString::from("--test-concurrency=1"),
    ];
    options.extend(extra);
    let mut node = prepared.node_test(&options, &files);
    node.env("CHROMIUM_PATH", &chromium);
    e2e::run_node(&mut node, SUITE_DIR)
}

/// The Chromium binary: `CHROMIUM_PATH`, else Debian's.
pub(crate) fn chromium() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM));
    if !path.is_file() {
        bail!(
            "no Chromium at {}; install Debian's (`apt-get install -y chromium chromium-driver fonts-dejavu-core`, which `cargo xtask test` does as root) or set CHROMIUM_PATH",
            path.display()
        );
    }
    Ok(path)
}
