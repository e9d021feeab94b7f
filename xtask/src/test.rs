//! `cargo xtask test`: the whole test suite, with everything it needs installed first.
//!
//! This is the README's test command and what CI runs: it installs the Debian packages the suites
//! need when they are missing (Chromium, its driver, a font and nginx; see `system_packages.rs`),
//! the real harness (from the wheel, into the project cache) and the Node packages of the
//! project's official-client tests (the stream validator is installed by the end-to-end suite
//! when it is missing, see `validate.rs`), then runs every Rust test of the workspace against the real harness, then the
//! deployment recipes' checks (`recipes.rs`), then the end-to-end suite (`tests/e2e`, see `e2e.rs`), then the browser suite (`tests/browser`, see
//! `browser.rs`).

use std::ffi::OsString;

use crate::util::{cargo, install_harness, install_node_package, run_checked, workspace_root};

/// Node packages (folders under the workspace root) of the official-client and browser tests, and
/// the playground's (whose committed build CI checks after the tests).
const NODE_PACKAGES: &[&str] = &[
    crate::playground::PACKAGE_DIR,
    "tests/agui-client",
    crate::e2e::SUITE_DIR,
    crate::browser::SUITE_DIR,
    crate::client::PACKAGE_DIR,
    crate::copilotkit::APP_DIR,
];

/// Arguments of `test`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Extra arguments for `cargo test` (e.g. `-p harness-client`, or `-- --nocapture` after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    cargo_args: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let root = workspace_root();
    crate::system_packages::ensure()?;
    let harness = install_harness()?;
    eprintln!("xtask test: harness at {}", harness.display());
    for package in NODE_PACKAGES {
        install_node_package(&root.join(package))?;
    }
    let mut cargo = cargo();
    cargo
        .current_dir(&root)
        .env("ANTIGRAVITY_HARNESS_PATH", &harness)
        .arg("test");
    if !args
        .cargo_args
        .iter()
        .any(|a| a == "-p" || a.starts_with("--package"))
    {
        cargo.arg("--workspace");
    }
    cargo.args(&args.cargo_args);
    run_checked(&mut cargo, "cargo test")?;
    crate::recipes::run(crate::recipes::Args {})?;
    crate::e2e::run_suite(&harness, Vec::<OsString>::new())?;
    crate::browser::run_suite(&harness, false, Vec::<OsString>::new())?;
    crate::client::run_suite(&harness, Vec::<OsString>::new())?;
    crate::copilotkit::run_suite(&harness, Vec::<OsString>::new())
}
