//! Everything that touches libibverbs: mirrors of the structs it shares with
//! providers, and the runtime glue that finds the libibverbs loaded in this
//! process and decides which of those layouts it has.
//!
//! - [`device_context`]: the public device and context structs of `verbs.h` (stable ABI);
//! - [`cq`]: the public CQ structs (`ibv_cq`, `ibv_cq_ex`, `ibv_wc`);
//! - [`device_abi`]: private device-level structs (same from v35 to v65);
//! - [`control_objects`]: the PD, MR, MW, AH and QP objects of the control verbs;
//! - [`qp`]: the public QP structs, work requests, and `verbs_qp`;
//! - [`srq`]: the public SRQ structs and `verbs_srq`;
//! - [`private_context`]: private context structs of rdma-core v36..v58;
//! - [`private_context_releases`]: what v59, v62, v64 and v65 add to them, and the
//!   ops table for the running library;
//! - [`layout`]: which layout a given libibverbs has (pure logic);
//! - [`runtime`]: dlopen/dlvsym of the running libibverbs, and the raw side of
//!   the objects handed to it (this directory's boundary module).

/// Declares a `#[repr(C)]` mirror with the C offset of each field written next to it, and
/// asserts at compile time that Rust lays it out at those offsets and at the C size. For the
/// structs `tests/c_layout.rs` cannot ask clang about: `driver.h`'s (in no Debian package;
/// the numbers are x86_64's from rdma-core's tags, plus [`MUTEX_GROWTH`] after a mutex) and
/// the few `verbs.h` ones it does not list.
///
/// ```text
/// c_struct! {
///     /// Documentation.
///     pub struct name [size 56 + MUTEX_GROWTH] {
///         0 => pub first: *mut c_void,
///         48 + MUTEX_GROWTH => pub second: u64,   // after a mutex
///     }
/// }
/// ```
macro_rules! c_struct {
    (
        $(#[$attr:meta])*
        pub struct $name:ident [size $size:literal $(+ $size_growth:ident)?] {
            $( $(#[$fattr:meta])* $offset:literal $(+ $growth:ident)? => pub $field:ident : $fty:ty ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        #[repr(C)]
        pub struct $name {
            $( $(#[$fattr])* pub $field: $fty ),*
        }
        const _: () = assert!(::core::mem::size_of::<$name>() == $size $(+ $size_growth)?);
        $( const _: () = assert!(::core::mem::offset_of!($name, $field) == $offset $(+ $growth)?); )*
    };
}

pub mod control_objects;
pub mod cq;
pub mod device_abi;
pub mod device_context;
pub mod layout;
pub mod private_context;
pub mod private_context_releases;
pub mod qp;
pub mod runtime;
pub mod srq;

/// How much larger glibc's `pthread_mutex_t` is on this target than on x86_64's 40 bytes: 0
/// there, 8 on aarch64 (48 bytes; `pthread_cond_t` is 48 on both). `ibv_context`, `ibv_cq`,
/// `ibv_qp` and `ibv_srq` hold one, so everything after it moves by this much; the compile-time
/// layout checks of the `driver.h` mirrors that hold one are x86_64's numbers plus this.
/// (`tests/c_layout.rs` compares the `verbs.h` mirrors with clang's layout of the headers for
/// each target.)
pub const MUTEX_GROWTH: usize = core::mem::size_of::<libc::pthread_mutex_t>() - 40;
