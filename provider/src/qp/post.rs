//! The legacy data path: `post_send`, `post_recv` and `bind_mw`.

use core::ffi::c_int;
use core::ptr;

use log::debug;

use super::object::{ring_doorbell, sq_accepts_posts, RxeQp};
use crate::boundary;
use crate::errno::Errno;
use crate::libibverbs::control_objects::{ibv_mw, ibv_qp, IBV_MW_TYPE_1};
use crate::libibverbs::qp::*;
use crate::recv_queue::post_recv_list;
use crate::send_queue::post_one_send;
use crate::wqe;

/// `post_send`. Requests are taken in order; the first that fails is
/// refused whole and returned in `*bad_wr`, those before it stay posted.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    boundary::guard("post_send", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a QP of ours; bad_wr is the caller's.
        let Some(q) = (unsafe { RxeQp::from_ibv_qp(qp) }) else {
            return Errno::EINVAL.code();
        };
        if bad_wr.is_null() {
            return Errno::EINVAL.code();
        }
        // SAFETY: non-null, the caller's out pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        let Some(sq) = &q.sq else { return Errno::EINVAL.code() };
        if wr.is_null() {
            return 0;
        }
        // Before RTS the kernel refuses the doorbell while the WQEs would
        // stay in the ring and run later: refuse the whole list instead.
        if !sq_accepts_posts(q) {
            // SAFETY: non-null, the caller's out pointer.
            unsafe { *bad_wr = wr };
            return Errno::EINVAL.code();
        }
        let posting = sq.with(|sq| {
            let mut cur = wr;
            let mut posted = false;
            let mut rc = 0;
            while !cur.is_null() {
                // SAFETY: the caller's list of live work requests.
                let w = unsafe { &*cur };
                // SAFETY: the ibv_post_send contract covers the SGEs and the
                // AH/MW/MR objects it names.
                if let Err(e) = unsafe { post_one_send(sq, w) } {
                    debug!("post_send: work request {:#x} refused (errno {e})", w.wr_id);
                    // SAFETY: as above.
                    unsafe { *bad_wr = cur };
                    rc = e.code();
                    break;
                }
                posted = true;
                cur = w.next;
            }
            if posted {
                sq.publish();
            }
            (rc, posted)
        });
        let (rc, posted) = match posting {
            Ok(done) => done,
            Err(e) => {
                // SAFETY: non-null, the caller's out pointer.
                unsafe { *bad_wr = wr };
                return e.code();
            }
        };
        if posted {
            if let Err(e) = ring_doorbell(q) {
                return e.code();
            }
        }
        rc
    })
}

/// `post_recv`: only advances the producer index.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    boundary::guard("post_recv", Errno::EIO.code(), || {
        // SAFETY: libibverbs passes a QP of ours.
        let Some(q) = (unsafe { RxeQp::from_ibv_qp(qp) }) else {
            return Errno::EINVAL.code();
        };
        if bad_wr.is_null() {
            return Errno::EINVAL.code();
        }
        // SAFETY: non-null, the caller's out pointer.
        unsafe { *bad_wr = ptr::null_mut() };
        let Some(rq) = &q.rq else { return Errno::EINVAL.code() };
        if wr.is_null() {
            return 0;
        }
        // C10-97.2.1: no receives in RESET.
        if q.state() == IBV_QPS_RESET {
            // SAFETY: non-null, the caller's out pointer.
            unsafe { *bad_wr = wr };
            return Errno::EINVAL.code();
        }
        // SAFETY: forwarded from the ibv_post_recv contract.
        rq.with(|rq| unsafe { post_recv_list(rq, wr, bad_wr) })
            .unwrap_or_else(|e| {
                // SAFETY: non-null, the caller's out pointer.
                unsafe { *bad_wr = wr };
                e.code()
            })
    })
}

/// `bind_mw` for type 1 windows: a BIND_MW work request with the window's
/// next rkey, which the window takes when the post succeeded (the
/// application undoes it if the completion reports an error).
pub(crate) unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, bind: *mut ibv_mw_bind) -> c_int {
    boundary::guard("bind_mw", Errno::EIO.code(), || {
        // SAFETY: the caller's window (ours) and bind description; nulls refused.
        let (Some(m), Some(b)) = (unsafe { mw.as_mut() }, unsafe { bind.as_ref() }) else {
            return boundary::fail_code(Errno::EINVAL);
        };
        if m.r#type != IBV_MW_TYPE_1 || b.bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
            return boundary::fail_code(Errno::EINVAL);
        }
        // SAFETY: ibv_send_wr is plain C data; all-zero is its memset state.
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = b.wr_id;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = b.send_flags;
        let new_rkey = wqe::next_rkey(m.rkey);
        wr.ext.bind_mw = ibv_send_wr_bind_mw {
            mw,
            rkey: new_rkey,
            bind_info: b.bind_info,
        };
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: a complete work request on our stack, a QP of the caller's.
        let rc = unsafe { post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            return boundary::fail_code(Errno::from_raw(rc));
        }
        m.rkey = new_rkey;
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libibverbs::cq::ibv_cq;
    use crate::qp::batch::Batch;
    use crate::ring::testing::FakeRing;
    use crate::ring::Producer;
    use crate::send_queue::tests::{send_queue, wr};
    use crate::work_queue::{Locked, WorkQueue};
    use crate::wqe::{RecvLimits, SendLimits, RECV_WQE_HEADER};
    use core::cell::UnsafeCell;
    use kernel_abi::rxe_send_wqe;

    /// A QP as create_qp and a modify to RTS leave it, on fake rings: the
    /// `FakeRing`s play the kernel's side of the send queue (16 slots of
    /// 512 bytes) and the receive queue, and the doorbell goes to /dev/null.
    struct FakeQp {
        sq: FakeRing,
        rq: FakeRing,
        qp: Box<RxeQp>,
        _doorbell: std::fs::File,
    }

    impl FakeQp {
        fn new(qp_type: c_int, max_sge: u32, max_inline: u32) -> FakeQp {
            use std::os::fd::AsRawFd;
            let sq = FakeRing::new(9, 15, 0);
            let rq = FakeRing::new(7, 15, 0);
            let doorbell = std::fs::File::options().write(true).open("/dev/null").unwrap();
            let mut send = send_queue(&sq, max_sge);
            send.limits = SendLimits::new(qp_type, max_sge, max_inline, send.limits.payload_room);
            let ring = Producer::map(rq.raw_fd(), &rq.mi, RECV_WQE_HEADER).unwrap();
            let limits = RecvLimits {
                max_sge,
                payload_room: ring.geometry().elem_size() - RECV_WQE_HEADER,
            };
            let recv = WorkQueue::new(ring, limits).unwrap();
            let mut qp = Box::new(RxeQp {
                // SAFETY: plain C data, all-zero as create_qp starts it.
                vqp: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                qp_type,
                cmd_fd: doorbell.as_raw_fd(),
                layout: QpExLayout::for_release(44),
                sq: Some(Locked::new(send, crate::lock::QueueLock::new())),
                rq: Some(Locked::new(recv, crate::lock::QueueLock::new())),
                batch: UnsafeCell::new(Batch::default()),
                domain: crate::pd::DomainUse::none(),
                doorbell: crate::qp::object::Doorbell::unarmed(),
            });
            qp.doorbell.arm(doorbell.as_raw_fd(), 0);
            let base = &mut qp.vqp.get_mut().qp_ex.qp_base;
            base.qp_type = qp_type;
            base.state = IBV_QPS_RTS;
            FakeQp {
                sq,
                rq,
                qp,
                _doorbell: doorbell,
            }
        }

        fn ibv_qp(&self) -> *mut ibv_qp {
            self.qp.ibv_qp()
        }

        fn set_state(&mut self, state: c_int) {
            self.qp.vqp.get_mut().qp_ex.qp_base.state = state;
        }

        /// What the kernel would find: the published WQEs it has not consumed yet.
        fn published(&self) -> Vec<rxe_send_wqe> {
            let k = &self.sq.kernel;
            let q = k.indices();
            let (mut i, prod) = (k.consumer_index(), k.producer_index());
            let mut v = Vec::new();
            while i != prod {
                v.push(k.read_slot(i));
                i = q.next(i);
            }
            v
        }

        /// The kernel takes every published WQE.
        fn consume_all(&self) {
            let k = &self.sq.kernel;
            k.release_consumer(k.producer_index());
        }
    }

    /// Links `wrs` into a list as an application would.
    /// Every link derives from one pointer to the list: a `&mut` to one
    /// request, or to the list, would invalidate the links made before it.
    fn link(wrs: &mut [ibv_send_wr]) -> *mut ibv_send_wr {
        let base = wrs.as_mut_ptr();
        for i in 0..wrs.len().saturating_sub(1) {
            // SAFETY: i + 1 < len: both inside the list.
            unsafe { (*base.add(i)).next = base.add(i + 1) };
        }
        if wrs.is_empty() {
            ptr::null_mut()
        } else {
            base
        }
    }

    /// Threads posting sends and receives on one QP while the kernel takes the WQEs from both
    /// rings: each queue's lock serialises its producers, so every request lands whole in a slot
    /// of its own and the kernel reads each exactly once (a full ring is ENOMEM, retried).
    /// ThreadSanitizer runs it (tests/check.sh, docs/safety.md): each queue's state is its
    /// posters' shared data.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "threads spinning on a ring: a run cut to a tenth had not ended after 8 minutes under Miri; ThreadSanitizer runs it"
    )]
    fn threads_posting_on_one_qp_land_each_request_once() {
        use crate::ring::testing::KernelSide;
        use kernel_abi::rxe_recv_wqe;
        const THREADS: u64 = 2;
        const EACH: u64 = 200;
        /// A ring's kernel side, read from a thread of its own as rxe reads it from another CPU.
        #[derive(Clone, Copy)]
        struct Kernel<'a>(&'a KernelSide);
        // SAFETY: the kernel's side reads slots and the producer index and stores the consumer
        // index, all through the shared mapping, as the kernel does concurrently with posters.
        unsafe impl Send for Kernel<'_> {}
        /// Takes `n` WQEs as they are published; their wr_ids.
        fn take(kernel: Kernel<'_>, n: usize, wr_id: impl Fn(&KernelSide, u32) -> u64) -> Vec<u64> {
            let k = kernel.0;
            let mut seen = Vec::new();
            while seen.len() < n {
                let (mut i, prod) = (k.consumer_index(), k.producer_index());
                if i == prod {
                    std::thread::yield_now();
                }
                while i != prod {
                    seen.push(wr_id(k, i));
                    i = k.indices().next(i);
                }
                k.release_consumer(i);
            }
            seen.sort_unstable();
            seen
        }
        /// Posts until accepted, retrying while the ring is full.
        fn until_posted(mut post: impl FnMut() -> c_int) {
            loop {
                match post() {
                    0 => return,
                    rc if rc == Errno::ENOMEM.code() => std::thread::yield_now(),
                    rc => panic!("post: {rc}"),
                }
            }
        }
        let fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        let qp = fake.ibv_qp() as usize;
        let (sq, rq) = (Kernel(&fake.sq.kernel), Kernel(&fake.rq.kernel));
        let n = (THREADS * EACH) as usize;
        let (sent, received) = std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    let sge = [ibv_sge {
                        addr: 0x1000,
                        length: 8,
                        lkey: 1,
                    }];
                    for i in 0..EACH {
                        let mut w = wr(t * EACH + i, IBV_WR_SEND, &sge);
                        let mut bad = ptr::null_mut();
                        // SAFETY: the test's live QP, a live request.
                        until_posted(|| unsafe { post_send(qp as *mut ibv_qp, &mut w, &mut bad) });
                    }
                });
                s.spawn(move || {
                    let mut sge = [ibv_sge {
                        addr: 0x2000,
                        length: 8,
                        lkey: 1,
                    }];
                    for i in 0..EACH {
                        let mut w = ibv_recv_wr {
                            wr_id: t * EACH + i,
                            next: ptr::null_mut(),
                            sg_list: sge.as_mut_ptr(),
                            num_sge: 1,
                        };
                        let mut bad = ptr::null_mut();
                        // SAFETY: the test's live QP, a live request.
                        until_posted(|| unsafe { post_recv(qp as *mut ibv_qp, &mut w, &mut bad) });
                    }
                });
            }
            let sent = s.spawn(move || take(sq, n, |k, i| k.read_slot::<rxe_send_wqe>(i).wr.wr_id));
            let received = s.spawn(move || take(rq, n, |k, i| k.read_slot::<rxe_recv_wqe>(i).wr_id));
            (sent.join().unwrap(), received.join().unwrap())
        });
        let all: Vec<u64> = (0..THREADS * EACH).collect();
        assert_eq!(sent, all);
        assert_eq!(received, all);
        assert!(fake.published().is_empty());
    }

    #[test]
    fn a_panic_mid_list_leaves_nothing_to_publish_and_the_lock_free() {
        let fq = FakeQp::new(IBV_QPT_RC, 1, 0);
        let sq = fq.qp.sq.as_ref().unwrap();
        let before = sq.with(|wq| wq.prod);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sq.with(|wq| {
                wq.next_slot().unwrap();
                wq.advance();
                panic!("mid-list");
            })
        }));
        assert!(r.is_err());
        assert!(!sq.lock.is_locked());
        assert_eq!(sq.with(|wq| wq.prod), before, "the built slot was forgotten");
        assert!(fq.published().is_empty());
    }

    #[test]
    fn post_send_refuses_a_bad_request_whole_and_keeps_the_ones_before() {
        let fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let three = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }; 3];
        let mut wrs = [
            wr(1, IBV_WR_SEND, &one),
            wr(2, IBV_WR_SEND, &three),
            wr(3, IBV_WR_SEND, &one),
        ];
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests.
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::EINVAL.code()
        );
        assert_eq!(bad, &mut wrs[1] as *mut ibv_send_wr);
        let posted = fake.published();
        assert_eq!(posted.iter().map(|w| w.wr.wr_id).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn post_send_before_rts_refuses_the_whole_list() {
        let mut fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        for state in [IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR] {
            fake.set_state(state);
            let mut wrs = [wr(1, IBV_WR_SEND, &one), wr(2, IBV_WR_SEND, &one)];
            let list = link(&mut wrs);
            let mut bad: *mut ibv_send_wr = ptr::null_mut();
            assert_eq!(
                // SAFETY: a live QP of ours and a list of live requests.
                unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
                Errno::EINVAL.code()
            );
            assert_eq!(bad, list);
            assert!(fake.published().is_empty());
        }
        fake.set_state(IBV_QPS_RTS);
        let mut w = wr(7, IBV_WR_RDMA_WRITE, &one);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) }, 0);
        assert!(bad.is_null());
        assert_eq!(fake.published().len(), 1);
    }

    #[test]
    fn post_send_on_a_full_queue_is_enomem_at_the_first_that_does_not_fit() {
        let fake = FakeQp::new(IBV_QPT_RC, 1, 0);
        let one = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        // 16 slots hold 15; ask for 17.
        let mut wrs: Vec<ibv_send_wr> = (0..17).map(|i| wr(i, IBV_WR_SEND, &one)).collect();
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests.
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::ENOMEM.code()
        );
        assert_eq!(bad, &mut wrs[15] as *mut ibv_send_wr);
        let ids: Vec<u64> = fake.published().iter().map(|w| w.wr.wr_id).collect();
        assert_eq!(ids, (0..15).collect::<Vec<_>>());
    }

    #[test]
    fn a_doorbell_that_write_refuses_for_another_reason_is_not_retried() {
        use core::sync::atomic::Ordering;
        let mut fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        // A closed fd: EBADF from write(), and no switch to the ioctl path.
        let closed = 1 << 20;
        fake.qp.doorbell.arm(closed, 0);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(1, IBV_WR_SEND, &sge);
        let mut bad = ptr::null_mut();
        // SAFETY: the test's live QP, a live request.
        let rc = unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) };
        assert_eq!(rc, Errno::EBADF.code());
        assert!(bad.is_null(), "the request was posted; only the doorbell failed");
        assert!(!crate::command::doorbell_write_refused());
        assert_eq!(fake.qp.doorbell.fd.load(Ordering::Relaxed), closed);
    }

    /// Not a test: the post_send + poll_cq pair `tests/bench/verbs.sh` counts
    /// in the rig (one signalled 8-byte RDMA WRITE, its completion polled),
    /// on fake rings, so the instructions can be counted on the host.
    /// `tests/cost-budget.sh` runs it and its siblings (SEND; WRITE with the
    /// QP and the CQ on a thread domain; WRITE by `ibv_wr_*`; SEND on UD; a
    /// receive through an SRQ) under callgrind and holds the provider's
    /// instructions per pair to `provider/perf-budget.txt`:
    ///
    /// ```text
    /// cargo test --release -p rxe-rs-provider --lib --no-run   # prints the test binary
    /// valgrind --tool=callgrind --toggle-collect='rxe_rs::qp::post::post_send' \
    ///     --toggle-collect='rxe_rs::cq::*poll_cq' --toggle-collect='rxe_rs::qp::wr::wr_*' \
    ///     --toggle-collect='rxe_rs::srq::post_srq_recv' target/release/deps/rxe_rs-HASH \
    ///     --ignored --exact qp::post::tests::hot_path_pairs --test-threads=1
    /// ```
    ///
    /// Instructions per pair = the total / `RXE_RS_HOT_PATH_PAIRS` (10,000).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs() {
        hot_path(IBV_WR_RDMA_WRITE, false);
    }

    /// [`hot_path_pairs`] with an 8-byte SEND.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_send() {
        hot_path(IBV_WR_SEND, false);
    }

    /// [`hot_path_pairs`] with the QP's queues and the CQ on a thread domain (no lock).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_td() {
        hot_path(IBV_WR_RDMA_WRITE, true);
    }

    /// The WRITE of [`hot_path_pairs`] by `ibv_wr_*` (`wr_start`, `wr_rdma_write`, `wr_set_sge`,
    /// `wr_complete`) and the poll_cq of its completion.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_wr() {
        use core::ffi::c_void;
        let fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        let start: unsafe extern "C" fn(*mut c_void) = std::hint::black_box(super::super::wr::wr_start);
        let write: unsafe extern "C" fn(*mut c_void, u32, u64) = std::hint::black_box(super::super::wr::wr_rdma_write);
        let set_sge: unsafe extern "C" fn(*mut c_void, u32, u64, u32) =
            std::hint::black_box(super::super::wr::wr_set_sge);
        let complete: unsafe extern "C" fn(*mut c_void) -> c_int = std::hint::black_box(super::super::wr::wr_complete);
        let qx = fake.ibv_qp().cast::<c_void>();
        let ex = fake.qp.vqp.get().cast::<ibv_qp_ex_base>();
        count_pairs(
            |i| {
                // SAFETY: a live QP of ours, its ibv_qp_ex written as the inline ibv_wr_* do.
                unsafe {
                    start(qx);
                    (*ex).wr_id = i;
                    (*ex).wr_flags = IBV_SEND_SIGNALED;
                    write(qx, 2, 0x2000);
                    set_sge(qx, 1, 0x1000, 8);
                    assert_eq!(complete(qx), 0);
                }
                fake.consume_all();
            },
            false,
        );
    }

    /// [`hot_path_pairs`] with an 8-byte SEND on a UD QP, through an AH with the kernel's index
    /// (as rxe gives one since Linux 5.10).
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_ud() {
        let fake = FakeQp::new(IBV_QPT_UD, 1, 64);
        let ah = crate::ah::RxeAh::fake(1);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(0, IBV_WR_SEND, &sge);
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.ud = ibv_send_wr_ud {
            ah: ptr::from_ref(&ah).cast_mut().cast(),
            remote_qpn: 0x12,
            remote_qkey: 0x1111_1111,
        };
        let post: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int =
            std::hint::black_box(post_send);
        count_pairs(
            |i| {
                w.wr_id = i;
                let mut bad = ptr::null_mut();
                // SAFETY: a live QP of ours, a live request naming a live AH.
                assert_eq!(unsafe { post(fake.ibv_qp(), &mut w, &mut bad) }, 0);
                fake.consume_all();
            },
            false,
        );
    }

    /// A receive posted to an SRQ (`post_srq_recv`, one 8-byte SGE) and the poll_cq of its
    /// completion.
    #[test]
    #[ignore = "an instruction-count harness (tests/cost-budget.sh), not a test"]
    fn hot_path_pairs_srq() {
        use crate::libibverbs::srq::ibv_srq;
        let ring = FakeRing::new(7, 15, 0);
        let rq = crate::recv_queue::map(ring.raw_fd(), &ring.mi, 1).unwrap();
        let srq = crate::srq::RxeSrq::fake(rq, crate::lock::QueueLock::new());
        let mut sge = [ibv_sge {
            addr: 0x2000,
            length: 8,
            lkey: 1,
        }];
        let mut w = ibv_recv_wr {
            wr_id: 0,
            next: ptr::null_mut(),
            sg_list: sge.as_mut_ptr(),
            num_sge: 1,
        };
        let post: unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int =
            std::hint::black_box(crate::srq::post_srq_recv);
        count_pairs(
            |i| {
                w.wr_id = i;
                let mut bad = ptr::null_mut();
                // SAFETY: a live SRQ of ours, a live request.
                assert_eq!(unsafe { post(srq.as_ibv_srq(), &mut w, &mut bad) }, 0);
                let k = &ring.kernel;
                k.release_consumer(k.producer_index());
            },
            true,
        );
    }

    /// Runs `post(i)` (which also lets the kernel's side take what it posted) and polls the
    /// completion of `i` (a RECV's when `recv`), `RXE_RS_HOT_PATH_PAIRS` times.
    fn count_pairs(mut post: impl FnMut(u64), recv: bool) {
        use crate::cq::testing::fake_rxe_cq_with;
        use crate::libibverbs::cq::ibv_wc;
        use crate::lock::QueueLock;
        use kernel_abi::ib_uverbs_wc;
        use zerocopy::FromZeros;
        let pairs = harness_pairs();
        let (cq_kernel, cq) = fake_rxe_cq_with(0, QueueLock::new());
        // SAFETY: plain C data.
        let mut wc: ibv_wc = unsafe { core::mem::zeroed() };
        let mut cqe = ib_uverbs_wc::new_zeroed();
        if recv {
            cqe.opcode = 128; // IB_WC_RECV, as rxe writes it
            cqe.byte_len = 8;
        }
        let poll: unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int =
            std::hint::black_box(crate::cq::poll_cq);
        for i in 0..pairs {
            post(i);
            cqe.wr_id = i;
            cq_kernel.produce(&cqe);
            // SAFETY: a live CQ of ours, room for one completion.
            assert_eq!(unsafe { poll(cq.cast(), 1, &mut wc) }, 1);
            assert_eq!(wc.wr_id, i);
        }
        // SAFETY: made by fake_rxe_cq_with, not used again.
        drop(unsafe { Box::from_raw(cq.cast::<crate::cq::RxeCq>()) });
    }

    fn harness_pairs() -> u64 {
        std::env::var("RXE_RS_HOT_PATH_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000)
    }

    fn hot_path(opcode: c_int, thread_domain: bool) {
        use crate::cq::testing::fake_rxe_cq_with;
        use crate::libibverbs::cq::ibv_wc;
        use crate::lock::QueueLock;
        use kernel_abi::ib_uverbs_wc;
        use zerocopy::FromZeros;
        let pairs = harness_pairs();
        let lock = || {
            if thread_domain {
                QueueLock::unlocked()
            } else {
                QueueLock::new()
            }
        };
        let mut fake = FakeQp::new(IBV_QPT_RC, 1, 64);
        if let Some(sq) = &mut fake.qp.sq {
            sq.lock = lock();
        }
        if let Some(rq) = &mut fake.qp.rq {
            rq.lock = lock();
        }
        let (cq_kernel, cq) = fake_rxe_cq_with(0, lock());
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let mut w = wr(0, opcode, &sge);
        w.send_flags = IBV_SEND_SIGNALED;
        if opcode == IBV_WR_RDMA_WRITE {
            w.wr.rdma = ibv_send_wr_rdma {
                remote_addr: 0x2000,
                rkey: 2,
            };
        }
        // SAFETY: plain C data.
        let mut wc: ibv_wc = unsafe { core::mem::zeroed() };
        let mut cqe = ib_uverbs_wc::new_zeroed();
        // Called through pointers, as libibverbs calls them (and so that
        // they are not inlined here, out of callgrind's sight).
        let post: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int =
            std::hint::black_box(post_send);
        let poll: unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int =
            std::hint::black_box(crate::cq::poll_cq);
        for i in 0..pairs {
            w.wr_id = i;
            let mut bad = ptr::null_mut();
            // SAFETY: a live QP of ours, a live request.
            assert_eq!(unsafe { post(fake.ibv_qp(), &mut w, &mut bad) }, 0);
            fake.consume_all();
            cqe.wr_id = i;
            cq_kernel.produce(&cqe);
            // SAFETY: a live CQ of ours, room for one completion.
            assert_eq!(unsafe { poll(cq.cast(), 1, &mut wc) }, 1);
            assert_eq!(wc.wr_id, i);
        }
        // SAFETY: made by fake_rxe_cq_with, not used again.
        drop(unsafe { Box::from_raw(cq.cast::<crate::cq::RxeCq>()) });
    }

    #[test]
    fn a_ud_send_carries_its_destination_and_one_without_an_ah_or_of_another_opcode_is_einval() {
        let fake = FakeQp::new(IBV_QPT_UD, 1, 64);
        let ah = crate::ah::RxeAh::fake(7);
        let sge = [ibv_sge {
            addr: 0x1000,
            length: 8,
            lkey: 1,
        }];
        let ud = |wr_id, opcode, ah: *mut crate::libibverbs::control_objects::ibv_ah| {
            let mut w = wr(wr_id, opcode, &sge);
            w.wr.ud = ibv_send_wr_ud {
                ah,
                remote_qpn: 0x12,
                remote_qkey: 0x3456,
            };
            w
        };
        let ours = ptr::from_ref(&ah).cast_mut().cast();
        for mut w in [
            ud(1, IBV_WR_SEND, ptr::null_mut()),
            ud(2, IBV_WR_RDMA_WRITE, ours),
            ud(3, IBV_WR_BIND_MW, ours),
        ] {
            let mut bad: *mut ibv_send_wr = ptr::null_mut();
            // SAFETY: a live QP of ours, a live request (its AH ours or null).
            let rc = unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) };
            assert_eq!(rc, Errno::EINVAL.code());
            assert_eq!(bad, &mut w as *mut ibv_send_wr);
            assert!(fake.published().is_empty());
        }
        let mut w = ud(4, IBV_WR_SEND_WITH_IMM, ours);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: as above.
        assert_eq!(unsafe { post_send(fake.ibv_qp(), &mut w, &mut bad) }, 0);
        let posted = fake.published();
        // SAFETY: the ud arm was written for a UD QP.
        let u = unsafe { posted[0].wr.wr.ud };
        assert_eq!(
            (
                posted[0].wr.wr_id,
                u.remote_qpn,
                u.remote_qkey,
                u.ah_num,
                posted[0].dma.length
            ),
            (4, 0x12, 0x3456, 7, 8)
        );
    }

    #[test]
    fn an_inline_sge_at_address_0_with_a_length_is_einval() {
        let fake = FakeQp::new(IBV_QPT_RC, 2, 64);
        let data = [7u8; 8];
        let sges = [
            ibv_sge {
                addr: data.as_ptr() as u64,
                length: 8,
                lkey: 0,
            },
            ibv_sge {
                addr: 0,
                length: 0,
                lkey: 0,
            },
        ];
        let mut good = wr(1, IBV_WR_SEND, &sges);
        good.send_flags = IBV_SEND_INLINE;
        let null = [ibv_sge {
            addr: 0,
            length: 4,
            lkey: 0,
        }];
        let mut bad_one = wr(2, IBV_WR_SEND, &null);
        bad_one.send_flags = IBV_SEND_INLINE;
        let mut wrs = [good, bad_one];
        let list = link(&mut wrs);
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(
            // SAFETY: a live QP of ours and a list of live requests (the NULL
            // SGE is what is tested: it must be refused, not read).
            unsafe { post_send(fake.ibv_qp(), list, &mut bad) },
            Errno::EINVAL.code()
        );
        assert_eq!(bad, &mut wrs[1] as *mut ibv_send_wr);
        // The first, with a zero-length NULL SGE beside real bytes, went.
        let posted = fake.published();
        assert_eq!(posted.iter().map(|w| w.wr.wr_id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(posted[0].dma.length, 8);
    }
}
