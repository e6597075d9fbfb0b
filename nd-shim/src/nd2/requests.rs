//! ND2_RESULT.RequestType for every completion. Verbs defines a work completion's opcode only
//! when its status is success; a failed or flushed completion's opcode is undefined. So the type
//! of each request is noted when it is posted, by (QP number, wr_id), and a completion takes its
//! type from there: a successful one by its opcode (and drops the matching note), a failed one
//! from the oldest note for its (QP, wr_id).
//!
//! Sends posted with ND_OP_FLAG_SILENT_SUCCESS complete only on failure, so they are not noted
//! (their note would never be taken); nor are receives posted to a shared receive queue (their
//! QP is known only at completion). A failed completion with no note reports
//! Nd2RequestTypeReceive.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rdma_mummy_sys as ffi;

pub(crate) const RECEIVE: u32 = 0;
pub(crate) const SEND: u32 = 1;
pub(crate) const BIND: u32 = 2;
pub(crate) const INVALIDATE: u32 = 3;
pub(crate) const READ: u32 = 4;
pub(crate) const WRITE: u32 = 5;

/// ND2_REQUEST_TYPE of a successful work completion's opcode.
pub(crate) fn of_completion(opcode: u32) -> u32 {
    use ffi::ibv_wc_opcode as Op;
    match opcode {
        Op::IBV_WC_SEND => SEND,
        Op::IBV_WC_RDMA_WRITE => WRITE,
        Op::IBV_WC_RDMA_READ => READ,
        Op::IBV_WC_BIND_MW => BIND,
        Op::IBV_WC_LOCAL_INV => INVALIDATE,
        _ => RECEIVE,
    }
}

/// ND2_REQUEST_TYPE of a send work request's opcode.
pub(crate) fn of_send(opcode: ffi::ibv_wr_opcode::Type) -> u32 {
    use ffi::ibv_wr_opcode as Op;
    match opcode {
        Op::IBV_WR_RDMA_WRITE => WRITE,
        Op::IBV_WR_RDMA_READ => READ,
        Op::IBV_WR_BIND_MW => BIND,
        Op::IBV_WR_LOCAL_INV => INVALIDATE,
        _ => SEND,
    }
}

/// The requests posted and not completed yet, per (QP number, wr_id), oldest first.
#[derive(Default)]
pub(crate) struct Requests(Mutex<HashMap<(u32, u64), VecDeque<u32>>>);

impl Requests {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<(u32, u64), VecDeque<u32>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn posted(&self, qp_num: u32, wr_id: u64, request_type: u32) {
        self.map().entry((qp_num, wr_id)).or_default().push_back(request_type);
    }

    /// The type of a completion: `success` takes it from `opcode`, a failure from the notes.
    pub(crate) fn completed(&self, qp_num: u32, wr_id: u64, success: bool, opcode: u32) -> u32 {
        let mut map = self.map();
        let Some(notes) = map.get_mut(&(qp_num, wr_id)) else {
            return if success { of_completion(opcode) } else { RECEIVE };
        };
        let request_type = if success {
            let request_type = of_completion(opcode);
            if let Some(at) = notes.iter().position(|&t| t == request_type) {
                notes.remove(at);
            }
            request_type
        } else {
            notes.pop_front().unwrap_or(RECEIVE)
        };
        if notes.is_empty() {
            map.remove(&(qp_num, wr_id));
        }
        request_type
    }

    /// A post that failed: its note (the newest for the key) goes.
    pub(crate) fn withdrawn(&self, qp_num: u32, wr_id: u64) {
        let mut map = self.map();
        if let Some(notes) = map.get_mut(&(qp_num, wr_id)) {
            notes.pop_back();
            if notes.is_empty() {
                map.remove(&(qp_num, wr_id));
            }
        }
    }

    /// The QP is gone: its notes with it.
    pub(crate) fn forget(&self, qp_num: u32) {
        self.map().retain(|&(qp, _), _| qp != qp_num);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::ibv_wc_opcode as Op;

    #[test]
    fn a_failed_completion_takes_the_type_it_was_posted_with() {
        let r = Requests::default();
        r.posted(7, 42, READ);
        r.posted(7, 42, RECEIVE);
        r.posted(8, 42, WRITE);
        // The opcode of a failure is garbage: ignored.
        assert_eq!(r.completed(7, 42, false, Op::IBV_WC_SEND), READ);
        assert_eq!(r.completed(8, 42, false, Op::IBV_WC_SEND), WRITE);
        assert_eq!(r.completed(7, 42, false, Op::IBV_WC_RDMA_WRITE), RECEIVE);
        assert_eq!(r.completed(7, 42, false, Op::IBV_WC_SEND), RECEIVE, "no note left");
        assert!(r.map().is_empty());
    }

    #[test]
    fn a_success_takes_its_opcode_and_drops_its_note() {
        let r = Requests::default();
        r.posted(7, 1, SEND);
        r.posted(7, 1, RECEIVE);
        assert_eq!(r.completed(7, 1, true, Op::IBV_WC_RECV), RECEIVE);
        assert_eq!(r.completed(7, 1, false, 0), SEND);
        assert_eq!(r.completed(9, 1, true, Op::IBV_WC_RDMA_READ), READ, "not noted");
        r.posted(7, 2, BIND);
        r.posted(7, 2, WRITE);
        r.withdrawn(7, 2);
        assert_eq!(r.map()[&(7, 2)], [BIND]);
        r.posted(3, 2, INVALIDATE);
        r.forget(7);
        assert_eq!(r.map().len(), 1);
    }

    #[test]
    fn send_opcodes() {
        use ffi::ibv_wr_opcode as W;
        assert_eq!(of_send(W::IBV_WR_SEND), SEND);
        assert_eq!(of_send(W::IBV_WR_RDMA_WRITE), WRITE);
        assert_eq!(of_send(W::IBV_WR_RDMA_READ), READ);
        assert_eq!(of_send(W::IBV_WR_BIND_MW), BIND);
        assert_eq!(of_send(W::IBV_WR_LOCAL_INV), INVALIDATE);
    }
}
