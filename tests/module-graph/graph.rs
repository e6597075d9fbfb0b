//! The import graph of a crate's modules and a cycle finder, shared by
//! `provider/tests/module_graph.rs` and `nd-shim/tests/module_graph.rs`
//! (each includes this file with `#[path]`; each asserts its own layering).
//!
//! An edge is a `crate::…` path (in a `use` or inline) or a `super::…` path
//! in the non-test code of a module's file, to the longest module that path
//! names; a name the crate root re-exports (`crate::Connector`) is an edge to
//! the module it comes from; a `mod.rs` also depends on the children it
//! re-exports from (`pub use` or `pub(crate) use`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() {
            let mut p = prefix.to_vec();
            p.push(name);
            modules(&path, &p, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut p = prefix.to_vec();
            if name != "mod" && name != "lib" {
                p.push(name);
            }
            if p.is_empty() {
                continue;
            }
            out.insert(p.join("::"), std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The source without its `#[cfg(test)] mod …` at the top level and
/// without line comments.
fn non_test(src: &str) -> String {
    let mut cut = src.len();
    for marker in ["\n#[cfg(test)]\nmod ", "\n#[cfg(test)]\npub(crate) mod "] {
        if let Some(i) = src.find(marker) {
            cut = cut.min(i);
        }
    }
    src[..cut]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn resolve(mods: &BTreeMap<String, String>, path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| mods.contains_key(m))
}

/// The crate root's `pub use module::{Name, …};`: each name to its module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let flat = lib.replace('\n', " ");
    for stmt in flat.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}' || c == ' ').split(',') {
            let name = name.trim();
            if !name.is_empty() {
                out.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    out
}

/// `a::b::{c, d::e, self}` after `crate::` or `super::`, as full paths.
fn paths_after(src: &str, anchor: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find(anchor) {
        let before = rest[..i].chars().last();
        rest = &rest[i + anchor.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let run = &rest[..end];
        let head = run.trim_end_matches(':').to_owned();
        if rest[end..].starts_with('{') && (run.is_empty() || run.ends_with("::")) {
            let close = rest[end..].find('}').map_or(rest.len(), |j| end + j);
            for item in rest[end + 1..close].split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if item.is_empty() {
                    continue;
                }
                out.push(match (head.is_empty(), item) {
                    (_, "self") => head.clone(),
                    (true, _) => item.to_owned(),
                    (false, _) => format!("{head}::{item}"),
                });
            }
        } else if !head.is_empty() {
            out.push(head);
        }
    }
    out
}

/// The import graph of the crate whose sources are `src_dir`: module -> the modules it imports.
pub fn graph(src_dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut mods = BTreeMap::new();
    modules(src_dir, &[], &mut mods);
    let reexports = root_reexports(&non_test(&std::fs::read_to_string(src_dir.join("lib.rs")).unwrap()));
    let mut edges = BTreeMap::new();
    for (m, src) in &mods {
        let src = non_test(src);
        let mut to = BTreeSet::new();
        for p in paths_after(&src, "crate::") {
            let first = p.split("::").next().unwrap_or("");
            match reexports.get(first) {
                Some(module) => to.extend(resolve(&mods, module)),
                None => to.extend(resolve(&mods, &p)),
            }
        }
        let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
        for p in paths_after(&src, "super::") {
            let full = if parent.is_empty() { p } else { format!("{parent}::{p}") };
            to.extend(resolve(&mods, &full));
        }
        for line in src.lines() {
            let Some(rest) = line
                .strip_prefix("pub(crate) use ")
                .or_else(|| line.strip_prefix("pub use "))
            else {
                continue;
            };
            let child = rest.split("::").next().unwrap_or("");
            to.extend(resolve(&mods, &format!("{m}::{child}")));
        }
        to.remove(m);
        edges.insert(m.clone(), to);
    }
    edges
}

/// Panics naming an import cycle of `edges`, if there is one.
pub fn assert_acyclic(edges: &BTreeMap<String, BTreeSet<String>>) {
    if let Some(c) = cycle(edges) {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

/// A cycle, if any, by depth-first search.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == m) {
            let mut c = stack[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_owned());
        for n in edges.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

/// Prints the graph, one module a line.
pub fn print(edges: &BTreeMap<String, BTreeSet<String>>) {
    for (m, to) in edges {
        let to: Vec<_> = to.iter().map(String::as_str).collect();
        println!("{m} -> {}", if to.is_empty() { "(none)".into() } else { to.join(", ") });
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.insert("a".into(), ["b".to_owned()].into());
    edges.insert("b".into(), ["c".to_owned()].into());
    edges.insert("c".into(), ["a".to_owned()].into());
    assert_eq!(cycle(&edges).map(|c| c.len()), Some(4));
    edges.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle(&edges), None);
}
