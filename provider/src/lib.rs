//! rxe_rs: a libibverbs provider for the kernel's Soft-RoCE device (rdma_rxe).
//!
//! libibverbs loads this library (`librxe_rs-rdmav<PABI>.so`) with dlopen. Its
//! constructor finds the libibverbs already in the process, decides which
//! private-ABI layout that library has, and registers our `verbs_device_ops`.
//! From then on libibverbs calls us through the ops tables:
//!
//! - `registration`: the load-time constructor, the device ops and match table;
//! - `device`: `alloc_device` / `uninit_device`;
//! - `ops`: the verbs tables (every op we implement) and `alloc_context`;
//! - `context`: opening a context, and `free_context`;
//! - `query`: `query_device_ex` and `query_port`;
//! - `cq`: completion queues and `ibv_cq_ex`; `ring`: the mmap'd rxe rings;
//! - `qp`: queue pairs (create/modify/query/destroy, the legacy data path,
//!   the `ibv_qp_ex` work-request API); `wqe`: work requests to WQEs;
//! - `srq`: shared receive queues;
//! - `work_queue`, `send_queue`, `recv_queue`: the queues QPs and SRQs post
//!   into, on the rings of `ring`; `post_raw`: the raw access behind posting
//!   (the application's work requests, ring slots);
//! - `pd`, `mr`, `mw`, `ah`, `mcast`: the control-path verbs;
//! - [`command`]: the kernel command channel (write() commands and ioctl()
//!   methods on `cmd_fd`);
//! - [`libibverbs`]: mirrors of libibverbs' structs and the runtime glue;
//! - [`errno`]: the one errno type; `lifecycle`: create / undo / destroy of
//!   kernel objects and their leak policy;
//! - `boundary`: the panic boundary every `extern "C"` entry goes through;
//! - `lock`: the lock of a CQ and of each work queue;
//! - `logger`: `VERBS_LOG_LEVEL` / `VERBS_LOG_FILE` handling.

mod ah;
mod boundary;
pub mod command;
mod context;
mod cq;
mod device;
mod entry;
pub mod errno;
pub mod libibverbs;
mod lifecycle;
mod lock;
mod logger;
mod mcast;
mod mr;
mod mw;
mod ops;
mod pd;
mod post_raw;
mod qp;
mod query;
mod recv_queue;
mod registration;
pub mod ring;
mod send_queue;
mod srq;
mod sync;
mod work_queue;
mod wqe;

#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

/// The name under which the provider registers with libibverbs.
pub const PROVIDER_NAME: &str = "rxe_rs";
