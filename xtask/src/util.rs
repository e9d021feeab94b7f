//! Helpers shared by the tasks.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

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
