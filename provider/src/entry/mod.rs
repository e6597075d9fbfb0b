//! The C entries: every function libibverbs calls (the verbs ops, the `ibv_cq_ex` and
//! `ibv_qp_ex` callbacks) and the raw access to the structs it hands us. With `post_raw` (work
//! requests and C arrays, ring slots, a work queue's critical section), `ring` (the mmap'd
//! rings), `command` (the kernel channel, the doorbell's write()), `lock` and `sync` (the parking
//! lot), `libibverbs::runtime` (the loaded libibverbs, objects handed to C, unions read whole),
//! `logger`, `registration` and `fuzzing` (feature `fuzzing`), these are the provider's boundary
//! modules, the only ones that hold `unsafe`; every other module is `#![forbid(unsafe_code)]`
//! (docs/provider-architecture.md, "Where unsafe lives").

pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod objects;
pub(crate) mod qp;
pub(crate) mod srq;
pub(crate) mod wr;
