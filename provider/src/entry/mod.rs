//! The C entries: every function libibverbs calls (the verbs ops, the `ibv_cq_ex` and
//! `ibv_qp_ex` callbacks) and the raw access to the structs it hands us. With `boundary`,
//! `command`, `ring`, `lock`, `sync`, `logger`, `registration` and `libibverbs::runtime`, these
//! are the provider's boundary modules, the only ones that hold `unsafe`; every other module is
//! `#![forbid(unsafe_code)]` (docs/provider-architecture.md, "Where unsafe lives").

pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod objects;
pub(crate) mod qp;
pub(crate) mod srq;
