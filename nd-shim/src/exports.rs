//! The version node of libnd_shim's exports. `nd_shim.map` (the version script build.rs gives the
//! linker) lists every exported name under ND_SHIM_0, but rustc gives the linker its own version
//! script first, which leaves every exported name at the base version. A version suffix on the
//! symbol itself decides over both scripts, so each module that defines exports names them in
//! [`version_node!`]: `.symver name, name@@@ND_SHIM_0` renames the definition in that module's
//! object. The directive must sit in the same object as the definition (in another it is
//! ignored), hence one invocation per defining module rather than one list here.
//! `nd-shim/tests/exports.rs` checks that the library exports exactly the map's names, each at
//! ND_SHIM_0.

#![forbid(unsafe_code)]

/// Binds the named exports of the invoking module to the version node ND_SHIM_0, when build.rs
/// gives the linker the script that defines the node (`nd_shim_symver`). Not in the unit tests'
/// executable, which has no version node (nor under Miri, which runs no assembler).
macro_rules! version_node {
    ($($name:literal),+ $(,)?) => {
        #[cfg(all(nd_shim_symver, not(miri), not(test)))]
        core::arch::global_asm!($(concat!(".symver ", $name, ", ", $name, "@@@ND_SHIM_0")),+);
    };
}
pub(crate) use version_node;
