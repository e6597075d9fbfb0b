//! The boundary to librdmacm and libibverbs (through `rdma-mummy-sys`, which loads both at run
//! time). Everything above this module works with owned handles and `Result<_, NdStatus>`; every
//! raw call lives here, each with its `// SAFETY:` reason.
//!
//! `rdma_notify` is not bound by rdma-mummy-sys 0.2; it is looked up with `dlsym` in the
//! librdmacm that rdma-mummy-sys already loaded.

use std::ffi::c_void;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::BorrowedFd;
use std::ptr;
use std::sync::Mutex;

use rdma_mummy_sys as ffi;

use crate::status::{from_errno, NdStatus};

/// `RDMA_OPTION_ID` / `RDMA_OPTION_ID_REUSEADDR` of `<rdma/rdma_cma.h>` (not bound by the crate).
const RDMA_OPTION_ID: i32 = 0;
const RDMA_OPTION_ID_REUSEADDR: i32 = 1;

/// `struct ibv_async_event` with its type as the C int it is. rdma-mummy-sys declares the type a
/// Rust enum, so a value it does not list (a newer libibverbs or kernel) would be undefined
/// behaviour the moment libibverbs wrote it; this twin is what the calls below fill instead.
#[repr(C)]
struct RawAsyncEvent {
    /// The union of the QP, CQ, SRQ, WQ pointers and the port number.
    element: *mut c_void,
    event_type: u32,
}
const _: () = {
    assert!(std::mem::size_of::<RawAsyncEvent>() == std::mem::size_of::<ffi::ibv_async_event>());
    assert!(std::mem::offset_of!(RawAsyncEvent, event_type) == std::mem::offset_of!(ffi::ibv_async_event, event_type));
};

/// What the shim takes from an async event: its type, and the QP number for a QP event it acts on.
pub struct AsyncEvent {
    pub event_type: u32,
    /// For `IBV_EVENT_COMM_EST`: the QP it is about.
    pub comm_est_qp_num: Option<u32>,
    /// The CQ, QP, SRQ or WQ handle the event names (the port number for a port event), as an
    /// address to recognise it by: the event is acknowledged, nothing may dereference it.
    pub element: usize,
}

/// The next async event of `ctx`, already acknowledged, or `None` when there is none (the
/// context's async fd is non-blocking).
///
/// # Safety
/// `ctx` is a live context whose async fd is non-blocking.
pub unsafe fn next_async_event(ctx: *mut ffi::ibv_context) -> Option<AsyncEvent> {
    let mut raw = RawAsyncEvent {
        element: ptr::null_mut(),
        event_type: 0,
    };
    let event = ptr::addr_of_mut!(raw).cast::<ffi::ibv_async_event>();
    // SAFETY: ctx per the contract; `event` is an ibv_async_event's worth of writable memory,
    // laid out as one (asserted above), whose type field holds any int.
    if unsafe { ffi::ibv_get_async_event(ctx, event) } != 0 {
        return None;
    }
    let comm_est = ffi::ibv_event_type::IBV_EVENT_COMM_EST as u32;
    // SAFETY: for a QP event the element is the QP, live until the event is acknowledged.
    let comm_est_qp_num = (raw.event_type == comm_est).then(|| unsafe { (*raw.element.cast::<ffi::ibv_qp>()).qp_num });
    // SAFETY: the event ibv_get_async_event filled, acknowledged once.
    unsafe { ffi::ibv_ack_async_event(event) };
    Some(AsyncEvent {
        event_type: raw.event_type,
        comm_est_qp_num,
        element: raw.element as usize,
    })
}

/// C structs for which all zeroes is a valid value: integers, raw pointers, and arrays, structs
/// and unions of them (rdma-mummy-sys declares the C enums as integer constants).
///
/// # Safety
/// Implement it only for such types.
pub unsafe trait Zeroable: Sized {}

// SAFETY: each is a C struct of integers, raw pointers, and arrays, structs and unions of them.
unsafe impl Zeroable for ffi::ibv_qp_attr {}
// SAFETY: as above.
unsafe impl Zeroable for ffi::ibv_qp_init_attr {}
// SAFETY: as above.
unsafe impl Zeroable for ffi::ibv_wc {}
// SAFETY: as above.
unsafe impl Zeroable for ffi::ibv_send_wr {}
// SAFETY: as above.
unsafe impl Zeroable for ffi::ibv_device_attr {}
// SAFETY: as above.
unsafe impl Zeroable for ffi::ibv_port_attr {}
// SAFETY: as above.
unsafe impl Zeroable for libc::sockaddr_storage {}

/// All zeroes: the start value of a C struct the caller fills, or a call fills.
#[inline]
pub fn zeroed<T: Zeroable>() -> T {
    // SAFETY: `T: Zeroable` says all zeroes is a valid T.
    unsafe { std::mem::zeroed() }
}

/// A protection domain of the adapter's context: allocated by [`open_device`], deallocated by
/// `AdapterInner::release_pd` (verbs.rs) when the adapter goes.
pub(crate) struct Pd(pub(crate) *mut ffi::ibv_pd);
// SAFETY: a PD handle is usable from any thread; libibverbs serialises internally.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

/// The attributes of `ctx`'s device and a new PD on it. `ctx` must be one of `devices`'
/// contexts (held open by the list), else ND_INVALID_ADDRESS.
pub(crate) fn open_device(
    devices: &DeviceList,
    ctx: *mut ffi::ibv_context,
) -> Result<(ffi::ibv_device_attr, Pd), NdStatus> {
    if ctx.is_null() || !devices.contains(ctx) {
        return Err(NdStatus::ND_INVALID_ADDRESS);
    }
    let mut attr: ffi::ibv_device_attr = zeroed();
    // SAFETY: ctx is an open context of librdmacm's device list, which the caller holds.
    if unsafe { ffi::ibv_query_device(ctx, &mut attr) } != 0 {
        return Err(last_error());
    }
    // SAFETY: as above.
    let pd = unsafe { ffi::ibv_alloc_pd(ctx) };
    if pd.is_null() {
        return Err(last_error());
    }
    Ok((attr, Pd(pd)))
}

/// The errno of the last failed call, as an ND code.
pub fn last_error() -> NdStatus {
    from_errno(errno())
}

/// The calling thread's errno (read in place: no io::Error to make and drop, on the wait path).
pub fn errno() -> i32 {
    nix::errno::Errno::last_raw()
}

fn check(ret: i32) -> Result<(), NdStatus> {
    if ret == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// The sockaddr variants a `sockaddr_storage` holds (its family says which).
///
/// # Safety
/// Implement it only for a type that fits in a `sockaddr_storage`, needs no more alignment,
/// has no padding, and for which any bytes are a valid value.
unsafe trait SockaddrVariant: Copy {}

// SAFETY: 16 bytes of integers, aligned to 4; the storage is 128 bytes aligned to 8.
unsafe impl SockaddrVariant for libc::sockaddr_in {}
// SAFETY: 28 bytes of integers, aligned to 4.
unsafe impl SockaddrVariant for libc::sockaddr_in6 {}

/// `value` at the start of `storage`.
fn store<T: SockaddrVariant>(storage: &mut libc::sockaddr_storage, value: T) {
    // SAFETY: T fits in the storage and needs no more alignment (SockaddrVariant).
    unsafe { ptr::write(ptr::from_mut(storage).cast::<T>(), value) }
}

/// The start of `storage` as a `T`.
fn view<T: SockaddrVariant>(storage: &libc::sockaddr_storage) -> &T {
    // SAFETY: T fits, needs no more alignment, and any initialised bytes are a valid T
    // (SockaddrVariant); every storage the shim reads was zeroed and then written, or copied
    // whole from librdmacm's, so its bytes are initialised.
    unsafe { &*ptr::from_ref(storage).cast::<T>() }
}

/// A `sockaddr_storage` holding `addr`, and the length of the part that matters.
pub fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut storage: libc::sockaddr_storage = zeroed();
    let len = match addr {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            store(&mut storage, sin);
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            store(&mut storage, sin6);
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The address in `storage`, if it is IPv4 or IPv6.
pub fn from_sockaddr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            let sin: &libc::sockaddr_in = view(storage);
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            let sin6: &libc::sockaddr_in6 = view(storage);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The encoded sockaddr bytes of `addr`, for the address getters' buffer rules.
pub fn sockaddr_bytes(addr: SocketAddr) -> Vec<u8> {
    let (storage, len) = to_sockaddr(addr);
    // SAFETY: `storage` is a live local of at least `len` bytes.
    unsafe { std::slice::from_raw_parts(ptr::addr_of!(storage).cast::<u8>(), len as usize) }.to_vec()
}

/// An rdma_cm event channel. Its fd is non-blocking: the engine drains it.
pub struct EventChannel(*mut ffi::rdma_event_channel);

// SAFETY: librdmacm event channels may be used from any thread; the engine serialises reads.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    pub fn new() -> Result<Self, NdStatus> {
        // SAFETY: no arguments; a null return is handled.
        let channel = unsafe { ffi::rdma_create_event_channel() };
        if channel.is_null() {
            return Err(last_error());
        }
        let channel = EventChannel(channel);
        set_nonblocking(channel.fd())?;
        Ok(channel)
    }

    pub fn fd(&self) -> i32 {
        // SAFETY: self.0 is a live channel until Drop.
        unsafe { (*self.0).fd }
    }

    /// The channel's fd, borrowed from the channel.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the channel owns its fd and closes it only in Drop, after the borrow ends.
        unsafe { BorrowedFd::borrow_raw(self.fd()) }
    }

    /// The next event, copied out and acknowledged; `None` when there is none now.
    pub fn next_event(&self) -> Result<Option<RawEvent>, NdStatus> {
        let mut event = ptr::null_mut();
        // SAFETY: self.0 is live; `event` receives a pointer owned by librdmacm until acked.
        if unsafe { ffi::rdma_get_cm_event(self.0, &mut event) } != 0 {
            return match errno() {
                libc::EAGAIN | libc::EINTR => Ok(None),
                e => Err(from_errno(e)),
            };
        }
        // SAFETY: rdma_get_cm_event succeeded, so `event` points at a valid event until acked.
        let copied = unsafe { RawEvent::copy_from(&*event) };
        // SAFETY: `event` came from rdma_get_cm_event and is acknowledged exactly once, after
        // everything the engine needs was copied out of it.
        unsafe { ffi::rdma_ack_cm_event(event) };
        Ok(Some(copied))
    }

    pub fn create_id(&self, context: u64) -> Result<CmId, NdStatus> {
        self.create_id_in(context, ffi::rdma_port_space::RDMA_PS_TCP)
    }

    /// An id in port space `ps` (connections use RDMA_PS_TCP).
    pub fn create_id_in(&self, context: u64, ps: ffi::rdma_port_space::Type) -> Result<CmId, NdStatus> {
        let mut id = ptr::null_mut();
        // SAFETY: self.0 is live; `context` is an opaque token, never dereferenced.
        check(unsafe { ffi::rdma_create_id(self.0, &mut id, context as usize as *mut c_void, ps) })?;
        Ok(CmId(id))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id on the channel is owned by an object that keeps the channel's owner
        // alive, so none is left when this runs.
        unsafe { ffi::rdma_destroy_event_channel(self.0) }
    }
}

pub fn set_nonblocking(fd: i32) -> Result<(), NdStatus> {
    set_nonblocking_to(fd, true)
}

/// O_NONBLOCK on (`nonblocking`) or off for the open file of `fd`.
pub fn set_nonblocking_to(fd: i32, nonblocking: bool) -> Result<(), NdStatus> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let failed = |e: nix::errno::Errno| from_errno(e as i32);
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL).map_err(failed)?);
    let mut wanted = flags;
    wanted.set(OFlag::O_NONBLOCK, nonblocking);
    if wanted != flags {
        fcntl(fd, FcntlArg::F_SETFL(wanted)).map_err(failed)?;
    }
    Ok(())
}

/// What the engine keeps of an `rdma_cm_event`.
#[derive(Debug)]
pub struct RawEvent {
    pub id: CmIdRef,
    /// The listener's token for CONNECT_REQUEST.
    pub listen_context: Option<u64>,
    pub context: u64,
    pub kind: u32,
    pub status: i32,
    pub private_data: Vec<u8>,
    pub responder_resources: u8,
    pub initiator_depth: u8,
}

impl RawEvent {
    /// # Safety
    /// `event` must be a valid, not yet acknowledged event.
    unsafe fn copy_from(event: &ffi::rdma_cm_event) -> RawEvent {
        // SAFETY: the caller guarantees the event is valid; `conn` is the member librdmacm fills
        // for connected (RDMA_PS_TCP) ids.
        let conn = unsafe { event.param.conn };
        let private_data = if conn.private_data.is_null() || conn.private_data_len == 0 {
            Vec::new()
        } else {
            // SAFETY: a non-null private data pointer of a valid event covers private_data_len bytes.
            unsafe { std::slice::from_raw_parts(conn.private_data.cast::<u8>(), usize::from(conn.private_data_len)) }
                .to_vec()
        };
        // SAFETY: the ids of a valid, unacknowledged event are live cm ids.
        let listen_context =
            (!event.listen_id.is_null()).then(|| unsafe { (*event.listen_id).context } as usize as u64);
        // SAFETY: as above.
        let context = unsafe { (*event.id).context } as usize as u64;
        RawEvent {
            id: CmIdRef {
                id: event.id,
                new_connection: event.event == crate::cm_event::CmEventKind::ConnectRequest as u32,
            },
            listen_context,
            context,
            kind: event.event,
            status: event.status,
            private_data,
            responder_resources: conn.responder_resources,
            initiator_depth: conn.initiator_depth,
        }
    }
}

/// A raw id pointer from an event: only turned into an owned [`CmId`] for CONNECT_REQUEST.
#[derive(Debug)]
pub struct CmIdRef {
    id: *mut ffi::rdma_cm_id,
    /// The event is a CONNECT_REQUEST, whose id is new and not yet taken.
    new_connection: bool,
}

// SAFETY: a plain pointer value handed between the engine's threads.
unsafe impl Send for CmIdRef {}

impl CmIdRef {
    /// The new id of a CONNECT_REQUEST event, which the receiver then owns; `None` for other
    /// events, and once taken.
    pub fn take_new_connection(&mut self) -> Option<CmId> {
        std::mem::take(&mut self.new_connection).then_some(CmId(self.id))
    }
}

/// An owned `rdma_cm_id`; destroyed on drop.
#[derive(Debug)]
pub struct CmId(*mut ffi::rdma_cm_id);

// SAFETY: librdmacm ids may be used from any thread; owners serialise calls through their lock.
unsafe impl Send for CmId {}

/// The connection parameters of Connect and Accept.
pub struct ConnParam<'a> {
    pub private_data: &'a [u8],
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub qp_num: u32,
}

impl CmId {
    fn raw(&self) -> *mut ffi::rdma_cm_id {
        self.0
    }

    /// The id's fields, read in place (librdmacm keeps them current; the shim writes only
    /// `context`, through [`CmId::set_context`], before any call that causes events on it).
    fn fields(&self) -> &ffi::rdma_cm_id {
        // SAFETY: self.0 is live until Drop, which needs `&mut self`.
        unsafe { &*self.0 }
    }

    pub fn set_context(&self, context: u64) {
        // SAFETY: self.0 is live; the engine reads `context` only when an event for this id
        // arrives, which happens after this store in the engine's own order (the id was just
        // handed over, before any call that causes events on it).
        unsafe { (*self.0).context = context as usize as *mut c_void }
    }

    /// The port of its device the id is bound to (0 before a bind to a device's address).
    pub fn port_num(&self) -> u8 {
        self.fields().port_num
    }

    /// The device context the id is bound to, null if none (wildcard bind).
    pub fn verbs(&self) -> *mut ffi::ibv_context {
        self.fields().verbs
    }

    pub fn set_reuseaddr(&self) -> Result<(), NdStatus> {
        let mut on: i32 = 1;
        // SAFETY: self.0 is live; optval points at an int of the given size.
        check(unsafe {
            ffi::rdma_set_option(
                self.raw(),
                RDMA_OPTION_ID,
                RDMA_OPTION_ID_REUSEADDR,
                ptr::addr_of_mut!(on).cast(),
                std::mem::size_of::<i32>(),
            )
        })
    }

    pub fn bind(&self, addr: SocketAddr) -> Result<(), NdStatus> {
        self.try_bind(addr).map_err(from_errno)
    }

    /// `rdma_bind_addr`, failing with the errno: the port rules tell EADDRINUSE from the rest.
    pub fn try_bind(&self, addr: SocketAddr) -> Result<(), i32> {
        let (mut storage, _) = to_sockaddr(addr);
        // SAFETY: self.0 is live; storage is a valid sockaddr for the call's duration.
        match unsafe { ffi::rdma_bind_addr(self.raw(), ptr::addr_of_mut!(storage).cast()) } {
            0 => Ok(()),
            _ => Err(errno()),
        }
    }

    pub fn resolve_addr(&self, dst: SocketAddr, timeout_ms: i32) -> Result<(), NdStatus> {
        let (mut storage, _) = to_sockaddr(dst);
        // SAFETY: as in bind; a null source means "the bound address".
        check(unsafe {
            ffi::rdma_resolve_addr(
                self.raw(),
                ptr::null_mut(),
                ptr::addr_of_mut!(storage).cast(),
                timeout_ms,
            )
        })
    }

    pub fn resolve_route(&self, timeout_ms: i32) -> Result<(), NdStatus> {
        // SAFETY: self.0 is live.
        check(unsafe { ffi::rdma_resolve_route(self.raw(), timeout_ms) })
    }

    /// The private data's length for librdmacm (a u8): more than 255 bytes is
    /// ND_INVALID_BUFFER_SIZE, never a truncated message (the connection's own limits, smaller,
    /// are checked before: docs/nd-semantics.md, "Private data").
    fn private_data_len(data: &[u8]) -> Result<u8, NdStatus> {
        u8::try_from(data.len()).map_err(|_| NdStatus::ND_INVALID_BUFFER_SIZE)
    }

    fn conn_param(p: &ConnParam<'_>) -> Result<ffi::rdma_conn_param, NdStatus> {
        // RNR retries, finite: 7 would retry for ever, and a Send to a peer that never posts a
        // receive must fail with ND_IO_TIMEOUT (IBV_WC_RNR_RETRY_EXC_ERR), as Microsoft's
        // ndmemorytest NdSendNoReceive expects. 6 is the largest finite count; with the
        // responder's RNR timer as the IB CM programs it that is a few seconds of waiting for
        // a late receive. The REQ carries the passive side's count, the REP the active side's.
        const RNR_RETRY_COUNT: u8 = 6;
        Ok(ffi::rdma_conn_param {
            private_data: if p.private_data.is_empty() {
                ptr::null()
            } else {
                p.private_data.as_ptr().cast()
            },
            private_data_len: Self::private_data_len(p.private_data)?,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: RNR_RETRY_COUNT,
            srq: 0,
            qp_num: p.qp_num,
        })
    }

    pub fn connect(&self, p: &ConnParam<'_>) -> Result<(), NdStatus> {
        let mut param = Self::conn_param(p)?;
        // SAFETY: self.0 is live; param and its private data outlive the call (librdmacm copies).
        check(unsafe { ffi::rdma_connect(self.raw(), &mut param) })
    }

    pub fn accept(&self, p: &ConnParam<'_>) -> Result<(), NdStatus> {
        let mut param = Self::conn_param(p)?;
        // SAFETY: as in connect.
        check(unsafe { ffi::rdma_accept(self.raw(), &mut param) })
    }

    pub fn reject(&self, private_data: &[u8]) -> Result<(), NdStatus> {
        let data = if private_data.is_empty() {
            ptr::null()
        } else {
            private_data.as_ptr().cast()
        };
        let len = Self::private_data_len(private_data)?;
        // SAFETY: self.0 is live; data covers len bytes for the call's duration.
        check(unsafe { ffi::rdma_reject(self.raw(), data, len) })
    }

    pub fn establish(&self) -> Result<(), NdStatus> {
        // SAFETY: self.0 is live.
        check(unsafe { ffi::rdma_establish(self.raw()) })
    }

    pub fn disconnect(&self) -> Result<(), NdStatus> {
        // SAFETY: self.0 is live.
        check(unsafe { ffi::rdma_disconnect(self.raw()) })
    }

    pub fn listen(&self, backlog: i32) -> Result<(), NdStatus> {
        // SAFETY: self.0 is live.
        check(unsafe { ffi::rdma_listen(self.raw(), backlog) })
    }

    pub fn notify(&self) -> Result<(), NdStatus> {
        let Some(notify) = rdma_notify_fn() else {
            return Err(NdStatus::ND_NOT_SUPPORTED);
        };
        // SAFETY: the symbol has librdmacm's `int rdma_notify(struct rdma_cm_id *, enum
        // ibv_event_type)` signature; self.0 is live.
        check(unsafe { notify(self.raw(), ffi::ibv_event_type::IBV_EVENT_COMM_EST as i32) })
    }

    /// QP attributes for `state` from the id's connection, as `ibv_modify_qp` wants them.
    pub fn qp_attr(&self, state: ffi::ibv_qp_state::Type) -> Result<(ffi::ibv_qp_attr, i32), NdStatus> {
        let mut attr: ffi::ibv_qp_attr = zeroed();
        attr.qp_state = state;
        let mut mask = 0;
        // SAFETY: self.0 is live; attr and mask are valid out-parameters.
        check(unsafe { ffi::rdma_init_qp_attr(self.raw(), &mut attr, &mut mask) })?;
        Ok((attr, mask))
    }

    /// Whether a received connection request still waits for our answer. ucma reports no event
    /// of a new connection before `rdma_accept` (`ucma_event_handler` drops them while the
    /// context has no uid), so when the active side abandons (its REJ, reason 4, moves the IB
    /// CM id from REQ_RCVD to idle) nobody is told. The CM hands out RTR attributes only from
    /// REQ_RCVD on, and fails with EINVAL in idle: one ioctl, no state change.
    pub fn request_alive(&self) -> bool {
        !matches!(self.qp_attr(ffi::ibv_qp_state::IBV_QPS_RTR), Err(s) if s == from_errno(libc::EINVAL))
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        // SAFETY: the src member of the route's address union is a sockaddr_storage-sized field
        // librdmacm keeps current; every member is plain old data.
        let storage = unsafe { self.fields().route.addr.src_addr_union.src_storage };
        from_sockaddr(&storage).filter(|a| !a.ip().is_unspecified() || a.port() != 0)
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        // SAFETY: as in local_addr, for the destination.
        let storage = unsafe { self.fields().route.addr.dst_addr_union.dst_storage };
        from_sockaddr(&storage).filter(|a| !a.ip().is_unspecified())
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: self.0 is owned and destroyed once; the engine acks every event before it
        // dispatches it, so rdma_destroy_id does not wait on the engine.
        if unsafe { ffi::rdma_destroy_id(self.0) } != 0 {
            log::warn!("rdma_destroy_id failed: {}", last_error());
        }
    }
}

type NotifyFn = unsafe extern "C" fn(*mut ffi::rdma_cm_id, i32) -> i32;

fn rdma_notify_fn() -> Option<NotifyFn> {
    static NOTIFY: std::sync::OnceLock<Option<NotifyFn>> = std::sync::OnceLock::new();
    *NOTIFY.get_or_init(|| {
        // SAFETY: dlopen/dlsym with NUL-terminated names; RTLD_NOLOAD only finds the copy
        // rdma-mummy-sys already loaded (or another one in the process), never a new one. A
        // non-null symbol is librdmacm's rdma_notify, whose C signature NotifyFn mirrors.
        unsafe {
            let handle = libc::dlopen(c"librdmacm.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if handle.is_null() {
                return None;
            }
            let sym = libc::dlsym(handle, c"rdma_notify".as_ptr());
            (!sym.is_null()).then(|| std::mem::transmute::<*mut c_void, NotifyFn>(sym))
        }
    })
}

/// The devices librdmacm opened; holding the list keeps their contexts (and librdmacm's
/// reference on them) alive.
pub struct DeviceList(*mut *mut ffi::ibv_context);

// SAFETY: the list is only read after creation.
unsafe impl Send for DeviceList {}
// SAFETY: as above.
unsafe impl Sync for DeviceList {}

impl DeviceList {
    pub fn new() -> Result<Self, NdStatus> {
        let mut n = 0;
        // SAFETY: n is a valid out-parameter; null is handled.
        let list = unsafe { ffi::rdma_get_devices(&mut n) };
        if list.is_null() {
            return Err(NdStatus::ND_DEVICE_NOT_READY);
        }
        Ok(DeviceList(list))
    }

    pub fn contains(&self, ctx: *mut ffi::ibv_context) -> bool {
        let mut i = 0;
        loop {
            // SAFETY: the list is null-terminated and live until Drop.
            let entry = unsafe { *self.0.add(i) };
            if entry.is_null() {
                return false;
            }
            if entry == ctx {
                return true;
            }
            i += 1;
        }
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from rdma_get_devices and is freed once.
        unsafe { ffi::rdma_free_devices(self.0) }
    }
}

/// Whether the routing table has a route from `src` to `dst`. An id bound to a device makes
/// the kernel assume any destination is on link (`ip_route_output_key_hash_rcu` with an output
/// interface), so a missing route would only show as an ARP timeout; a UDP socket's connect()
/// looks the route up without that device and sends nothing.
pub fn check_route(src: IpAddr, dst: SocketAddr) -> Result<(), NdStatus> {
    let socket = std::net::UdpSocket::bind(SocketAddr::new(src, 0))
        .map_err(|e| from_errno(e.raw_os_error().unwrap_or(libc::EINVAL)))?;
    socket
        .connect(dst)
        .map_err(|e| from_errno(e.raw_os_error().unwrap_or(libc::EINVAL)))
}

/// [`check_route`] for one source address, with one UDP socket kept bound to it: connect() on a
/// bound UDP socket looks the route up afresh each time (it resets the cached route first) from
/// the bound address, so re-connecting the kept socket answers the same question with one
/// syscall instead of four (socket, bind, connect, close). Any failure, and a kept socket in use
/// by another thread, take [`check_route`]'s own path, so every code is the one it gives.
pub struct RouteCheck {
    src: IpAddr,
    socket: Mutex<Option<std::net::UdpSocket>>,
}

impl RouteCheck {
    pub fn new(src: IpAddr) -> RouteCheck {
        RouteCheck {
            src,
            socket: Mutex::new(None),
        }
    }

    pub fn check(&self, dst: SocketAddr) -> Result<(), NdStatus> {
        if let Ok(mut kept) = self.socket.try_lock() {
            if kept.is_none() {
                *kept = std::net::UdpSocket::bind(SocketAddr::new(self.src, 0)).ok();
            }
            match kept.as_ref().map(|s| s.connect(dst)) {
                Some(Ok(())) => return Ok(()),
                // Failed: the socket may be left half-way; start again next time.
                Some(Err(_)) => *kept = None,
                None => {}
            }
        }
        check_route(self.src, dst)
    }
}

/// True for addresses that rdma_cm would bind to a device through its loopback rule rather than
/// because an RDMA adapter has them.
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

// ---- The pump's and the channel's system calls (`pump`, `notify`): each over live memory it
// borrows, with descriptors the kernel checks (a closed one is EBADF) ----

/// poll(2) of `fds` for at most `ms` milliseconds (-1: no limit): what it returns.
pub(crate) fn poll(fds: &mut [libc::pollfd], ms: i32) -> i32 {
    // SAFETY: fds is live for its length.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
}

/// epoll_ctl(EPOLL_CTL_ADD) of descriptor `fd` to `set` for `events`, reported with `token`.
pub(crate) fn epoll_add(set: &nix::sys::epoll::Epoll, fd: i32, events: u32, token: u64) -> nix::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: the set is open while borrowed; `event` is a live local.
    let ret = unsafe {
        libc::epoll_ctl(
            std::os::fd::AsRawFd::as_raw_fd(&set.0),
            libc::EPOLL_CTL_ADD,
            fd,
            &mut event,
        )
    };
    nix::errno::Errno::result(ret).map(drop)
}

/// epoll_ctl(EPOLL_CTL_DEL) of descriptor `fd` from `set`.
pub(crate) fn epoll_delete(set: &nix::sys::epoll::Epoll, fd: i32) -> nix::Result<()> {
    // SAFETY: the set is open while borrowed; DEL reads no event.
    let ret = unsafe {
        libc::epoll_ctl(
            std::os::fd::AsRawFd::as_raw_fd(&set.0),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut(),
        )
    };
    nix::errno::Errno::result(ret).map(drop)
}

/// The epoll_pwait system call with no signal mask (epoll_wait; not glibc's wrapper, a
/// cancellation point: see the pump's wait_once): up to `events.len()` events of `set` within
/// `ms` milliseconds (-1: no limit); the count, or -1 with errno.
#[inline]
pub(crate) fn epoll_wait(set: &nix::sys::epoll::Epoll, events: &mut [libc::epoll_event], ms: i32) -> libc::c_long {
    let room = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: the set is open while borrowed; `events` has room for `room` entries; a null
    // signal mask is not read.
    unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            std::os::fd::AsRawFd::as_raw_fd(&set.0),
            events.as_mut_ptr(),
            room,
            ms,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    }
}

/// FUTEX_WAKE (private) of every thread waiting on `word`.
pub(crate) fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: a futex wake on a live word; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        )
    };
}

/// FUTEX_WAIT (private) on `word` while it holds `seen` (the kernel compares it before it
/// sleeps), for at most `limit`.
pub(crate) fn futex_wait(word: &std::sync::atomic::AtomicU32, seen: u32, limit: std::time::Duration) {
    let limit = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(limit.subsec_nanos() as i32),
    };
    // SAFETY: a futex wait on a live word, with a live timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            std::ptr::addr_of!(limit),
        )
    };
}

/// write(2) of `value` (8 bytes) to descriptor `fd` (the tests' eventfds): what it returns.
#[cfg(test)]
pub(crate) fn write_counter(fd: i32, value: u64) -> isize {
    // SAFETY: 8 bytes of a live local.
    unsafe { libc::write(fd, std::ptr::addr_of!(value).cast(), 8) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Private data longer than librdmacm's u8 length is refused, not cut to 255 bytes.
    #[test]
    fn private_data_over_255_bytes_is_refused_not_truncated() {
        let data = [7u8; 300];
        let param = |len: usize| ConnParam {
            private_data: &data[..len],
            responder_resources: 1,
            initiator_depth: 1,
            qp_num: 5,
        };
        assert_eq!(
            CmId::conn_param(&param(300)).err(),
            Some(NdStatus::ND_INVALID_BUFFER_SIZE)
        );
        assert_eq!(
            CmId::conn_param(&param(256)).err(),
            Some(NdStatus::ND_INVALID_BUFFER_SIZE)
        );
        let max = CmId::conn_param(&param(255)).unwrap();
        assert_eq!(max.private_data_len, 255);
        let none = CmId::conn_param(&param(0)).unwrap();
        assert!(none.private_data.is_null() && none.private_data_len == 0);
        assert_eq!(
            CmId::private_data_len(&data[..300]),
            Err(NdStatus::ND_INVALID_BUFFER_SIZE)
        );
    }
}
