//! Work requests to rxe WQEs: validation and encoding, as pure functions.
//!
//! A send WQE is a `rxe_send_wqe` header at the start of a send-queue slot,
//! followed in the same slot by its payload: the scatter/gather list, or the
//! inline data itself. A receive WQE is `rxe_recv_wqe` followed by its SGEs.
//! The slot size is the kernel's (`log2_elem_size` of the ring), so every
//! payload is checked against it as well as against the QP's capabilities:
//! nothing is ever written past the slot into the next WQE.
//!
//! A request is checked whole ([`check_send`], [`validate_recv`]) before its
//! slot is touched, so a rejected request leaves the ring as it was. Legacy
//! sends are checked and encoded straight from the caller's `ibv_send_wr`
//! (the data path: no intermediate copy); the `ibv_wr_*` builders describe
//! their operation as a [`SendRequest`] and share the field writers.
//!
//! [`limits`]: the slot layout and what a queue accepts; [`request`]: what a
//! request names beyond its SGEs; [`validate`]: the checks; [`encode`]: the
//! header and data writers; [`payload`]: the SGE list and inline bytes after
//! the header. The writers that read a request's raw parts (its SGE list, its
//! unions, inline bytes) are in the boundary module [`crate::post_raw`].

#![forbid(unsafe_code)]

pub(crate) mod encode;
pub(crate) mod limits;
pub(crate) mod payload;
pub(crate) mod request;
pub(crate) mod validate;

pub(crate) use encode::{encode_header, encode_recv, next_rkey, set_flush, set_sge, set_sges};
pub(crate) use limits::{QueueLimits, RecvLimits, SendLimits, RECV_WQE_HEADER, SEND_WQE_HEADER, SGE_SIZE};
pub(crate) use request::{Flush, MwBind, SendRequest, UdDest, WrObjects};
pub(crate) use validate::{check_allowed_send, check_send, validate_recv};
// The fuzz targets' model checks the opcode table directly.
#[cfg(feature = "fuzzing")]
pub(crate) use limits::opcode_allowed;
