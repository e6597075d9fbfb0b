//! libnd_shim.so's exports: exactly the names `nd_shim.map` lists, each at the version node
//! ND_SHIM_0 (readelf --dyn-syms). Then two Win32 layers in one process: a program linked against
//! libnd_shim and against another shared library (tests/c/other_win32.c, versioned by a script
//! of its own) that defines CreateEventA, SetEvent and CloseHandle too and calls them itself
//! (tests/c/two_layers.c). The program's calls must reach libnd_shim's definitions and the other
//! library's calls its own, with the other library after libnd_shim in the lookup order (its
//! place in the program's DT_NEEDED) and before it (LD_PRELOAD). Unversioned, libnd_shim's
//! names took the other library's calls in the first order and the program's in the second.
//! Needs gcc and readelf (binutils); a host without them skips the test (it says so). No RDMA
//! device is needed: the program only makes, signals, waits on and closes an event.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::have;

const NODE: &str = "ND_SHIM_0";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The cdylib cargo built beside this test: `target/<profile>/deps/libnd_shim.so` (the test runs
/// from `deps`), or the copy in `target/<profile>`.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let deps = exe.parent().expect("the test's directory");
    [
        deps.join("libnd_shim.so"),
        deps.parent().expect("the profile directory").join("libnd_shim.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libnd_shim.so beside the test (cargo builds the cdylib with the crate)")
}

/// The names in the `global:` part of nd_shim.map.
fn map_names() -> BTreeSet<String> {
    let map = std::fs::read_to_string(manifest_dir().join("nd_shim.map")).expect("nd_shim.map");
    let mut text = String::new();
    let mut rest = map.as_str();
    while let Some(start) = rest.find("/*") {
        text.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("closed comment");
        rest = &rest[start + end + 2..];
    }
    text.push_str(rest);
    let node = text.split_once(&format!("{NODE} {{")).expect("the node").1;
    let global = node.split_once("global:").expect("global:").1;
    let global = global.split_once("local:").expect("local:").0;
    global
        .split(';')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect()
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_export_is_at_nd_shim_0_and_each_win32_layer_binds_to_its_own() {
    if !have("gcc") || !have("readelf") {
        eprintln!("exports: gcc or readelf missing; skipped");
        return;
    }
    let lib = library();

    // Every defined dynamic symbol is a name of the map, at ND_SHIM_0; every name of the map is
    // defined. (readelf -W --dyn-syms: "Num: Value Size Type Bind Vis Ndx Name@@VERSION".)
    let symbols = run(Command::new("readelf").args(["-W", "--dyn-syms"]).arg(&lib));
    let mut exported = BTreeSet::new();
    let mut unversioned = Vec::new();
    for line in symbols.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 || !fields[0].ends_with(':') || fields[6] == "UND" || fields[6] == "Ndx" {
            continue;
        }
        if fields[3] == "SECTION" || fields[7].is_empty() {
            continue;
        }
        match fields[7].split_once("@@") {
            Some((name, version)) if version == NODE => {
                exported.insert(name.to_string());
            }
            _ if fields[7] == NODE => {} // the version node's own symbol, if the linker writes one
            _ => unversioned.push(fields[7].to_string()),
        }
    }
    assert!(
        unversioned.is_empty(),
        "{} exports names not at {NODE}: {unversioned:?}",
        lib.display()
    );
    assert_eq!(exported, map_names(), "{}'s exports against nd_shim.map", lib.display());

    // The two layers.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("exports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = manifest_dir().join("tests/c");
    // The program asks for libnd_shim.so.0 (the SONAME): a link of that name to the library
    // under test, in the program's run path.
    let soname_link = dir.join("libnd_shim.so.0");
    let _ = std::fs::remove_file(&soname_link);
    std::os::unix::fs::symlink(&lib, &soname_link).unwrap();
    let lib_dir = lib.parent().unwrap();
    run(Command::new("gcc")
        .args(["-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-Wl,--version-script={}", c.join("other_win32.map").display()))
        .arg("-Wl,-soname,libother_win32.so")
        .arg("-o")
        .arg(dir.join("libother_win32.so"))
        .arg(c.join("other_win32.c")));
    let program = dir.join("two_layers");
    run(Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(manifest_dir().join("include/nd2"))
        .arg("-o")
        .arg(&program)
        .arg(c.join("two_layers.c"))
        .arg("-L")
        .arg(lib_dir)
        .arg("-L")
        .arg(&dir)
        .args(["-lnd_shim", "-lother_win32"])
        .arg(format!("-Wl,-rpath,{}", dir.display())));
    let expected = "program's CreateEventA/SetEvent/CloseHandle -> libnd_shim\n\
                    the other library's own calls -> its own\n";
    // libnd_shim first in the lookup order (DT_NEEDED's order), then the other library first.
    assert_eq!(run(&mut Command::new(&program)), expected, "libnd_shim first");
    assert_eq!(
        run(Command::new(&program).env("LD_PRELOAD", dir.join("libother_win32.so"))),
        expected,
        "the other library first (LD_PRELOAD)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
