//! The rdma_cm events the shim reacts to, as plain values.
//!
//! Discriminants mirror `enum rdma_cm_event_type` of librdmacm's `<rdma/rdma_cma.h>` (and the
//! kernel's `enum rdma_cm_event_type`), so the event engine converts with [`CmEventKind::from_raw`].
//! The meaning of each event for ND follows `docs/nd-semantics.md` ("The handshake", "Disconnect").

#![forbid(unsafe_code)]

/// Which end of the handshake a connector is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Called Connect / ConnectWithSharedEndpoint.
    Active,
    /// Handed a request by a listener.
    Passive,
}

/// `RDMA_CM_EVENT_*`, without the multicast events (the shim joins no multicast groups).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmEventKind {
    AddrResolved = 0,
    AddrError = 1,
    RouteResolved = 2,
    RouteError = 3,
    ConnectRequest = 4,
    /// REP received on an id without an rdma_cm-created QP: ND's Connect completes here.
    ConnectResponse = 5,
    ConnectError = 6,
    Unreachable = 7,
    Rejected = 8,
    /// On the passive side: RTU received. ND's Accept completes here.
    Established = 9,
    Disconnected = 10,
    DeviceRemoval = 11,
    AddrChange = 14,
    TimewaitExit = 15,
}

impl CmEventKind {
    pub const ALL: [CmEventKind; 14] = [
        CmEventKind::AddrResolved,
        CmEventKind::AddrError,
        CmEventKind::RouteResolved,
        CmEventKind::RouteError,
        CmEventKind::ConnectRequest,
        CmEventKind::ConnectResponse,
        CmEventKind::ConnectError,
        CmEventKind::Unreachable,
        CmEventKind::Rejected,
        CmEventKind::Established,
        CmEventKind::Disconnected,
        CmEventKind::DeviceRemoval,
        CmEventKind::AddrChange,
        CmEventKind::TimewaitExit,
    ];

    /// The kind for an `rdma_cm_event.event` value; `None` for multicast events and values this
    /// librdmacm does not define.
    pub fn from_raw(raw: u32) -> Option<CmEventKind> {
        CmEventKind::ALL.into_iter().find(|kind| *kind as u32 == raw)
    }

    /// True for the events that end a connection attempt.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            CmEventKind::AddrError
                | CmEventKind::RouteError
                | CmEventKind::ConnectError
                | CmEventKind::Unreachable
                | CmEventKind::Rejected
                | CmEventKind::DeviceRemoval
        )
    }
}

/// One rdma_cm event as the state machines see it: the kind and `rdma_cm_event.status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmEvent {
    pub kind: CmEventKind,
    pub status: i32,
}

impl CmEvent {
    pub const fn new(kind: CmEventKind, status: i32) -> Self {
        CmEvent { kind, status }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_mirror_rdma_cma_h() {
        let rows: &[(u32, Option<CmEventKind>)] = &[
            (0, Some(CmEventKind::AddrResolved)),
            (1, Some(CmEventKind::AddrError)),
            (2, Some(CmEventKind::RouteResolved)),
            (3, Some(CmEventKind::RouteError)),
            (4, Some(CmEventKind::ConnectRequest)),
            (5, Some(CmEventKind::ConnectResponse)),
            (6, Some(CmEventKind::ConnectError)),
            (7, Some(CmEventKind::Unreachable)),
            (8, Some(CmEventKind::Rejected)),
            (9, Some(CmEventKind::Established)),
            (10, Some(CmEventKind::Disconnected)),
            (11, Some(CmEventKind::DeviceRemoval)),
            (12, None), // MULTICAST_JOIN
            (13, None), // MULTICAST_ERROR
            (14, Some(CmEventKind::AddrChange)),
            (15, Some(CmEventKind::TimewaitExit)),
            (16, None),
            (u32::MAX, None),
        ];
        for &(raw, want) in rows {
            assert_eq!(CmEventKind::from_raw(raw), want, "raw {raw}");
        }
    }

    #[test]
    fn failure_kinds() {
        let failures: Vec<_> = CmEventKind::ALL.into_iter().filter(|k| k.is_failure()).collect();
        assert_eq!(
            failures,
            [
                CmEventKind::AddrError,
                CmEventKind::RouteError,
                CmEventKind::ConnectError,
                CmEventKind::Unreachable,
                CmEventKind::Rejected,
                CmEventKind::DeviceRemoval,
            ]
        );
    }
}
