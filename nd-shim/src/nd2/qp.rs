//! IND2QueuePair: an RC QP of the Rust API ([`QueuePair`], so the connector can connect it)
//! whose requests are posted here with ND2's whole operation set: Send, Receive, Read, Write,
//! Bind and Invalidate of memory windows, Flush.
//! The caller's SGE arrays go to verbs as they are ([`super::sge`]).

use std::ffi::c_void;
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::adapter::AdapterBody;
use super::cq::CqBody;
use super::mr::MrBody;
use super::mw::{BoundWindows, MwBody};
use super::requests::{self, QpRequests};
use super::sge::{post_result, sge_list, Nd2Sge};
use super::srq::SrqBody;
use super::{arg, code, hr_boundary, iids, this, Class, Guid, HResult, UnknownVtbl, ND_INVALID_PARAMETER, ND_SUCCESS};
use crate::QueuePair;

const ND_OP_FLAG_SILENT_SUCCESS: u32 = 0x1;
const ND_OP_FLAG_READ_FENCE: u32 = 0x2;
const ND_OP_FLAG_SEND_AND_SOLICIT_EVENT: u32 = 0x4;
const ND_OP_FLAG_ALLOW_READ: u32 = 0x8;
const ND_OP_FLAG_ALLOW_WRITE: u32 = 0x10;
const ND_OP_FLAG_INLINE: u32 = 0x20;
const KNOWN_OP_FLAGS: u32 = ND_OP_FLAG_SILENT_SUCCESS
    | ND_OP_FLAG_READ_FENCE
    | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT
    | ND_OP_FLAG_ALLOW_READ
    | ND_OP_FLAG_ALLOW_WRITE
    | ND_OP_FLAG_INLINE;

/// The verbs send flags of valid ND2 operation flags (no check).
const fn translate_send_flags(flags: u32) -> u32 {
    use ffi::ibv_send_flags as F;
    let mut out = 0;
    if flags & ND_OP_FLAG_SILENT_SUCCESS == 0 {
        out |= F::IBV_SEND_SIGNALED.0;
    }
    if flags & ND_OP_FLAG_READ_FENCE != 0 {
        out |= F::IBV_SEND_FENCE.0;
    }
    if flags & ND_OP_FLAG_SEND_AND_SOLICIT_EVENT != 0 {
        out |= F::IBV_SEND_SOLICITED.0;
    }
    out
}

/// Every combination of the known operation flags (they are the low six bits), translated once:
/// a Send looks its flags up instead of testing them one by one.
const SEND_FLAGS: [u32; 64] = {
    let mut table = [0; 64];
    let mut flags = 0;
    while flags < 64 {
        table[flags] = translate_send_flags(flags as u32);
        flags += 1;
    }
    table
};
const _: () = assert!(KNOWN_OP_FLAGS == 63);

/// Verbs send flags for ND2 operation flags; an unknown flag is ND_INVALID_PARAMETER.
/// ND_OP_FLAG_INLINE is accepted and ignored (the adapter reports MaxInlineDataSize 0).
#[inline]
pub(crate) fn send_flags(flags: u32) -> Result<u32, HResult> {
    match SEND_FLAGS.get(flags as usize) {
        Some(&out) => Ok(out),
        None => Err(ND_INVALID_PARAMETER),
    }
}

pub(crate) struct QpBody {
    adapter: Arc<AdapterBody>,
    pub(super) qp: QueuePair,
    /// What was posted and has not completed (ND2_RESULT's contexts and type).
    requests: Arc<QpRequests>,
    _receive_cq: Arc<CqBody>,
    _initiator_cq: Arc<CqBody>,
    _srq: Option<Arc<SrqBody>>,
    /// The windows bound through this QP, which its release takes ([`MwBody::release_from`]).
    windows: BoundWindows<MwBody>,
}

impl QpBody {
    pub(super) fn new(
        adapter: Arc<AdapterBody>,
        receive_cq: Arc<CqBody>,
        initiator_cq: Arc<CqBody>,
        srq: Option<Arc<SrqBody>>,
        context: usize,
        cap: ffi::ibv_qp_cap,
    ) -> Result<QpBody, HResult> {
        let raw_srq = srq.as_ref().map(|s| {
            let keep: Arc<dyn Send + Sync> = s.srq.clone();
            (s.srq.0, keep)
        });
        let qp =
            QueuePair::with_caps(&adapter.adapter, &receive_cq.cq, &initiator_cq.cq, raw_srq, cap).map_err(code)?;
        let srq_requests = srq.as_ref().map(|s| Arc::clone(&s.requests));
        let requests = adapter.requests.open_qp(qp.qp_num(), context, srq_requests);
        Ok(QpBody {
            adapter,
            qp,
            requests,
            _receive_cq: receive_cq,
            _initiator_cq: initiator_cq,
            _srq: srq,
            windows: BoundWindows::default(),
        })
    }

    fn raw(&self) -> *mut ffi::ibv_qp {
        self.qp.inner.qp.0
    }

    /// Posts a send work request under a wr_id of its record ([`super::requests`]).
    fn post(&self, mut wr: ffi::ibv_send_wr) -> Result<HResult, HResult> {
        let silent = wr.send_flags & ffi::ibv_send_flags::IBV_SEND_SIGNALED.0 == 0;
        self.requests
            .post_send(wr.wr_id, requests::of_send(wr.opcode), silent, |wr_id| {
                wr.wr_id = wr_id;
                let mut bad = std::ptr::null_mut();
                // SAFETY: the QP is live; wr and what it points to (the caller's SGEs, read
                // during the call) are valid for the call.
                post_result(unsafe { ffi::ibv_post_send(self.raw(), &mut wr, &mut bad) }).map(|_| ())
            })
            .map(|()| ND_SUCCESS)
    }

    /// A send work request with the common fields.
    fn request(
        context: *mut c_void,
        sges: &mut [ffi::ibv_sge],
        opcode: ffi::ibv_wr_opcode::Type,
        flags: u32,
    ) -> Result<ffi::ibv_send_wr, HResult> {
        // SAFETY: plain old data; zero is a valid start.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = context as u64;
        wr.sg_list = sges.as_mut_ptr();
        wr.num_sge = sges.len() as i32;
        wr.opcode = opcode;
        wr.send_flags = send_flags(flags)?;
        Ok(wr)
    }
}

impl Drop for QpBody {
    fn drop(&mut self) {
        // Before the verbs QP goes: rxe's destroy would wait for the windows bound through it.
        let qp_num = self.qp.qp_num();
        for window in self.windows.take() {
            window.release_from(qp_num);
        }
        self.adapter.requests.close_qp(self.qp.qp_num(), &self.requests);
    }
}

type PostFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32, u64, u32, u32) -> HResult;

#[repr(C)]
pub(crate) struct QpVtbl {
    unknown: UnknownVtbl,
    flush: unsafe extern "C" fn(*mut c_void) -> HResult,
    send: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32, u32) -> HResult,
    receive: unsafe extern "C" fn(*mut c_void, *mut c_void, *const Nd2Sge, u32) -> HResult,
    bind:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void, *const c_void, usize, u32) -> HResult,
    invalidate: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, u32) -> HResult,
    read: PostFn,
    write: PostFn,
}

static VTBL: QpVtbl = QpVtbl {
    unknown: UnknownVtbl::of::<QpBody>(),
    flush,
    send,
    receive,
    bind,
    invalidate,
    read,
    write,
};

impl Class for QpBody {
    type Vtbl = QpVtbl;
    const VTBL: &'static QpVtbl = &VTBL;
    const IIDS: &'static [&'static Guid] = &[&iids::IID_IUnknown, &iids::IID_IND2QueuePair];
}

unsafe extern "C" fn flush(this: *mut c_void) -> HResult {
    hr_boundary("IND2QueuePair::Flush", || {
        // SAFETY: the caller's object.
        let qp = unsafe { self::this::<QpBody>(this)? };
        qp.qp.inner.flush().map_err(code)?;
        Ok(ND_SUCCESS)
    })
}

unsafe extern "C" fn send(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32, flags: u32) -> HResult {
    if requests::is_direct(context as u64) {
        // A direct context makes no record: nothing on that path can panic, no boundary.
        // SAFETY: forwarded.
        return match unsafe { send_direct(this, context as u64, sge, n, flags) } {
            Ok(hr) | Err(hr) => hr,
        };
    }
    // SAFETY: forwarded.
    unsafe { send_recorded(this, context, sge, n, flags) }
}

/// Send with a context that needs a record, inside the boundary. Out of line: the common path
/// keeps a frame without the closure's captures.
///
/// # Safety
/// As Send's.
#[inline(never)]
unsafe fn send_recorded(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32, flags: u32) -> HResult {
    hr_boundary("IND2QueuePair::Send", || {
        // SAFETY: the caller's object and SGE array.
        let (qp, sges) = unsafe { (self::this::<QpBody>(this)?, sge_list(sge, n)?) };
        qp.post(QpBody::request(context, sges, ffi::ibv_wr_opcode::IBV_WR_SEND, flags)?)
    })
}

/// Send with a direct context (the common path): the work request is built once, where the
/// provider reads it, under the wr_id that carries the request (no record, no copy through
/// [`QpBody::post`]). Pointer checks, a table lookup, arithmetic and the provider's post:
/// nothing here can panic.
///
/// # Safety
/// As Send's; `context` is direct ([`requests::is_direct`]).
#[inline(always)]
unsafe fn send_direct(
    this: *mut c_void,
    context: u64,
    sge: *const Nd2Sge,
    n: u32,
    flags: u32,
) -> Result<HResult, HResult> {
    // SAFETY: the caller's object and SGE array.
    let (qp, sges) = unsafe { (self::this::<QpBody>(this)?, sge_list(sge, n)?) };
    let send_flags = send_flags(flags)?;
    let silent = send_flags & ffi::ibv_send_flags::IBV_SEND_SIGNALED.0 == 0;
    qp.requests
        .post_send(context, requests::SEND, silent, |wr_id| {
            let mut wr = ffi::ibv_send_wr {
                wr_id,
                next: std::ptr::null_mut(),
                sg_list: sges.as_mut_ptr(),
                num_sge: sges.len() as i32,
                opcode: ffi::ibv_wr_opcode::IBV_WR_SEND,
                send_flags,
                // SAFETY: plain old data; zero is what a Send leaves in the other fields.
                ..unsafe { std::mem::zeroed() }
            };
            let mut bad = std::ptr::null_mut();
            // SAFETY: the QP is live; wr and the caller's SGEs are valid for the call.
            post_result(unsafe { ffi::ibv_post_send(qp.raw(), &mut wr, &mut bad) }).map(|_| ())
        })
        .map(|()| ND_SUCCESS)
}

unsafe extern "C" fn receive(this: *mut c_void, context: *mut c_void, sge: *const Nd2Sge, n: u32) -> HResult {
    if requests::is_direct(context as u64) {
        // As Send: no record, nothing can panic, no boundary.
        // SAFETY: forwarded.
        return match unsafe { post_receive(this, context as u64, sge, n) } {
            Ok(hr) | Err(hr) => hr,
        };
    }
    // SAFETY: forwarded.
    unsafe { receive_recorded(this, context as u64, sge, n) }
}

/// Receive with a context that needs a record, inside the boundary (out of line, as
/// [`send_recorded`]).
///
/// # Safety
/// As Receive's.
#[inline(never)]
unsafe fn receive_recorded(this: *mut c_void, context: u64, sge: *const Nd2Sge, n: u32) -> HResult {
    hr_boundary("IND2QueuePair::Receive", || {
        // SAFETY: forwarded.
        unsafe { post_receive(this, context, sge, n) }
    })
}

/// Receive's body: the request's wr_id (direct, or a record's) and the provider's post.
///
/// # Safety
/// As Receive's.
#[inline(always)]
unsafe fn post_receive(this: *mut c_void, context: u64, sge: *const Nd2Sge, n: u32) -> Result<HResult, HResult> {
    // SAFETY: the caller's object and SGE array.
    let (qp, sges) = unsafe { (self::this::<QpBody>(this)?, sge_list(sge, n)?) };
    qp.requests
        .post_receive(context, |wr_id| {
            let mut wr = ffi::ibv_recv_wr {
                wr_id,
                next: std::ptr::null_mut(),
                sg_list: sges.as_mut_ptr(),
                num_sge: sges.len() as i32,
            };
            let mut bad = std::ptr::null_mut();
            // SAFETY: the QP is live; wr and the caller's SGEs are valid for the call.
            post_result(unsafe { ffi::ibv_post_recv(qp.raw(), &mut wr, &mut bad) }).map(|_| ())
        })
        .map(|()| ND_SUCCESS)
}

#[allow(clippy::too_many_arguments)] // the interface's
unsafe fn rdma(
    entry: &str,
    opcode: ffi::ibv_wr_opcode::Type,
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> HResult {
    hr_boundary(entry, || {
        // SAFETY: the caller's object and SGE array.
        let (qp, sges) = unsafe { (self::this::<QpBody>(this)?, sge_list(sge, n)?) };
        let mut wr = QpBody::request(context, sges, opcode, flags)?;
        wr.wr = ffi::wr_t {
            rdma: ffi::rdma_t {
                remote_addr: remote_address,
                rkey: remote_token,
            },
        };
        qp.post(wr)
    })
}

unsafe extern "C" fn read(
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HResult {
    // SAFETY: forwarded.
    unsafe {
        rdma(
            "IND2QueuePair::Read",
            ffi::ibv_wr_opcode::IBV_WR_RDMA_READ,
            this,
            context,
            sge,
            n,
            addr,
            token,
            flags,
        )
    }
}

unsafe extern "C" fn write(
    this: *mut c_void,
    context: *mut c_void,
    sge: *const Nd2Sge,
    n: u32,
    addr: u64,
    token: u32,
    flags: u32,
) -> HResult {
    // SAFETY: forwarded.
    unsafe {
        rdma(
            "IND2QueuePair::Write",
            ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            this,
            context,
            sge,
            n,
            addr,
            token,
            flags,
        )
    }
}

unsafe extern "C" fn bind(
    this: *mut c_void,
    context: *mut c_void,
    region: *mut c_void,
    window: *mut c_void,
    buffer: *const c_void,
    len: usize,
    flags: u32,
) -> HResult {
    hr_boundary("IND2QueuePair::Bind", || {
        // SAFETY: the caller's objects, checked by kind.
        let (qp, mr, mw) = unsafe {
            (
                self::this::<QpBody>(this)?,
                arg::<MrBody>(region)?,
                arg::<MwBody>(window)?,
            )
        };
        let raw_mr = mr.raw().ok_or(ND_INVALID_PARAMETER)?;
        use ffi::ibv_access_flags as A;
        let mut access = 0;
        if flags & ND_OP_FLAG_ALLOW_READ != 0 {
            access |= A::IBV_ACCESS_REMOTE_READ.0;
        }
        if flags & ND_OP_FLAG_ALLOW_WRITE != 0 {
            access |= A::IBV_ACCESS_REMOTE_WRITE.0;
        }
        // Flags checked before the window gives out a new rkey.
        let mut wr = QpBody::request(
            context,
            &mut [],
            ffi::ibv_wr_opcode::IBV_WR_BIND_MW,
            flags & !(ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE),
        )?;
        let posted = mw.bind_through(qp.qp.qp_num(), |raw_mw, rkey| {
            wr.bind_mw_tso_union = ffi::bind_mw_tso_union_t {
                bind_mw: ffi::bind_mw_t {
                    mw: raw_mw,
                    rkey,
                    bind_info: ffi::ibv_mw_bind_info {
                        mr: raw_mr,
                        addr: buffer as u64,
                        length: len as u64,
                        mw_access_flags: access,
                    },
                },
            };
            qp.post(wr)
        })?;
        qp.windows.note(&mw);
        Ok(posted)
    })
}

unsafe extern "C" fn invalidate(this: *mut c_void, context: *mut c_void, window: *mut c_void, flags: u32) -> HResult {
    hr_boundary("IND2QueuePair::Invalidate", || {
        // SAFETY: the caller's objects, checked by kind.
        let (qp, mw) = unsafe { (self::this::<QpBody>(this)?, arg::<MwBody>(window)?) };
        let mut wr = QpBody::request(context, &mut [], ffi::ibv_wr_opcode::IBV_WR_LOCAL_INV, flags)?;
        wr.imm_data_invalidated_rkey_union = ffi::imm_data_invalidated_rkey_union_t {
            invalidated_rkey: mw.rkey(),
        };
        qp.post(wr)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffi::ibv_send_flags as F;

    #[test]
    fn operation_flags() {
        assert_eq!(send_flags(0), Ok(F::IBV_SEND_SIGNALED.0));
        assert_eq!(send_flags(ND_OP_FLAG_SILENT_SUCCESS), Ok(0));
        assert_eq!(
            send_flags(ND_OP_FLAG_READ_FENCE | ND_OP_FLAG_SEND_AND_SOLICIT_EVENT | ND_OP_FLAG_INLINE),
            Ok(F::IBV_SEND_SIGNALED.0 | F::IBV_SEND_FENCE.0 | F::IBV_SEND_SOLICITED.0)
        );
        assert_eq!(send_flags(0x40), Err(ND_INVALID_PARAMETER));
        assert_eq!(send_flags(u32::MAX), Err(ND_INVALID_PARAMETER));
        // The table is the one-by-one translation for every valid combination.
        for flags in 0..=KNOWN_OP_FLAGS {
            let mut want = 0;
            if flags & ND_OP_FLAG_SILENT_SUCCESS == 0 {
                want |= F::IBV_SEND_SIGNALED.0;
            }
            if flags & ND_OP_FLAG_READ_FENCE != 0 {
                want |= F::IBV_SEND_FENCE.0;
            }
            if flags & ND_OP_FLAG_SEND_AND_SOLICIT_EVENT != 0 {
                want |= F::IBV_SEND_SOLICITED.0;
            }
            assert_eq!(send_flags(flags), Ok(want), "flags {flags:#x}");
        }
    }
}
