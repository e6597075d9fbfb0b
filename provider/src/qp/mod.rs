//! Queue pairs: `create_qp`, `create_qp_ex`, `query_qp`, `modify_qp`,
//! `destroy_qp`, and the legacy data path `post_send` / `post_recv` /
//! `bind_mw`, for RC, UC and UD.
//!
//! The kernel creates the QP (legacy `CREATE_QP` write; rxe answers with the
//! mmap info of the send and receive rings) and we map both rings. A post
//! builds each WQE in place in the next free slot ([`crate::wqe`] validates
//! and encodes), publishes the producer index with a release store, and for
//! sends rings the doorbell: a `POST_SEND` write with zero work requests,
//! which makes rxe's requester look at the ring. Receives need no syscall.
//! As in the stock provider one lock per send queue and one per receive
//! queue serialize posters.
//!
//! What libibverbs expects of the QP we return: a `struct verbs_qp` (layout
//! of the running release, [`VerbsQp`](crate::libibverbs::qp::VerbsQp)) whose `ibv_qp` has the core fields
//! `ibv_cmd_create_qp` fills (context, pd, CQs, SRQ, handle, qp_num, state,
//! qp_type, mutex/cond, events_completed), and `comp_mask` with
//! `VERBS_QP_EX` when made by `create_qp_ex`. The kernel's `user_handle` is
//! the `ibv_qp` address: async events carry it back to libibverbs.

//!
//! By concern: `object` is our QP and its doorbell; `control` checks and
//! builds the create, modify, query and destroy commands; `batch` and `wr`
//! are the `ibv_qp_ex` work-request API (`ibv_wr_*`). The C entries, the
//! legacy data path (`post_send`, `post_recv`, `bind_mw`) and the raw access
//! they need are in [`crate::entry::qp`].

#![forbid(unsafe_code)]

pub(crate) mod batch;
pub(crate) mod control;
pub(crate) mod object;
pub(crate) mod wr;
