//! `cargo xtask client`: the TypeScript client package's own tests (`clients/typescript/test/`).
//!
//! The package (`@agui-antigravity/client`: `AntigravityAgent`, and CopilotKit's
//! `AntigravityRunner`) is tested with Node's test runner against the debug-built
//! `agui-antigravity` with the real harness and the scripted model, as the e2e suite is: the
//! agent with the `@ag-ui/client` CopilotKit pins and with 1.x, the runner inside CopilotKit's
//! runtime, and its committed `dist/` against a fresh build.

use std::ffi::OsString;
use std::path::Path;

use crate::e2e;
use crate::util::{install_harness, install_node_package, workspace_root};

/// The package's folder, relative to the workspace root.
pub(crate) const PACKAGE_DIR: &str = "clients/typescript";

/// Arguments of `client` (and `copilotkit`).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Extra arguments for `node --test` (e.g. `--test-name-pattern=connect`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) node_args: Vec<OsString>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let harness = install_harness()?;
    install_node_package(&workspace_root().join(PACKAGE_DIR))?;
    run_suite(&harness, args.node_args)
}

/// The package's tests, once the harness and its Node packages are installed.
pub(crate) fn run_suite(
    harness: &Path,
    extra: impl IntoIterator<Item = OsString>,
) -> anyhow::Result<()> {
    let prepared = e2e::build(harness)?;
    let files = e2e::test_files(&workspace_root().join(PACKAGE_DIR).join("test"))?;
    let mut options = vec![
        OsString::from("--test-reporter=spec"),
        // One set of servers at a time on a small machine.
        OsString::from("--test-concurrency=1"),
    ];
    options.extend(extra);
    let mut node = prepared.node_test(&options, &files);
    // CopilotKit's runtime reports usage to its makers unless told not to.
    node.env("COPILOTKIT_TELEMETRY_DISABLED", "true");
    e2e::run_node(&mut node, PACKAGE_DIR)
}
