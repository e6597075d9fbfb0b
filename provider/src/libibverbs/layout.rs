//! Which private-ABI layout a libibverbs has, from what it exposes: the PABI
//! of its `verbs_register_driver_<PABI>` symbol (symbol version
//! `IBVERBS_PRIVATE_<PABI>`) and the rdma-core release in its file name
//! (`libibverbs.so.1.<abi-minor>.<release>.<patch>`, e.g.
//! `libibverbs.so.1.14.44.0`). Both are needed: layouts changed inside PABI 34
//! (v35, v36) and inside PABI 59 (v62) without a bump, and public structs the
//! library reads (`ibv_qp_ex`, grown in v44 and v45) follow the release too.

use core::fmt;
use core::mem::offset_of;

use super::context_v36;

/// The PABIs whose registration symbol we look for, newest first. Only 34 has
/// a layout here yet; adding 57 means adding it here and building
/// `librxe_rs-rdmav57.so` (same structs as v36..v56, see [`context_v36`]).
pub const KNOWN_PABIS: &[u32] = &[34];

/// The context-level layout family a library uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextLayout {
    /// rdma-core v36..v58: [`context_v36`].
    V36,
}

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
    /// None of [`KNOWN_PABIS`] has its registration symbol.
    UnknownPabi,
    /// A symbol we need is missing.
    MissingSymbol(&'static str),
    /// The library's file name does not carry a release we can read.
    UnknownRelease(String),
    /// Known PABI, but a release whose layout we do not have.
    UnsupportedRelease { pabi: u32, release: u32 },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotLoaded => write!(f, "libibverbs.so.1 is not loaded in this process"),
            Refusal::UnknownPabi => {
                write!(f, "libibverbs has none of the private ABIs {KNOWN_PABIS:?}")
            }
            Refusal::MissingSymbol(s) => write!(f, "libibverbs lacks {s}"),
            Refusal::UnknownRelease(p) => {
                write!(f, "cannot tell the rdma-core release of {p}")
            }
            Refusal::UnsupportedRelease { pabi, release } => {
                write!(f, "no struct layout for rdma-core v{release} (private ABI {pabi})")
            }
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
        let context = match (pabi, release) {
            (34, 36..=56) => ContextLayout::V36,
            _ => return Err(Refusal::UnsupportedRelease { pabi, release }),
        };
        Ok(Layout { context, pabi, release })
    }

    /// Bytes from the start of `struct verbs_context` to its last member,
    /// `struct ibv_context`. `verbs_context` grows downwards, so this is the
    /// only thing about it that changes between releases.
    pub fn verbs_context_prefix(self) -> usize {
        match self.context {
            ContextLayout::V36 => offset_of!(context_v36::verbs_context, context),
        }
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
        // A release that cannot carry PABI 34, and PABIs we have no layout for.
        assert!(Layout::select(34, 57).is_err());
        assert!(Layout::select(57, 57).is_err());
        assert!(Layout::select(59, 62).is_err());
        assert!(Layout::select(64, 64).is_err());
    }
}
