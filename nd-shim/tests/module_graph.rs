//! nd-shim's modules import each other without cycles, and the layers hold:
//! the check behind the import graph in docs/nd-semantics.md ("Layers").
//! The graph and the cycle finder: tests/module-graph/graph.rs.

#[path = "../../tests/module-graph/graph.rs"]
mod graph;

fn src_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

type Edges = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// Whether `module` is `tree` or a module under it.
fn within(module: &str, tree: &str) -> bool {
    module == tree || module.strip_prefix(tree).is_some_and(|rest| rest.starts_with("::"))
}

/// The modules outside `tree` that `tree` and the modules under it import.
fn imports_of(edges: &Edges, tree: &str) -> std::collections::BTreeSet<String> {
    edges
        .iter()
        .filter(|(module, _)| within(module, tree))
        .flat_map(|(_, to)| to.iter())
        .filter(|to| !within(to, tree))
        .cloned()
        .collect()
}

/// Whether `tree` (or a module under it) imports `other` (or a module under it).
fn imports(edges: &Edges, tree: &str, other: &str) -> bool {
    imports_of(edges, tree).iter().any(|to| within(to, other))
}

#[test]
fn the_nd_shim_modules_import_each_other_without_cycles() {
    let edges = graph::graph(&src_dir());
    // The parser sees what it must: the endpoints drive the machines on the engine, and the
    // faces reach the Rust API through the crate root's re-exports.
    assert!(imports(&edges, "endpoint::connector", "connection") && imports(&edges, "endpoint::connector", "engine"));
    assert!(imports(&edges, "endpoint::listener", "listen") && imports(&edges, "endpoint::listener", "engine"));
    assert!(edges["ndk::ndk_connector"].contains("endpoint"));
    assert!(edges["nd2::ind2_connector"].contains("endpoint"));
    assert!(edges["nd2::qp"].contains("nd2::srq") && edges["nd2::cq"].contains("nd2::adapter"));
    // The layering: the engine knows no endpoint, and no state machine knows the engine.
    for lower in ["engine", "connection", "listen"] {
        assert!(!imports(&edges, lower, "endpoint"), "{lower} imports endpoint");
    }
    for machine in ["connection", "listen"] {
        assert!(!imports(&edges, machine, "engine"), "{machine} imports engine");
    }
    graph::assert_acyclic(&edges);
}

/// `cargo test -p nd-shim --test module_graph -- --ignored --nocapture`
/// prints the graph.
#[test]
#[ignore]
fn print_the_graph() {
    graph::print(&graph::graph(&src_dir()));
}
