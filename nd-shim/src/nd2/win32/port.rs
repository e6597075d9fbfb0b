//! The I/O completion port object: a FIFO of packets, waited on (or abandoned when its handle is
//! closed).

#![forbid(unsafe_code)]

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::common::{timeout, wait_until};
use crate::nd2::pump;
use crate::status::NdStatus;

/// One completion packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packet {
    pub(crate) bytes: u32,
    pub(crate) key: usize,
    /// The OVERLAPPED's address (0 for a packet posted without one).
    pub(crate) overlapped: usize,
    /// The operation's status; a failure makes GetQueuedCompletionStatus return FALSE.
    pub(crate) status: NdStatus,
}

/// An I/O completion port: a FIFO of packets.
#[derive(Default)]
pub(crate) struct Port {
    packets: Mutex<VecDeque<Packet>>,
    cv: Condvar,
    /// Its handle was closed: its waiters return ERROR_ABANDONED_WAIT_0.
    closed: AtomicBool,
}

/// What a wait on a port got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Got {
    Packet(Packet),
    Timeout,
    /// The port's handle was closed while the thread waited.
    Abandoned,
}

impl Port {
    pub(crate) fn post(&self, packet: Packet) {
        self.post_unkicked(packet);
        pump::kick();
    }

    /// Posts without waking the leader, as [`Event::set_unkicked`](super::event::Event::set_unkicked).
    pub(crate) fn post_unkicked(&self, packet: Packet) {
        self.packets.lock().push_back(packet);
        self.cv.notify_one();
    }

    /// A packet, waiting up to `ms` (tests).
    #[cfg(test)]
    pub(crate) fn get(&self, ms: u32) -> Option<Packet> {
        match self.wait(ms) {
            Got::Packet(packet) => Some(packet),
            _ => None,
        }
    }

    pub(crate) fn wait(&self, ms: u32) -> Got {
        let deadline = timeout(ms).map(|t| Instant::now() + t);
        let closed = || self.closed.load(Ordering::SeqCst);
        if ms != 0 {
            // The leader reads the completion channels itself (pump.rs): one wake-up per event.
            // Its first look at the queue comes before any wait.
            if let Some(leader) = pump::lead() {
                let mut got = None;
                let ready = leader.wait_until(deadline, || {
                    got = self.packets.lock().pop_front();
                    got.is_some() || closed()
                });
                return match got {
                    _ if ready && closed() => self.abandon(got),
                    Some(packet) => Got::Packet(packet),
                    None => Got::Timeout,
                };
            }
        }
        let _follower = (ms != 0).then(pump::follow);
        let mut packets = self.packets.lock();
        wait_until(&self.cv, &mut packets, deadline, |p| !p.is_empty() || closed());
        if closed() {
            drop(packets);
            return self.abandon(None);
        }
        let got = packets.pop_front();
        drop(packets);
        if got.is_none() && ms == 0 {
            pump::polled();
        }
        got.map_or(Got::Timeout, Got::Packet)
    }

    /// A waiter of a closed port leaves with nothing; a packet it took goes back.
    fn abandon(&self, taken: Option<Packet>) -> Got {
        if let Some(packet) = taken {
            self.packets.lock().push_front(packet);
        }
        Got::Abandoned
    }

    /// Up to `max` more packets that are already queued, no wait.
    pub(super) fn take_more(&self, max: usize) -> Vec<Packet> {
        let mut packets = self.packets.lock();
        let n = max.min(packets.len());
        packets.drain(..n).collect()
    }

    /// CloseHandle of the port: every thread waiting on it returns (ERROR_ABANDONED_WAIT_0).
    pub(super) fn close(&self) {
        let _packets = self.packets.lock();
        self.closed.store(true, Ordering::SeqCst);
        self.cv.notify_all();
        drop(_packets);
        pump::kick();
    }
}
