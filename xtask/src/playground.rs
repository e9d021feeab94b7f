//! `cargo xtask playground`: the chat page agui-server serves to browsers.
//!
//! The page's sources live in `crates/agui-server/playground/` (TypeScript and CSS, with the
//! official `@ag-ui/client`, `marked` and `dompurify` from its lockfile). This task installs its
//! Node packages (`npm ci`), type-checks and bundles it with the pinned esbuild (`build.mjs`,
//! deterministic output) and writes `playground/dist/`, which is committed and embedded in the
//! binary. Under `--check` it builds into a temporary folder and fails when `dist/` differs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use crate::util::{
    GeneratedFile, install_node_package, run_checked, sync_generated, workspace_root,
};

/// The page's source package, relative to the workspace root.
pub(crate) const PACKAGE_DIR: &str = "crates/agui-server/playground";
/// Its committed build, relative to the workspace root.
const DIST_DIR: &str = "crates/agui-server/playground/dist";

/// Arguments of `playground`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Fail if the committed build in `playground/dist/` is stale, instead of writing it.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let package = workspace_root().join(PACKAGE_DIR);
    install_node_package(&package)?;
    let out = tempfile::tempdir().context("creating a temporary directory")?;
    let mut node = Command::new("node");
    node.current_dir(&package)
        .arg(package.join("build.mjs"))
        .arg(out.path());
    run_checked(&mut node, "building the playground (node build.mjs)")?;
    let files = collect(out.path())?;
    sync_generated(&files, &[PathBuf::from(DIST_DIR)], args.check, "playground")
}

/// The built files, to be placed under `dist/`.
fn collect(dir: &Path) -> anyhow::Result<Vec<GeneratedFile>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let contents = std::fs::read_to_string(entry.path())
            .with_context(|| format!("reading {}", entry.path().display()))?;
        files.push(GeneratedFile {
            path: PathBuf::from(DIST_DIR).join(entry.file_name()),
            contents,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    if files.is_empty() {
        anyhow::bail!("the playground build wrote nothing into {}", dir.display());
    }
    Ok(files)
}
