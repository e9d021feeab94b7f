//! One lock policy: the workspace's crates take their synchronous locks from `parking_lot`,
//! whose locks are never poisoned, so no caller decides what a lock poisoned by another
//! thread's panic means (an `expect` in a `Drop` turned one panic into an abort). A
//! `std::sync::Mutex`, `RwLock` or `PoisonError` in a crate's sources fails the check; tests
//! under `tests/` may use what they like.

use std::path::Path;

use anyhow::Context as _;
use syn::visit::Visit;

/// Paths that must not appear in a crate's sources.
const FORBIDDEN: &[&str] = &[
    "std::sync::Mutex",
    "std::sync::MutexGuard",
    "std::sync::RwLock",
    "std::sync::RwLockReadGuard",
    "std::sync::RwLockWriteGuard",
    "std::sync::PoisonError",
    "std::sync::Condvar",
];

/// The std locks in the `.rs` files under each of `sources`, one line each; also returns how
/// many files were read.
pub(crate) fn check(
    root: &Path,
    sources: &[std::path::PathBuf],
) -> anyhow::Result<(usize, Vec<String>)> {
    let mut problems = Vec::new();
    let mut read = 0;
    for src in sources {
        let mut files = Vec::new();
        rs_files(src, &mut files)?;
        for file in files {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let parsed =
                syn::parse_file(&text).with_context(|| format!("parsing {}", file.display()))?;
            read += 1;
            let mut paths = StdLocks::default();
            paths.visit_file(&parsed);
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            for path in paths.found {
                problems.push(format!(
                    "{shown} uses `{path}`: take the lock from parking_lot (one lock policy: no poisoning)"
                ));
            }
        }
    }
    Ok((read, problems))
}

fn rs_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rs_files(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// The forbidden paths a file names, in `use` trees and in code.
#[derive(Default)]
struct StdLocks {
    found: Vec<String>,
}

impl StdLocks {
    fn record(&mut self, path: &str) {
        let named = FORBIDDEN
            .iter()
            .find(|f| path == **f || path.strip_prefix(**f).is_some_and(|r| r.starts_with("::")));
        if let Some(named) = named
            && !self.found.iter().any(|f| f == named)
        {
            self.found.push((*named).to_owned());
        }
    }

    fn use_tree(&mut self, prefix: &str, tree: &syn::UseTree) {
        let join = |name: &syn::Ident| {
            if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}::{name}")
            }
        };
        match tree {
            syn::UseTree::Path(p) => self.use_tree(&join(&p.ident), &p.tree),
            syn::UseTree::Name(n) => self.record(&join(&n.ident)),
            syn::UseTree::Rename(r) => self.record(&join(&r.ident)),
            syn::UseTree::Glob(_) => {
                if prefix == "std::sync" {
                    self.record("std::sync::Mutex");
                }
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for StdLocks {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree("", &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let text: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&text.join("::"));
        syn::visit::visit_path(self, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_locks_are_reported_in_uses_paths_and_globs_and_parking_lot_passes() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("a.rs"),
            "use std::sync::{Arc, Mutex, PoisonError};\nfn f() { let _ = std::sync::RwLock::new(0); }",
        )
        .unwrap();
        std::fs::write(src.join("b.rs"), "use std::sync::*;").unwrap();
        std::fs::write(
            src.join("c.rs"),
            "use parking_lot::{Mutex, RwLock}; use std::sync::{Arc, OnceLock};",
        )
        .unwrap();
        let (read, mut problems) = check(dir.path(), &[src]).unwrap();
        problems.sort();
        assert_eq!(read, 3);
        assert_eq!(
            problems,
            [
                "src/a.rs uses `std::sync::Mutex`: take the lock from parking_lot (one lock policy: no poisoning)",
                "src/a.rs uses `std::sync::PoisonError`: take the lock from parking_lot (one lock policy: no poisoning)",
                "src/a.rs uses `std::sync::RwLock`: take the lock from parking_lot (one lock policy: no poisoning)",
                "src/b.rs uses `std::sync::Mutex`: take the lock from parking_lot (one lock policy: no poisoning)",
            ]
        );
    }
}
