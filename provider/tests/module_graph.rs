//! The provider's modules import each other without cycles: the check
//! behind the import graph in docs/provider-architecture.md.
//! The graph and the cycle finder: tests/module-graph/graph.rs.

#[path = "../../tests/module-graph/graph.rs"]
mod graph;

fn src_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_provider_modules_import_each_other_without_cycles() {
    let edges = graph::graph(&src_dir());
    // The parser sees what it must: the verbs table knows the verbs.
    assert!(edges["ops"].contains("entry") && edges["ops"].contains("entry::cq"));
    assert!(edges["entry::qp"].contains("lifecycle"));
    graph::assert_acyclic(&edges);
}

/// `cargo test -p rxe-rs-provider --test module_graph -- --ignored --nocapture`
/// prints the graph.
#[test]
#[ignore]
fn print_the_graph() {
    graph::print(&graph::graph(&src_dir()));
}
