//! What every object made from one IND2Adapter shares ([`AdapterBody`]: the Rust API's
//! [`Adapter`], with the shim's event thread: ND2 never asks the caller to drive events), and
//! the adapter's helpers the other objects use. The IND2Adapter interface, which makes every
//! object, is `ind2_adapter.rs`.

#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rdma_mummy_sys as ffi;

use super::notify::NotifyChannel;
use super::registration::DeferredRegions;
use super::requests::Requests;
use super::win32::{self, Handle, OverlappedFile};
use super::{code, HResult, ND_BUFFER_OVERFLOW, ND_INVALID_HANDLE, ND_SUCCESS};
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

impl AdapterInfo2 {
    /// The structure's bytes, as C reads it (native order, no padding).
    pub(crate) fn to_bytes(self) -> [u8; std::mem::size_of::<AdapterInfo2>()] {
        let mut bytes = [0u8; std::mem::size_of::<AdapterInfo2>()];
        let fields: [&[u8]; 22] = [
            &self.info_version.to_ne_bytes(),
            &self.vendor_id.to_ne_bytes(),
            &self.device_id.to_ne_bytes(),
            &self.adapter_id.to_ne_bytes(),
            &self.max_registration_size.to_ne_bytes(),
            &self.max_window_size.to_ne_bytes(),
            &self.max_initiator_sge.to_ne_bytes(),
            &self.max_receive_sge.to_ne_bytes(),
            &self.max_read_sge.to_ne_bytes(),
            &self.max_transfer_length.to_ne_bytes(),
            &self.max_inline_data_size.to_ne_bytes(),
            &self.max_inbound_read_limit.to_ne_bytes(),
            &self.max_outbound_read_limit.to_ne_bytes(),
            &self.max_receive_queue_depth.to_ne_bytes(),
            &self.max_initiator_queue_depth.to_ne_bytes(),
            &self.max_shared_receive_queue_depth.to_ne_bytes(),
            &self.max_completion_queue_depth.to_ne_bytes(),
            &self.inline_request_threshold.to_ne_bytes(),
            &self.large_request_threshold.to_ne_bytes(),
            &self.max_caller_data.to_ne_bytes(),
            &self.max_callee_data.to_ne_bytes(),
            &self.adapter_flags.to_ne_bytes(),
        ];
        let mut at = 0;
        for field in fields {
            bytes[at..at + field.len()].copy_from_slice(field);
            at += field.len();
        }
        bytes
    }
}

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
        let max_transfer = super::max_message_size(&adapter)
            .unwrap_or_else(|| u32::try_from(limits.max_registration_size).unwrap_or(u32::MAX));
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

/// Writes `addrs` as a SOCKET_ADDRESS_LIST into the caller's buffer: the list, then the
/// sockaddrs it points to (at their addresses in `buffer`). A short buffer is untouched:
/// ND_BUFFER_OVERFLOW. Either way the size needed comes back.
pub(super) fn write_address_list(addrs: &[SocketAddr], buffer: &mut [u8]) -> (usize, HResult) {
    const HEADER: usize = 8; // INT iAddressCount, padded to SOCKET_ADDRESS's alignment
    const ENTRY: usize = 16; // { struct sockaddr *lpSockaddr; INT iSockaddrLength; }
    let encoded: Vec<Vec<u8>> = addrs.iter().map(|a| crate::sys::sockaddr_bytes(*a)).collect();
    let slot = |b: &Vec<u8>| b.len().next_multiple_of(8);
    let need = HEADER + ENTRY * addrs.len().max(1) + encoded.iter().map(slot).sum::<usize>();
    let base = buffer.as_ptr() as usize;
    let Some(buffer) = buffer.get_mut(..need) else {
        return (need, ND_BUFFER_OVERFLOW);
    };
    buffer.fill(0);
    buffer[..4].copy_from_slice(&(addrs.len() as i32).to_ne_bytes());
    let mut data = HEADER + ENTRY * addrs.len().max(1);
    for (i, bytes) in encoded.iter().enumerate() {
        let entry = HEADER + ENTRY * i;
        buffer[data..data + bytes.len()].copy_from_slice(bytes);
        buffer[entry..entry + 8].copy_from_slice(&(base + data).to_ne_bytes());
        buffer[entry + 8..entry + 12].copy_from_slice(&(bytes.len() as i32).to_ne_bytes());
        data += slot(bytes);
    }
    (need, ND_SUCCESS)
}

/// [`write_address_list`] with ND2's 32-bit size: `*len` is the buffer's, and becomes the size
/// needed.
pub(super) fn write_address_list_sized(addrs: &[SocketAddr], buffer: &mut [u8], len: &mut u32) -> HResult {
    let (need, hr) = write_address_list(addrs, buffer);
    *len = u32::try_from(need).unwrap_or(u32::MAX);
    hr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_list_probe_then_fill() {
        let addrs: Vec<SocketAddr> = vec!["198.18.0.1:0".parse().unwrap(), "[fd00::1]:0".parse().unwrap()];
        let (len, probe) = write_address_list(&addrs, &mut []);
        assert_eq!(probe, ND_BUFFER_OVERFLOW);
        assert_eq!(len, 8 + 2 * 16 + 16 + 32);
        let mut bytes = vec![0u8; len];
        let short = len as u32 - 1;
        let mut size = short;
        assert_eq!(
            write_address_list_sized(&addrs, &mut bytes[..short as usize], &mut size),
            ND_BUFFER_OVERFLOW
        );
        assert_eq!((size as usize, bytes.iter().all(|b| *b == 0)), (len, true), "untouched");
        assert_eq!(write_address_list(&addrs, &mut bytes), (len, ND_SUCCESS));
        let base = bytes.as_ptr() as usize;
        let buffer: Vec<u64> = bytes
            .chunks(8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap()))
            .collect();
        assert_eq!(buffer[0] as u32, 2);
        assert_eq!(buffer[1] as usize, base + 8 + 32);
        assert_eq!(buffer[2] as u32, 16);
        assert_eq!(buffer[3] as usize, base + 8 + 32 + 16);
        assert_eq!(buffer[4] as u32, 28);
    }

    #[test]
    fn adapter_info_bytes_are_the_c_layout() {
        let info = AdapterInfo2 {
            info_version: ND_VERSION_2,
            adapter_id: 0x0102_0304_0506_0708,
            max_initiator_sge: 32,
            adapter_flags: 0x101,
            ..AdapterInfo2::default()
        };
        let bytes = info.to_bytes();
        let word = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(word(0), ND_VERSION_2);
        assert_eq!(
            u64::from_ne_bytes(bytes[8..16].try_into().unwrap()),
            0x0102_0304_0506_0708
        );
        assert_eq!(word(std::mem::offset_of!(AdapterInfo2, max_initiator_sge)), 32);
        assert_eq!(word(std::mem::offset_of!(AdapterInfo2, adapter_flags)), 0x101);
    }

    #[test]
    fn adapter_id_is_the_ipv4_address() {
        assert_eq!(adapter_id("198.18.0.2".parse().unwrap()), 0xC612_0002);
    }
}
