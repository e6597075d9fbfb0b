//! Who reads the adapters' completion channels, so that a CQ event wakes one thread, not two.
//!
//! Two kinds of thread wait for the channels' events:
//!
//! - the *leader*: at most one application thread at a time that waits in the shim
//!   (GetQueuedCompletionStatus, WaitForSingleObject, GetOverlappedResult(TRUE)). Instead of
//!   sleeping on its object's condition variable it sleeps in the leader's epoll set, reads the
//!   channel itself when the CQ's event comes, completes the Notify request (which posts the
//!   packet to its own port or sets its own event), and returns: one wake-up per event, as a
//!   verbs program blocked in `ibv_get_cq_event`. Other waiters at the same time sleep on their
//!   condition variables as before.
//! - the adapters' relay threads (`notify.rs`), which sleep in the relay's epoll set and read
//!   the channels when no leader does: for waiters that are not the leader, and for programs
//!   that never wait in the shim (they poll GetOverlappedResult(FALSE) or Internal).
//!
//! Every channel is in both sets, EPOLLEXCLUSIVE, added to the leader's set first. An exclusive
//! entry on the channel's wait queue wakes its set's sleeper and stops the wake-up there only if
//! the set has a sleeper; the kernel walks the entries in the order they were added. So an event
//! wakes the leader if one is asleep, else a relay, never both: a strict priority, whatever order
//! the threads went to sleep in. (An event a relay took while no leader slept leaves the channel
//! on the leader set's ready list; the next leader's epoll_wait finds it empty and sleeps on.)
//!
//! The channels are level-triggered: a [`Drain`] may take one event per turn and leave the rest,
//! which the next epoll_wait reports again. So a wake-up costs epoll_wait and one read, not a
//! second read that only finds the channel empty (each system call is microseconds under
//! emulation, and a ping-pong waits four times per exchange).
//!
//! The leader's own wake-up by other threads (a packet posted by the connection engine, a
//! SetEvent from another thread): every post, set and completion calls [`kick`], which writes
//! the wake eventfd, in the leader's set only, while the leader is blocked.

use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, Weak};
use std::time::Instant;

use super::int_map::IntMap;
use crate::status::NdStatus;
use crate::sys::last_error;

/// Something in the epoll set that has events to read (an adapter's completion channel).
pub(crate) trait Drain: Send + Sync {
    /// Reads and handles at least one event ready on the source if it has one (the set is
    /// level-triggered: what is left is reported again); never blocks.
    fn drain(&self);
}

/// The epoll token of the wake eventfd; sources get tokens from 1 on.
const WAKE: u64 = 0;
/// Events taken per epoll_wait.
const EVENTS: usize = 8;

struct Pump {
    /// The leader's set: the channels and the wake eventfd.
    epoll: i32,
    /// The relays' set: the channels.
    relay_epoll: i32,
    wake: i32,
    /// An application thread holds the leader role.
    leader: AtomicBool,
    /// The leader is in (or about to enter) epoll_wait: posters write the wake eventfd.
    blocked: AtomicBool,
    sources: Mutex<IntMap<u64, Weak<dyn Drain>>>,
    next: AtomicU64,
}

static PUMP: OnceLock<Option<Pump>> = OnceLock::new();

fn create() -> Option<Pump> {
    // SAFETY: plain system calls; the descriptors are owned by the pump for the process's life.
    unsafe {
        let epoll = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        if epoll < 0 {
            log::error!("nd2: epoll_create1: {}", last_error());
            return None;
        }
        let relay_epoll = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        if relay_epoll < 0 {
            log::error!("nd2: epoll_create1: {}", last_error());
            libc::close(epoll);
            return None;
        }
        let wake = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
        if wake < 0 {
            log::error!("nd2: eventfd: {}", last_error());
            libc::close(relay_epoll);
            libc::close(epoll);
            return None;
        }
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: WAKE,
        };
        if libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, wake, &mut event) != 0 {
            log::error!("nd2: epoll_ctl(wake): {}", last_error());
            libc::close(wake);
            libc::close(relay_epoll);
            libc::close(epoll);
            return None;
        }
        Some(Pump {
            epoll,
            relay_epoll,
            wake,
            leader: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            sources: Mutex::new(IntMap::default()),
            next: AtomicU64::new(WAKE + 1),
        })
    }
}

/// The pump, once a source was registered (before that, nothing needs reading).
fn pump() -> Option<&'static Pump> {
    PUMP.get().and_then(Option::as_ref)
}

/// A registered source: its token, for [`unregister`].
pub(crate) struct Registration {
    token: u64,
    fd: i32,
}

/// Adds `fd` (non-blocking, readable when `source` has events) to the set.
pub(crate) fn register(fd: i32, source: Weak<dyn Drain>) -> Result<Registration, NdStatus> {
    let pump = PUMP
        .get_or_init(create)
        .as_ref()
        .ok_or(NdStatus::ND_INSUFFICIENT_RESOURCES)?;
    let token = pump.next.fetch_add(1, Ordering::Relaxed);
    pump.sources.lock().insert(token, source);
    // The leader's set first: its entry comes first on the channel's wait queue (module doc).
    let mut added = Vec::with_capacity(2);
    for set in [pump.epoll, pump.relay_epoll] {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32,
            u64: token,
        };
        // SAFETY: both descriptors are open; the event is a live local.
        if unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, fd, &mut event) } != 0 {
            let error = last_error();
            for set in added {
                // SAFETY: as above; undoes this function's own add.
                unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
            }
            pump.sources.lock().remove(&token);
            return Err(error);
        }
        added.push(set);
    }
    Ok(Registration { token, fd })
}

/// Takes the source out of the set; its descriptor may be closed after this returns.
pub(crate) fn unregister(registration: &Registration) {
    let Some(pump) = pump() else { return };
    for set in [pump.epoll, pump.relay_epoll] {
        // SAFETY: both descriptors are open (the caller closes its own after this).
        unsafe { libc::epoll_ctl(set, libc::EPOLL_CTL_DEL, registration.fd, std::ptr::null_mut()) };
    }
    pump.sources.lock().remove(&registration.token);
}

/// Something a blocked leader may be waiting for has happened (a packet posted, an event set, a
/// request completed): wakes the leader if it is blocked. Cheap when it is not.
pub(crate) fn kick() {
    let Some(pump) = pump() else { return };
    // Pairs with the fence in Leader::wait_until: either the leader sees what the caller just
    // did, or the caller sees the leader blocked.
    fence(Ordering::SeqCst);
    if pump.blocked.load(Ordering::Relaxed) {
        pump.write_wake();
    }
}

/// [`kick`] for a caller that made a SeqCst fence after its changes (Request::complete, which
/// shares its fence with the GetOverlappedResult sleepers' check).
pub(crate) fn kick_fenced() {
    let Some(pump) = pump() else { return };
    if pump.blocked.load(Ordering::Relaxed) {
        pump.write_wake();
    }
}

impl Pump {
    fn write_wake(&self) {
        let one: u64 = 1;
        // SAFETY: the eventfd is open; 8 bytes from a live local. A full counter (never) only
        // fails the write: the leader is then already readable.
        unsafe { libc::write(self.wake, std::ptr::addr_of!(one).cast(), 8) };
    }

    /// One epoll_wait of at most `ms` (-1: no limit); drains the sources that fired. True if
    /// the wake eventfd fired. A leader clears `blocked` as soon as it is awake: what it
    /// completes while draining needs no wake eventfd.
    fn wait_once(&self, ms: i32, as_leader: bool) -> bool {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        let set = if as_leader { self.epoll } else { self.relay_epoll };
        // The system call itself, not glibc's wrapper: that one is a cancellation point, which
        // in a threaded process costs two calls around every wait (about 40 instructions), and
        // a thread cancelled here would unwind through the shim's frames, which must not be.
        // SAFETY: the epoll descriptor is open; `events` has room for EVENTS entries.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_wait,
                set,
                events.as_mut_ptr(),
                EVENTS as libc::c_int,
                ms,
            )
        };
        if as_leader {
            self.blocked.store(false, Ordering::Relaxed);
        }
        let Ok(n) = usize::try_from(n) else {
            if crate::sys::errno() != libc::EINTR {
                log::error!("nd2: epoll_wait: {}", last_error());
                // Never spin on a broken set.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            return false;
        };
        let mut woken = false;
        for event in &events[..n.min(EVENTS)] {
            let token = event.u64;
            if token == WAKE {
                woken = true;
                continue;
            }
            let source = self.sources.lock().get(&token).and_then(Weak::upgrade);
            if let Some(source) = source {
                source.drain();
            }
        }
        woken
    }

    fn read_wake(&self) {
        let mut count: u64 = 0;
        // SAFETY: the eventfd is open and non-blocking; 8 bytes into a live local.
        unsafe { libc::read(self.wake, std::ptr::addr_of_mut!(count).cast(), 8) };
    }
}

/// A relay thread's turn: sleeps in the relays' set for at most `ms` and reads what fires.
pub(crate) fn relay(ms: i32) {
    match pump() {
        Some(pump) => {
            pump.wait_once(ms, false);
        }
        None => std::thread::sleep(std::time::Duration::from_millis(ms.max(0) as u64)),
    }
}

/// The leader role, held by one waiting application thread while it waits.
pub(crate) struct Leader {
    pump: &'static Pump,
}

/// The leader role if no other thread holds it (and the pump exists).
pub(crate) fn lead() -> Option<Leader> {
    let pump = pump()?;
    pump.leader
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .ok()?;
    Some(Leader { pump })
}

impl Leader {
    /// Reads the completion channels until `ready()` says so (true) or the deadline passes
    /// (false). `ready` is asked again after every wake-up; whatever makes it true must call
    /// [`kick`] after it is visible.
    pub(crate) fn wait_until(&self, deadline: Option<Instant>, mut ready: impl FnMut() -> bool) -> bool {
        let pump = self.pump;
        loop {
            pump.blocked.store(true, Ordering::Relaxed);
            // Pairs with the fence in kick: the check below sees what a poster did, or the
            // poster sees `blocked` and writes the wake eventfd.
            fence(Ordering::SeqCst);
            if ready() {
                pump.blocked.store(false, Ordering::Relaxed);
                return true;
            }
            let ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        pump.blocked.store(false, Ordering::Relaxed);
                        return false;
                    }
                    // Rounded up: never wake before the deadline only to sleep again for 0 ms.
                    i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
                }
            };
            let woken = pump.wait_once(ms, true);
            if woken {
                pump.read_wake();
            }
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.pump.blocked.store(false, Ordering::Relaxed);
        self.pump.leader.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A source over an eventfd: counts its drains.
    struct Counter {
        fd: i32,
        drained: AtomicUsize,
    }

    impl Drain for Counter {
        fn drain(&self) {
            let mut value: u64 = 0;
            // SAFETY: a live non-blocking eventfd, 8 bytes into a local.
            while unsafe { libc::read(self.fd, std::ptr::addr_of_mut!(value).cast(), 8) } == 8 {
                self.drained.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn signal(fd: i32) {
        let one: u64 = 1;
        // SAFETY: a live eventfd, 8 bytes from a local.
        assert_eq!(unsafe { libc::write(fd, std::ptr::addr_of!(one).cast(), 8) }, 8);
    }

    // One test: the leader role is process-wide.
    #[test]
    fn leader_reads_sources_and_is_woken_by_kick() {
        // SAFETY: a plain system call.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        let counter = Arc::new(Counter {
            fd,
            drained: AtomicUsize::new(0),
        });
        let weak: Weak<dyn Drain> = Arc::downgrade(&counter) as Weak<dyn Drain>;
        let registration = register(fd, weak).unwrap();

        // The leader drains a source that fires while it waits.
        // Other tests' port waits may hold the role for a moment.
        let leader = loop {
            if let Some(leader) = lead() {
                break leader;
            }
            std::thread::yield_now();
        };
        assert!(lead().is_none(), "one leader at a time");
        let writer = std::thread::spawn(move || signal(fd));
        assert!(leader.wait_until(None, || counter.drained.load(Ordering::SeqCst) == 1));
        writer.join().unwrap();

        // A kick from another thread wakes it for a condition no source changes.
        let flag = Arc::new(AtomicBool::new(false));
        let setter = {
            let flag = Arc::clone(&flag);
            std::thread::spawn(move || {
                flag.store(true, Ordering::SeqCst);
                kick();
            })
        };
        assert!(leader.wait_until(None, || flag.load(Ordering::SeqCst)));
        setter.join().unwrap();

        // A deadline ends the wait with false.
        let deadline = Some(Instant::now() + std::time::Duration::from_millis(5));
        assert!(!leader.wait_until(deadline, || false));
        drop(leader);

        unregister(&registration);
        // SAFETY: the eventfd is ours and out of the set.
        unsafe { libc::close(fd) };
    }
}
