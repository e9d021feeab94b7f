//! What the repository's code defines, for the map's check: the names its Rust items, variants
//! and associated items are declared with (outside `#[cfg(test)]`), the names it imports from
//! other crates, the names TypeScript and JavaScript declare, and where Rust code is `unsafe`.
//! A name that is only mentioned (in a comment, a string, a call) is not a definition.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context as _;
use syn::visit::Visit;

/// TypeScript and JavaScript files, read for their declarations.
const SCRIPT_EXTENSIONS: &[&str] = &["ts", "tsx", "mjs", "js"];

/// Words that declare the next name in TypeScript and JavaScript.
const SCRIPT_DECLARATIONS: &[&str] = &[
    "class",
    "interface",
    "type",
    "enum",
    "function",
    "const",
    "let",
    "var",
    "namespace",
];

/// Words that declare the next name in Rust, read in macros' tokens.
const RUST_DECLARATIONS: &[&str] = &["struct", "enum", "trait", "type", "fn", "const", "mod"];

/// Names every Rust file may use without importing them (the prelude and the derivable traits).
const PRELUDE: &[&str] = &[
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "Box",
    "Vec",
    "String",
    "Drop",
    "Send",
    "Sync",
    "Sized",
    "Clone",
    "Copy",
    "Default",
    "Debug",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "Into",
    "TryFrom",
    "TryInto",
    "Iterator",
    "IntoIterator",
    "ToString",
    "ToOwned",
    "AsRef",
    "Unpin",
];

/// The code's declarations, gathered once for the whole repository.
#[derive(Default)]
pub(crate) struct Definitions {
    /// Names the repository's own code declares (items, variants, associated items, modules,
    /// script declarations) and its crates' names.
    pub(crate) own: BTreeSet<String>,
    /// Names Rust code imports from other crates (`use tokio::sync::Mutex` gives `Mutex`).
    pub(crate) imported: BTreeSet<String>,
    /// Files (relative to the root) holding `unsafe` code outside tests, with how many places.
    pub(crate) unsafe_sites: BTreeMap<String, usize>,
}

impl Definitions {
    /// Reads `files` (relative to `root`).
    pub(crate) fn collect(root: &Path, files: &[String]) -> anyhow::Result<Definitions> {
        let mut definitions = Definitions {
            imported: PRELUDE.iter().map(|n| (*n).to_owned()).collect(),
            ..Definitions::default()
        };
        // Crate names first: a `use` from one of them is not an import from outside.
        for file in files.iter().filter(|f| f.ends_with("Cargo.toml")) {
            if let Some(dir) = Path::new(file).parent().and_then(|d| d.file_name()) {
                let name = dir.to_string_lossy();
                definitions.own.insert(name.replace('-', "_"));
                definitions.own.insert(name.into_owned());
            }
        }
        for file in files {
            let extension = Path::new(file).extension().and_then(|e| e.to_str());
            if extension == Some("rs") {
                let text = std::fs::read_to_string(root.join(file))
                    .with_context(|| format!("reading {file}"))?;
                let Ok(parsed) = syn::parse_file(&text) else {
                    // Fixtures and templates need not be Rust a parser accepts.
                    continue;
                };
                let mut visitor = RustDeclarations {
                    definitions: &mut definitions,
                    unsafe_sites: 0,
                };
                visitor.visit_file(&parsed);
                let sites = visitor.unsafe_sites;
                if sites > 0 {
                    definitions.unsafe_sites.insert(file.clone(), sites);
                }
            } else if extension.is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e)) {
                let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
                definitions.script_declarations(&text);
            }
        }
        Ok(definitions)
    }

    /// Whether `name` is declared by the repository or imported by its Rust code.
    pub(crate) fn knows(&self, name: &str) -> bool {
        self.own.contains(name) || self.imported.contains(name)
    }

    fn script_declarations(&mut self, text: &str) {
        let words: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            if SCRIPT_DECLARATIONS.contains(&pair[0]) {
                self.own.insert(pair[1].to_owned());
            }
        }
        // `import { A, B as C } from "…"` and `import D from "…"`: names from other packages.
        for statement in text.split("import").skip(1) {
            let Some((names, _)) = statement.split_once("from") else {
                continue;
            };
            if names.contains(';') || names.contains('(') {
                continue;
            }
            self.imported.extend(
                names
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                    .filter(|w| !w.is_empty() && !matches!(*w, "as" | "type" | "default"))
                    .map(str::to_owned),
            );
        }
    }
}

/// True for `#[cfg(test)]` (and `#[cfg(all(test, …))]`-like attributes naming `test`).
pub(super) fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                list.tokens
                    .to_string()
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|word| word == "test")
            })
    })
}

struct RustDeclarations<'a> {
    definitions: &'a mut Definitions,
    unsafe_sites: usize,
}

impl RustDeclarations<'_> {
    fn declare(&mut self, ident: &syn::Ident) {
        self.definitions.own.insert(ident.to_string());
    }

    fn imports(&mut self, tree: &syn::UseTree, external: bool, first: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                let external = if first {
                    let root = p.ident.to_string();
                    !matches!(root.as_str(), "crate" | "self" | "super")
                        && !self.definitions.own.contains(&root)
                } else {
                    external
                };
                self.imports(&p.tree, external, false);
            }
            syn::UseTree::Name(n) if external => {
                self.definitions.imported.insert(n.ident.to_string());
            }
            syn::UseTree::Rename(r) if external => {
                self.definitions.imported.insert(r.ident.to_string());
                self.definitions.imported.insert(r.rename.to_string());
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.imports(tree, external, first);
                }
            }
            _ => {}
        }
    }
}

impl<'ast> Visit<'ast> for RustDeclarations<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        match item {
            syn::Item::Const(i) => self.declare(&i.ident),
            syn::Item::Enum(i) => {
                self.declare(&i.ident);
                for variant in &i.variants {
                    self.declare(&variant.ident);
                }
            }
            syn::Item::Fn(i) => {
                self.declare(&i.sig.ident);
                self.unsafe_sites += usize::from(i.sig.unsafety.is_some());
            }
            syn::Item::Macro(i) => {
                if let Some(ident) = &i.ident {
                    self.declare(ident);
                }
                // Items a macro declares (a `macro_rules!` body, or an invocation that writes
                // them) are read from its tokens: `struct AgentSettings` declares the name.
                let tokens = i.mac.tokens.to_string();
                let words: Vec<&str> = tokens
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .collect();
                for pair in words.windows(2) {
                    if RUST_DECLARATIONS.contains(&pair[0]) {
                        self.definitions.own.insert(pair[1].to_owned());
                    }
                }
            }
            syn::Item::Mod(i) => self.declare(&i.ident),
            syn::Item::Static(i) => self.declare(&i.ident),
            syn::Item::Struct(i) => self.declare(&i.ident),
            syn::Item::Trait(i) => {
                self.declare(&i.ident);
                self.unsafe_sites += usize::from(i.unsafety.is_some());
            }
            syn::Item::TraitAlias(i) => self.declare(&i.ident),
            syn::Item::Type(i) => self.declare(&i.ident),
            syn::Item::Union(i) => self.declare(&i.ident),
            syn::Item::Impl(i) => self.unsafe_sites += usize::from(i.unsafety.is_some()),
            syn::Item::Use(u) => self.imports(&u.tree, false, true),
            _ => {}
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        match item {
            syn::ImplItem::Fn(f) => {
                if is_test_only(&f.attrs) {
                    return;
                }
                self.declare(&f.sig.ident);
                self.unsafe_sites += usize::from(f.sig.unsafety.is_some());
            }
            syn::ImplItem::Const(c) => self.declare(&c.ident),
            syn::ImplItem::Type(t) => self.declare(&t.ident),
            _ => {}
        }
        syn::visit::visit_impl_item(self, item);
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        match item {
            syn::TraitItem::Fn(f) => self.declare(&f.sig.ident),
            syn::TraitItem::Const(c) => self.declare(&c.ident),
            syn::TraitItem::Type(t) => self.declare(&t.ident),
            _ => {}
        }
        syn::visit::visit_trait_item(self, item);
    }

    fn visit_field(&mut self, field: &'ast syn::Field) {
        if let Some(ident) = &field.ident {
            self.declare(ident);
        }
        syn::visit::visit_field(self, field);
    }

    fn visit_expr_unsafe(&mut self, block: &'ast syn::ExprUnsafe) {
        self.unsafe_sites += 1;
        syn::visit::visit_expr_unsafe(self, block);
    }
}
