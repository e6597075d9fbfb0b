//! A completion channel's doorbell: a way for any thread to make the channel readable, so that a
//! thread blocked in the channel's read (the pump's direct wait) can be woken without a signal.
//!
//! A small CQ on the channel, kept armed, and a QP in the error state whose sends go to it: a send
//! posted to a QP in the error state completes at once, flushed, and the armed CQ's event is
//! queued on the channel (so on Debian 12's kernel, 6.1, and sid's, 7.2, over the stock provider
//! and rxe_rs; the delay is in docs/nd2-performance.md). A kick is one post (a system call)
//! instead of an eventfd write, and only while a thread is blocked in the read.

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use crate::engine::AdapterInner;
use crate::sys::last_error;

/// Flushed sends the CQ holds between two answers: one ring at a time is outstanding.
const DEPTH: i32 = 4;

pub(crate) struct Doorbell {
    cq: *mut ffi::ibv_cq,
    qp: *mut ffi::ibv_qp,
    gate: RingGate,
    /// The PD and context the QP and CQ belong to.
    _adapter: Arc<AdapterInner>,
}

// SAFETY: a verbs CQ and QP may be used from any thread; the ring/answer protocol is atomic.
unsafe impl Send for Doorbell {}
// SAFETY: as above.
unsafe impl Sync for Doorbell {}

impl Doorbell {
    /// The doorbell of `channel` (a channel of `adapter`'s context), or None if the device will
    /// not make one (the caller then never blocks in the channel's read).
    pub(crate) fn new(adapter: &Arc<AdapterInner>, channel: *mut ffi::ibv_comp_channel) -> Option<Doorbell> {
        // SAFETY: the context is open and `channel` is one of its channels.
        let cq = unsafe { ffi::ibv_create_cq(adapter.ctx, DEPTH, std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            log::warn!("nd2: no doorbell CQ ({}): waits keep to epoll", last_error());
            return None;
        }
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: std::ptr::null_mut(),
            cap: ffi::ibv_qp_cap {
                max_send_wr: 2,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 1,
        };
        // SAFETY: the PD and CQ are live and of this context.
        let qp = unsafe { ffi::ibv_create_qp(adapter.pd.0, &mut init) };
        if qp.is_null() {
            log::warn!("nd2: no doorbell QP ({}): waits keep to epoll", last_error());
            // SAFETY: created above, nothing else refers to it.
            unsafe { ffi::ibv_destroy_cq(cq) };
            return None;
        }
        let doorbell = Doorbell {
            cq,
            qp,
            gate: RingGate::new(),
            _adapter: Arc::clone(adapter),
        };
        if !doorbell.to_error() || !doorbell.arm() {
            log::warn!(
                "nd2: the doorbell QP will not go to the error state ({}): waits keep to epoll",
                last_error()
            );
            return None;
        }
        Some(doorbell)
    }

    /// RESET -> INIT -> ERR (rxe refuses RESET -> ERR).
    fn to_error(&self) -> bool {
        // SAFETY: plain old data.
        let mut attr: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
        attr.port_num = 1;
        let mask = ffi::ibv_qp_attr_mask::IBV_QP_STATE.0
            | ffi::ibv_qp_attr_mask::IBV_QP_PORT.0
            | ffi::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0
            | ffi::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0;
        // SAFETY: the QP is live; attr is valid for the mask.
        if unsafe { ffi::ibv_modify_qp(self.qp, &mut attr, mask as i32) } != 0 {
            return false;
        }
        attr.qp_state = ffi::ibv_qp_state::IBV_QPS_ERR;
        // SAFETY: as above.
        unsafe { ffi::ibv_modify_qp(self.qp, &mut attr, ffi::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32) == 0 }
    }

    fn arm(&self) -> bool {
        // SAFETY: the CQ is live.
        unsafe { ffi::ibv_req_notify_cq(self.cq, 0) == 0 }
    }

    /// The verbs CQ whose events are this doorbell's.
    pub(crate) fn cq(&self) -> *mut ffi::ibv_cq {
        self.cq
    }

    /// Makes the channel readable, unless a ring is already on its way.
    pub(crate) fn ring(&self) {
        if !self.gate.ask() {
            return;
        }
        let mut wr = ffi::ibv_send_wr {
            wr_id: 0,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: ffi::ibv_wr_opcode::IBV_WR_SEND,
            send_flags: ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
            // SAFETY: plain old data; zero is what a Send leaves in the other fields.
            ..unsafe { std::mem::zeroed() }
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; wr is valid for the call.
        let posted = unsafe { ffi::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if posted != 0 {
            log::error!("nd2: the doorbell's post failed ({posted}): a waiter may wake late");
            self.gate.post_failed();
        }
    }

    /// The channel's event for this doorbell was read (and acknowledged): arms it again and takes
    /// the flushed sends, then lets the next ring post, and posts again at once if rings were
    /// asked for since the outstanding one (they found it outstanding and posted nothing; its
    /// event may have been read before they came). Armed first: a ring after `rung` clears
    /// must find the CQ armed.
    pub(crate) fn answer(&self) {
        if !self.arm() {
            log::error!(
                "nd2: cannot arm the doorbell again ({}): waiters may wake late",
                last_error()
            );
        }
        // SAFETY: plain old data, written by ibv_poll_cq before it is read (it is not).
        let mut wcs: [ffi::ibv_wc; DEPTH as usize] = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is live; wcs has room for DEPTH entries.
        while unsafe { ffi::ibv_poll_cq(self.cq, DEPTH, wcs.as_mut_ptr()) } > 0 {}
        if self.gate.answered() {
            self.ring();
        }
    }
}

/// The doorbell's ring protocol, apart from its verbs calls: at most one ring outstanding, and
/// no ring lost. A ring asked for while one is outstanding posts nothing; but if that one's
/// event was already read when it was asked for, the reader it was for would block for good, so
/// the answer rings again when rings were asked for since the outstanding post.
struct RingGate {
    /// A ring is outstanding (posted, not answered yet).
    rung: AtomicBool,
    /// Rings asked for so far, and how many of them the outstanding post answers.
    requested: AtomicU64,
    covered: AtomicU64,
}

impl RingGate {
    fn new() -> RingGate {
        RingGate {
            rung: AtomicBool::new(false),
            requested: AtomicU64::new(0),
            covered: AtomicU64::new(0),
        }
    }

    /// A ring is asked for: true if the caller must post it (none is outstanding).
    fn ask(&self) -> bool {
        // SeqCst with `answered`: a ring that finds one outstanding has its count seen there.
        self.requested.fetch_add(1, Ordering::SeqCst);
        if self.rung.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.covered
            .store(self.requested.load(Ordering::SeqCst), Ordering::SeqCst);
        true
    }

    /// The post `ask` asked for failed: none is outstanding.
    fn post_failed(&self) {
        self.rung.store(false, Ordering::SeqCst);
    }

    /// The outstanding ring was answered: true if the caller must ring again (rings were asked
    /// for since its post).
    fn answered(&self) -> bool {
        // A swap, not a store: it reads from the swap of a ring that found this one outstanding,
        // so that ring's count is seen below (by acquire/release alone, as loom checks it).
        self.rung.swap(false, Ordering::SeqCst);
        self.requested.load(Ordering::SeqCst) != self.covered.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::RingGate;

    /// The interleaving that lost a ring: the outstanding ring's event is read, then a kicker
    /// asks before the answer. The answer must ring again.
    #[test]
    fn a_ring_asked_after_the_event_was_read_is_posted_at_the_answer() {
        let gate = RingGate::new();
        assert!(gate.ask(), "none outstanding: post");
        // The event is read; a kicker asks before the answer.
        assert!(!gate.ask(), "one outstanding: nothing posted");
        assert!(gate.answered(), "asked for since the post: ring again");
        assert!(gate.ask(), "that ring posts");
        assert!(!gate.answered(), "nothing asked for since: done");
        assert!(gate.ask(), "none outstanding again");
        gate.post_failed();
        assert!(gate.ask(), "a failed post leaves none outstanding");
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::RingGate;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use loom::sync::Arc;
    use loom::thread;

    /// One ring outstanding, its event in the channel. A kicker asks for a ring while the
    /// reader takes the event and answers it. If the kicker asked after the event was taken,
    /// an event must be in the channel once both are done (the reader blocks again after its
    /// answer and must be woken); if before, the taken event was the kicker's too.
    #[test]
    fn loom_no_ring_is_lost_between_the_read_and_the_answer() {
        loom::model(|| {
            let gate = Arc::new(RingGate::new());
            let events = Arc::new(AtomicUsize::new(0));
            let taken = Arc::new(AtomicBool::new(false));
            assert!(gate.ask());
            events.fetch_add(1, Ordering::SeqCst);
            let kicker = {
                let (gate, events, taken) = (Arc::clone(&gate), Arc::clone(&events), Arc::clone(&taken));
                thread::spawn(move || {
                    let after_the_take = taken.load(Ordering::SeqCst);
                    if gate.ask() {
                        events.fetch_add(1, Ordering::SeqCst);
                    }
                    after_the_take
                })
            };
            // The reader.
            events.fetch_sub(1, Ordering::SeqCst);
            taken.store(true, Ordering::SeqCst);
            if gate.answered() && gate.ask() {
                events.fetch_add(1, Ordering::SeqCst);
            }
            let after_the_take = kicker.join().unwrap();
            if after_the_take {
                assert!(events.load(Ordering::SeqCst) > 0, "the kicker's ring was lost");
            }
        });
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: both are live and destroyed once, the QP first; the channel outlives them
        // (NotifyChannel drops its doorbell before destroying the channel).
        unsafe {
            if ffi::ibv_destroy_qp(self.qp) != 0 {
                log::error!("nd2: ibv_destroy_qp(doorbell): {}", last_error());
            }
            if ffi::ibv_destroy_cq(self.cq) != 0 {
                log::error!("nd2: ibv_destroy_cq(doorbell): {}", last_error());
            }
        }
    }
}
