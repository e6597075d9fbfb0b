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
                     this rxe_rs knows (rdma-core v36 to v65)"
                )
            }
            Refusal::MissingSymbol(s) => write!(f, "libibverbs lacks {s}"),
            Refusal::UnknownRelease(p) => {
                write!(f, "cannot tell the rdma-core release of {p}")
            }
            Refusal::UnsupportedRelease { pabi, release } => write!(
                f,
                "no struct layout for rdma-core v{release} (private ABI {pabi}); \
                 this rxe_rs knows v36 to v65"
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

impl Layout {
    /// The layout for a library with this PABI and release, if we have it.
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
}
