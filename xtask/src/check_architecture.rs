//! `cargo xtask check-architecture`: the dependency invariants of ARCHITECTURE.md, checked on the
//! resolved dependency graph (`cargo metadata`), normal dependencies only; the public APIs that
//! must not name generated protocol types ([`public_api`]); and no module circle inside any
//! crate ([`module_circles`]), both checked on the source; ARCHITECTURE.md naming only
//! files and types that exist ([`doc_names`]); and the file-system API called only where
//! nothing an agent can write is touched ([`file_access`]).

mod definitions;
mod doc_names;
mod file_access;
mod lock_policy;
mod module_circles;
mod public_api;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util::{cargo, workspace_root};

/// Which workspace crates each crate may depend on (its lower layers). A crate missing here is
/// an error, so a new crate must be placed in the layering explicitly.
const ALLOWED_WORKSPACE_DEPS: &[(&str, &[&str])] = &[
    ("harness-install", &[]),
    ("harness-proto", &[]),
    ("agui-types", &[]),
    ("gemini-script", &[]),
    ("harness-sandbox", &[]),
    (
        "harness-client",
        &["harness-install", "harness-proto", "harness-sandbox"],
    ),
    ("agui-translate", &["harness-proto", "agui-types"]),
    (
        "agui-session",
        &[
            "harness-install",
            "harness-proto",
            "harness-sandbox",
            "harness-client",
            "agui-types",
            "agui-translate",
        ],
    ),
    (
        "agui-server",
        &[
            "harness-install",
            "harness-proto",
            "harness-sandbox",
            "harness-client",
            "agui-types",
            "agui-translate",
            "agui-session",
            "gemini-script",
        ],
    ),
    // Tools: above every layer.
    ("xtask", &["*"]),
    ("agui-bench", &["*"]),
];

/// External crates a workspace crate must not pull in, even transitively, with the reason.
const FORBIDDEN: &[(&str, &[&str], &str)] = &[
    (
        "agui-translate",
        &[
            "tokio",
            "mio",
            "hyper",
            "axum",
            "reqwest",
            "tungstenite",
            "futures-util",
        ],
        "the translator is pure: no I/O, no async runtime",
    ),
    (
        "agui-types",
        &["tokio", "mio", "hyper", "axum", "tungstenite"],
        "agui-types is usable by any AG-UI server",
    ),
    (
        "harness-proto",
        &["tokio", "mio", "hyper"],
        "protocol types carry no runtime",
    ),
];

/// Arguments of `check-architecture`.
#[derive(clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    // Only this platform's dependencies count: a crate pulled in for wasm alone (e.g. js-sys
    // under uuid) is not something the translator runs with here.
    let host = host_triple()?;
    let output = cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            &host,
        ])
        .current_dir(workspace_root())
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let graph = Graph::from_metadata(&metadata)?;
    let mut problems = check(&graph);
    for (dir, forbidden) in public_api::PROTO_FREE_APIS {
        let src = workspace_root().join(dir).join("src");
        for problem in public_api::check_dir(&src, forbidden)? {
            problems.push(format!("{dir}/src/{problem}"));
        }
    }
    let mut modules = 0;
    for src in crate_sources(&metadata)? {
        let (count, circles) = module_circles::check_dir(&src)?;
        modules += count;
        let dir = src
            .strip_prefix(workspace_root())
            .unwrap_or(&src)
            .display()
            .to_string();
        problems.extend(circles.into_iter().map(|c| format!("{dir}: {c}")));
    }
    problems.extend(doc_names::check(&workspace_root(), "ARCHITECTURE.md")?);
    let (files_read, file_access) = file_access::check(&workspace_root())?;
    problems.extend(file_access);
    let (lock_files, std_locks) =
        lock_policy::check(&workspace_root(), &crate_sources(&metadata)?)?;
    problems.extend(std_locks);
    if !problems.is_empty() {
        bail!(
            "architecture invariants violated:\n- {}",
            problems.join("\n- ")
        );
    }
    println!(
        "architecture invariants hold for {} workspace crates; no module circle among their {modules} modules; ARCHITECTURE.md names only what the code declares, every source file in its crate's section, and each crate's unsafe count; no generated protocol type in the public API of {}; of the {files_read} source files of {}, only the listed ones call std::fs; none of the {lock_files} source files of the workspace takes a std lock (parking_lot: one lock policy)",
        graph.members.len(),
        public_api::PROTO_FREE_APIS
            .iter()
            .map(|(dir, _)| dir.trim_start_matches("crates/"))
            .collect::<Vec<_>>()
            .join(" or "),
        file_access::CRATES
            .iter()
            .map(|dir| dir.trim_start_matches("crates/"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The `src` folder of every workspace member.
fn crate_sources(metadata: &Value) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("metadata.workspace_members")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut sources: Vec<std::path::PathBuf> = metadata["packages"]
        .as_array()
        .context("metadata.packages")?
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
        .filter_map(|p| {
            let manifest = std::path::Path::new(p["manifest_path"].as_str()?);
            Some(manifest.parent()?.join("src"))
        })
        .collect();
    sources.sort();
    Ok(sources)
}

fn host_triple() -> anyhow::Result<String> {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .context("rustc -vV printed no host triple")
}

/// Package names, workspace membership and normal-dependency edges.
struct Graph {
    members: BTreeSet<String>,
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn from_metadata(metadata: &Value) -> anyhow::Result<Self> {
        let name_of: BTreeMap<&str, &str> = metadata["packages"]
            .as_array()
            .context("metadata.packages")?
            .iter()
            .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
            .collect();
        let members = metadata["workspace_members"]
            .as_array()
            .context("metadata.workspace_members")?
            .iter()
            .filter_map(|id| name_of.get(id.as_str()?).map(|n| (*n).to_owned()))
            .collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for node in metadata["resolve"]["nodes"]
            .as_array()
            .context("metadata.resolve.nodes")?
        {
            let Some(from) = node["id"].as_str().and_then(|id| name_of.get(id)) else {
                continue;
            };
            for dep in node["deps"].as_array().into_iter().flatten() {
                let normal = dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|k| k["kind"].is_null());
                if let (true, Some(to)) =
                    (normal, dep["pkg"].as_str().and_then(|id| name_of.get(id)))
                {
                    edges
                        .entry((*from).to_owned())
                        .or_default()
                        .insert((*to).to_owned());
                }
            }
        }
        Ok(Self { members, edges })
    }

    /// Every package reachable from `root` through normal dependencies.
    fn closure(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![root.to_owned()];
        while let Some(next) = stack.pop() {
            for dep in self.edges.get(&next).into_iter().flatten() {
                if seen.insert(dep.clone()) {
                    stack.push(dep.clone());
                }
            }
        }
        seen
    }
}

fn check(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for member in &graph.members {
        let Some((_, allowed)) = ALLOWED_WORKSPACE_DEPS
            .iter()
            .find(|(name, _)| name == member)
        else {
            problems.push(format!("{member} has no place in the layering (add it to check_architecture.rs and ARCHITECTURE.md)"));
            continue;
        };
        if allowed.contains(&"*") {
            continue;
        }
        for dep in graph.edges.get(member).into_iter().flatten() {
            if graph.members.contains(dep) && !allowed.contains(&dep.as_str()) {
                problems.push(format!(
                    "{member} depends on {dep}, which is not one of its lower layers"
                ));
            }
        }
    }
    for (krate, forbidden, why) in FORBIDDEN {
        let closure = graph.closure(krate);
        for bad in forbidden.iter().filter(|f| closure.contains(**f)) {
            problems.push(format!("{krate} depends (transitively) on {bad}: {why}"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph {
            members: BTreeSet::new(),
            edges: BTreeMap::new(),
        };
        for name in [
            "harness-proto",
            "agui-types",
            "agui-translate",
            "harness-client",
        ] {
            g.members.insert(name.into());
        }
        for (from, to) in edges {
            g.edges
                .entry((*from).into())
                .or_default()
                .insert((*to).into());
        }
        g
    }

    #[test]
    fn violations_are_reported() {
        assert!(
            check(&graph(&[
                ("agui-translate", "agui-types"),
                ("harness-client", "harness-proto")
            ]))
            .is_empty()
        );
        let upward = check(&graph(&[("harness-client", "agui-types")]));
        assert_eq!(
            upward,
            ["harness-client depends on agui-types, which is not one of its lower layers"]
        );
        let io = check(&graph(&[
            ("agui-translate", "agui-types"),
            ("agui-types", "tokio"),
        ]));
        assert!(
            io.iter()
                .any(|p| p.starts_with("agui-translate depends (transitively) on tokio")),
            "{io:?}"
        );
        assert!(
            io.iter()
                .any(|p| p.starts_with("agui-types depends (transitively) on tokio")),
            "{io:?}"
        );
    }
}
