//! A completion channel's doorbell: a way for any thread to make the channel readable, so that a
//! thread blocked in the channel's read (the pump's direct wait) can be woken without a signal.
//!
//! A small CQ on the channel, kept armed, and a QP in the error state whose sends go to it: a send
//! posted to a QP in the error state completes at once, flushed, and the armed CQ's event is
//! queued on the channel (so on Debian 12's kernel, 6.1, and sid's, 7.2, over the stock provider
//! and rxe_rs; the delay is in docs/nd2-performance.md). A kick is one post (a system call)
//! instead of an eventfd write, and only while a thread is blocked in the read.
//!
//! Its verbs objects are `data_verbs`' [`DoorbellQueues`].
#![forbid(unsafe_code)]

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::data_verbs::{CompChannel, DoorbellPart, DoorbellQueues, SendWr};
use crate::engine::AdapterInner;
use crate::sys::last_error;

/// Flushed sends the CQ holds between two answers: one ring at a time is outstanding.
const DEPTH: i32 = 4;

pub(crate) struct Doorbell {
    queues: DoorbellQueues,
    gate: RingGate,
}

impl Doorbell {
    /// The doorbell of `channel` (a channel of `adapter`'s context), or None if the device will
    /// not make one (the caller then never blocks in the channel's read).
    pub(crate) fn new(adapter: &Arc<AdapterInner>, channel: &CompChannel) -> Option<Doorbell> {
        let cap = ffi::ibv_qp_cap {
            max_send_wr: 2,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let queues = match DoorbellQueues::create(adapter, channel, DEPTH, cap) {
            Ok(queues) => queues,
            Err((DoorbellPart::Cq, error)) => {
                log::warn!("nd2: no doorbell CQ ({error}): waits keep to epoll");
                return None;
            }
            Err((DoorbellPart::Qp, error)) => {
                log::warn!("nd2: no doorbell QP ({error}): waits keep to epoll");
                return None;
            }
        };
        let doorbell = Doorbell {
            queues,
            gate: RingGate::new(),
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
        self.queues.move_qp(ffi::ibv_qp_state::IBV_QPS_INIT, Some(1))
            && self.queues.move_qp(ffi::ibv_qp_state::IBV_QPS_ERR, None)
    }

    fn arm(&self) -> bool {
        self.queues.arm()
    }

    /// The verbs CQ whose events are this doorbell's.
    pub(crate) fn cq(&self) -> *mut ffi::ibv_cq {
        self.queues.cq()
    }

    /// Makes the channel readable, unless a ring is already on its way.
    pub(crate) fn ring(&self) {
        if !self.gate.ask() {
            return;
        }
        let mut wr = SendWr::new(
            0,
            &[],
            ffi::ibv_wr_opcode::IBV_WR_SEND,
            ffi::ibv_send_flags::IBV_SEND_SIGNALED.0,
        );
        let posted = self.queues.post_send(&mut wr);
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
        self.queues.drain_cq::<{ DEPTH as usize }>();
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
