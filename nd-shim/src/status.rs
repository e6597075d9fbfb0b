//! ND2 HRESULT / NTSTATUS codes and the tables that turn Linux failures into them.
//!
//! The codes and values are those of `docs/nd-semantics.md` ("Status codes"), which were read from
//! Microsoft's `ndstatus.mc` / `ndspi.h`: ND2 HRESULTs and NTSTATUS share values bit for bit, so one
//! type serves the ND2 face (HRESULT) and the NDK face (NTSTATUS = `int32_t`).
//!
//! Two sources of failure exist on Linux, and each has exactly one mapping function here:
//! - [`from_errno`]: an errno from a failed librdmacm / libibverbs call (an inline failure);
//! - [`from_cm_event`]: an rdma_cm event and its `status` field, per side of the connection
//!   (the failure table of `docs/nd-semantics.md`, "Failures seen on the active side").

#![forbid(unsafe_code)]

use std::fmt;

use crate::cm_event::{CmEventKind, Side};

/// An ND2 HRESULT / NDK NTSTATUS value.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NdStatus(pub i32);

/// Severity class in the top two bits of an NTSTATUS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Success,
    Informational,
    Warning,
    Error,
}

macro_rules! nd_codes {
    ($($name:ident = $value:expr;)*) => {
        impl NdStatus {
            $(pub const $name: NdStatus = NdStatus($value as u32 as i32);)*
        }

        /// Every named code, in the order of `docs/nd-semantics.md`'s table.
        pub const ALL_CODES: &[(NdStatus, &str)] = &[$((NdStatus::$name, stringify!($name)),)*];
    };
}

nd_codes! {
    ND_SUCCESS = 0x0000_0000;
    ND_TIMEOUT = 0x0000_0102;
    ND_PENDING = 0x0000_0103;
    ND_BUFFER_OVERFLOW = 0x8000_0005;
    ND_DEVICE_BUSY = 0x8000_0011;
    ND_NO_MORE_ENTRIES = 0x8000_001A;
    ND_UNSUCCESSFUL = 0xC000_0001;
    ND_ACCESS_VIOLATION = 0xC000_0005;
    ND_INVALID_HANDLE = 0xC000_0008;
    ND_INVALID_PARAMETER = 0xC000_000D;
    ND_INVALID_DEVICE_REQUEST = 0xC000_0010;
    ND_NO_MEMORY = 0xC000_0017;
    ND_INVALID_PARAMETER_MIX = 0xC000_0030;
    ND_DATA_OVERRUN = 0xC000_003C;
    ND_SHARING_VIOLATION = 0xC000_0043;
    ND_INSUFFICIENT_RESOURCES = 0xC000_009A;
    ND_DEVICE_NOT_READY = 0xC000_00A3;
    ND_IO_TIMEOUT = 0xC000_00B5;
    ND_NOT_SUPPORTED = 0xC000_00BB;
    ND_INTERNAL_ERROR = 0xC000_00E5;
    ND_INVALID_PARAMETER_1 = 0xC000_00EF;
    ND_INVALID_PARAMETER_2 = 0xC000_00F0;
    ND_INVALID_PARAMETER_3 = 0xC000_00F1;
    ND_INVALID_PARAMETER_4 = 0xC000_00F2;
    ND_INVALID_PARAMETER_5 = 0xC000_00F3;
    ND_INVALID_PARAMETER_6 = 0xC000_00F4;
    ND_INVALID_PARAMETER_7 = 0xC000_00F5;
    ND_INVALID_PARAMETER_8 = 0xC000_00F6;
    ND_INVALID_PARAMETER_9 = 0xC000_00F7;
    ND_INVALID_PARAMETER_10 = 0xC000_00F8;
    ND_CANCELED = 0xC000_0120;
    ND_REMOTE_ERROR = 0xC000_013D;
    ND_INVALID_ADDRESS = 0xC000_0141;
    ND_INVALID_DEVICE_STATE = 0xC000_0184;
    ND_INVALID_BUFFER_SIZE = 0xC000_0206;
    ND_TOO_MANY_ADDRESSES = 0xC000_0209;
    ND_ADDRESS_ALREADY_EXISTS = 0xC000_020A;
    ND_CONNECTION_REFUSED = 0xC000_0236;
    ND_CONNECTION_INVALID = 0xC000_023A;
    ND_CONNECTION_ACTIVE = 0xC000_023B;
    ND_NETWORK_UNREACHABLE = 0xC000_023C;
    ND_HOST_UNREACHABLE = 0xC000_023D;
    ND_CONNECTION_ABORTED = 0xC000_0241;
    ND_DEVICE_REMOVED = 0xC000_02B6;
    STATUS_BUFFER_TOO_SMALL = 0xC000_0023;
    STATUS_ADDRESS_ALREADY_ASSOCIATED = 0xC000_0238;
    STATUS_CONNECTION_DISCONNECTED = 0xC000_020C;
    STATUS_DATA_ERROR = 0xC000_003E;
    STATUS_BAD_NETWORK_NAME = 0xC000_00CC;
}

impl NdStatus {
    /// NTSTATUS spelling of ND_PENDING, for the NDK face.
    pub const STATUS_PENDING: NdStatus = NdStatus::ND_PENDING;

    /// The raw value, as an NTSTATUS / HRESULT.
    pub const fn raw(self) -> i32 {
        self.0
    }

    pub const fn severity(self) -> Severity {
        match (self.0 as u32) >> 30 {
            0 => Severity::Success,
            1 => Severity::Informational,
            2 => Severity::Warning,
            _ => Severity::Error,
        }
    }

    /// `NT_SUCCESS()` / `SUCCEEDED()`: success or informational class. ND_PENDING and ND_TIMEOUT
    /// are successes in this sense; ND_BUFFER_OVERFLOW (a warning) is not.
    pub const fn is_success(self) -> bool {
        self.0 >= 0
    }

    /// Error class (severity 3). Warnings such as ND_BUFFER_OVERFLOW are neither success nor error.
    pub const fn is_error(self) -> bool {
        matches!(self.severity(), Severity::Error)
    }

    /// The name of a code listed in `docs/nd-semantics.md`, or `None` for any other value.
    pub fn name(self) -> Option<&'static str> {
        ALL_CODES.iter().find(|(code, _)| *code == self).map(|(_, name)| *name)
    }
}

impl fmt::Display for NdStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "NTSTATUS {:#010X}", self.0 as u32),
        }
    }
}

impl fmt::Debug for NdStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}({:#010X})", self.0 as u32)
    }
}

/// The code for a failed librdmacm / libibverbs call, from its errno.
///
/// Rows marked "docs/nd-semantics.md" are rules of that document; the others are the nearest ND
/// meaning of the errno. Anything not listed is ND_UNSUCCESSFUL, the generic failure code.
pub fn from_errno(errno: i32) -> NdStatus {
    match errno {
        // docs/nd-semantics.md "Ports": address in use.
        libc::EADDRINUSE => NdStatus::ND_SHARING_VIOLATION,
        // docs/nd-semantics.md "Ports": address not on an RDMA adapter. rdma_bind_addr reports that as
        // ENODEV (cma_acquire_dev_by_src_ip finds no device) or EADDRNOTAVAIL.
        libc::EADDRNOTAVAIL | libc::ENODEV => NdStatus::ND_INVALID_ADDRESS,
        libc::EAFNOSUPPORT => NdStatus::ND_INVALID_ADDRESS,
        // docs/nd-semantics.md failure table: rdma_resolve_addr fails inline with ENETUNREACH when
        // there is no route.
        libc::ENETUNREACH => NdStatus::ND_NETWORK_UNREACHABLE,
        libc::EHOSTUNREACH => NdStatus::ND_HOST_UNREACHABLE,
        libc::ETIMEDOUT => NdStatus::ND_IO_TIMEOUT,
        libc::ECONNREFUSED => NdStatus::ND_CONNECTION_REFUSED,
        libc::ECONNABORTED | libc::ECONNRESET => NdStatus::ND_CONNECTION_ABORTED,
        libc::EISCONN => NdStatus::ND_CONNECTION_ACTIVE,
        libc::ENOTCONN => NdStatus::ND_CONNECTION_INVALID,
        libc::ENOMEM => NdStatus::ND_NO_MEMORY,
        libc::ENOBUFS | libc::EAGAIN | libc::EMFILE | libc::ENFILE | libc::ENOSPC => {
            NdStatus::ND_INSUFFICIENT_RESOURCES
        }
        libc::EINVAL => NdStatus::ND_INVALID_PARAMETER,
        libc::EFAULT => NdStatus::ND_ACCESS_VIOLATION,
        libc::EBADF => NdStatus::ND_INVALID_HANDLE,
        libc::EBUSY => NdStatus::ND_DEVICE_BUSY,
        libc::ECANCELED => NdStatus::ND_CANCELED,
        libc::EOPNOTSUPP | libc::ENOSYS => NdStatus::ND_NOT_SUPPORTED,
        // uverbs answers EIO once the device has been disassociated (hot removal).
        libc::EIO => NdStatus::ND_DEVICE_REMOVED,
        _ => NdStatus::ND_UNSUCCESSFUL,
    }
}

/// IB CM reject reasons that the mapping distinguishes (IBTA 12.6.7.2, `ib_cm_rej_reason`).
pub mod rej_reason {
    /// The REQ timed out at the peer's CM; also what `rdma_destroy_id` sends in REQ_SENT.
    pub const TIMEOUT: i32 = 4;
    /// No listener on the service id.
    pub const INVALID_SERVICE_ID: i32 = 8;
    /// `rdma_reject`, or `rdma_destroy_id` in REQ_RCVD / REP_RCVD.
    pub const CONSUMER_DEFINED: i32 = 28;
}

/// The code an rdma_cm event means for the request it completes, on the given side.
///
/// `status` is `rdma_cm_event.status`: a negative errno for ADDR_ERROR, ROUTE_ERROR,
/// UNREACHABLE and CONNECT_ERROR, the IB CM reject reason (positive) for REJECTED, 0 otherwise.
/// Events that move the handshake forward map to ND_SUCCESS.
///
/// The active-side rows are `docs/nd-semantics.md`'s failure table, row by row; the passive-side
/// REJECTED rows are its "The handshake" section (reason 28 -> refused, reason 4 -> aborted).
pub fn from_cm_event(side: Side, kind: CmEventKind, status: i32) -> NdStatus {
    use CmEventKind as K;
    match (side, kind) {
        (_, K::AddrResolved | K::RouteResolved | K::ConnectRequest | K::ConnectResponse)
        | (_, K::Established | K::Disconnected | K::TimewaitExit | K::AddrChange) => NdStatus::ND_SUCCESS,
        (Side::Active, K::Rejected) => match status {
            // Failure table: reason 8 (no listener) and reason 28 (consumer reject) are refusals.
            rej_reason::INVALID_SERVICE_ID | rej_reason::CONSUMER_DEFINED => NdStatus::ND_CONNECTION_REFUSED,
            // Any other reason is still the peer's CM saying no.
            _ => NdStatus::ND_CONNECTION_REFUSED,
        },
        (Side::Passive, K::Rejected) => match status {
            // The active side rejected or released after its Connect completed.
            rej_reason::CONSUMER_DEFINED => NdStatus::ND_CONNECTION_REFUSED,
            // The active side abandoned in REQ_SENT: "the connecting peer aborted".
            rej_reason::TIMEOUT => NdStatus::ND_CONNECTION_ABORTED,
            _ => NdStatus::ND_CONNECTION_ABORTED,
        },
        // Failure table: ADDR_ERROR is host or network unreachable. -ETIMEDOUT is the rig's
        // "address on the local subnet with no host behind it" (neighbour resolution timed out).
        (_, K::AddrError) => match status.wrapping_neg() {
            libc::ENETUNREACH => NdStatus::ND_NETWORK_UNREACHABLE,
            libc::ENODEV | libc::EADDRNOTAVAIL => NdStatus::ND_INVALID_ADDRESS,
            libc::ETIMEDOUT | libc::EHOSTUNREACH => NdStatus::ND_HOST_UNREACHABLE,
            _ => NdStatus::ND_HOST_UNREACHABLE,
        },
        // Failure table: ROUTE_ERROR is network unreachable whatever its status.
        (_, K::RouteError) => NdStatus::ND_NETWORK_UNREACHABLE,
        // Failure table: UNREACHABLE with -ETIMEDOUT (REQ or REP retries exhausted) is an I/O
        // timeout; the kernel (cma_ib_handler) sets no other status on this event.
        (_, K::Unreachable) => NdStatus::ND_IO_TIMEOUT,
        // The CM could not process the peer's REP/RTU: the handshake broke after it started.
        (_, K::ConnectError) => NdStatus::ND_CONNECTION_ABORTED,
        (_, K::DeviceRemoval) => NdStatus::ND_DEVICE_REMOVED,
    }
}

/// ND2_REQUEST_TYPE: which request a work completion ends. The ND2 face knows it from its
/// records; the Rust API (whose failed completions carry no valid opcode) does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Receive,
    Send,
    Bind,
    Invalidate,
    Read,
    Write,
    /// Not known: the nearest code that fits every request type.
    Unknown,
}

impl RequestKind {
    /// ND2_REQUEST_TYPE's values (Nd2RequestTypeReceive = 0 .. Nd2RequestTypeWrite = 5).
    pub const fn from_nd2(request_type: u32) -> RequestKind {
        match request_type {
            0 => RequestKind::Receive,
            1 => RequestKind::Send,
            2 => RequestKind::Bind,
            3 => RequestKind::Invalidate,
            4 => RequestKind::Read,
            5 => RequestKind::Write,
            _ => RequestKind::Unknown,
        }
    }
}

/// The code of a work completion, from `ibv_wc.status` (`enum ibv_wc_status` of
/// `<infiniband/verbs.h>`), for a request whose type is not known (the Rust API).
pub fn from_wc_status(status: u32) -> NdStatus {
    from_wc_status_for(status, RequestKind::Unknown)
}

/// The code of a work completion of a request of type `kind`.
///
/// Microsoft's IND2CompletionQueue.md ("ND2_RESULT", Remarks) lists which codes each request type
/// can complete with; every row here gives a code its column allows:
/// - Send, Read, Write: SUCCESS, DATA_OVERRUN, ACCESS_VIOLATION, CANCELED, INVALID_DEVICE_REQUEST,
///   INTERNAL_ERROR, IO_TIMEOUT, REMOTE_ERROR;
/// - Receive: as Send with BUFFER_OVERFLOW in place of DATA_OVERRUN;
/// - Bind, Invalidate: SUCCESS, CANCELED, INVALID_DEVICE_REQUEST, INTERNAL_ERROR.
///
/// One exception, which Microsoft's ndmval test fixes: a Send that the receiver could not take
/// (its receive buffer too small: the responder's NAK, IBV_WC_REM_INV_REQ_ERR or
/// IBV_WC_REM_OP_ERR) completes with STATUS_DATA_ERROR, as Windows' IB providers report it
/// (ndmval fails on ND_REMOTE_ERROR).
/// A flushed request (the QP went to ERR: Disconnect, release) is ND_CANCELED
/// (`docs/nd-semantics.md`, "Disconnect").
pub fn from_wc_status_for(status: u32, kind: RequestKind) -> NdStatus {
    use RequestKind as K;
    // Bind and Invalidate: malformed or refused is INVALID_DEVICE_REQUEST, the only failure
    // their column has besides CANCELED and INTERNAL_ERROR.
    if matches!(kind, K::Bind | K::Invalidate) {
        return match status {
            0 => NdStatus::ND_SUCCESS,
            5 => NdStatus::ND_CANCELED,
            // LOC_LEN, LOC_QP_OP, LOC_PROT, MW_BIND, LOC_ACCESS
            1 | 2 | 4 | 6 | 8 => NdStatus::ND_INVALID_DEVICE_REQUEST,
            _ => NdStatus::ND_INTERNAL_ERROR,
        };
    }
    match status {
        0 => NdStatus::ND_SUCCESS,
        // IBV_WC_LOC_LEN_ERR: a Receive's buffers were too small for the incoming Send; a
        // Send/Read/Write's SGEs referenced more than the adapter can send.
        1 => match kind {
            K::Receive | K::Unknown => NdStatus::ND_BUFFER_OVERFLOW,
            _ => NdStatus::ND_DATA_OVERRUN,
        },
        // IBV_WC_LOC_QP_OP_ERR on a Receive: the kernel's rxe (6.1) completes a receive whose
        // buffers cannot take the incoming Send so (copy_data's "length > resid" is EINVAL, a
        // "malformed WQE", not ENOSPC): ndmval's case, ND_BUFFER_OVERFLOW as documented.
        2 if kind == K::Receive => NdStatus::ND_BUFFER_OVERFLOW,
        // IBV_WC_LOC_QP_OP_ERR: the WQE could not be processed (malformed).
        2 => NdStatus::ND_INVALID_DEVICE_REQUEST,
        // IBV_WC_LOC_PROT_ERR (an SGE outside its region), IBV_WC_MW_BIND_ERR,
        // IBV_WC_LOC_ACCESS_ERR (a Read's sink refused), IBV_WC_REM_ACCESS_ERR (the remote token)
        4 | 6 | 8 | 10 => NdStatus::ND_ACCESS_VIOLATION,
        // IBV_WC_WR_FLUSH_ERR
        5 => NdStatus::ND_CANCELED,
        // IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_OP_ERR on a Send: the receiver could not place
        // the data (its buffer too small: the responder's NAK; rxe 6.1 answers REM_OP_ERR).
        9 | 11 if kind == K::Send => NdStatus::STATUS_DATA_ERROR,
        // IBV_WC_BAD_RESP_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_OP_ERR,
        // IBV_WC_REM_INV_RD_REQ_ERR, IBV_WC_REM_ABORT_ERR: the remote QP failed the request.
        7 | 9 | 11 | 15 | 16 => NdStatus::ND_REMOTE_ERROR,
        // IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_RESP_TIMEOUT_ERR
        12 | 13 | 19 => NdStatus::ND_IO_TIMEOUT,
        // LOC_EEC_OP, LOC_RDD_VIOL, INV_EECN, INV_EEC_STATE, FATAL, GENERAL, TM_*: the QP failed.
        _ => NdStatus::ND_INTERNAL_ERROR,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn work_completion_statuses() {
        use NdStatus as S;
        use RequestKind as K;
        // Every ibv_wc_status (0..=23, and one past) for every request type: one row per
        // status, one column per type, in ND2_REQUEST_TYPE's order, then the type-less column.
        let columns = [
            K::Receive,
            K::Send,
            K::Bind,
            K::Invalidate,
            K::Read,
            K::Write,
            K::Unknown,
        ];
        let (ok, bo, dov, av, can, idr, ie, tmo, rem, de) = (
            S::ND_SUCCESS,
            S::ND_BUFFER_OVERFLOW,
            S::ND_DATA_OVERRUN,
            S::ND_ACCESS_VIOLATION,
            S::ND_CANCELED,
            S::ND_INVALID_DEVICE_REQUEST,
            S::ND_INTERNAL_ERROR,
            S::ND_IO_TIMEOUT,
            S::ND_REMOTE_ERROR,
            S::STATUS_DATA_ERROR,
        );
        #[rustfmt::skip]
        let rows: [[NdStatus; 7]; 25] = [
            //    Receive Send Bind Inval Read Write Unknown
            /*  0 SUCCESS            */ [ok,  ok,  ok,  ok,  ok,  ok,  ok],
            /*  1 LOC_LEN_ERR        */ [bo,  dov, idr, idr, dov, dov, bo],
            /*  2 LOC_QP_OP_ERR      */ [bo,  idr, idr, idr, idr, idr, idr],
            /*  3 LOC_EEC_OP_ERR     */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /*  4 LOC_PROT_ERR       */ [av,  av,  idr, idr, av,  av,  av],
            /*  5 WR_FLUSH_ERR       */ [can, can, can, can, can, can, can],
            /*  6 MW_BIND_ERR        */ [av,  av,  idr, idr, av,  av,  av],
            /*  7 BAD_RESP_ERR       */ [rem, rem, ie,  ie,  rem, rem, rem],
            /*  8 LOC_ACCESS_ERR     */ [av,  av,  idr, idr, av,  av,  av],
            /*  9 REM_INV_REQ_ERR    */ [rem, de,  ie,  ie,  rem, rem, rem],
            /* 10 REM_ACCESS_ERR     */ [av,  av,  ie,  ie,  av,  av,  av],
            /* 11 REM_OP_ERR         */ [rem, de,  ie,  ie,  rem, rem, rem],
            /* 12 RETRY_EXC_ERR      */ [tmo, tmo, ie,  ie,  tmo, tmo, tmo],
            /* 13 RNR_RETRY_EXC_ERR  */ [tmo, tmo, ie,  ie,  tmo, tmo, tmo],
            /* 14 LOC_RDD_VIOL_ERR   */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 15 REM_INV_RD_REQ_ERR */ [rem, rem, ie,  ie,  rem, rem, rem],
            /* 16 REM_ABORT_ERR      */ [rem, rem, ie,  ie,  rem, rem, rem],
            /* 17 INV_EECN_ERR       */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 18 INV_EEC_STATE_ERR  */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 19 RESP_TIMEOUT_ERR   */ [tmo, tmo, ie,  ie,  tmo, tmo, tmo],
            /* 20 FATAL_ERR          */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 21 GENERAL_ERR        */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 22 TM_ERR             */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 23 TM_RNDV_INCOMPLETE */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
            /* 24 (not a status)     */ [ie,  ie,  ie,  ie,  ie,  ie,  ie],
        ];
        for (status, row) in rows.iter().enumerate() {
            for (kind, want) in columns.iter().zip(row) {
                assert_eq!(
                    from_wc_status_for(status as u32, *kind),
                    *want,
                    "wc status {status}, {kind:?}"
                );
            }
            assert_eq!(from_wc_status(status as u32), row[6], "wc status {status}");
        }
        assert_eq!(from_wc_status(u32::MAX), ie);
        // Each column stays within IND2CompletionQueue.md's table for its request type.
        let allowed = |kind: K| -> Vec<NdStatus> {
            match kind {
                K::Receive => vec![ok, bo, av, can, idr, ie, tmo, rem],
                K::Send => vec![ok, dov, av, can, idr, ie, tmo, rem, de],
                K::Read | K::Write => vec![ok, dov, av, can, idr, ie, tmo, rem],
                K::Bind | K::Invalidate => vec![ok, can, idr, ie],
                K::Unknown => vec![ok, bo, dov, av, can, idr, ie, tmo, rem],
            }
        };
        for status in 0..64 {
            for kind in columns {
                assert!(
                    allowed(kind).contains(&from_wc_status_for(status, kind)),
                    "{status} {kind:?}"
                );
            }
        }
        for t in 0..6 {
            assert_eq!(RequestKind::from_nd2(t), columns[t as usize]);
        }
        assert_eq!(RequestKind::from_nd2(6), K::Unknown);
    }
    use super::*;

    #[test]
    fn values_match_the_table_of_nd_semantics() {
        let expected: &[(&str, u32)] = &[
            ("ND_SUCCESS", 0x0000_0000),
            ("ND_TIMEOUT", 0x0000_0102),
            ("ND_PENDING", 0x0000_0103),
            ("ND_BUFFER_OVERFLOW", 0x8000_0005),
            ("ND_DEVICE_BUSY", 0x8000_0011),
            ("ND_NO_MORE_ENTRIES", 0x8000_001A),
            ("ND_UNSUCCESSFUL", 0xC000_0001),
            ("ND_ACCESS_VIOLATION", 0xC000_0005),
            ("ND_INVALID_HANDLE", 0xC000_0008),
            ("ND_INVALID_PARAMETER", 0xC000_000D),
            ("ND_INVALID_DEVICE_REQUEST", 0xC000_0010),
            ("ND_NO_MEMORY", 0xC000_0017),
            ("ND_INVALID_PARAMETER_MIX", 0xC000_0030),
            ("ND_DATA_OVERRUN", 0xC000_003C),
            ("ND_SHARING_VIOLATION", 0xC000_0043),
            ("ND_INSUFFICIENT_RESOURCES", 0xC000_009A),
            ("ND_DEVICE_NOT_READY", 0xC000_00A3),
            ("ND_IO_TIMEOUT", 0xC000_00B5),
            ("ND_NOT_SUPPORTED", 0xC000_00BB),
            ("ND_INTERNAL_ERROR", 0xC000_00E5),
            ("ND_INVALID_PARAMETER_1", 0xC000_00EF),
            ("ND_INVALID_PARAMETER_2", 0xC000_00F0),
            ("ND_INVALID_PARAMETER_3", 0xC000_00F1),
            ("ND_INVALID_PARAMETER_4", 0xC000_00F2),
            ("ND_INVALID_PARAMETER_5", 0xC000_00F3),
            ("ND_INVALID_PARAMETER_6", 0xC000_00F4),
            ("ND_INVALID_PARAMETER_7", 0xC000_00F5),
            ("ND_INVALID_PARAMETER_8", 0xC000_00F6),
            ("ND_INVALID_PARAMETER_9", 0xC000_00F7),
            ("ND_INVALID_PARAMETER_10", 0xC000_00F8),
            ("ND_CANCELED", 0xC000_0120),
            ("ND_REMOTE_ERROR", 0xC000_013D),
            ("ND_INVALID_ADDRESS", 0xC000_0141),
            ("ND_INVALID_DEVICE_STATE", 0xC000_0184),
            ("ND_INVALID_BUFFER_SIZE", 0xC000_0206),
            ("ND_TOO_MANY_ADDRESSES", 0xC000_0209),
            ("ND_ADDRESS_ALREADY_EXISTS", 0xC000_020A),
            ("ND_CONNECTION_REFUSED", 0xC000_0236),
            ("ND_CONNECTION_INVALID", 0xC000_023A),
            ("ND_CONNECTION_ACTIVE", 0xC000_023B),
            ("ND_NETWORK_UNREACHABLE", 0xC000_023C),
            ("ND_HOST_UNREACHABLE", 0xC000_023D),
            ("ND_CONNECTION_ABORTED", 0xC000_0241),
            ("ND_DEVICE_REMOVED", 0xC000_02B6),
            ("STATUS_BUFFER_TOO_SMALL", 0xC000_0023),
            ("STATUS_ADDRESS_ALREADY_ASSOCIATED", 0xC000_0238),
            ("STATUS_CONNECTION_DISCONNECTED", 0xC000_020C),
            ("STATUS_DATA_ERROR", 0xC000_003E),
            ("STATUS_BAD_NETWORK_NAME", 0xC000_00CC),
        ];
        assert_eq!(ALL_CODES.len(), expected.len());
        for ((code, name), (want_name, want_value)) in ALL_CODES.iter().zip(expected) {
            assert_eq!(name, want_name);
            assert_eq!(code.raw() as u32, *want_value, "{name}");
        }
    }

    #[test]
    fn every_value_has_one_name() {
        for (i, (a, _)) in ALL_CODES.iter().enumerate() {
            for (b, _) in &ALL_CODES[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // ND_CANCELED is STATUS_CANCELLED, the NDK spelling of the same value.
        assert_eq!(NdStatus::ND_CANCELED.raw() as u32, 0xC000_0120);
        assert_eq!(NdStatus::STATUS_PENDING, NdStatus::ND_PENDING);
    }

    #[test]
    fn severity_classes() {
        for (code, name) in ALL_CODES {
            let raw = code.raw() as u32;
            match raw >> 30 {
                0 => {
                    assert!(code.is_success() && !code.is_error(), "{name}");
                    assert_eq!(code.severity(), Severity::Success);
                }
                2 => {
                    assert!(!code.is_success() && !code.is_error(), "{name}");
                    assert_eq!(code.severity(), Severity::Warning);
                }
                3 => {
                    assert!(!code.is_success() && code.is_error(), "{name}");
                    assert_eq!(code.severity(), Severity::Error);
                }
                _ => panic!("no informational code is listed: {name}"),
            }
        }
        let informational = NdStatus(0x4000_0000);
        assert_eq!(informational.severity(), Severity::Informational);
        assert!(informational.is_success() && !informational.is_error());
        assert!(NdStatus::ND_PENDING.is_success());
        assert!(NdStatus::ND_TIMEOUT.is_success());
        assert!(!NdStatus::ND_BUFFER_OVERFLOW.is_success());
    }

    #[test]
    fn display_and_debug_name_the_code() {
        assert_eq!(NdStatus::ND_CONNECTION_REFUSED.to_string(), "ND_CONNECTION_REFUSED");
        assert_eq!(
            format!("{:?}", NdStatus::ND_CONNECTION_REFUSED),
            "ND_CONNECTION_REFUSED(0xC0000236)"
        );
        assert_eq!(NdStatus(0x1234).to_string(), "NTSTATUS 0x00001234");
        assert_eq!(NdStatus(0x1234).name(), None);
        for (code, name) in ALL_CODES {
            assert_eq!(code.to_string(), *name);
        }
    }

    #[test]
    fn errno_table() {
        use libc::*;
        let rows: &[(i32, NdStatus)] = &[
            (EADDRINUSE, NdStatus::ND_SHARING_VIOLATION),
            (EADDRNOTAVAIL, NdStatus::ND_INVALID_ADDRESS),
            (ENODEV, NdStatus::ND_INVALID_ADDRESS),
            (EAFNOSUPPORT, NdStatus::ND_INVALID_ADDRESS),
            (ENETUNREACH, NdStatus::ND_NETWORK_UNREACHABLE),
            (EHOSTUNREACH, NdStatus::ND_HOST_UNREACHABLE),
            (ETIMEDOUT, NdStatus::ND_IO_TIMEOUT),
            (ECONNREFUSED, NdStatus::ND_CONNECTION_REFUSED),
            (ECONNABORTED, NdStatus::ND_CONNECTION_ABORTED),
            (ECONNRESET, NdStatus::ND_CONNECTION_ABORTED),
            (EISCONN, NdStatus::ND_CONNECTION_ACTIVE),
            (ENOTCONN, NdStatus::ND_CONNECTION_INVALID),
            (ENOMEM, NdStatus::ND_NO_MEMORY),
            (ENOBUFS, NdStatus::ND_INSUFFICIENT_RESOURCES),
            (EAGAIN, NdStatus::ND_INSUFFICIENT_RESOURCES),
            (EMFILE, NdStatus::ND_INSUFFICIENT_RESOURCES),
            (ENFILE, NdStatus::ND_INSUFFICIENT_RESOURCES),
            (ENOSPC, NdStatus::ND_INSUFFICIENT_RESOURCES),
            (EINVAL, NdStatus::ND_INVALID_PARAMETER),
            (EFAULT, NdStatus::ND_ACCESS_VIOLATION),
            (EBADF, NdStatus::ND_INVALID_HANDLE),
            (EBUSY, NdStatus::ND_DEVICE_BUSY),
            (ECANCELED, NdStatus::ND_CANCELED),
            (EOPNOTSUPP, NdStatus::ND_NOT_SUPPORTED),
            (ENOSYS, NdStatus::ND_NOT_SUPPORTED),
            (EIO, NdStatus::ND_DEVICE_REMOVED),
        ];
        for &(errno, want) in rows {
            assert_eq!(from_errno(errno), want, "errno {errno}");
        }
        // The documented default: every errno that is not a row is ND_UNSUCCESSFUL.
        for errno in 0..200 {
            if !rows.iter().any(|&(e, _)| e == errno) {
                assert_eq!(from_errno(errno), NdStatus::ND_UNSUCCESSFUL, "errno {errno}");
            }
        }
    }

    #[test]
    fn active_side_failure_table() {
        use CmEventKind as K;
        let a = |kind, status| from_cm_event(Side::Active, kind, status);
        // Rows of docs/nd-semantics.md's failure table, in its order.
        assert_eq!(a(K::Rejected, 8), NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(a(K::Rejected, 28), NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(a(K::AddrError, -libc::ETIMEDOUT), NdStatus::ND_HOST_UNREACHABLE);
        assert_eq!(a(K::AddrError, -libc::EHOSTUNREACH), NdStatus::ND_HOST_UNREACHABLE);
        assert_eq!(a(K::AddrError, -libc::ENETUNREACH), NdStatus::ND_NETWORK_UNREACHABLE);
        assert_eq!(a(K::RouteError, -libc::ETIMEDOUT), NdStatus::ND_NETWORK_UNREACHABLE);
        assert_eq!(a(K::RouteError, -libc::ENETUNREACH), NdStatus::ND_NETWORK_UNREACHABLE);
        assert_eq!(a(K::Unreachable, -libc::ETIMEDOUT), NdStatus::ND_IO_TIMEOUT);
        // Rows the table leaves open, and the defaults.
        assert_eq!(a(K::Rejected, 1), NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(a(K::Rejected, rej_reason::TIMEOUT), NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(a(K::AddrError, -libc::ENODEV), NdStatus::ND_INVALID_ADDRESS);
        assert_eq!(a(K::AddrError, -libc::EADDRNOTAVAIL), NdStatus::ND_INVALID_ADDRESS);
        assert_eq!(a(K::AddrError, -libc::ENOMEM), NdStatus::ND_HOST_UNREACHABLE);
        assert_eq!(a(K::AddrError, i32::MIN), NdStatus::ND_HOST_UNREACHABLE);
        assert_eq!(a(K::ConnectError, -libc::EINVAL), NdStatus::ND_CONNECTION_ABORTED);
        assert_eq!(a(K::DeviceRemoval, 0), NdStatus::ND_DEVICE_REMOVED);
    }

    #[test]
    fn passive_side_rows() {
        use CmEventKind as K;
        let p = |kind, status| from_cm_event(Side::Passive, kind, status);
        assert_eq!(p(K::Rejected, 28), NdStatus::ND_CONNECTION_REFUSED);
        assert_eq!(p(K::Rejected, 4), NdStatus::ND_CONNECTION_ABORTED);
        assert_eq!(p(K::Rejected, 6), NdStatus::ND_CONNECTION_ABORTED);
        assert_eq!(p(K::Unreachable, -libc::ETIMEDOUT), NdStatus::ND_IO_TIMEOUT);
        assert_eq!(p(K::ConnectError, -libc::ECONNRESET), NdStatus::ND_CONNECTION_ABORTED);
        assert_eq!(p(K::DeviceRemoval, 0), NdStatus::ND_DEVICE_REMOVED);
    }

    #[test]
    fn progress_events_are_success_on_both_sides() {
        use CmEventKind as K;
        for side in [Side::Active, Side::Passive] {
            for kind in [
                K::AddrResolved,
                K::RouteResolved,
                K::ConnectRequest,
                K::ConnectResponse,
                K::Established,
                K::Disconnected,
                K::TimewaitExit,
                K::AddrChange,
            ] {
                assert_eq!(from_cm_event(side, kind, 0), NdStatus::ND_SUCCESS, "{kind:?}");
            }
        }
    }
}
