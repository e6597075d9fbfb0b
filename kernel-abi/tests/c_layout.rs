//! Compares every type of kernel-abi with the C compiler's layout of the UAPI headers.
//!
//! The crate declares only the records the provider uses, each one whole. The Rust side is
//! enumerated, not a hand-picked list:
//! - Rust: `kernel_abi::LAYOUTS`, the table that the `abi!` macro builds from the same
//!   declarations that define the types. The crate's sources are scanned so that a type declared
//!   outside `abi!`, or a module whose table is not in `LAYOUTS`, fails.
//! - C: clang's `-fdump-record-layouts` of a probe that names every Rust type; its fields
//!   (nested records expanded, anonymous members flattened) come from the compiler, so a field
//!   the header has and Rust lacks fails too.
//!
//! Constants go the same way: `kernel_abi::CONSTS` (built by `abi_consts!`) becomes one
//! `_Static_assert` per constant, compiled against the headers.
//!
//! The reference is `/usr/include` (Debian bookworm, Linux 6.1 UAPI). Fields only newer kernels
//! have (`rxe_send_wr.wr.flush`, `rxe_dma_info.atomic_wr`) are checked against the
//! linux-libc-dev of Debian trixie, which `tests/rig/fetch-headers.sh` unpacks into the rig's
//! header cache (see `common/c_headers.rs`); the test itself needs no network.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kernel_abi::layout::{Kind, Origin, TypeLayout};

#[path = "common/c_headers.rs"]
mod c_headers;
use c_headers::{CKind, CRecord};

/// The headers whose every record must have a Rust twin.
const HEADERS: &[&str] = &[
    "rdma/ib_user_verbs.h",
    "rdma/ib_user_ioctl_verbs.h",
    "rdma/ib_user_ioctl_cmds.h",
    "rdma/rdma_user_ioctl_cmds.h",
    "rdma/rdma_user_rxe.h",
];

const BOOKWORM_INCLUDE: &str = "/usr/include";

// ---------------------------------------------------------------------------------------------
// The Rust side

fn rust_types() -> BTreeMap<&'static str, &'static TypeLayout> {
    let mut types = BTreeMap::new();
    for layout in kernel_abi::LAYOUTS.iter().flat_map(|module| module.iter()) {
        assert!(
            types.insert(layout.name, layout).is_none(),
            "{} is in LAYOUTS twice",
            layout.name
        );
    }
    types
}

/// Every field reachable from `ty`, as C spells the access path (`wr.ud.av.grh.dgid.raw`),
/// with its offset from the start of `ty`.
fn rust_paths(types: &BTreeMap<&str, &TypeLayout>, ty: &TypeLayout) -> BTreeMap<String, usize> {
    fn walk(
        types: &BTreeMap<&str, &TypeLayout>,
        ty: &TypeLayout,
        prefix: &str,
        base: usize,
        out: &mut BTreeMap<String, usize>,
    ) {
        for field in ty.fields {
            let name = field.name.trim_start_matches("r#");
            let offset = base + field.offset;
            match types.get(field.ty) {
                Some(inner) if inner.origin == Origin::Anonymous => walk(types, inner, prefix, offset, out),
                Some(inner) => {
                    out.insert(format!("{prefix}{name}"), offset);
                    walk(types, inner, &format!("{prefix}{name}."), offset, out);
                }
                None => {
                    out.insert(format!("{prefix}{name}"), offset);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(types, ty, "", 0, &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// The C side

/// Runs clang over a probe that makes it lay out `records` (`struct x` / `union x`) with the
/// five headers included.
fn c_records(include: &[PathBuf], records: &BTreeSet<String>, tag: &str) -> BTreeMap<String, CRecord> {
    let mut preamble = String::new();
    for header in HEADERS {
        writeln!(preamble, "#include <{header}>").unwrap();
    }
    let records: Vec<String> = records.iter().cloned().collect();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_layout");
    c_headers::c_records(&dir, include, &preamble, &records, tag)
}

// ---------------------------------------------------------------------------------------------
// The comparisons

struct Headers {
    bookworm: BTreeMap<String, CRecord>,
    trixie: BTreeMap<String, CRecord>,
    trixie_include: Vec<PathBuf>,
}

fn c_name(ty: &TypeLayout) -> String {
    let kind = match ty.kind {
        Kind::Struct => "struct",
        Kind::Union => "union",
    };
    format!("{kind} {}", ty.name)
}

fn headers() -> &'static Headers {
    static HEADERS_CELL: OnceLock<Headers> = OnceLock::new();
    HEADERS_CELL.get_or_init(|| {
        let probed: BTreeSet<String> = rust_types()
            .values()
            .filter(|t| t.origin == Origin::Named)
            .map(|t| c_name(t))
            .collect();
        let trixie = c_headers::suite_include("trixie");
        Headers {
            bookworm: c_records(&[PathBuf::from(BOOKWORM_INCLUDE)], &probed, "bookworm"),
            trixie: c_records(&trixie, &probed, "trixie"),
            trixie_include: trixie,
        }
    })
}

/// Compiles one `_Static_assert` per constant against the headers and returns the names clang
/// did not know and the names whose value differs.
fn check_constants(include: &[PathBuf], tag: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut probe = String::new();
    for header in HEADERS {
        writeln!(probe, "#include <{header}>").unwrap();
    }
    for &(name, value) in kernel_abi::CONSTS.iter().flat_map(|module| module.iter()) {
        let (cast, literal) = if value < 0 {
            ("long long", format!("({value}LL)"))
        } else {
            ("unsigned long long", format!("{value}ULL"))
        };
        writeln!(probe, "_Static_assert(({cast})({name}) == {literal}, \"{name}\");").unwrap();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c_layout");
    std::fs::create_dir_all(&dir).unwrap();
    let probe_path = dir.join(format!("constants_{tag}.c"));
    std::fs::write(&probe_path, probe).unwrap();
    let mut clang = Command::new("clang");
    clang.args(["-fsyntax-only", "-ferror-limit=0"]);
    for dir in include {
        clang.arg("-I").arg(dir);
    }
    let output = clang.arg(&probe_path).output().expect("cannot run clang");
    let (mut unknown, mut differ) = (BTreeSet::new(), BTreeSet::new());
    for line in String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| l.contains("error:"))
    {
        let quoted = |l: &str, open: char, close: char| {
            let start = l.rfind(open).map(|i| i + 1);
            let text = &l[start.unwrap_or(0)..];
            text.split(close).next().unwrap_or_default().to_string()
        };
        if line.contains("use of undeclared identifier") {
            unknown.insert(line.split('\'').nth(1).unwrap_or_default().to_string());
        } else if line.contains("static_assert failed") || line.contains("static assertion failed") {
            differ.insert(quoted(line.trim_end_matches('"'), '"', '"'));
        } else {
            panic!("unexpected clang error in {}: {line}", probe_path.display());
        }
    }
    // clang substitutes a similar name for an unknown one ("did you mean") and then reports
    // the assertion too; the name is unknown, not different.
    differ.retain(|name| !unknown.contains(name));
    (unknown, differ)
}

#[test]
fn every_constant_matches_the_headers() {
    let count = kernel_abi::CONSTS.iter().map(|module| module.len()).sum::<usize>();
    assert!(count > 50, "only {count} constants in CONSTS");
    let (unknown_old, differ_old) = check_constants(&[PathBuf::from(BOOKWORM_INCLUDE)], "bookworm");
    assert!(
        differ_old.is_empty(),
        "values differ from the bookworm headers: {differ_old:?}"
    );
    // Names the 6.1 headers lack must come from the newer header, with the same value.
    let (unknown_new, differ_new) = check_constants(&headers().trixie_include, "trixie");
    let missing: Vec<&String> = unknown_old.intersection(&unknown_new).collect();
    assert!(
        missing.is_empty(),
        "constants in neither the bookworm nor the trixie headers: {missing:?}"
    );
    assert!(
        differ_new.is_empty(),
        "values differ from the trixie headers: {differ_new:?}"
    );
    assert!(unknown_old.contains("IB_FLUSH_GLOBAL"), "newer constants not exercised");
}

fn compare_record(errors: &mut Vec<String>, ty: &TypeLayout, which: &str, c: Option<&CRecord>) {
    let Some(c) = c else {
        errors.push(format!("{}: not found in the {which} headers", c_name(ty)));
        return;
    };
    let kind = match c.kind {
        CKind::Struct => Kind::Struct,
        CKind::Union => Kind::Union,
    };
    if kind != ty.kind || c.size != ty.size || c.align != ty.align {
        errors.push(format!(
            "{} ({which}): C is {:?} size {} align {}, Rust is {:?} size {} align {}",
            ty.name, kind, c.size, c.align, ty.kind, ty.size, ty.align
        ));
    }
}

#[test]
fn every_type_matches_the_c_layout() {
    let types = rust_types();
    let headers = headers();
    let mut errors = Vec::new();
    let mut compared_fields = 0;
    for ty in types.values().filter(|t| t.origin == Origin::Named) {
        let name = c_name(ty);
        let bookworm = headers.bookworm.get(ty.name);
        let trixie = headers.trixie.get(ty.name);
        compare_record(&mut errors, ty, "bookworm", bookworm);
        compare_record(&mut errors, ty, "trixie", trixie);
        let (Some(bookworm), Some(trixie)) = (bookworm, trixie) else {
            continue;
        };
        let rust = rust_paths(&types, ty);
        for (path, &offset) in &rust {
            compared_fields += 1;
            match (bookworm.paths.get(path), trixie.paths.get(path)) {
                (Some(&c), _) if c != offset => errors.push(format!(
                    "{name}.{path}: offset {offset} in Rust, {c} in the bookworm header"
                )),
                (_, Some(&c)) if c != offset => errors.push(format!(
                    "{name}.{path}: offset {offset} in Rust, {c} in the trixie header"
                )),
                (None, None) => errors.push(format!(
                    "{name}.{path}: in Rust but in neither the bookworm nor the trixie header"
                )),
                _ => {}
            }
        }
        for path in bookworm.paths.keys().filter(|p| !rust.contains_key(*p)) {
            errors.push(format!("{name}.{path}: in the bookworm header, missing in Rust"));
        }
    }
    assert!(
        errors.is_empty(),
        "{} layout mismatches:\n{}",
        errors.len(),
        errors.join("\n")
    );
    // The table cannot be empty or fieldless without the comparison being hollow.
    assert!(compared_fields > 800, "only {compared_fields} fields compared");
}

#[test]
fn the_newer_fields_are_only_in_the_newer_header() {
    // The fields this crate takes from Linux 6.2+ must really be absent from the 6.1 headers
    // and present in trixie's; this keeps the two-header comparison honest.
    let headers = headers();
    for (record, path) in [
        ("rxe_send_wr", "wr.flush.level"),
        ("rxe_dma_info", "atomic_wr"),
        ("ib_uverbs_query_port_resp_ex", "active_speed_ex"),
    ] {
        assert!(
            !headers.bookworm[record].paths.contains_key(path),
            "{record}.{path} in bookworm"
        );
        assert!(
            headers.trixie[record].paths.contains_key(path),
            "{record}.{path} not in trixie"
        );
    }
}

#[test]
fn every_helper_type_is_reached_from_a_named_type() {
    // Unnamed and anonymous helper types are only compared through the fields that hold them.
    let types = rust_types();
    let used: BTreeSet<&str> = types.values().flat_map(|t| t.fields.iter().map(|f| f.ty)).collect();
    let orphans: Vec<&str> = types
        .values()
        .filter(|t| t.origin != Origin::Named && !used.contains(t.name))
        .map(|t| t.name)
        .collect();
    assert!(
        orphans.is_empty(),
        "helper types no field uses, so never compared: {orphans:?}"
    );
}

#[test]
fn every_abi_type_in_the_sources_is_in_the_table() {
    let types = rust_types();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let mut declared = 0;
    // src/ and its module directories (ib_user_verbs/).
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for path in files {
        let file = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        // layout.rs holds the macro itself and the table's own (non-ABI) types.
        if file == "layout.rs" || path.extension() != Some("rs".as_ref()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("#[repr(") {
                problems.push(format!("{file}:{}: #[repr] outside abi!", number + 1));
            }
            let Some(rest) = line.strip_prefix("pub struct ").or(line.strip_prefix("pub union ")) else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            declared += 1;
            if !rest[name.len()..].trim_start().starts_with("[size ") {
                problems.push(format!("{file}:{}: {name} declared outside abi!", number + 1));
            }
            if !types.contains_key(name.as_str()) {
                problems.push(format!("{file}:{}: {name} missing from LAYOUTS", number + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(declared, types.len(), "declarations in src/ vs entries in LAYOUTS");
}
