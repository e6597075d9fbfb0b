//! Which private-ABI layout a libibverbs has, from what it exposes: the PABI
//! of its `verbs_register_driver_<PABI>` symbol (symbol version
//! `IBVERBS_PRIVATE_<PABI>`) and the rdma-core release in its file name
//! (`libibverbs.so.1.<abi-minor>.<release>.<patch>`, e.g.
//! `libibverbs.so.1.14.44.0`). Both are needed: layouts changed inside PABI 34
//! (v35, v36) and inside PABI 59 (v62) without a bump, and public structs the
//! library reads (`ibv_qp_ex`, grown in v44 and v45) follow the release too.

use core::fmt;
use core::mem::size_of;

use super::device_context::ibv_context;

pub use super::private_context_releases::ContextLayout;

/// The rdma-core releases whose layouts this provider has. A later release may have grown the
/// private structs under a PABI it kept, so it is refused (the stock provider then serves).
pub const RELEASES: core::ops::RangeInclusive<u32> = 36..=65;

/// The PABIs whose registration symbol we look for, newest first: one per
/// rdma-core line from v36 to v65. The build leaves `librxe_rs-rdmav<N>.so`
/// for each (provider/build.rs keeps the same list).
pub const KNOWN_PABIS: &[u32] = &[65, 64, 59, 57, 34];

/// What we know about the running libibverbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub context: ContextLayout,
    pub pabi: u32,
    /// The rdma-core release (44 for v44.0). Later verbs key the `ibv_qp_ex`
    /// layout on it (v44 added `wr_atomic_write`, v45 `wr_flush`).
    pub release: u32,
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
    /// The library's file name does not carry a release we can read.
    UnknownRelease(String),
    /// Known PABI, but a release whose layout we do not have.
    UnsupportedRelease { pabi: u32, release: u32 },
    /// The library's exports name no known layout, or one its private ABI never had.
    UnknownExports { pabi: u32, release: u32, found: String },
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
            Refusal::UnknownRelease(p) => {
                write!(f, "cannot tell the rdma-core release of {p}")
            }
            Refusal::UnknownExports { pabi, release, found } => write!(
                f,
                "libibverbs (rdma-core v{release}, private ABI {pabi}) exports {found}: no \
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

/// Which of [`PROBED_EXPORTS`] a library has, in that order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exports(pub [bool; PROBED_EXPORTS.len()]);

impl Exports {
    /// Asks `has(name, version)` for each probed symbol.
    pub fn probe(mut has: impl FnMut(&str, &str) -> bool) -> Exports {
        Exports(PROBED_EXPORTS.map(|(name, version)| has(name, version)))
    }

    /// The layout whose tables go with exactly these verbs.
    fn layout(self) -> Option<ContextLayout> {
        Some(match self.0 {
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
            .zip(self.0)
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

impl Layout {
    /// The layout of a library from what it exports, cross-checked with its
    /// private ABI (each layout's tables belong to the PABIs listed in
    /// [`select`](Self::select)) and its release (v36 on).
    pub fn from_exports(pabi: u32, release: u32, exports: Exports) -> Result<Layout, Refusal> {
        let unknown = || Refusal::UnknownExports {
            pabi,
            release,
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
        if !RELEASES.contains(&release) {
            return Err(Refusal::UnsupportedRelease { pabi, release });
        }
        Ok(Layout { context, pabi, release })
    }

    /// The layout a tagged release with this PABI has, if we have it: the
    /// cross-check of [`from_exports`](Self::from_exports), and its facts.
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
        Ok(Layout { context, pabi, release })
    }

    /// Bytes from the start of `struct verbs_context` to its last member,
    /// `struct ibv_context`. `verbs_context` grows downwards, so this is the
    /// only thing about it that changes between releases.
    pub fn verbs_context_prefix(self) -> usize {
        self.context.verbs_context_size() - size_of::<ibv_context>()
    }

    /// Whether `verbs_sysfs_dev` has `num_ports` (v35 and later).
    pub fn sysfs_dev_has_num_ports(self) -> bool {
        self.release >= 35
    }

    /// Whether this release's `struct ibv_port_attr` ends with
    /// `active_speed_ex` (v49 on, 56 bytes; 52 before), which libibverbs'
    /// own buffer for `query_port` then has room for.
    pub fn port_attr_has_active_speed_ex(self) -> bool {
        self.release >= 49
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_comes_from_the_versioned_file_name() {
        assert_eq!(
            release_from_file_name("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"),
            Some(44)
        );
        assert_eq!(release_from_file_name("libibverbs.so.1.14.56.3"), Some(56));
        assert_eq!(release_from_file_name("libibverbs.so.1.15.64.0"), Some(64));
        assert_eq!(release_from_file_name("/lib/libibverbs.so.1"), None);
        assert_eq!(release_from_file_name("libibverbs.so"), None);
        assert_eq!(release_from_file_name("libmlx5.so.1.24.44.0"), None);
        assert_eq!(release_from_file_name("libibverbs.so.1.14.x.0"), None);
    }

    #[test]
    fn pabi_34_is_accepted_only_where_the_ops_table_is_known() {
        for release in 36..=56 {
            let l = Layout::select(34, release).unwrap();
            assert_eq!(l.context, ContextLayout::V36);
            assert_eq!(l.verbs_context_prefix(), 320);
            assert!(l.sysfs_dev_has_num_ports());
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
            assert_eq!((l.pabi, l.release), (pabi, release));
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

    /// The rdma-core builds that tell layouts apart, as recorded from the
    /// repository (`libibverbs.map.in` and `CMakeLists.txt` at each tag, and
    /// at each first-parent commit where the set changed between tags):
    /// (what, PABI, release, exports, the layout or None for a refusal).
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
            // 6fe804e75 (2026-05-06): 64 before its PABI bump and alloc_buf.
            ("64.0 bump", 59, 64, V62, Some(ContextLayout::V62)),
            ("v64.0", 64, 64, V64, Some(ContextLayout::V64)),
            // 5a8b66556 (2026-07-08): 65 before its PABI bump and the counters.
            ("65.0 bump", 64, 65, V64, Some(ContextLayout::V64)),
            ("v65.0", 65, 65, V65, Some(ContextLayout::V65)),
            // Exports a PABI never had with them: refused.
            ("odd", 34, 56, V59, None),
            ("odd", 59, 63, V64, None),
            ("odd", 65, 65, V64, None),
        ]);
        for (what, pabi, release, exports, want) in builds {
            let got = Layout::from_exports(pabi, release, Exports(exports));
            match want {
                Some(context) => assert_eq!(got, Ok(Layout { context, pabi, release }), "{what} v{release}"),
                None => {
                    let Err(Refusal::UnknownExports { found, .. }) = got else {
                        panic!("{what} v{release}: {got:?}, expected a refusal");
                    };
                    assert_eq!(found, Exports(exports).describe());
                }
            }
        }
        // Outside the known releases the layout is refused whatever the exports: before v36,
        // and after the newest (a 66.0 bump that kept PABI 65 may already have grown the tables).
        assert_eq!(
            Layout::from_exports(34, 35, Exports(NONE)),
            Err(Refusal::UnsupportedRelease { pabi: 34, release: 35 })
        );
        assert_eq!(
            Layout::from_exports(65, 66, Exports(V65)),
            Err(Refusal::UnsupportedRelease { pabi: 65, release: 66 })
        );
        assert_eq!(
            Layout::from_exports(34, 99, Exports(NONE)),
            Err(Refusal::UnsupportedRelease { pabi: 34, release: 99 })
        );
        // The message names what was found.
        let half = Layout::from_exports(59, 62, Exports([true, false, true, false, false])).unwrap_err();
        assert!(half
            .to_string()
            .contains("ibv_alloc_dmah@IBVERBS_1.15, ibv_query_port_speed@IBVERBS_1.16"));
    }
}
