//! ARCHITECTURE.md claims only what the code shows. Each crate's section (`### <crate>`) is
//! checked against that crate:
//!
//! - **Paths.** A path it names (`thread/task.rs`, `tests/e2e/`) is a file or folder of the
//!   crate (relative to its `src/` or its folder, or ending a path inside it) or of the
//!   repository's root; elsewhere in the map, of the repository. Paths outside the repository
//!   (`../shared/…`) and URL paths (`/connect`) are not checked.
//! - **Every file.** Each source file of the crate's `src/` is named in its section (by its path
//!   from `src/` or its file name), so a new file cannot go unmapped; `lib.rs`, `main.rs`,
//!   `mod.rs`, `tests.rs` and generated code are exempt.
//! - **Names.** A CamelCase name (`HarnessPool`, `Command::Place`) is declared by the
//!   repository's code (an item, a variant, an associated item, a script declaration; tests
//!   excluded) or imported by it from another crate: a word in a comment does not count. In a
//!   path (`Runtime::model_proxy_addr`, `agui_session::conversation_config`) starting at a
//!   repository crate or name, every segment is declared. Names in capitals only (`HOME`,
//!   `RUN_FINISHED`) are constants, variables and wire names, and are not checked.
//! - **`unsafe`.** A crate with `unsafe` code says so in its section, with how many places
//!   ("the crate's only `unsafe`", "two `unsafe` blocks"), and that count is the code's; a
//!   section that says "no `unsafe`" has none.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;

use super::definitions::Definitions;

/// Folders never searched: build output, installed packages, version control.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", ".git"];

/// File kinds a backticked name is taken as a path for.
const PATH_EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "mjs", "ts", "tsx", "json", "proto", "conf", "py", "sh", "yml", "yaml",
    "html", "service",
];

/// Source files a crate's section need not name: roots, folders' modules, test modules.
const UNNAMED_FILES: &[&str] = &["lib.rs", "main.rs", "mod.rs", "tests.rs"];

/// Count words a section may state an `unsafe` count with.
const COUNT_WORDS: &[(&str, usize)] = &[
    ("no", 0),
    ("only", 1),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
];

/// One part of the map: a crate's section (with the crate's folder), or the text around them.
struct Section<'a> {
    title: &'a str,
    /// The crate's folder, relative to the root (`crates/agui-server`, `xtask`).
    crate_dir: Option<String>,
    text: String,
}

/// What `doc` (relative to `root`) claims that the code does not show, one line each.
pub(crate) fn check(root: &Path, doc: &str) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(root.join(doc)).with_context(|| format!("reading {doc}"))?;
    let mut files = Vec::new();
    walk(root, root, &mut files)?;
    let definitions = Definitions::collect(root, &files)?;
    let mut problems = BTreeSet::new();
    for section in sections(root, &text) {
        let place = match &section.crate_dir {
            Some(_) => format!("{doc} ({})", section.title),
            None => doc.to_owned(),
        };
        for name in backticked(&section.text) {
            if is_path(name) {
                if !path_exists(&files, section.crate_dir.as_deref(), name) {
                    let within = match &section.crate_dir {
                        Some(dir) => format!("which is no file or folder of `{dir}` or the root"),
                        None => "which no file or folder is".to_owned(),
                    };
                    problems.insert(format!("{place} names `{name}`, {within}"));
                }
            } else if let Some(unknown) = unknown_name(&definitions, name) {
                problems.insert(format!(
                    "{place} names `{name}`, but the code declares no `{unknown}`"
                ));
            }
        }
        if let Some(dir) = &section.crate_dir {
            problems.extend(unnamed_files(&files, dir, &section.text, &place));
            problems.extend(unsafe_claims(&definitions, dir, &section.text, &place));
        }
    }
    Ok(problems.into_iter().collect())
}

/// The map cut at its `###` headings; a heading naming a crate folder (`crates/<name>`, or a
/// root folder with a `Cargo.toml`) starts that crate's section.
fn sections<'a>(root: &Path, text: &'a str) -> Vec<Section<'a>> {
    let mut sections = vec![Section {
        title: "",
        crate_dir: None,
        text: String::new(),
    }];
    for line in text.lines() {
        if let Some(title) = line
            .strip_prefix("### ")
            .or_else(|| line.strip_prefix("## "))
        {
            let title = title.trim();
            let crate_dir = [format!("crates/{title}"), title.to_owned()]
                .into_iter()
                .find(|dir| !title.contains(' ') && root.join(dir).join("Cargo.toml").is_file());
            sections.push(Section {
                title,
                crate_dir,
                text: String::new(),
            });
        } else if let Some(section) = sections.last_mut() {
            section.text.push_str(line);
            section.text.push('\n');
        }
    }
    sections
}

/// Whether `name` is a file or folder of the crate in `crate_dir` (or of the root), or, outside
/// a crate's section, ends a path of the repository.
fn path_exists(files: &[String], crate_dir: Option<&str>, name: &str) -> bool {
    let wanted = name.trim_end_matches('/');
    let is = |f: &String, path: &str| f == path || f.starts_with(&format!("{path}/"));
    match crate_dir {
        Some(dir) => files.iter().any(|f| {
            is(f, wanted)
                || is(f, &format!("{dir}/{wanted}"))
                || is(f, &format!("{dir}/src/{wanted}"))
                || (f.starts_with(&format!("{dir}/"))
                    && (f.ends_with(&format!("/{wanted}")) || f.contains(&format!("/{wanted}/"))))
        }),
        None => files.iter().any(|f| {
            f == wanted
                || f.ends_with(&format!("/{wanted}"))
                || f.starts_with(&format!("{wanted}/"))
                || f.contains(&format!("/{wanted}/"))
        }),
    }
}

/// The first segment of `name` the code does not declare, if any.
fn unknown_name<'a>(definitions: &Definitions, name: &'a str) -> Option<&'a str> {
    let segments: Vec<&str> = name.split("::").map(|s| s.trim_end_matches("()")).collect();
    if segments.len() == 1 {
        let only = segments[0];
        return (is_type_name(only) && !definitions.knows(only)).then_some(only);
    }
    if !segments.iter().all(|s| is_identifier(s)) {
        return None;
    }
    // A path from another crate (`std::fs`, `tokio::spawn`) is not the map's to check; a path
    // from a type (`Conversation::Lost`) is, and the type must be known.
    let first = segments[0];
    if is_type_name(first) && !definitions.knows(first) {
        return Some(first);
    }
    if !(definitions.own.contains(first) || matches!(first, "crate" | "self" | "super")) {
        return None;
    }
    segments[1..]
        .iter()
        .copied()
        .find(|s| !matches!(*s, "crate" | "self" | "super") && !definitions.knows(s))
}

/// The crate's source files its section does not name.
fn unnamed_files(files: &[String], dir: &str, text: &str, place: &str) -> Vec<String> {
    let src = format!("{dir}/src/");
    let named: BTreeSet<&str> = backticked(text).collect();
    files
        .iter()
        .filter_map(|f| f.strip_prefix(&src))
        .filter(|rel| rel.ends_with(".rs") && !rel.split('/').any(|part| part == "generated"))
        .filter(|rel| {
            let file = rel.rsplit('/').next().unwrap_or(rel);
            !UNNAMED_FILES.contains(&file)
                && !named
                    .iter()
                    .any(|n| *n == file || *n == *rel || n.ends_with(&format!("/{rel}")))
        })
        .map(|rel| format!("{place} does not name `{rel}`, a source file of `{dir}`"))
        .collect()
}

/// Whether the section's statements about `unsafe` match the crate's code.
fn unsafe_claims(definitions: &Definitions, dir: &str, text: &str, place: &str) -> Vec<String> {
    let prefix = format!("{dir}/src/");
    let actual: usize = definitions
        .unsafe_sites
        .iter()
        .filter(|(file, _)| file.starts_with(&prefix))
        .map(|(_, n)| n)
        .sum();
    let words: Vec<&str> = text.split_whitespace().collect();
    let claims: Vec<(usize, &str)> = words
        .windows(2)
        .filter(|pair| pair[1].trim_end_matches([',', '.', ')', ';', ':']) == "`unsafe`")
        .filter_map(|pair| {
            let word = pair[0].trim_start_matches('(').to_lowercase();
            COUNT_WORDS
                .iter()
                .find(|(w, _)| *w == word)
                .map(|(_, n)| (*n, pair[0]))
        })
        .collect();
    let mut problems = Vec::new();
    for (claimed, word) in &claims {
        if *claimed != actual {
            problems.push(format!(
                "{place} says \"{word} `unsafe`\", but `{dir}` has {actual} unsafe place(s)"
            ));
        }
    }
    if actual > 0 && claims.is_empty() {
        problems.push(format!(
            "{place} does not say how many `unsafe` places `{dir}` has ({actual}) and why"
        ));
    }
    problems
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

/// A Rust identifier (`model_proxy_addr`, `Runtime`).
fn is_identifier(segment: &str) -> bool {
    segment.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
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

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn missing_paths_and_undeclared_names_are_reported_and_present_ones_pass() {
        let root = repo(&[
            ("crates/a/Cargo.toml", ""),
            ("crates/a/src/lib.rs", "mod pool;"),
            (
                "crates/a/src/pool.rs",
                "pub struct HarnessPool { pub slots: usize }\n// Sweeper, Lost: only in a comment\n\
                 #[cfg(test)] mod tests { struct Conversation; }",
            ),
            ("crates/b/Cargo.toml", ""),
            ("crates/b/src/lib.rs", "use tokio::sync::Mutex;"),
            (
                "MAP.md",
                "`crates/a/src/pool.rs` holds `a::HarnessPool`, `HarnessPool::slots`; `crates/a/` too.\n\
                 `HOME`, `/connect`, `../shared/x.md` and `std::fs::Missing` are not checked.\n\
                 `sweeper.rs` holds the `Sweeper`; `Conversation::Lost`.\n\
                 ### a\n`pool.rs` and `src/pool.rs`, not `lib2.rs`; `Mutex` is not imported here but is known.\n\
                 ### b\n`pool.rs` is a's.\n",
            ),
        ]);
        let problems = check(root.path(), "MAP.md").unwrap();
        assert_eq!(
            problems,
            [
                "MAP.md (a) names `lib2.rs`, which is no file or folder of `crates/a` or the root",
                "MAP.md (b) names `pool.rs`, which is no file or folder of `crates/b` or the root",
                "MAP.md names `Conversation::Lost`, but the code declares no `Conversation`",
                "MAP.md names `Sweeper`, but the code declares no `Sweeper`",
                "MAP.md names `sweeper.rs`, which no file or folder is",
            ]
        );
    }

    #[test]
    fn every_source_file_of_a_crate_is_named_in_its_section() {
        let root = repo(&[
            ("crates/a/Cargo.toml", ""),
            ("crates/a/src/lib.rs", "mod named; mod unnamed; mod deep;"),
            ("crates/a/src/named.rs", ""),
            ("crates/a/src/unnamed.rs", ""),
            (
                "crates/a/src/deep/mod.rs",
                "mod leaf; #[cfg(test)] mod tests;",
            ),
            ("crates/a/src/deep/leaf.rs", ""),
            ("crates/a/src/deep/tests.rs", ""),
            ("crates/a/src/generated/x.rs", ""),
            ("MAP.md", "### a\n`named.rs`, and `deep/` as a folder.\n"),
        ]);
        let problems = check(root.path(), "MAP.md").unwrap();
        assert_eq!(
            problems,
            [
                "MAP.md (a) does not name `deep/leaf.rs`, a source file of `crates/a`",
                "MAP.md (a) does not name `unnamed.rs`, a source file of `crates/a`",
            ]
        );
    }

    #[test]
    fn unsafe_counts_stated_in_a_section_match_the_code() {
        let block = "fn f() { unsafe { g() } }";
        let root = repo(&[
            ("crates/one/Cargo.toml", ""),
            ("crates/one/src/lib.rs", block),
            ("crates/two/Cargo.toml", ""),
            ("crates/two/src/lib.rs", "mod x; fn f() { unsafe { g() } }"),
            ("crates/two/src/x.rs", "unsafe fn h() {}"),
            ("crates/silent/Cargo.toml", ""),
            ("crates/silent/src/lib.rs", block),
            ("crates/none/Cargo.toml", ""),
            (
                "crates/none/src/lib.rs",
                "#[cfg(test)] mod tests { fn f() { unsafe { g() } } }",
            ),
            (
                "MAP.md",
                "### one\nThe crate's only `unsafe`.\n### two\nIts only `unsafe`, in `x.rs`.\n\
                 ### silent\nNothing.\n### none\nIt has no `unsafe`.\n",
            ),
        ]);
        let problems = check(root.path(), "MAP.md").unwrap();
        assert_eq!(
            problems,
            [
                "MAP.md (silent) does not say how many `unsafe` places `crates/silent` has (1) and why",
                "MAP.md (two) says \"only `unsafe`\", but `crates/two` has 2 unsafe place(s)",
            ]
        );
    }
}
