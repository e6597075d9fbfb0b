//! What every object made from one IND2Adapter shares ([`AdapterBody`]: the Rust API's
//! [`Adapter`], with the shim's event thread: ND2 never asks the caller to drive events), and
//! the adapter's helpers the other objects use. The IND2Adapter interface, which makes every
//! object, is `ind2_adapter.rs`.

use std::ffi::c_void;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::notify::NotifyChannel;
use super::registration::DeferredRegions;
use super::requests::Requests;
use super::win32::{self, Handle, OverlappedFile};
use super::{code, HResult, ND_BUFFER_OVERFLOW, ND_INVALID_HANDLE, ND_INVALID_PARAMETER, ND_SUCCESS};
use crate::Adapter;

/// ND_VERSION_2, ND2_ADAPTER_INFO.InfoVersion.
pub(crate) const ND_VERSION_2: u32 = 0x20000;
const ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED: u32 = 0x1;
const ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED: u32 = 0x100;

/// The deepest queue (QP initiator and receive queues, SRQ) Query reports. rxe advertises
/// max_qp_wr 1,048,576, but a ring that deep is 2^21 slots of up to 1 KiB per queue: creating it
/// fails with ENOMEM (ND_NO_MEMORY) on any ordinary machine, Microsoft's NdQpMax among the
/// programs it fails. 16,384 at 32 SGEs is 32 MiB per queue, which the rig's 2 GiB guest creates
/// with both providers (tests/nd2/nd2-queue-pair.cpp, max-limits).
const QUEUE_DEPTH_CAP: u32 = 16_384;

/// LargeRequestThreshold: a hint (no limit). On rxe, Send and Write both copy on the receiver;
/// above one 4 KiB packet a Write saves the receiver's posted buffer and its completion.
const LARGE_REQUEST_THRESHOLD: u32 = 4096;

/// ND2_ADAPTER_INFO, in the documented field order (96 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdapterInfo2 {
    pub info_version: u32,
    pub vendor_id: u16,
    pub device_id: u16,
    pub adapter_id: u64,
    pub max_registration_size: usize,
    pub max_window_size: usize,
    pub max_initiator_sge: u32,
    pub max_receive_sge: u32,
    pub max_read_sge: u32,
    pub max_transfer_length: u32,
    pub max_inline_data_size: u32,
    pub max_inbound_read_limit: u32,
    pub max_outbound_read_limit: u32,
    pub max_receive_queue_depth: u32,
    pub max_initiator_queue_depth: u32,
    pub max_shared_receive_queue_depth: u32,
    pub max_completion_queue_depth: u32,
    pub inline_request_threshold: u32,
    pub large_request_threshold: u32,
    pub max_caller_data: u32,
    pub max_callee_data: u32,
    pub adapter_flags: u32,
}

const _: () = assert!(std::mem::size_of::<AdapterInfo2>() == 96);
const _: () = assert!(std::mem::offset_of!(AdapterInfo2, max_initiator_sge) == 32);
const _: () = assert!(std::mem::offset_of!(AdapterInfo2, adapter_flags) == 92);

/// What every object made from one adapter shares.
pub(crate) struct AdapterBody {
    pub(super) adapter: Adapter,
    pub(super) notify: Arc<NotifyChannel>,
    pub(super) info: AdapterInfo2,
    /// The QPs by number with their requests posted and not completed (ND2_RESULT's
    /// QueuePairContext, RequestContext and RequestType).
    pub(super) requests: Requests,
    /// The device's own SGE maximum (max_sge), which a QP is created with up to, where its
    /// slots have room anyway ([`super::qp::fitted_caps`]).
    pub(super) device_max_sge: u32,
    /// Regions released while windows were bound to them, deregistered once they are gone.
    pub(super) deferred_regions: DeferredRegions,
}

impl Drop for AdapterBody {
    fn drop(&mut self) {
        // Every window and QP holds the adapter, so they are gone: so are the bindings.
        self.deferred_regions.retry(true);
        // A leader in a direct read of the channel holds it: wake it, so that the channel and
        // the device go now, not at its next event.
        self.notify.release_readers();
    }
}

/// The adapter's id: its IPv4 address (or the low 64 bits of its IPv6 one), which the address
/// helpers can find again.
pub(crate) fn adapter_id(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) => u64::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6) as u64,
    }
}

impl AdapterBody {
    pub(crate) fn open(ip: IpAddr) -> Result<AdapterBody, HResult> {
        let adapter = Adapter::open(ip).map_err(code)?;
        let notify = NotifyChannel::new(&adapter)?;
        let limits = adapter.query();
        // SAFETY: plain old data, filled by the call.
        let mut port: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the adapter's context is open; rxe has one port, number 1.
        let max_transfer = match unsafe { ffi::ibv_query_port(adapter.inner.ctx, 1, &mut port) } {
            0 => port.max_msg_sz,
            _ => u32::try_from(limits.max_registration_size).unwrap_or(u32::MAX),
        };
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let max_inline = max_inline_data(&adapter, limits.max_initiator_sge);
        let info = AdapterInfo2 {
            info_version: ND_VERSION_2,
            vendor_id: limits.vendor_id as u16,
            device_id: limits.device_id as u16,
            adapter_id: adapter_id(ip),
            max_registration_size: size(limits.max_registration_size),
            max_window_size: size(limits.max_registration_size),
            max_initiator_sge: limits.max_initiator_sge,
            // One maximum for a QP's receives and an SRQ's: the smaller (rxe: 32 and 27).
            max_receive_sge: limits.max_receive_sge.min(limits.max_srq_sge),
            max_read_sge: limits.max_read_sge,
            max_transfer_length: max_transfer,
            max_inline_data_size: max_inline,
            max_inbound_read_limit: limits.max_inbound_read_limit,
            max_outbound_read_limit: limits.max_outbound_read_limit,
            max_receive_queue_depth: limits.max_receive_queue_depth.min(QUEUE_DEPTH_CAP),
            max_initiator_queue_depth: limits.max_initiator_queue_depth.min(QUEUE_DEPTH_CAP),
            max_shared_receive_queue_depth: limits.max_srq_depth.min(QUEUE_DEPTH_CAP),
            max_completion_queue_depth: limits.max_completion_queue_depth,
            // Inline costs nothing more on rxe (the payload goes in the slot the SGEs use).
            inline_request_threshold: max_inline,
            large_request_threshold: LARGE_REQUEST_THRESHOLD,
            max_caller_data: limits.max_caller_data,
            max_callee_data: limits.max_callee_data,
            adapter_flags: ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED | ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED,
        };
        Ok(AdapterBody {
            adapter,
            notify,
            info,
            requests: Requests::default(),
            device_max_sge: limits.max_initiator_sge,
            deferred_regions: DeferredRegions::default(),
        })
    }

    pub(super) fn local_ip(&self) -> IpAddr {
        self.adapter.local_address()
    }
}

/// The device's inline limit: ibv_query_device does not say it, so a QP of one slot with every
/// SGE asks for none and reads what the provider granted (rxe: its 512, the room of 32 SGEs).
/// 0 when the probe fails (ND_OP_FLAG_INLINE then sends from the SGEs).
fn max_inline_data(adapter: &Adapter, max_sge: u32) -> u32 {
    let Ok(cq) = crate::CompletionQueue::new(adapter, 1) else {
        return 0;
    };
    let cq = Arc::new(cq);
    let cap = ffi::ibv_qp_cap {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: max_sge,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    match crate::QueuePair::with_caps(adapter, &cq, &cq, None, cap) {
        Ok(qp) => qp.inner.granted.max_inline_data,
        Err(_) => 0,
    }
}

/// An overlapped file handle from the caller: ND_INVALID_HANDLE unless it is one.
pub(super) fn file(handle: Handle) -> Result<Arc<OverlappedFile>, HResult> {
    win32::overlapped_file(handle).ok_or(ND_INVALID_HANDLE)
}

/// The local addresses of RDMA devices whose device context `keep` accepts, in interface
/// order (NdQueryAddressList: all; IND2Adapter::QueryAddressList: those of one adapter). An
/// address is RDMA-capable when rdma_cm can bind an id to it on an RDMA device.
pub(super) fn rdma_addresses_where(keep: impl Fn(*mut ffi::ibv_context) -> bool) -> Vec<SocketAddr> {
    let Ok(channel) = crate::sys::EventChannel::new() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return found;
    };
    for interface in interfaces {
        let Some(address) = interface.address else {
            continue;
        };
        let ip = if let Some(v4) = address.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = address.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        let link_local = matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
        if crate::sys::is_loopback(ip) || link_local || found.iter().any(|a: &SocketAddr| a.ip() == ip) {
            continue;
        }
        let on_rdma = channel
            .create_id(u64::MAX)
            .and_then(|id| {
                id.bind(SocketAddr::new(ip, 0))
                    .map(|()| !id.verbs().is_null() && keep(id.verbs()))
            })
            .unwrap_or(false);
        if on_rdma {
            found.push(SocketAddr::new(ip, 0));
        }
    }
    found
}

/// Writes `list` as a SOCKET_ADDRESS_LIST into the caller's buffer: the list, then the
/// sockaddrs it points to. A short buffer is untouched: ND_BUFFER_OVERFLOW with the size.
///
/// # Safety
/// `len` is NULL or valid for a size; `buffer` is NULL or writable for `*len` bytes.
pub(super) unsafe fn write_address_list(addrs: &[SocketAddr], buffer: *mut c_void, len: *mut usize) -> HResult {
    if len.is_null() {
        return ND_INVALID_PARAMETER;
    }
    const HEADER: usize = 8; // INT iAddressCount, padded to SOCKET_ADDRESS's alignment
    const ENTRY: usize = 16; // { struct sockaddr *lpSockaddr; INT iSockaddrLength; }
    let encoded: Vec<Vec<u8>> = addrs.iter().map(|a| crate::sys::sockaddr_bytes(*a)).collect();
    let slot = |b: &Vec<u8>| b.len().next_multiple_of(8);
    let need = HEADER + ENTRY * addrs.len().max(1) + encoded.iter().map(slot).sum::<usize>();
    // SAFETY: non-NULL, readable and writable (the caller's promise).
    let have = unsafe { len.read() };
    // SAFETY: as above.
    unsafe { len.write(need) };
    if buffer.is_null() || have < need {
        return ND_BUFFER_OVERFLOW;
    }
    let base = buffer.cast::<u8>();
    // SAFETY: `need` bytes are writable at `base` (checked); unaligned writes, as the caller's
    // buffer may be any byte array.
    unsafe {
        std::ptr::write_bytes(base, 0, need);
        base.cast::<i32>().write_unaligned(addrs.len() as i32);
        let mut data = HEADER + ENTRY * addrs.len().max(1);
        for (i, bytes) in encoded.iter().enumerate() {
            let entry = base.add(HEADER + ENTRY * i);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(data), bytes.len());
            entry.cast::<*mut u8>().write_unaligned(base.add(data));
            entry.add(8).cast::<i32>().write_unaligned(bytes.len() as i32);
            data += slot(bytes);
        }
    }
    ND_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_list_probe_then_fill() {
        let addrs: Vec<SocketAddr> = vec!["198.18.0.1:0".parse().unwrap(), "[fd00::1]:0".parse().unwrap()];
        let mut len = 0usize;
        // SAFETY: a NULL buffer with a live size.
        let probe = unsafe { write_address_list(&addrs, std::ptr::null_mut(), &mut len) };
        assert_eq!(probe, ND_BUFFER_OVERFLOW);
        assert_eq!(len, 8 + 2 * 16 + 16 + 32);
        let mut buffer = vec![0u64; len / 8];
        // SAFETY: `len` bytes of a live buffer.
        let filled = unsafe { write_address_list(&addrs, buffer.as_mut_ptr().cast(), &mut len) };
        assert_eq!(filled, ND_SUCCESS);
        let base = buffer.as_ptr() as usize;
        assert_eq!(buffer[0] as u32, 2);
        assert_eq!(buffer[1] as usize, base + 8 + 32);
        assert_eq!(buffer[2] as u32, 16);
        assert_eq!(buffer[3] as usize, base + 8 + 32 + 16);
        assert_eq!(buffer[4] as u32, 28);
    }

    #[test]
    fn adapter_id_is_the_ipv4_address() {
        assert_eq!(adapter_id("198.18.0.2".parse().unwrap()), 0xC612_0002);
    }
}
