//! ARCHITECTURE.md names only what exists: every file path and every type name it writes in
//! backticks must be found in the repository, so a rename or a move that forgets the map fails
//! here instead of leaving the map stale.
//!
//! - A path (`crates/x/src/a.rs`, `thread/task.rs`, `tests/e2e/`) exists when a file or folder
//!   of the repository ends with it (the map often names a file within its crate's section).
//!   Paths outside the repository (`../shared/…`) and URL paths (`/connect`) are not checked.
//! - A type name (`HarnessPool`, or the last CamelCase segments of `a::B`) exists when a source
//!   file (Rust, TypeScript, JavaScript) has it as a word. Names in capitals only (`HOME`,
//!   `RUN_FINISHED`) are constants, variables and wire names, not types, and are not checked.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;

/// Folders never searched: build output, installed packages, version control.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", ".git"];

/// Source file kinds whose words count as defined names.
const SOURCE_EXTENSIONS: &[&str] = &["rs", "ts", "tsx", "mjs", "js"];

/// File kinds a backticked name is taken as a path for.
const PATH_EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "mjs", "ts", "tsx", "json", "proto", "conf", "py", "sh", "yml", "yaml",
    "html", "service",
];

/// The names of `doc` (relative to `root`) that do not exist, one line each.
pub(crate) fn check(root: &Path, doc: &str) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(root.join(doc)).with_context(|| format!("reading {doc}"))?;
    let mut files = Vec::new();
    walk(root, root, &mut files)?;
    let mut words = BTreeSet::new();
    for file in &files {
        let extension = Path::new(file).extension().and_then(|e| e.to_str());
        if extension.is_some_and(|e| SOURCE_EXTENSIONS.contains(&e)) {
            let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            words.extend(
                source
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
                    .map(str::to_owned),
            );
        }
    }
    let mut problems = BTreeSet::new();
    for name in backticked(&text) {
        if is_path(name) {
            let wanted = name.trim_end_matches('/');
            let found = files.iter().any(|f| {
                f == wanted
                    || f.ends_with(&format!("/{wanted}"))
                    || f.starts_with(&format!("{wanted}/"))
                    || f.contains(&format!("/{wanted}/"))
            });
            if !found {
                problems.insert(format!("{doc} names `{name}`, which no file or folder is"));
            }
        } else {
            for segment in name.split("::").filter(|s| is_type_name(s)) {
                if !words.contains(segment) {
                    problems.insert(format!(
                        "{doc} names `{name}`, but no source file has `{segment}`"
                    ));
                }
            }
        }
    }
    Ok(problems.into_iter().collect())
}

/// The text between pairs of backticks on one line (code blocks included: they name things too).
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .filter(|name| !name.is_empty())
}

fn is_path(name: &str) -> bool {
    let plain = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
    if !plain || name.starts_with('/') || name.starts_with("..") {
        return false;
    }
    let extension = Path::new(name).extension().and_then(|e| e.to_str());
    let file = extension.is_some_and(|e| PATH_EXTENSIONS.contains(&e));
    let folder = name.ends_with('/') && name.len() > 1;
    file || folder || (name.contains('/') && !name.contains('.'))
}

/// CamelCase with at least one lowercase letter: a type's name, not a constant's.
fn is_type_name(segment: &str) -> bool {
    segment.starts_with(|c: char| c.is_ascii_uppercase())
        && segment.chars().all(|c| c.is_ascii_alphanumeric())
        && segment.chars().any(|c| c.is_ascii_lowercase())
}

/// Every file under `dir`, as a path relative to `root` with `/` separators.
fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if entry.file_type()?.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                walk(root, &path, files)?;
            }
        } else {
            files.push(
                path.strip_prefix(root)?
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_paths_and_types_are_named_and_present_ones_pass() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("crates/a/src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("pool.rs"), "pub struct HarnessPool;").unwrap();
        std::fs::write(
            root.path().join("MAP.md"),
            "`crates/a/src/pool.rs` and `src/pool.rs` hold `a::HarnessPool`; `crates/a/` too.\n\
             `HOME`, `/connect` and `../shared/x.md` are not checked.\n\
             `sweeper.rs` holds the `Sweeper`; `crates/a/src/pool.rs` `Conversation::Lost`.\n",
        )
        .unwrap();
        let problems = check(root.path(), "MAP.md").unwrap();
        assert_eq!(
            problems,
            [
                "MAP.md names `Conversation::Lost`, but no source file has `Conversation`",
                "MAP.md names `Conversation::Lost`, but no source file has `Lost`",
                "MAP.md names `Sweeper`, but no source file has `Sweeper`",
                "MAP.md names `sweeper.rs`, which no file or folder is",
            ]
        );
    }
}
