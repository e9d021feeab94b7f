//! One door to what the agent can write: in the crates that run the server, only the files
//! listed in [`ALLOWED`] may call the standard library's or tokio's file-system API
//! (`std::fs`, `tokio::fs`); everything else reaches files through
//! `harness_sandbox::AgentDir`, which follows no link and opens no FIFO. Each listed file
//! touches only the server's own state (the thread store, leases, owners, configuration) or
//! the host's (cgroups, `/proc`, `/etc`), and says so here; a new file that calls `std::fs`
//! fails the check until it is reviewed and listed, and a listed file that no longer does fails
//! it too (the list stays true). Test code (`#[cfg(test)]`, `tests.rs`) is not checked.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;
use syn::visit::Visit;

/// The crates checked.
pub(crate) const CRATES: &[&str] = &[
    "crates/harness-sandbox",
    "crates/harness-client",
    "crates/agui-session",
    "crates/agui-server",
];

/// Files (relative to the workspace) that may use the file-system API, and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "crates/harness-sandbox/src/agent_dir.rs",
        "the door itself (creates a root the caller trusts)",
    ),
    (
        "crates/harness-sandbox/src/cgroups.rs",
        "the host's cgroup file system",
    ),
    (
        "crates/harness-sandbox/src/roots.rs",
        "sandbox roots in the host's temp dir: mount points only (the agent writes into what is \
         mounted on them, never the directories themselves), made 0700 by the launcher, \
         removed only when empty of data, no link followed",
    ),
    (
        "crates/harness-sandbox/src/probe.rs",
        "the host's own executable and /proc",
    ),
    (
        "crates/harness-sandbox/src/launcher/outside.rs",
        "the launcher's outer stage: /etc links and cgroup.procs on the host",
    ),
    (
        "crates/harness-sandbox/src/launcher/identity.rs",
        "the launcher's outer stage, as root: /proc/<pid>/uid_map and the staging mounts on the host",
    ),
    (
        "crates/harness-sandbox/src/launcher/init.rs",
        "the sandbox's PID 1, inside the sandbox",
    ),
    (
        "crates/harness-sandbox/src/launcher/procs.rs",
        "the sandbox's PID 1: its own /proc (the sandbox's processes and their open files)",
    ),
    (
        "crates/harness-sandbox/src/spec.rs",
        "the spec's sealed memfd (File from a descriptor)",
    ),
    (
        "crates/harness-sandbox/src/launcher/netdev.rs",
        "the sandbox's PID 1: its own /proc/net",
    ),
    (
        "crates/harness-client/src/discovery.rs",
        "the harness binary the operator installed",
    ),
    (
        "crates/harness-client/src/trajectory.rs",
        "a private temporary copy (its own new temp dir) of a saved conversation's bytes, which the caller read through the door, for SQLite to open",
    ),
    (
        "crates/agui-session/src/agent.rs",
        "creates the operator's save dir and workspace root",
    ),
    (
        "crates/agui-session/src/store.rs",
        "the thread store (<save_dir>/threads), out of every sandbox's reach",
    ),
    (
        "crates/agui-session/src/claim.rs",
        "claim files (owners, tree claims, leases), in directories only the server writes",
    ),
    (
        "crates/agui-session/src/store/owners.rs",
        "thread owners, claimed beside the thread records (and those of <save_dir>/owners moved in)",
    ),
    (
        "crates/agui-session/src/store/rewrite.rs",
        "the thread store's records, renamed by the identity migration",
    ),
    (
        "crates/agui-session/src/store/scan.rs",
        "the thread store's directory, scanned for the thread lists",
    ),
    (
        "crates/agui-session/src/store/slots.rs",
        "the thread store's record slots",
    ),
    (
        "crates/agui-session/src/identity_migration.rs",
        "renames owners in the thread store, tree markers and claims and the server's owner files: server-only state (markers left inside a tree are first moved out through the door)",
    ),
    (
        "crates/agui-session/src/trees/claims.rs",
        "tree markers, owner claims and tree roots, under directories only the server writes",
    ),
    (
        "crates/agui-server/src/build.rs",
        "the operator's sandbox_ro_paths and key files",
    ),
    (
        "crates/agui-server/src/config.rs",
        "the operator's configuration and key files",
    ),
    (
        "crates/agui-server/src/leases.rs",
        "thread leases on the shared volume, out of every sandbox's reach",
    ),
];

/// The problems found under `root` (the workspace), one line each; also how many files were
/// read.
pub(crate) fn check(root: &Path) -> anyhow::Result<(usize, Vec<String>)> {
    let mut using = BTreeSet::new();
    let mut read = 0;
    for krate in CRATES {
        for file in rust_files(&root.join(krate).join("src"))? {
            let rel = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
                continue;
            }
            read += 1;
            let text = std::fs::read_to_string(&file).with_context(|| format!("reading {rel}"))?;
            let parsed = syn::parse_file(&text).with_context(|| format!("parsing {rel}"))?;
            let mut uses = FsUses::default();
            uses.visit_file(&parsed);
            if uses.found {
                using.insert(rel);
            }
        }
    }
    let allowed: BTreeSet<String> = ALLOWED.iter().map(|(f, _)| (*f).to_owned()).collect();
    let mut problems: Vec<String> = using
        .difference(&allowed)
        .map(|file| {
            format!(
                "{file} calls the file-system API (std::fs or tokio::fs): reach what an agent can write through harness_sandbox::AgentDir; a file that touches only the server's own state goes in ALLOWED of xtask/src/check_architecture/file_access.rs, with the reason"
            )
        })
        .collect();
    problems.extend(allowed.difference(&using).map(|file| {
        format!(
            "{file} is listed in ALLOWED of xtask/src/check_architecture/file_access.rs but no longer calls the file-system API (or no longer exists): take it off the list"
        )
    }));
    Ok((read, problems))
}

fn rust_files(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a file names `std::fs` or `tokio::fs` (a path or a `use`), test code aside.
#[derive(Default)]
struct FsUses {
    found: bool,
}

impl FsUses {
    fn is_fs(segments: &[String]) -> bool {
        segments
            .windows(2)
            .any(|w| matches!(w[0].as_str(), "std" | "tokio") && w[1] == "fs")
    }
}

impl<'ast> Visit<'ast> for FsUses {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => &Vec::new(),
        };
        if attrs.iter().any(is_cfg_test) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if Self::is_fs(&segments) {
            self.found = true;
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut prefixes = Vec::new();
        collect_use(&item.tree, &mut Vec::new(), &mut prefixes);
        if prefixes.iter().any(|p| Self::is_fs(p)) {
            self.found = true;
        }
    }
}

/// Every path a `use` tree names (its prefixes included).
fn collect_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            out.push(prefix.clone());
            collect_use(&path.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            full.push(name.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(group) => {
            for tree in &group.items {
                collect_use(tree, prefix, out);
            }
        }
    }
}

fn is_cfg_test(attr: &syn::Attribute) -> bool {
    attr.path().is_ident("cfg")
        && attr
            .meta
            .require_list()
            .is_ok_and(|list| list.tokens.to_string().contains("test"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(source: &str) -> bool {
        let mut uses = FsUses::default();
        uses.visit_file(&syn::parse_file(source).unwrap());
        uses.found
    }

    #[test]
    fn file_system_calls_are_found_in_paths_and_uses_but_not_in_tests_or_unix_extensions() {
        assert!(uses("fn f() { std::fs::remove_dir_all(\"x\").unwrap(); }"));
        assert!(uses("use std::fs; fn f() { fs::read(\"x\"); }"));
        assert!(uses("use std::{fs::File, io}; fn f() {}"));
        assert!(uses(
            "async fn f() { tokio::fs::create_dir_all(\"x\").await; }"
        ));
        assert!(!uses("use std::os::unix::fs::MetadataExt as _; fn f() {}"));
        assert!(!uses("fn f() { harness_sandbox::AgentDir::open(p); }"));
        assert!(!uses(
            "#[cfg(test)] mod tests { fn t() { std::fs::write(\"x\", \"y\").unwrap(); } }"
        ));
    }
}
