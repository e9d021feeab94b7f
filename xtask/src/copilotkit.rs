//! `cargo xtask copilotkit`: the CopilotKit example app (`examples/copilotkit/`) in a real browser.
//!
//! The app (CopilotKit's v2 runtime and a React page, wired through `clients/typescript`) is
//! type-checked and bundled by its `build.mjs` (`tsc --noEmit`, then esbuild), then its tests
//! (Node, `node:test`) start the debug-built `agui-antigravity` (the offline demo, and agents on
//! the `gemini-script` model) with the real harness, start the app on them and drive its page in
//! headless Chromium (Debian's) with the browser suite's helpers (`tests/browser/lib`); every
//! test saves a screenshot under `examples/copilotkit/test/screenshots/`.
//!
//! The app installs the client package from its folder as npm installs a packed package
//! (`install-links`), so a changed package is installed again before the tests.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use crate::util::{install_harness, install_node_package, run_checked, workspace_root};
use crate::{browser, client, e2e};

/// The app's folder, relative to the workspace root.
pub(crate) const APP_DIR: &str = "examples/copilotkit";

/// Arguments of `copilotkit`: extra arguments for `node --test`, as for `client`.
pub(crate) use crate::client::Args;

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let harness = install_harness()?;
    let root = workspace_root();
    install_node_package(&root.join(browser::SUITE_DIR))?;
    install_node_package(&root.join(APP_DIR))?;
    run_suite(&harness, args.node_args)
}

/// Builds the app and runs its tests, once the harness and the Node packages are installed.
pub(crate) fn run_suite(
    harness: &Path,
    extra: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<()> {
    let app = workspace_root().join(APP_DIR);
    refresh_client_package(&app)?;
    let mut build = Command::new("node");
    build.current_dir(&app).arg(app.join("build.mjs"));
    run_checked(
        &mut build,
        "building the CopilotKit example (tsc --noEmit, then esbuild)",
    )?;

    let prepared = e2e::build(harness)?;
    let files = e2e::test_files(&app.join("test"))?;
    let mut options = vec![
        OsString::from("--test-reporter=spec"),
        // One browser and one set of servers at a time on a small machine.
        OsString::from("--test-concurrency=1"),
    ];
    options.extend(extra);
    let mut node = prepared.node_test(&options, &files);
    node.env("CHROMIUM_PATH", browser::chromium()?)
        // CopilotKit's runtime reports usage to its makers unless told not to.
        .env("COPILOTKIT_TELEMETRY_DISABLED", "true");
    e2e::run_node(&mut node, APP_DIR)
}

/// Installs the app's packages again (`npm ci`) when its copy of the client package differs
/// from the package's folder: npm copies a linked folder only when it installs.
fn refresh_client_package(app: &Path) -> anyhow::Result<()> {
    let source = workspace_root().join(client::PACKAGE_DIR);
    let installed = app.join("node_modules/@agui-antigravity/client");
    if same_files(&source, &installed, &["package.json", "README.md", "dist"])? {
        return Ok(());
    }
    eprintln!(
        "xtask: the CopilotKit example's copy of {} is stale; npm ci in {APP_DIR}",
        client::PACKAGE_DIR
    );
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(app);
    run_checked(&mut npm, "npm ci")
        .with_context(|| format!("installing the Node packages in {}", app.display()))
}

/// Whether `entries` (files, or folders compared file by file) are the same under `a` and `b`.
fn same_files(a: &Path, b: &Path, entries: &[&str]) -> anyhow::Result<bool> {
    for entry in entries {
        let (left, right) = (a.join(entry), b.join(entry));
        if left.is_dir() {
            let names = |dir: &Path| -> anyhow::Result<Vec<OsString>> {
                let Ok(read) = std::fs::read_dir(dir) else {
                    return Ok(Vec::new());
                };
                let mut names = read
                    .map(|e| e.map(|e| e.file_name()))
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("reading {}", dir.display()))?;
                names.sort();
                Ok(names)
            };
            let files = names(&left)?;
            if files != names(&right)? {
                return Ok(false);
            }
            for name in files {
                if std::fs::read(left.join(&name)).ok() != std::fs::read(right.join(&name)).ok() {
                    return Ok(false);
                }
            }
        } else if std::fs::read(&left).ok() != std::fs::read(&right).ok() {
            return Ok(false);
        }
    }
    Ok(true)
}
