//! Helpers shared by the tasks.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use harness_install::{Cache, DEFAULT_VERSION, Installer};

/// The workspace root (the parent of `xtask/`).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_owned()
}

/// A file a generator wants on disk, relative to the workspace root.
pub(crate) struct GeneratedFile {
    pub(crate) path: PathBuf,
    pub(crate) contents: String,
}

/// Writes `files` (or, with `check`, verifies they are up to date) and removes stale files
/// in `owned_dirs` that no generator produced any more.
///
/// `task` names the command that regenerates them, for the error message.
pub(crate) fn sync_generated(
    files: &[GeneratedFile],
    owned_dirs: &[PathBuf],
    check: bool,
    task: &str,
) -> anyhow::Result<()> {
    let root = workspace_root();
    let mut stale = Vec::new();
    for file in files {
        let path = root.join(&file.path);
        let current = std::fs::read_to_string(&path).ok();
        if current.as_deref() == Some(file.contents.as_str()) {
            continue;
        }
        if check {
            stale.push(file.path.display().to_string());
        } else {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&path, &file.contents)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("updated {}", file.path.display());
        }
    }
    for dir in owned_dirs {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let rel = dir.join(entry.file_name());
            if entry.path().is_file() && !files.iter().any(|f| f.path == rel) {
                if check {
                    stale.push(format!("{} (no longer generated)", rel.display()));
                } else {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("removing {}", rel.display()))?;
                    eprintln!("removed {}", rel.display());
                }
            }
        }
    }
    if !stale.is_empty() {
        anyhow::bail!(
            "generated files are stale: {}\nrun `cargo xtask {task}` and commit the result",
            stale.join(", ")
        );
    }
    Ok(())
}

/// `cargo`, as the one running this task (`$CARGO`) when there is one.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `command` to completion, failing with `what` when it cannot start or does not succeed.
pub(crate) fn run_checked(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// The target directory cargo uses (`CARGO_TARGET_DIR`, else `<workspace>/target`).
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The real `localharness` of the pinned version, installed into the project cache if missing
/// (offline once cached).
pub(crate) fn install_harness() -> anyhow::Result<PathBuf> {
    Ok(Installer::new(Cache::from_env()?, DEFAULT_VERSION).install()?)
}

/// `npm ci` in `dir` when it has a lockfile and its installed tree is missing or older.
pub(crate) fn install_node_package(dir: &Path) -> anyhow::Result<()> {
    let lock = dir.join("package-lock.json");
    if !lock.is_file() {
        return Ok(());
    }
    let installed = dir.join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&installed)) {
        (Ok(l), Ok(i)) => i.modified()? >= l.modified()?,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    eprintln!("xtask: npm ci in {}", dir.display());
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir);
    run_checked(&mut npm, "npm ci").with_context(|| {
        format!(
            "installing the Node test packages in {} (needs Node.js >= 20 and npm)",
            dir.display()
        )
    })
}
