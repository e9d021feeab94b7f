//! No module circles inside a crate: the modules of one crate, one per file, must form layers,
//! so each can be read (and changed) knowing only those below it.
//!
//! A file's module depends on another when its code names a path into it (`crate::a::b::X`,
//! `super::x::Y`, `child::Z`, a `use` of any), resolved to the module that defines the named
//! item: a path through a `use` (a re-export at the crate root, a glob) is followed to where the
//! item lives, so `crate::X` re-exported from `a` is an edge to `a`. A module naming one of its
//! own ancestors' items does not count: it lives inside that namespace, and a parent that
//! declares a child is not thereby below it. Code under `#[cfg(test)]` is skipped (tests may
//! reach anywhere), and so are paths inside macro invocations, which syn does not parse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::definitions::is_test_only;
use anyhow::Context as _;
use syn::visit::Visit;

/// A module, as the path of names from the crate root (empty for the root).
type Module = Vec<String>;

/// The module circles of the crate whose sources are under `src`, one line each naming the
/// modules and the edges that close it; empty when there is none. Also returns how many
/// modules were read.
pub(crate) fn check_dir(src: &Path) -> anyhow::Result<(usize, Vec<String>)> {
    let mut files = BTreeMap::new();
    read_modules(src, src, &mut files)?;
    let modules: BTreeSet<Module> = files.keys().cloned().collect();
    let mut parsed = BTreeMap::new();
    for (module, text) in &files {
        let file = syn::parse_file(text)
            .with_context(|| format!("parsing the module `{}`", name(module)))?;
        parsed.insert(module.clone(), file);
    }
    let scopes: BTreeMap<Module, Scope> = parsed
        .iter()
        .map(|(module, file)| (module.clone(), Scope::of(module, file, &modules)))
        .collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in &parsed {
        let mut paths = Paths {
            current: module.clone(),
            modules: &modules,
            found: Vec::new(),
        };
        paths.visit_file(file);
        let targets = edges.entry(module.clone()).or_default();
        for path in paths.found {
            if let Some(target) = defining_module(&modules, &scopes, &path)
                && &target != module
                && !module.starts_with(&target)
            {
                targets.insert(target);
            }
        }
    }
    let problems = circles(&modules, &edges)
        .into_iter()
        .map(|circle| {
            let members: BTreeSet<&Module> = circle.iter().collect();
            let detail: Vec<String> = circle
                .iter()
                .map(|m| {
                    let to: Vec<String> = edges[m]
                        .iter()
                        .filter(|t| members.contains(t))
                        .map(name)
                        .collect();
                    format!("{} -> {}", name(m), to.join(", "))
                })
                .collect();
            format!("module circle: {}", detail.join("; "))
        })
        .collect();
    Ok((modules.len(), problems))
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Reads every file module under `dir`: `lib.rs` (or `main.rs` without one) is the root,
/// `a/mod.rs` and `a.rs` are `a`. Other binaries (`main.rs` beside `lib.rs`, `bin/`) are crates
/// of their own and left out.
fn read_modules(
    root: &Path,
    dir: &Path,
    files: &mut BTreeMap<Module, String>,
) -> anyhow::Result<()> {
    let has_lib = root.join("lib.rs").exists();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let relative = path.strip_prefix(root)?;
        if path.is_dir() {
            if relative != Path::new("bin") {
                read_modules(root, &path, files)?;
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let mut module: Module = relative
            .with_extension("")
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        match module.as_slice() {
            [only] if only == "lib" => module.clear(),
            [only] if only == "main" => {
                if has_lib {
                    continue;
                }
                module.clear();
            }
            [.., last] if last == "mod" => {
                module.pop();
            }
            _ => {}
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        files.insert(module, text);
    }
    Ok(())
}

/// The longest module that `path` (absolute, from the crate root) starts with.
fn longest_module(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// The module whose file defines what `path` names: the longest module it starts with, then
/// through that module's `use` of the next name (an alias, or a glob whose module has the
/// name), until a module defines it or the path leaves the crate. Bounded, so a `use` circle
/// (which rustc rejects) cannot loop.
fn defining_module(
    modules: &BTreeSet<Module>,
    scopes: &BTreeMap<Module, Scope>,
    path: &[String],
) -> Option<Module> {
    let mut path = path.to_vec();
    let mut module = longest_module(modules, &path)?;
    for _ in 0..32 {
        let Some(next) = path.get(module.len()) else {
            return Some(module);
        };
        let Some(scope) = scopes.get(&module) else {
            return Some(module);
        };
        if scope.defined.contains(next) {
            return Some(module);
        }
        let rest = &path[module.len() + 1..];
        let through = match scope.aliases.get(next) {
            Some(Some(target)) => Some(target.clone()),
            // A name imported from outside the crate: nothing further inside it.
            Some(None) => return Some(module),
            None => scope
                .globs
                .iter()
                .find(|glob| {
                    scopes
                        .get(*glob)
                        .is_some_and(|s| s.defined.contains(next) || s.aliases.contains_key(next))
                })
                .map(|glob| {
                    let mut target = glob.clone();
                    target.push(next.clone());
                    target
                }),
        };
        let Some(mut target) = through else {
            return Some(module);
        };
        target.extend(rest.iter().cloned());
        path = target;
        module = longest_module(modules, &path)?;
    }
    Some(module)
}

/// `segments` as an absolute path from the crate root, if it starts at `crate`, `self`,
/// `super` or a child module of `current`; other paths name items in scope or other crates.
fn absolute(
    current: &Module,
    modules: &BTreeSet<Module>,
    segments: &[String],
) -> Option<Vec<String>> {
    let (mut base, mut rest) = match segments.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &segments[1..]),
        Some("self") => (current.clone(), &segments[1..]),
        Some("super") => {
            let mut parent = current.clone();
            parent.pop();
            (parent, &segments[1..])
        }
        Some(first) => {
            let mut child = current.clone();
            child.push(first.to_owned());
            if !modules.contains(&child) {
                return None;
            }
            (current.clone(), segments)
        }
        None => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// What a module's file puts in its namespace at its top level: the items it defines, and what
/// its `use`s bring in (an alias's target is `None` when it lies outside the crate).
#[derive(Default)]
struct Scope {
    defined: BTreeSet<String>,
    aliases: BTreeMap<String, Option<Vec<String>>>,
    globs: Vec<Module>,
}

impl Scope {
    fn of(module: &Module, file: &syn::File, modules: &BTreeSet<Module>) -> Scope {
        let mut scope = Scope::default();
        for item in &file.items {
            if is_test_only(item_attrs(item)) {
                continue;
            }
            let ident = match item {
                syn::Item::Use(u) => {
                    scope.use_tree(module, modules, &mut Vec::new(), &u.tree);
                    continue;
                }
                syn::Item::Const(i) => &i.ident,
                syn::Item::Enum(i) => &i.ident,
                syn::Item::Fn(i) => &i.sig.ident,
                syn::Item::Mod(i) => &i.ident,
                syn::Item::Static(i) => &i.ident,
                syn::Item::Struct(i) => &i.ident,
                syn::Item::Trait(i) => &i.ident,
                syn::Item::TraitAlias(i) => &i.ident,
                syn::Item::Type(i) => &i.ident,
                syn::Item::Union(i) => &i.ident,
                syn::Item::Macro(i) => match &i.ident {
                    Some(ident) => ident,
                    None => continue,
                },
                _ => continue,
            };
            scope.defined.insert(ident.to_string());
        }
        scope
    }

    fn use_tree(
        &mut self,
        module: &Module,
        modules: &BTreeSet<Module>,
        prefix: &mut Vec<String>,
        tree: &syn::UseTree,
    ) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(module, modules, prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => {
                if let Some(last) = prefix.last() {
                    let target = absolute(module, modules, prefix);
                    self.aliases.insert(last.clone(), target);
                }
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.aliases
                    .insert(n.ident.to_string(), absolute(module, modules, prefix));
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.aliases
                    .insert(r.rename.to_string(), absolute(module, modules, prefix));
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                if let Some(target) = absolute(module, modules, prefix)
                    && modules.contains(&target)
                {
                    self.globs.push(target);
                }
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(module, modules, prefix, tree);
                }
            }
        }
    }
}

/// Collects the crate-relative paths a file names, resolved to absolute ones.
struct Paths<'a> {
    /// The module being read (an inline module adds its name while it is read).
    current: Module,
    modules: &'a BTreeSet<Module>,
    found: Vec<Vec<String>>,
}

impl Paths<'_> {
    fn record(&mut self, segments: &[String]) {
        if let Some(path) = absolute(&self.current, self.modules, segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => self.record(&prefix.clone()),
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.record(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.record(&prefix.clone());
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(&prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if module.content.is_some() {
            self.current.push(module.ident.to_string());
            syn::visit::visit_item_mod(self, module);
            self.current.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(
    modules: &BTreeSet<Module>,
    edges: &BTreeMap<Module, BTreeSet<Module>>,
) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(state: &mut State<'a>, v: &'a Module) {
        let n = state.index.len();
        state.index.insert(v, n);
        state.low.insert(v, n);
        state.stack.push(v);
        state.on_stack.insert(v);
        let edges = state.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !state.index.contains_key(w) {
                visit(state, w);
                let low = state.low[v].min(state.low[w]);
                state.low.insert(v, low);
            } else if state.on_stack.contains(w) {
                let low = state.low[v].min(state.index[w]);
                state.low.insert(v, low);
            }
        }
        if state.low[v] == state.index[v] {
            let mut component = Vec::new();
            while let Some(w) = state.stack.pop() {
                state.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in modules {
        if !state.index.contains_key(module) {
            visit(&mut state, module);
        }
    }
    state.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn a_circle_through_use_and_paths_is_reported_with_its_edges() {
        let dir = crate_of(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::Thing;"),
            ("b/mod.rs", "mod inner; fn f() { super::c::g(); }"),
            ("b/inner.rs", "fn f() { super::super::a::h(); }"),
            ("c.rs", "use crate::{a, b};"),
        ]);
        let (modules, problems) = check_dir(dir.path()).unwrap();
        assert_eq!(modules, 5);
        assert_eq!(
            problems,
            ["module circle: a -> b; b -> c; c -> a, b"],
            "b::inner -> a is outside the circle (nothing leads back to b::inner)"
        );
    }

    #[test]
    fn a_circle_through_a_root_re_export_is_reported() {
        // harness-client's shape before its fix: error names `crate::CloseReason`, which the
        // root re-exports from events; events uses process, and process uses error.
        let dir = crate_of(&[
            (
                "lib.rs",
                "mod error; mod events; mod process; pub use events::CloseReason; pub use error::HarnessError;",
            ),
            (
                "error.rs",
                "pub enum HarnessError { Closed(crate::CloseReason) }",
            ),
            (
                "events.rs",
                "use crate::process::ExitInfo; pub enum CloseReason {}",
            ),
            (
                "process.rs",
                "use crate::error::HarnessError; pub struct ExitInfo;",
            ),
        ]);
        let (_, problems) = check_dir(dir.path()).unwrap();
        assert_eq!(
            problems,
            ["module circle: error -> events; events -> process; process -> error"]
        );
    }

    #[test]
    fn a_circle_through_a_glob_and_a_renamed_use_is_reported() {
        let dir = crate_of(&[
            ("lib.rs", "mod a; mod b; mod prelude;"),
            (
                "prelude.rs",
                "pub use crate::a::*; pub use crate::b::Thing as Renamed;",
            ),
            ("a.rs", "pub struct A; fn f(_: crate::prelude::Renamed) {}"),
            ("b.rs", "use crate::prelude::A; pub struct Thing;"),
        ]);
        let (_, problems) = check_dir(dir.path()).unwrap();
        assert_eq!(problems, ["module circle: a -> b; b -> a"]);
    }

    #[test]
    fn a_re_export_of_another_crate_ends_the_path() {
        let dir = crate_of(&[
            (
                "lib.rs",
                "mod a; mod b; pub use other_crate as other; pub use a::X;",
            ),
            ("a.rs", "pub struct X; fn f(_: crate::other::Y) {}"),
            ("b.rs", "use crate::X;"),
        ]);
        assert!(check_dir(dir.path()).unwrap().1.is_empty());
    }

    #[test]
    fn layers_ancestors_and_test_code_make_no_circle() {
        let dir = crate_of(&[
            ("lib.rs", "pub mod a; mod b; pub use a::X;"),
            ("a/mod.rs", "mod child; pub use child::X;"),
            // A child naming its parent, and the crate root, is inside their namespace.
            ("a/child.rs", "use super::Y; use crate::X; pub struct X;"),
            (
                "b.rs",
                "use crate::a::X;\n#[cfg(test)]\nmod tests { use crate::b; }",
            ),
            ("main.rs", "use crate::b;"),
        ]);
        let (modules, problems) = check_dir(dir.path()).unwrap();
        assert_eq!(modules, 4, "main.rs beside lib.rs is a crate of its own");
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn test_only_code_does_not_count() {
        let dir = crate_of(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::X;"),
            (
                "b.rs",
                "pub struct X;\n#[cfg(test)]\nmod tests { use crate::a; }",
            ),
        ]);
        assert!(check_dir(dir.path()).unwrap().1.is_empty());
    }
}
