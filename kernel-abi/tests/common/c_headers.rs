//! Shared by the layout tests of kernel-abi and of the provider (included with `#[path]`):
//! where the Debian headers of each line are, and clang's record layouts of them.
//!
//! `tests/rig/fetch-headers.sh` (run by `tests/rig/setup-host.sh`) unpacks libibverbs-dev and
//! linux-libc-dev of each suite into `$RIG_CACHE/headers/<suite>/` (amd64) and
//! `<suite>.arm64/` (default `/var/cache/rxe-rs-rig`); the tests only read that folder and need
//! no network.
//!
//! The headers and clang's target are those of the architecture the test is built for: built
//! for aarch64 (`cargo test --target aarch64-unknown-linux-gnu`, run under qemu-aarch64 as
//! `.cargo/config.toml` says), the test compares the aarch64 layout of the mirrors with clang's
//! `--target=aarch64-linux-gnu` layout of the arm64 headers, over the arm64 libc headers of
//! libc6-dev-arm64-cross.

#![allow(dead_code)] // each including test uses its own part

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Debian suites whose headers are fetched, oldest first.
pub const SUITES: [&str; 3] = ["bookworm", "trixie", "sid"];

/// `-I` directories for `suite`'s headers (its own `usr/include` and the multiarch one), after
/// checking they were fetched.
pub fn suite_include(suite: &str) -> Vec<PathBuf> {
    let cache = std::env::var_os("RIG_CACHE").map_or_else(|| PathBuf::from("/var/cache/rxe-rs-rig"), PathBuf::from);
    let folder = match std::env::consts::ARCH {
        "x86_64" => suite.to_string(),
        "aarch64" => format!("{suite}.arm64"),
        other => panic!("no Debian headers fetched for {other}"),
    };
    let root = cache.join("headers").join(folder);
    assert!(
        root.join("VERSIONS").exists(),
        "no Debian {suite} headers in {}: run tests/rig/fetch-headers.sh (tests/rig/setup-host.sh does)",
        root.display()
    );
    let arch_dir = root.join(format!("usr/include/{}-linux-gnu", std::env::consts::ARCH));
    vec![root.join("usr/include"), arch_dir]
}

/// The package versions `suite`'s headers came from, for messages.
pub fn suite_versions(suite: &str) -> String {
    let include = suite_include(suite);
    let root = include[0].parent().and_then(Path::parent).expect("<root>/usr/include");
    std::fs::read_to_string(root.join("VERSIONS"))
        .unwrap_or_default()
        .lines()
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CKind {
    Struct,
    Union,
}

#[derive(Debug)]
pub struct CRecord {
    pub kind: CKind,
    pub size: usize,
    pub align: usize,
    /// Access path (`wr.ud.remote_qpn`; anonymous members flattened) -> offset.
    pub paths: BTreeMap<String, usize>,
}

impl CRecord {
    /// The members C code names directly on this record (no `.` in the path).
    pub fn top_level(&self) -> BTreeMap<&str, usize> {
        self.paths
            .iter()
            .filter(|(path, _)| !path.contains('.'))
            .map(|(path, &offset)| (path.as_str(), offset))
            .collect()
    }
}

/// Compiles `preamble` (the `#include`s) followed by one `sizeof` per record with clang's
/// record-layout dump, against `include` before the system directories, and returns the named
/// records it laid out. `tag` names the probe file under `dir`.
pub fn c_records(
    dir: &Path,
    include: &[PathBuf],
    preamble: &str,
    records: &[String],
    tag: &str,
) -> BTreeMap<String, CRecord> {
    let mut probe = String::from(preamble);
    for (i, record) in records.iter().enumerate() {
        // Taking the size forces clang to compute, and so dump, the layout.
        writeln!(probe, "unsigned long probe_{i} = sizeof({record});").unwrap();
    }
    std::fs::create_dir_all(dir).unwrap();
    let probe_path = dir.join(format!("probe_{tag}.c"));
    std::fs::write(&probe_path, probe).unwrap();

    let mut clang = Command::new("clang");
    clang.args(["-fsyntax-only", "-Xclang", "-fdump-record-layouts"]);
    // The architecture this test is built for (the host's clang runs natively even when the test
    // runs under qemu-aarch64).
    clang.arg(format!("--target={}-linux-gnu", std::env::consts::ARCH));
    for dir in include {
        clang.arg("-I").arg(dir);
    }
    let output = clang.arg(&probe_path).output().unwrap_or_else(|e| {
        panic!("cannot run clang ({e}): the layout test needs clang (Debian: apt-get install clang)")
    });
    assert!(
        output.status.success(),
        "clang failed on {}:\n{}",
        probe_path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_record_dump(&String::from_utf8(output.stdout).unwrap())
}

/// Parses clang's `-fdump-record-layouts` output. A block looks like
/// ```text
/// *** Dumping AST Record Layout
///          0 | struct rxe_av
///          0 |   __u8 port_num
///          8 |   struct rxe_global_route grh
///          8 |     union rxe_gid dgid
///          8 |       __u8[16] raw
///         32 |   union rxe_av::(unnamed at ...) sgid_addr
///         ...
///            | [sizeof=88, align=8]
/// ```
/// Two spaces of indent per nesting level; the member name is the last word, and a line ending
/// in `)` is an anonymous member whose fields belong to the enclosing record.
pub fn parse_record_dump(dump: &str) -> BTreeMap<String, CRecord> {
    let mut records = BTreeMap::new();
    for block in dump.split("*** Dumping AST Record Layout").skip(1) {
        let mut lines = block.lines().filter(|l| l.contains('|'));
        let (_, head) = lines.next().unwrap().split_once('|').unwrap();
        // A record known only by a typedef (`__atomic_wide_counter`) has no kind word.
        let Some((kind, name)) = head.trim().split_once(' ') else {
            continue;
        };
        if name.contains("::") || name.contains('(') {
            continue; // only records C code can name are probed on their own
        }
        let kind = match kind {
            "struct" => CKind::Struct,
            "union" => CKind::Union,
            other => panic!("unexpected record kind {other} in clang's dump"),
        };
        let (mut size, mut align) = (None, None);
        let mut paths = BTreeMap::new();
        // Member name (None when anonymous) at each nesting level above the current line.
        let mut stack: Vec<Option<&str>> = Vec::new();
        let mut skip_below: Option<usize> = None;
        for line in lines {
            let (offset, rest) = line.split_once('|').unwrap();
            let text = rest.trim();
            if let Some(summary) = text.strip_prefix('[') {
                size = field_value(summary, "sizeof=");
                align = field_value(summary, "align=");
                continue;
            }
            let depth = (rest.len() - rest.trim_start().len() - 1) / 2;
            if skip_below.is_some_and(|d| depth > d) {
                continue;
            }
            skip_below = None;
            let member = if text.ends_with(')') {
                None
            } else {
                Some(text.rsplit_once(' ').expect("member without a name").1)
            };
            // __DECLARE_FLEX_ARRAY puts an empty struct named __empty_<name> beside each
            // flexible array so that it may sit in a union; it carries no data.
            if member.is_some_and(|m| m.starts_with("__empty_")) {
                skip_below = Some(depth);
                continue;
            }
            stack.truncate(depth - 1);
            stack.push(member);
            if member.is_some() {
                let path: Vec<&str> = stack.iter().flatten().copied().collect();
                // Bit-fields print as `offset:bit-bit`; the byte offset is what we compare.
                let byte_offset = offset.trim().split(':').next().unwrap().parse().unwrap();
                paths.insert(path.join("."), byte_offset);
            }
        }
        records.insert(
            name.to_string(),
            CRecord {
                kind,
                size: size.expect("record without sizeof"),
                align: align.expect("record without align"),
                paths,
            },
        );
    }
    records
}

fn field_value(summary: &str, key: &str) -> Option<usize> {
    let start = summary.find(key)? + key.len();
    let digits: String = summary[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
