//! Which private-ABI layout a libibverbs has, from what it exports, never
//! from its file name (a developer's build or a distribution's copy may carry
//! no release there):
//!
//! - the PABI of its `verbs_register_driver_<PABI>` symbol (symbol version
//!   `IBVERBS_PRIVATE_<PABI>`);
//! - the verbs that came with each change of the ops tables
//!   ([`PROBED_EXPORTS`]; layouts changed inside PABI 34 (v35, v36) and 59
//!   (v62) without a bump), v36's ([`V36_EXPORT`]: v34 and v35 have shorter
//!   tables) and v49's ([`V49_PRIVATE_EXPORT`]: `ibv_port_attr` grew
//!   `active_speed_ex` before it);
//! - `ibv_qp_ex`, grown in v44 (`wr_atomic_write`) and v45 (`wr_flush`)
//!   with no export to tell: its own `ibv_qp_to_qp_ex` reads `verbs_qp.comp_mask`
//!   right after it, so the offset it answers at is its size
//!   ([`qp_ex_from_answers`]).
//!
//! The release in the file name (`libibverbs.so.1.14.44.0`), when there is
//! one, only cross-checks, and refuses a release after the newest known: it
//! may have grown the tables under a PABI it kept.

#![forbid(unsafe_code)]

use core::fmt;
use core::mem::size_of;

use super::device_context::ibv_context;
use super::qp::QpExLayout;

pub use super::private_context_releases::ContextLayout;

/// The rdma-core releases whose layouts this provider has. A later release may have grown the
/// private structs under a PABI it kept, so it is refused (the stock provider then serves).
pub const RELEASES: core::ops::RangeInclusive<u32> = 36..=65;

/// The PABIs whose registration symbol we look for, newest first: one per
/// rdma-core line from v36 to v65. `tests/link-libs.sh` names the library
/// `librxe_rs-rdmav<N>.so` for each, from provider/pabis.txt, which a unit test
/// holds to this list.
pub const KNOWN_PABIS: &[u32] = &[65, 64, 59, 57, 34];

/// What we know about the running libibverbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub context: ContextLayout,
    pub pabi: u32,
    /// The size of its `ibv_qp_ex`: where `verbs_qp`'s members after it are,
    /// and whether it has `wr_atomic_write` (v44) and `wr_flush` (v45).
    pub qp_ex: QpExLayout,
    /// Whether its `ibv_port_attr` ends with `active_speed_ex` (v49 on).
    pub port_attr_active_speed_ex: bool,
}

/// Why we do not register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No libibverbs in the process (e.g. a test program loaded us).
    NotLoaded,
    /// None of [`KNOWN_PABIS`] has its registration symbol in `library`.
    UnknownPabi { library: String },
    /// A symbol we need is missing (`name@version`).
    MissingSymbol(String),
    /// Known PABI, but a release (read off the file name) whose layout we do not have.
    UnsupportedRelease { pabi: u32, release: u32 },
    /// PABI 34 without v36's verb: rdma-core v34 or v35, whose ops tables are shorter.
    BeforeV36,
    /// `ibv_qp_to_qp_ex` answered at none or several of the offsets `verbs_qp.comp_mask` had.
    UnknownQpEx { answers: [bool; 3] },
    /// The library's exports name no known layout, or one its private ABI never had.
    UnknownExports { pabi: u32, found: String },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotLoaded => write!(f, "libibverbs.so.1 is not loaded in this process"),
            Refusal::UnknownPabi { library } => {
                let release = release_from_file_name(library).map_or("an unknown release".into(), |r| format!("v{r}"));
                write!(
                    f,
                    "{library} (rdma-core {release}) has none of the private ABIs {KNOWN_PABIS:?} \
                     this rxe_rs knows (rdma-core v{} to v{})",
                    RELEASES.start(),
                    RELEASES.end()
                )
            }
            Refusal::MissingSymbol(s) => write!(f, "libibverbs lacks {s}"),
            Refusal::BeforeV36 => write!(
                f,
                "libibverbs lacks {}@{}: rdma-core before v36, whose ops tables this rxe_rs does \
                 not have (it knows v{} to v{})",
                V36_EXPORT.0,
                V36_EXPORT.1,
                RELEASES.start(),
                RELEASES.end()
            ),
            Refusal::UnknownQpEx { answers } => write!(
                f,
                "libibverbs' ibv_qp_to_qp_ex finds verbs_qp.comp_mask at {} of the offsets \
                 {:?} (ibv_qp_ex of v36, v44, v45): its ibv_qp_ex layout cannot be told",
                answers.iter().filter(|&&a| a).count(),
                QpExLayout::ALL.map(QpExLayout::comp_mask_offset)
            ),
            Refusal::UnknownExports { pabi, found } => write!(
                f,
                "libibverbs (private ABI {pabi}) exports {found}: no \
                 rdma-core layout this rxe_rs knows has that set of verbs (a build between two \
                 releases?), so its ops table cannot be told"
            ),
            Refusal::UnsupportedRelease { pabi, release } => write!(
                f,
                "no struct layout for rdma-core v{release} (private ABI {pabi}); \
                 this rxe_rs knows v{} to v{}",
                RELEASES.start(),
                RELEASES.end()
            ),
        }
    }
}

/// Reads the rdma-core release from the real file name of libibverbs:
/// `libibverbs.so.1.14.44.0` -> 44.
pub fn release_from_file_name(name: &str) -> Option<u32> {
    let versions = name.rsplit('/').next()?.strip_prefix("libibverbs.so.")?;
    let mut parts = versions.split('.');
    let (_major, _minor, release) = (parts.next()?, parts.next()?, parts.next()?);
    release.parse().ok()
}

/// The release the library's file name carries, if any, after refusing one
/// outside [`RELEASES`]: a release after the newest known may have grown the
/// tables under a PABI it kept (a build between its version bump and its PABI
/// bump), which no export tells. Never used to choose a layout.
pub fn named_release(path: &str, pabi: u32) -> Result<Option<u32>, Refusal> {
    match release_from_file_name(path) {
        Some(release) if !RELEASES.contains(&release) => Err(Refusal::UnsupportedRelease { pabi, release }),
        named => Ok(named),
    }
}

/// The public verbs whose versioned symbols tell the layouts apart: each came
/// with ops of `verbs_context_ops` (and some with `verbs_context` members), so
/// a library exports it exactly when its tables have them. The release number
/// cannot tell: master builds between a version bump and the tag report the
/// new release with the old tables, or part of the new ones (recorded per
/// build in the tests below).
pub const PROBED_EXPORTS: [(&str, &str); 5] = [
    ("ibv_alloc_dmah", "IBVERBS_1.15"),
    ("ibv_dm_export_dmabuf_fd", "IBVERBS_1.16"),
    ("ibv_query_port_speed", "IBVERBS_1.16"),
    ("ibv_alloc_buf", "IBVERBS_1.17"),
    ("ibv_create_comp_cntr", "IBVERBS_1.18"),
];

/// The verb v36 added with its ops (`query_qp_data_in_order`), the first
/// release whose tables we have: PABI 34 also covers v34 and v35.
pub const V36_EXPORT: (&str, &str) = ("ibv_query_qp_data_in_order", "IBVERBS_1.14");

/// A private symbol (version `IBVERBS_PRIVATE_<PABI>`) of v49 on, added
/// after `ibv_port_attr.active_speed_ex` (both in v49; in master the struct
/// came first, so a build with the symbol has the member).
pub const V49_PRIVATE_EXPORT: &str = "ibv_wr_opcode_str";

/// What a library exports of the symbols that tell layouts apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exports {
    /// Which of [`PROBED_EXPORTS`] it has, in that order.
    pub tables: [bool; PROBED_EXPORTS.len()],
    /// [`V36_EXPORT`].
    pub v36: bool,
    /// [`V49_PRIVATE_EXPORT`].
    pub v49: bool,
}

impl Exports {
    /// Asks `has(name, version)` for each probed symbol of a library of
    /// private ABI `pabi`.
    pub fn probe(pabi: u32, mut has: impl FnMut(&str, &str) -> bool) -> Exports {
        Exports {
            tables: PROBED_EXPORTS.map(|(name, version)| has(name, version)),
            v36: has(V36_EXPORT.0, V36_EXPORT.1),
            v49: has(V49_PRIVATE_EXPORT, &format!("IBVERBS_PRIVATE_{pabi}")),
        }
    }

    /// The layout whose tables go with exactly these verbs.
    fn layout(self) -> Option<ContextLayout> {
        Some(match self.tables {
            [false, false, false, false, false] => ContextLayout::V36,
            [true, false, false, false, false] => ContextLayout::V59,
            [true, true, true, false, false] => ContextLayout::V62,
            [true, true, true, true, false] => ContextLayout::V64,
            [true, true, true, true, true] => ContextLayout::V65,
            _ => return None,
        })
    }

    /// The probed symbols found, for messages: `ibv_alloc_dmah@IBVERBS_1.15, ...`.
    pub fn describe(self) -> String {
        let found: Vec<String> = PROBED_EXPORTS
            .iter()
            .zip(self.tables)
            .filter(|&(_, has)| has)
            .map(|((name, version), _)| format!("{name}@{version}"))
            .collect();
        if found.is_empty() {
            "none of the verbs added since rdma-core v59".into()
        } else {
            found.join(", ")
        }
    }
}

/// The `ibv_qp_ex` layout from what the library's `ibv_qp_to_qp_ex` answers
/// for a `verbs_qp` whose `comp_mask` has `VERBS_QP_EX` at the offset of each
/// of [`QpExLayout::ALL`] in turn (and zero elsewhere): it reads `comp_mask`
/// right after its own `ibv_qp_ex`, so exactly one answers.
pub fn qp_ex_from_answers(answers: [bool; 3]) -> Result<QpExLayout, Refusal> {
    match answers {
        [true, false, false] => Ok(QpExLayout::ALL[0]),
        [false, true, false] => Ok(QpExLayout::ALL[1]),
        [false, false, true] => Ok(QpExLayout::ALL[2]),
        _ => Err(Refusal::UnknownQpEx { answers }),
    }
}

impl Layout {
    /// The layout of a library from what it exports, cross-checked with its
    /// private ABI (each layout's tables belong to the PABIs listed in
    /// [`select`](Self::select)), and its `ibv_qp_ex` layout from
    /// [`qp_ex_from_answers`]. The facts must agree as they do in every
    /// release: v49's export (which came after v45) with `wr_flush`, and the
    /// tables after v36's with v49's export.
    pub fn from_exports(pabi: u32, exports: Exports, qp_ex: QpExLayout) -> Result<Layout, Refusal> {
        let unknown = || Refusal::UnknownExports {
            pabi,
            found: exports.describe(),
        };
        let context = exports.layout().ok_or_else(unknown)?;
        let pabi_had_it = match context {
            ContextLayout::V36 => matches!(pabi, 34 | 57),
            ContextLayout::V59 | ContextLayout::V62 => pabi == 59,
            ContextLayout::V64 => pabi == 64,
            ContextLayout::V65 => pabi == 65,
        };
        if !pabi_had_it {
            return Err(unknown());
        }
        if !exports.v36 {
            return Err(Refusal::BeforeV36);
        }
        let coherent = (!exports.v49 || qp_ex.has_flush()) && (context == ContextLayout::V36 || exports.v49);
        if !coherent {
            return Err(unknown());
        }
        Ok(Layout {
            context,
            pabi,
            qp_ex,
            port_attr_active_speed_ex: exports.v49,
        })
    }

    /// The layout a tagged release with this PABI has, if we have it: the
    /// cross-check of [`from_exports`](Self::from_exports) when the file name
    /// carries the release, and the facts the tests hold it to.
    pub fn select(pabi: u32, release: u32) -> Result<Layout, Refusal> {
        // Each PABI only with the releases that carried it, and only those
        // whose tables we have: v34 and v35 are PABI 34 with shorter tables.
        let context = match (pabi, release) {
            (34, 36..=56) | (57, 57..=58) => ContextLayout::V36,
            (59, 59..=61) => ContextLayout::V59,
            (59, 62..=63) => ContextLayout::V62,
            (64, 64) => ContextLayout::V64,
            (65, 65) => ContextLayout::V65,
            _ => return Err(Refusal::UnsupportedRelease { pabi, release }),
        };
        Ok(Layout {
            context,
            pabi,
            qp_ex: QpExLayout::for_release(release),
            port_attr_active_speed_ex: release >= 49,
        })
    }

    /// Bytes from the start of `struct verbs_context` to its last member,
    /// `struct ibv_context`. `verbs_context` grows downwards, so this is the
    /// only thing about it that changes between releases.
    pub fn verbs_context_prefix(self) -> usize {
        self.context.verbs_context_size() - size_of::<ibv_context>()
    }

    /// Whether this library's `struct ibv_port_attr` ends with
    /// `active_speed_ex` (v49 on, 56 bytes; 52 before), which libibverbs'
    /// own buffer for `query_port` then has room for.
    pub fn port_attr_has_active_speed_ex(self) -> bool {
        self.port_attr_active_speed_ex
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_comes_from_the_versioned_file_name() {
        for (name, release) in [
            ("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", Some(44)),
            ("libibverbs.so.1.14.56.3", Some(56)),
            ("libibverbs.so.1.15.64.0", Some(64)),
            ("/lib/libibverbs.so.1", None),
            ("libibverbs.so", None),
            ("libmlx5.so.1.24.44.0", None),
            ("libibverbs.so.1.14.x.0", None),
        ] {
            assert_eq!(release_from_file_name(name), release, "{name}");
        }
    }

    #[test]
    fn a_file_name_release_only_refuses_one_outside_the_known() {
        assert_eq!(
            named_release("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", 34),
            Ok(Some(44))
        );
        assert_eq!(named_release("/tmp/x/libibverbs.so.1", 34), Ok(None));
        assert_eq!(named_release("/opt/rdma/lib/libibverbs.so", 65), Ok(None));
        assert_eq!(
            named_release("/tmp/x/libibverbs.so.1.14.99.0", 34),
            Err(Refusal::UnsupportedRelease { pabi: 34, release: 99 })
        );
        assert_eq!(
            named_release("libibverbs.so.1.19.66.0", 65),
            Err(Refusal::UnsupportedRelease { pabi: 65, release: 66 })
        );
    }

    #[test]
    fn pabi_34_is_accepted_only_where_the_ops_table_is_known() {
        for release in 36..=56 {
            let l = Layout::select(34, release).unwrap();
            assert_eq!(l.context, ContextLayout::V36);
            assert_eq!(l.verbs_context_prefix(), 320);
            assert_eq!(l.qp_ex, QpExLayout::for_release(release));
            assert_eq!(l.port_attr_has_active_speed_ex(), release >= 49);
        }
        // v34 and v35 have shorter ops tables under the same PABI.
        for release in [34, 35] {
            assert_eq!(
                Layout::select(34, release),
                Err(Refusal::UnsupportedRelease { pabi: 34, release })
            );
        }
    }

    #[test]
    fn every_line_gets_its_own_layout() {
        let cases = [
            (57, 57, ContextLayout::V36, 320),
            (57, 58, ContextLayout::V36, 320),
            (59, 59, ContextLayout::V59, 344),
            (59, 61, ContextLayout::V59, 344),
            (59, 62, ContextLayout::V62, 352),
            (59, 63, ContextLayout::V62, 352),
            (64, 64, ContextLayout::V64, 368),
            (65, 65, ContextLayout::V65, 368),
        ];
        for (pabi, release, context, prefix) in cases {
            let l = Layout::select(pabi, release).unwrap();
            assert_eq!((l.context, l.verbs_context_prefix()), (context, prefix), "v{release}");
            assert_eq!(l.pabi, pabi);
            assert!(l.qp_ex.has_flush() && l.port_attr_has_active_speed_ex());
        }
    }

    #[test]
    fn a_pabi_is_refused_with_a_release_that_never_carried_it() {
        for (pabi, release) in [
            (34, 57),
            (57, 56),
            (57, 59),
            (59, 58),
            (59, 64),
            (64, 63),
            (64, 65),
            (65, 66),
            (66, 66),
        ] {
            assert_eq!(
                Layout::select(pabi, release),
                Err(Refusal::UnsupportedRelease { pabi, release })
            );
        }
    }

    #[test]
    fn the_build_names_a_library_for_every_known_pabi() {
        let mut built: Vec<u32> = env!("RXE_RS_PABIS").split(',').map(|p| p.parse().unwrap()).collect();
        built.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(built, KNOWN_PABIS);
    }

    #[test]
    fn refusals_name_the_version_found() {
        let why = Refusal::UnsupportedRelease { pabi: 66, release: 66 };
        assert_eq!(
            why.to_string(),
            "no struct layout for rdma-core v66 (private ABI 66); this rxe_rs knows v36 to v65"
        );
        let library = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.19.66.0".to_string();
        assert_eq!(
            Refusal::UnknownPabi { library }.to_string(),
            "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.19.66.0 (rdma-core v66) has none of the \
             private ABIs [65, 64, 59, 57, 34] this rxe_rs knows (rdma-core v36 to v65)"
        );
    }

    /// What a tagged release exports of the probed symbols.
    fn tag_exports(release: u32, tables: [bool; 5]) -> Exports {
        Exports {
            tables,
            v36: release >= 36,
            v49: release >= 49,
        }
    }

    /// The rdma-core builds that tell layouts apart, as recorded from the
    /// repository (`libibverbs.map.in` and `CMakeLists.txt` at each tag, and
    /// at each first-parent commit where the set changed between tags):
    /// (what, PABI, release, tables' exports, the layout or None for a
    /// refusal). The release is the build's, for its other facts: the
    /// decision never sees it.
    #[test]
    fn every_tag_and_in_between_build_gets_the_layout_its_exports_say() {
        const NONE: [bool; 5] = [false; 5];
        const V59: [bool; 5] = [true, false, false, false, false];
        const V62: [bool; 5] = [true, true, true, false, false];
        const V64: [bool; 5] = [true, true, true, true, false];
        const V65: [bool; 5] = [true; 5];
        let mut builds = vec![];
        for release in 36..=56 {
            builds.push(("tag", 34, release, NONE, Some(ContextLayout::V36)));
        }
        builds.extend([
            ("v57.0", 57, 57, NONE, Some(ContextLayout::V36)),
            ("v58.0", 57, 58, NONE, Some(ContextLayout::V36)),
            ("v59.0", 59, 59, V59, Some(ContextLayout::V59)),
            ("v61.0", 59, 61, V59, Some(ContextLayout::V59)),
            // ed0476488 (2025-12-21): the version says 62, the tables are v59's.
            ("62.0 bump", 59, 62, V59, Some(ContextLayout::V59)),
            // c7cc0c8ef (2026-01-07): query_port_speed alone, 80 ops: no known layout.
            ("62.0 half", 59, 62, [true, false, true, false, false], None),
            ("v62.0", 59, 62, V62, Some(ContextLayout::V62)),
            ("v63.0", 59, 63, V62, Some(ContextLayout::V62)),
            // 6fe804e75 (2026-05-06): release 64 on PABI 59, without alloc_buf.
            ("64.0 bump", 59, 64, V62, Some(ContextLayout::V62)),
            ("v64.0", 64, 64, V64, Some(ContextLayout::V64)),
            // 5a8b66556 (2026-07-08): release 65 on PABI 64, without the counters.
            ("65.0 bump", 64, 65, V64, Some(ContextLayout::V64)),
            ("v65.0", 65, 65, V65, Some(ContextLayout::V65)),
            // Exports a PABI never had with them: refused.
            ("odd", 34, 56, V59, None),
            ("odd", 59, 63, V64, None),
            ("odd", 65, 65, V64, None),
        ]);
        for (what, pabi, release, tables, want) in builds {
            let exports = tag_exports(release, tables);
            let qp_ex = QpExLayout::for_release(release);
            let got = Layout::from_exports(pabi, exports, qp_ex);
            match want {
                Some(context) => {
                    let layout = Layout {
                        context,
                        pabi,
                        qp_ex,
                        port_attr_active_speed_ex: release >= 49,
                    };
                    assert_eq!(got, Ok(layout), "{what} v{release}");
                    // A tag's exports say what its release says.
                    if what.starts_with('v') || what == "tag" {
                        assert_eq!(Layout::select(pabi, release), got, "{what}");
                    }
                }
                None => {
                    let Err(Refusal::UnknownExports { found, .. }) = got else {
                        panic!("{what} v{release}: {got:?}, expected a refusal");
                    };
                    assert_eq!(found, exports.describe());
                }
            }
        }
        // The message names what was found.
        let half = Layout::from_exports(
            59,
            tag_exports(62, [true, false, true, false, false]),
            QpExLayout::ALL[2],
        )
        .unwrap_err();
        assert!(half
            .to_string()
            .contains("ibv_alloc_dmah@IBVERBS_1.15, ibv_query_port_speed@IBVERBS_1.16"));
    }

    #[test]
    fn v43_v44_and_v45_export_the_same_and_differ_in_what_ibv_qp_to_qp_ex_answers() {
        // v38 through v47 added no symbol: the ibv_qp_ex layout is the probe's alone.
        let exports = tag_exports(44, [false; 5]);
        assert_eq!(exports, tag_exports(43, [false; 5]));
        assert_eq!(exports, tag_exports(45, [false; 5]));
        for (release, answers) in [
            (43, [true, false, false]),
            (44, [false, true, false]),
            (45, [false, false, true]),
        ] {
            let qp_ex = qp_ex_from_answers(answers).unwrap();
            assert_eq!(qp_ex, QpExLayout::for_release(release));
            let l = Layout::from_exports(34, exports, qp_ex).unwrap();
            assert_eq!(Ok(l), Layout::select(34, release), "v{release}");
            assert_eq!(
                (l.qp_ex.has_atomic_write(), l.qp_ex.has_flush()),
                (release >= 44, release >= 45)
            );
        }
        // None or several answering: no layout to trust.
        for answers in [[false; 3], [true, true, false], [true; 3], [false, true, true]] {
            assert_eq!(qp_ex_from_answers(answers), Err(Refusal::UnknownQpEx { answers }));
        }
        assert_eq!(
            Refusal::UnknownQpEx { answers: [false; 3] }.to_string(),
            format!(
                "libibverbs' ibv_qp_to_qp_ex finds verbs_qp.comp_mask at 0 of the offsets {:?} \
                 (ibv_qp_ex of v36, v44, v45): its ibv_qp_ex layout cannot be told",
                QpExLayout::ALL.map(QpExLayout::comp_mask_offset)
            )
        );
    }

    #[test]
    fn v34_and_v35_are_refused_for_lacking_v36s_verb() {
        for release in [34, 35] {
            assert_eq!(
                Layout::from_exports(34, tag_exports(release, [false; 5]), QpExLayout::ALL[0]),
                Err(Refusal::BeforeV36)
            );
        }
        assert!(Refusal::BeforeV36
            .to_string()
            .starts_with("libibverbs lacks ibv_query_qp_data_in_order@IBVERBS_1.14: rdma-core before v36"));
    }

    #[test]
    fn active_speed_ex_follows_v49s_export() {
        let l = |release| Layout::from_exports(34, tag_exports(release, [false; 5]), QpExLayout::ALL[2]);
        assert!(!l(48).unwrap().port_attr_has_active_speed_ex());
        assert!(l(49).unwrap().port_attr_has_active_speed_ex());
    }

    #[test]
    fn facts_that_no_release_had_together_are_refused() {
        // v49's export came after wr_flush: with a shorter ibv_qp_ex, something is off.
        for qp_ex in &QpExLayout::ALL[..2] {
            assert!(matches!(
                Layout::from_exports(34, tag_exports(49, [false; 5]), *qp_ex),
                Err(Refusal::UnknownExports { .. })
            ));
        }
        // The tables after v36's without v49's export.
        let exports = Exports {
            v49: false,
            ..tag_exports(59, [true, false, false, false, false])
        };
        assert!(matches!(
            Layout::from_exports(59, exports, QpExLayout::ALL[2]),
            Err(Refusal::UnknownExports { .. })
        ));
    }

    /// The host's own libibverbs (the build needs libibverbs-dev), probed as
    /// the runtime probes the one it is loaded into: the layout from its exports
    /// is the one its release (from its file name, here only to check) has.
    #[test]
    #[cfg_attr(miri, ignore = "dlmopen of the host's libibverbs: Miri runs no foreign code")]
    fn the_hosts_libibverbs_gets_the_layout_of_its_release() {
        let Some(lib) = super::super::runtime::probe_layout_of("libibverbs.so.1") else {
            eprintln!("no libibverbs.so.1 on this host: nothing to probe");
            return;
        };
        let (path, layout) = lib.unwrap();
        let release = release_from_file_name(&path).expect("a packaged libibverbs names its release");
        assert_eq!(Layout::select(layout.pabi, release), Ok(layout), "{path}");
    }
}
