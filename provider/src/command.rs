//! The kernel command channel: uverbs commands on a context's `cmd_fd`,
//! built from `kernel-abi` types.
//!
//! Every command goes through the ioctl interface when the kernel has it
//! (Linux 4.20+): the write() command's body, response and rxe's driver
//! parts as the attributes of the device's INVOKE_WRITE method, as
//! libibverbs sends the commands it has no native method for
//! (`ioctl_write` in its `cmd_fallback.c`). The kernel refuses a write()
//! from a process whose credentials changed since it opened the device
//! (`uverbs_write`: "changed security contexts"), an ioctl it does not;
//! so a program that drops a capability after opening keeps the device, as
//! with the stock provider. write() is the fallback for a kernel without
//! the method.
//!
//! The post_send doorbell is a write(), the cheaper call (as in the stock
//! provider), until the kernel refuses one with EACCES: from then on every
//! doorbell of the QP, and of every QP the process creates later, goes by
//! INVOKE_WRITE, which carries POST_SEND too ([`doorbell_by_ioctl`]). Only a
//! QP's first post after a credential change pays the refused write(); the
//! stock provider's posts fail there.
//!
//! A legacy command is `ib_uverbs_cmd_hdr` + body in one write(); sizes are in
//! 4-byte words and include the header; the body's `response` field carries
//! the address the kernel writes the response to. An extended command is
//! `ib_uverbs_cmd_hdr` + `ib_uverbs_ex_cmd_hdr` + body; sizes are in 8-byte
//! words and exclude both headers; the response address is in the ex header.
//! Everything is one contiguous buffer: the uverbs file has no write_iter, so
//! writev() would split a command into several writes.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::os::fd::{BorrowedFd, RawFd};

use kernel_abi::{
    ib_uverbs_attr, ib_uverbs_attr_attr_data, ib_uverbs_attr_value, ib_uverbs_ioctl_hdr, RDMA_DRIVER_RXE,
    RDMA_VERBS_IOCTL, UVERBS_ATTR_CORE_IN, UVERBS_ATTR_CORE_OUT, UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT,
    UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT, UVERBS_ATTR_WRITE_CMD, UVERBS_METHOD_INVOKE_WRITE, UVERBS_OBJECT_DEVICE,
};
use kernel_abi::{
    ib_uverbs_cmd_hdr, ib_uverbs_ex_cmd_hdr, ib_uverbs_ex_query_device, ib_uverbs_ex_query_device_resp,
    ib_uverbs_get_context, ib_uverbs_get_context_resp, ib_uverbs_query_device, ib_uverbs_query_device_resp,
    ib_uverbs_query_port, ib_uverbs_query_port_resp, IB_USER_VERBS_CMD_FLAG_EXTENDED, IB_USER_VERBS_CMD_GET_CONTEXT,
    IB_USER_VERBS_CMD_QUERY_DEVICE, IB_USER_VERBS_CMD_QUERY_PORT, IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

use crate::errno::Errno;

/// Large enough for every write() command the stock rxe provider issues.
const CMD_BUF_MAX: usize = 512;

/// A legacy write() command: its id and response type, and where in the
/// body the response address goes.
pub trait WriteCmd: IntoBytes + Immutable {
    const ID: u32;
    type Resp: FromBytes + IntoBytes;
    /// How much of the response is the kernel's core part; the rest is the
    /// driver's (rxe's mmap info), UHW_OUT when sent by ioctl.
    const CORE_RESP: usize = core::mem::size_of::<Self::Resp>();
    fn set_response(&mut self, addr: u64);
}

/// The common [`WriteCmd`]: a kernel command struct whose `response` field
/// carries the response address. `impl_write_cmd!(Cmd, ID, Resp);`
/// `impl_write_cmd!(Cmd, ID, Resp, core: CoreResp);` for a response whose
/// first part is `CoreResp` and the rest the driver's.
macro_rules! impl_write_cmd {
    ($cmd:ty, $id:expr, $resp:ty) => {
        impl $crate::command::WriteCmd for $cmd {
            const ID: u32 = $id;
            type Resp = $resp;
            fn set_response(&mut self, addr: u64) {
                self.response = addr;
            }
        }
    };
    ($cmd:ty, $id:expr, $resp:ty, core: $core:ty) => {
        impl $crate::command::WriteCmd for $cmd {
            const ID: u32 = $id;
            type Resp = $resp;
            const CORE_RESP: usize = {
                assert!(core::mem::size_of::<$core>() <= core::mem::size_of::<$resp>());
                core::mem::size_of::<$core>()
            };
            fn set_response(&mut self, addr: u64) {
                self.response = addr;
            }
        }
    };
}
pub(crate) use impl_write_cmd;

/// An extended write() command (response address in the ex header).
pub trait WriteExCmd: IntoBytes + Immutable {
    const ID: u32;
    type Resp: FromBytes + IntoBytes;
}

impl_write_cmd!(
    ib_uverbs_get_context,
    IB_USER_VERBS_CMD_GET_CONTEXT,
    ib_uverbs_get_context_resp
);

impl_write_cmd!(
    ib_uverbs_query_device,
    IB_USER_VERBS_CMD_QUERY_DEVICE,
    ib_uverbs_query_device_resp
);

impl_write_cmd!(
    ib_uverbs_query_port,
    IB_USER_VERBS_CMD_QUERY_PORT,
    ib_uverbs_query_port_resp
);

impl WriteExCmd for ib_uverbs_ex_query_device {
    const ID: u32 = IB_USER_VERBS_EX_CMD_QUERY_DEVICE;
    type Resp = ib_uverbs_ex_query_device_resp;
}

fn words(bytes: usize, unit: usize) -> Result<u16, Errno> {
    if bytes % unit != 0 {
        return Err(Errno::EINVAL);
    }
    u16::try_from(bytes / unit).map_err(|_| Errno::EINVAL)
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) -> Result<usize, Errno> {
    let end = at.checked_add(bytes.len()).ok_or(Errno::EINVAL)?;
    out.get_mut(at..end).ok_or(Errno::EINVAL)?.copy_from_slice(bytes);
    Ok(end)
}

/// Frames a legacy command into `out`; returns the length to write.
pub fn frame_write(out: &mut [u8], id: u32, body: &[u8], resp_len: usize) -> Result<usize, Errno> {
    let total = core::mem::size_of::<ib_uverbs_cmd_hdr>() + body.len();
    let hdr = ib_uverbs_cmd_hdr {
        command: id,
        in_words: words(total, 4)?,
        out_words: words(resp_len, 4)?,
    };
    let at = put(out, 0, hdr.as_bytes())?;
    put(out, at, body)
}

/// Frames an extended command into `out`; returns the length to write.
pub fn frame_write_ex(out: &mut [u8], id: u32, body: &[u8], response: u64, resp_len: usize) -> Result<usize, Errno> {
    frame_write_ex_drv(out, id, body, response, resp_len, 0)
}

/// Frames an extended command whose driver response (`drv_resp_len` bytes)
/// the kernel writes right after the core response (`resp_len` bytes).
pub fn frame_write_ex_drv(
    out: &mut [u8],
    id: u32,
    body: &[u8],
    response: u64,
    resp_len: usize,
    drv_resp_len: usize,
) -> Result<usize, Errno> {
    let hdr = ib_uverbs_cmd_hdr {
        command: IB_USER_VERBS_CMD_FLAG_EXTENDED | id,
        in_words: words(body.len(), 8)?,
        out_words: words(resp_len, 8)?,
    };
    let ex = ib_uverbs_ex_cmd_hdr {
        response,
        provider_in_words: 0,
        provider_out_words: words(drv_resp_len, 8)?,
        cmd_hdr_reserved: 0,
    };
    let at = put(out, 0, hdr.as_bytes())?;
    let at = put(out, at, ex.as_bytes())?;
    put(out, at, body)
}

/// The address the kernel writes a response to. Casting exposes the
/// pointer's provenance, so the compiler knows write() may store through it.
fn response_addr<R>(resp: &mut R) -> u64 {
    core::ptr::from_mut(resp) as usize as u64
}

/// write() of `bytes` to `fd` (the doorbell's: no framing, no retry): the number written, or -1
/// with errno set.
#[inline(always)]
pub(crate) fn write_fd(fd: RawFd, bytes: &[u8]) -> isize {
    // SAFETY: bytes is a live, initialised buffer of its length, only read.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }
}

#[inline]
fn write_all(fd: RawFd, buf: &[u8]) -> Result<(), Errno> {
    // BorrowedFd cannot hold -1 (it panics): what write would say of it.
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    // SAFETY: fd is the context's command fd, open while the caller holds the
    // context.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let n = nix::unistd::write(fd, buf).map_err(Errno::from_nix)?;
    // The uverbs write handler consumes a command whole or fails it.
    if n != buf.len() {
        return Err(Errno::EIO);
    }
    Ok(())
}

/// A legacy command as one buffer: the header, then the body. Built in
/// place rather than copied into a framing buffer: the doorbell of every
/// post_send is one of these.
#[repr(C)]
struct Framed<C> {
    hdr: ib_uverbs_cmd_hdr,
    body: C,
}

impl<C: IntoBytes + Immutable> Framed<C> {
    fn new(id: u32, body: C, resp_len: usize) -> Result<Framed<C>, Errno> {
        let hdr = ib_uverbs_cmd_hdr {
            command: id,
            in_words: words(core::mem::size_of::<Framed<C>>(), 4)?,
            out_words: words(resp_len, 4)?,
        };
        Ok(Framed { hdr, body })
    }

    fn as_bytes(&self) -> &[u8] {
        const {
            assert!(
                core::mem::size_of::<Framed<C>>()
                    == core::mem::size_of::<ib_uverbs_cmd_hdr>() + core::mem::size_of::<C>()
            )
        };
        // SAFETY: repr(C); the header and the body have no padding (both
        // IntoBytes) and, by the size assertion, there is none between or
        // after them, so every byte of the struct is initialised.
        unsafe { core::slice::from_raw_parts(core::ptr::from_ref(self).cast::<u8>(), core::mem::size_of::<Self>()) }
    }
}

/// Issues a legacy command and returns the kernel's response: by ioctl
/// when the kernel has INVOKE_WRITE, by write() otherwise. The kernel
/// fills the whole response buffer (zeroing what it has no value for);
/// callers still validate every value before use.
pub fn write_cmd<C: WriteCmd>(fd: RawFd, cmd: C) -> Result<C::Resp, Errno> {
    if has_ioctl_write(fd) {
        return invoke_write_cmd(fd, cmd);
    }
    write_cmd_raw(fd, cmd)
}

/// Issues a legacy command by INVOKE_WRITE: the body whole as the core
/// request, the response split at `C::CORE_RESP`.
fn invoke_write_cmd<C: WriteCmd>(fd: RawFd, mut cmd: C) -> Result<C::Resp, Errno> {
    let mut resp = C::Resp::new_zeroed();
    cmd.set_response(response_addr(&mut resp));
    invoke_write(
        fd,
        C::ID,
        cmd.as_bytes(),
        cmd.as_bytes().len(),
        resp.as_mut_bytes(),
        C::CORE_RESP,
    )?;
    Ok(resp)
}

/// Issues a legacy command by write() only: GET_CONTEXT, which libibverbs
/// also writes (and which a context opened after a credential change sends
/// with the credentials it was opened with).
pub fn write_cmd_raw<C: WriteCmd>(fd: RawFd, mut cmd: C) -> Result<C::Resp, Errno> {
    let mut resp = C::Resp::new_zeroed();
    cmd.set_response(response_addr(&mut resp));
    let framed = Framed::new(C::ID, cmd, core::mem::size_of::<C::Resp>())?;
    write_all(fd, framed.as_bytes())?;
    Ok(resp)
}

/// Whether the kernel has refused one of this process's doorbell write()s
/// (EACCES: its credentials changed since the device was opened). The
/// refusal is about the calling thread's credentials against the opener's,
/// so it is remembered for the process, not per context: INVOKE_WRITE
/// serves every context, whoever opened it.
static DOORBELL_WRITE_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether a doorbell write() of this process was refused: a QP created
/// since rings its doorbell by INVOKE_WRITE from the start.
pub fn doorbell_write_refused() -> bool {
    DOORBELL_WRITE_REFUSED.load(Ordering::Relaxed)
}

/// Issues the post_send doorbell `cmd` by INVOKE_WRITE, which the kernel
/// does not check against the opener's credentials (`ib_uverbs_ioctl` has
/// no `ib_safe_file_access`), after the kernel refused a doorbell write()
/// with EACCES; remembered for the process. A kernel without INVOKE_WRITE
/// leaves the EACCES.
#[cold]
#[inline(never)]
pub fn doorbell_by_ioctl<C: WriteCmd>(fd: RawFd, cmd: C) -> Result<C::Resp, Errno> {
    if !has_ioctl_write(fd) {
        return Err(Errno::EACCES);
    }
    DOORBELL_WRITE_REFUSED.store(true, Ordering::Relaxed);
    invoke_write_cmd(fd, cmd)
}

/// A legacy write() command without a response (destroy, attach, detach):
/// `out_words` is 0 and the body has no `response` field.
pub trait WriteReq: IntoBytes + Immutable + Sized {
    const ID: u32;
    /// How much of the body is the kernel's core part; the rest is the
    /// driver's (UHW_IN when sent by ioctl).
    const CORE_REQ: usize = core::mem::size_of::<Self>();
}

/// A [`WriteReq`] whose body is only the handle of the kernel object it
/// destroys (DEALLOC_PD, DEREG_MR, DEALLOC_MW, DESTROY_AH); made by
/// `impl_destroy_req!`.
pub trait DestroyReq: WriteReq {
    fn naming(handle: u32) -> Self;
}

/// `impl_destroy_req!(cmd, ID, handle_field)`: `cmd` is a [`DestroyReq`].
macro_rules! impl_destroy_req {
    ($cmd:ident, $id:expr, $handle:ident) => {
        impl $crate::command::WriteReq for $cmd {
            const ID: u32 = $id;
        }
        impl $crate::command::DestroyReq for $cmd {
            fn naming(handle: u32) -> Self {
                $cmd { $handle: handle }
            }
        }
    };
}
pub(crate) use impl_destroy_req;

/// Destroys kernel object `handle` by command `C`.
pub fn destroy_kernel<C: DestroyReq>(fd: RawFd, handle: u32) -> Result<(), Errno> {
    write_req(fd, C::naming(handle))
}

/// Issues a legacy command that has no response (ioctl first, as
/// [`write_cmd`]).
pub fn write_req<C: WriteReq>(fd: RawFd, cmd: C) -> Result<(), Errno> {
    if has_ioctl_write(fd) {
        return invoke_write(fd, C::ID, cmd.as_bytes(), C::CORE_REQ, &mut [], 0);
    }
    write_all(fd, Framed::new(C::ID, cmd, 0)?.as_bytes())
}

/// Whether this process's kernel has the INVOKE_WRITE method: unknown, yes, no.
static INVOKE_WRITE: AtomicU8 = AtomicU8::new(PROBE_UNKNOWN);
const PROBE_UNKNOWN: u8 = 0;
const PROBE_YES: u8 = 1;
const PROBE_NO: u8 = 2;

/// libibverbs' `has_ioctl_write` probe, once a process: INVOKE_WRITE of
/// QUERY_DEVICE without its body, which a kernel with the method refuses
/// for the missing request (ENOSPC); ENOTTY (no ioctl interface) and
/// EPROTONOSUPPORT (no such method) say write() it is, and so does ENOSYS
/// (the ioctl never reached the kernel: a seccomp filter, or qemu-user, which
/// refuses ioctls it does not know). Any other answer (a bad fd) decides
/// nothing and is asked again next time.
fn has_ioctl_write(fd: RawFd) -> bool {
    match INVOKE_WRITE.load(Ordering::Relaxed) {
        PROBE_YES => return true,
        PROBE_NO => return false,
        _ => {}
    }
    let probe = IoctlCmd::new(
        UVERBS_OBJECT_DEVICE as u16,
        UVERBS_METHOD_INVOKE_WRITE as u16,
        RDMA_DRIVER_RXE,
        [attr_in_const(
            UVERBS_ATTR_WRITE_CMD as u16,
            u64::from(kernel_abi::IB_USER_VERBS_CMD_QUERY_DEVICE),
        )],
    );
    let answer = probe.and_then(|mut cmd| ioctl_cmd(fd, &mut cmd));
    match probe_says(answer) {
        Some(yes) => {
            INVOKE_WRITE.store(if yes { PROBE_YES } else { PROBE_NO }, Ordering::Relaxed);
            yes
        }
        None => true,
    }
}

/// What the probe's answer says: `Some(true)` the method exists,
/// `Some(false)` it does not, `None` nothing learned.
fn probe_says(answer: Result<(), Errno>) -> Option<bool> {
    match answer {
        Ok(()) | Err(Errno::ENOSPC) => Some(true),
        Err(Errno::ENOTTY | Errno::EPROTONOSUPPORT | Errno::ENOSYS) => Some(false),
        Err(_) => None,
    }
}

/// A byte input attribute as libibverbs' `fill_attr_in`: up to 8 bytes
/// inline in `data`, longer by address; mandatory.
fn attr_in_bytes(attr_id: u16, bytes: &[u8]) -> Result<ib_uverbs_attr, Errno> {
    let len = u16::try_from(bytes.len()).map_err(|_| Errno::EINVAL)?;
    let data = if bytes.len() <= 8 {
        let mut inline = [0u8; 8];
        inline[..bytes.len()].copy_from_slice(bytes);
        u64::from_ne_bytes(inline)
    } else {
        bytes.as_ptr() as usize as u64
    };
    Ok(attr_in(attr_id, len, data))
}

/// A byte output attribute as libibverbs' `fill_attr_out`: by address,
/// mandatory.
fn attr_out_bytes(attr_id: u16, bytes: &mut [u8]) -> Result<ib_uverbs_attr, Errno> {
    let len = u16::try_from(bytes.len()).map_err(|_| Errno::EINVAL)?;
    Ok(ib_uverbs_attr {
        flags: UVERBS_ATTR_F_MANDATORY as u16,
        ..attr_out(attr_id, bytes.as_mut_ptr() as usize as u64, len)
    })
}

/// The attributes of an INVOKE_WRITE call of write() command `id` (the
/// extended flag included): its number, the core request and response, and
/// the driver's parts past them, each only when it has bytes, as
/// libibverbs' `ioctl_write` fills them. Returns the attributes and how
/// many are used.
fn invoke_write_attrs(
    id: u32,
    req: &[u8],
    core_req: usize,
    resp: &mut [u8],
    core_resp: usize,
) -> Result<([ib_uverbs_attr; 5], usize), Errno> {
    let (core_in, uhw_in) = req.split_at_checked(core_req).ok_or(Errno::EINVAL)?;
    let (core_out, uhw_out) = resp.split_at_mut_checked(core_resp).ok_or(Errno::EINVAL)?;
    let mut attrs = [attr_in_const(UVERBS_ATTR_WRITE_CMD as u16, u64::from(id)); 5];
    let mut n = 1;
    // Only the parts that are there, in this order.
    let parts = [
        (!core_in.is_empty()).then(|| attr_in_bytes(UVERBS_ATTR_CORE_IN as u16, core_in)),
        (!core_out.is_empty()).then(|| attr_out_bytes(UVERBS_ATTR_CORE_OUT as u16, core_out)),
        (!uhw_in.is_empty()).then(|| attr_in_bytes(UVERBS_ATTR_UHW_IN as u16, uhw_in)),
        (!uhw_out.is_empty()).then(|| attr_out_bytes(UVERBS_ATTR_UHW_OUT as u16, uhw_out)),
    ];
    for part in parts.into_iter().flatten() {
        attrs[n] = part?;
        n += 1;
    }
    Ok((attrs, n))
}

/// Issues write() command `id` through the ioctl interface (INVOKE_WRITE):
/// `req` is the body after the write() header(s), its first `core_req`
/// bytes the kernel's struct and the rest the driver's; `resp` likewise
/// with `core_resp`. The kernel writes the response where the attributes
/// point, not at the body's `response` field.
fn invoke_write(
    fd: RawFd,
    id: u32,
    req: &[u8],
    core_req: usize,
    resp: &mut [u8],
    core_resp: usize,
) -> Result<(), Errno> {
    let (attrs, n) = invoke_write_attrs(id, req, core_req, resp, core_resp)?;
    let mut cmd = IoctlCmd::new(
        UVERBS_OBJECT_DEVICE as u16,
        UVERBS_METHOD_INVOKE_WRITE as u16,
        RDMA_DRIVER_RXE,
        attrs,
    )?;
    cmd.use_first(n)?;
    ioctl_cmd(fd, &mut cmd)
}

/// An ioctl() method call: the header and its attributes in one buffer, as
/// the kernel reads them (and writes `flags` of output attributes back).
#[repr(C)]
pub struct IoctlCmd<const N: usize> {
    pub hdr: ib_uverbs_ioctl_hdr,
    pub attrs: [ib_uverbs_attr; N],
}

impl<const N: usize> IoctlCmd<N> {
    /// A call of `method` on `object`, for a device of `driver_id`.
    pub fn new(object_id: u16, method_id: u16, driver_id: u32, attrs: [ib_uverbs_attr; N]) -> Result<Self, Errno> {
        let hdr = ib_uverbs_ioctl_hdr {
            length: u16::try_from(core::mem::size_of::<Self>()).map_err(|_| Errno::EINVAL)?,
            object_id,
            method_id,
            num_attrs: u16::try_from(N).map_err(|_| Errno::EINVAL)?,
            reserved1: 0,
            driver_id,
            reserved2: 0,
            attrs: [],
        };
        Ok(IoctlCmd { hdr, attrs })
    }

    /// Sends only the first `n` attributes: the header's count and length
    /// say so, and the kernel reads no further.
    pub fn use_first(&mut self, n: usize) -> Result<(), Errno> {
        if n > N {
            return Err(Errno::EINVAL);
        }
        let len = core::mem::size_of::<ib_uverbs_ioctl_hdr>() + n * core::mem::size_of::<ib_uverbs_attr>();
        self.hdr.num_attrs = u16::try_from(n).map_err(|_| Errno::EINVAL)?;
        self.hdr.length = u16::try_from(len).map_err(|_| Errno::EINVAL)?;
        Ok(())
    }
}

/// An output attribute: the kernel writes up to `len` bytes at `addr` and
/// sets `UVERBS_ATTR_F_VALID_OUTPUT` in the attribute's `flags`.
pub fn attr_out(attr_id: u16, addr: u64, len: u16) -> ib_uverbs_attr {
    ib_uverbs_attr {
        attr_id,
        len,
        flags: 0,
        attr_data: ib_uverbs_attr_attr_data { reserved: 0 },
        value: ib_uverbs_attr_value { data: addr },
    }
}

/// An input attribute as libibverbs' `fill_attr_*` make them: flagged
/// mandatory (a kernel that does not know it fails the call rather than
/// ignoring it), `data` as given.
fn attr_in(attr_id: u16, len: u16, data: u64) -> ib_uverbs_attr {
    ib_uverbs_attr {
        attr_id,
        len,
        flags: UVERBS_ATTR_F_MANDATORY as u16,
        attr_data: ib_uverbs_attr_attr_data { reserved: 0 },
        value: ib_uverbs_attr_value { data },
    }
}

/// An object handle (`UVERBS_ATTR_TYPE_IDR`): the handle in `data`, no length.
pub fn attr_in_obj(attr_id: u16, handle: u32) -> ib_uverbs_attr {
    attr_in(attr_id, 0, u64::from(handle))
}

/// A constant (`UVERBS_ATTR_TYPE_CONST_IN`): always 8 bytes inline.
pub fn attr_in_const(attr_id: u16, value: u64) -> ib_uverbs_attr {
    attr_in(attr_id, 8, value)
}

/// A 32-bit input, flags for instance: its 4 bytes at the start of `data`
/// (in memory order, as libibverbs' memcpy puts them).
pub fn attr_in_u32(attr_id: u16, value: u32) -> ib_uverbs_attr {
    let mut data = [0u8; 8];
    data[..4].copy_from_slice(&value.to_ne_bytes());
    attr_in(attr_id, 4, u64::from_ne_bytes(data))
}

/// An array input of `count` elements of `T` at `addr`. `T` is larger than
/// the 8 bytes the kernel takes inline, so any non-empty array goes by
/// address; an empty one has length 0 and no address, as libibverbs sends it
/// (and the kernel judges it). An array whose length does not fit the
/// attribute's 16 bits is `EINVAL`, libibverbs' answer before any ioctl.
pub fn attr_in_array<T>(attr_id: u16, addr: u64, count: u32) -> Result<ib_uverbs_attr, Errno> {
    const { assert!(core::mem::size_of::<T>() > 8) };
    let len = u64::from(count) * core::mem::size_of::<T>() as u64;
    let len = u16::try_from(len).map_err(|_| Errno::EINVAL)?;
    Ok(attr_in(attr_id, len, if len == 0 { 0 } else { addr }))
}

/// Whether the kernel wrote output attribute `attr`.
pub fn output_valid(attr: &ib_uverbs_attr) -> bool {
    u32::from(attr.flags) & UVERBS_ATTR_F_VALID_OUTPUT != 0
}

/// Issues an ioctl() method call.
#[cfg(not(miri))]
pub fn ioctl_cmd<const N: usize>(fd: RawFd, cmd: &mut IoctlCmd<N>) -> Result<(), Errno> {
    // SAFETY: cmd is a live, exclusively borrowed buffer of hdr.length bytes
    // laid out as the kernel expects; every output attribute points at
    // memory the caller keeps alive and writable for this call.
    let rc = unsafe { libc::ioctl(fd, RDMA_VERBS_IOCTL as _, core::ptr::from_mut(cmd)) };
    if rc != 0 {
        return Err(Errno::last_os_error());
    }
    Ok(())
}

/// Under Miri, which cannot model ioctl(): every fd a test hands the
/// provider is a memfd, a temporary file or an eventfd (the fake kernels),
/// and Linux answers an ioctl on those ENOTTY, so commands take write().
#[cfg(miri)]
pub fn ioctl_cmd<const N: usize>(_fd: RawFd, _cmd: &mut IoctlCmd<N>) -> Result<(), Errno> {
    Err(Errno::ENOTTY)
}

/// [`invoke_write`] of extended command `cmd`, whose body is all the
/// kernel's; `resp`'s first `core_resp` bytes are the kernel's response.
fn invoke_write_ex<C: WriteExCmd>(fd: RawFd, cmd: &C, resp: &mut [u8], core_resp: usize) -> Result<(), Errno> {
    let body = cmd.as_bytes();
    invoke_write(
        fd,
        IB_USER_VERBS_CMD_FLAG_EXTENDED | C::ID,
        body,
        body.len(),
        resp,
        core_resp,
    )
}

/// Issues an extended command and returns the kernel's response (ioctl
/// first, as [`write_cmd`]).
pub fn write_ex_cmd<C: WriteExCmd>(fd: RawFd, cmd: C) -> Result<C::Resp, Errno> {
    let mut resp = C::Resp::new_zeroed();
    if has_ioctl_write(fd) {
        invoke_write_ex(fd, &cmd, resp.as_mut_bytes(), core::mem::size_of::<C::Resp>())?;
        return Ok(resp);
    }
    let addr = response_addr(&mut resp);
    let mut buf = [0u8; CMD_BUF_MAX];
    let len = frame_write_ex(&mut buf, C::ID, cmd.as_bytes(), addr, core::mem::size_of::<C::Resp>())?;
    write_all(fd, &buf[..len])?;
    Ok(resp)
}

/// Issues an extended command with a driver response `D` (rxe's create
/// responses) and returns both parts.
pub fn write_ex_cmd_drv<C: WriteExCmd, D: FromBytes>(fd: RawFd, cmd: C) -> Result<(C::Resp, D), Errno> {
    /// One 8-aligned block: the kernel writes the driver part at `response +
    /// out_words * 8`, right after the core part.
    #[repr(C, align(8))]
    struct RespBuf([u8; CMD_BUF_MAX]);
    let core_len = core::mem::size_of::<C::Resp>();
    let drv_len = core::mem::size_of::<D>();
    if core_len + drv_len > CMD_BUF_MAX {
        return Err(Errno::EINVAL);
    }
    let mut resp = RespBuf([0; CMD_BUF_MAX]);
    if has_ioctl_write(fd) {
        invoke_write_ex(fd, &cmd, &mut resp.0[..core_len + drv_len], core_len)?;
    } else {
        let addr = response_addr(&mut resp);
        let mut buf = [0u8; CMD_BUF_MAX];
        let len = frame_write_ex_drv(&mut buf, C::ID, cmd.as_bytes(), addr, core_len, drv_len)?;
        write_all(fd, &buf[..len])?;
    }
    let core = C::Resp::read_from_bytes(&resp.0[..core_len]).map_err(|_| Errno::EINVAL)?;
    let drv = D::read_from_bytes(&resp.0[core_len..core_len + drv_len]).map_err(|_| Errno::EINVAL)?;
    Ok((core, drv))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_ne_bytes([b[at], b[at + 1]])
    }
    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// `frame_write` into a buffer of 64 bytes: the buffer and the length framed.
    fn framed(id: u32, body: &[u8], resp_len: usize) -> ([u8; 64], usize) {
        let mut buf = [0u8; 64];
        let n = frame_write(&mut buf, id, body, resp_len).unwrap();
        (buf, n)
    }

    #[test]
    fn get_context_is_header_plus_response_address() {
        let cmd = ib_uverbs_get_context {
            response: 0x1122_3344_5566_7788,
            driver_data: [],
        };
        let (buf, n) = framed(IB_USER_VERBS_CMD_GET_CONTEXT, cmd.as_bytes(), 8);
        assert_eq!(n, 16);
        assert_eq!(u32_at(&buf, 0), 0);
        assert_eq!(u16_at(&buf, 4), 4); // (8 header + 8 body) / 4
        assert_eq!(u16_at(&buf, 6), 2); // 8-byte response / 4
        assert_eq!(u64_at(&buf, 8), 0x1122_3344_5566_7788);
    }

    /// QUERY_PORT of port 1, its response at 8.
    fn query_port_1() -> ib_uverbs_query_port {
        ib_uverbs_query_port {
            response: 8,
            port_num: 1,
            reserved: [0; 7],
            driver_data: [],
        }
    }

    /// QUERY_DEVICE, its response at `response`.
    fn query_device(response: u64) -> ib_uverbs_query_device {
        ib_uverbs_query_device {
            response,
            driver_data: [],
        }
    }

    #[test]
    fn commands_built_in_place_are_the_framed_bytes() {
        let cmd = query_port_1();
        let (buf, n) = framed(IB_USER_VERBS_CMD_QUERY_PORT, cmd.as_bytes(), 40);
        let in_place = Framed::new(IB_USER_VERBS_CMD_QUERY_PORT, cmd, 40).unwrap();
        assert_eq!(in_place.as_bytes(), &buf[..n]);
        let cmd = query_device(0x55);
        let (buf, n) = framed(IB_USER_VERBS_CMD_QUERY_DEVICE, cmd.as_bytes(), 0);
        assert_eq!(
            Framed::new(IB_USER_VERBS_CMD_QUERY_DEVICE, cmd, 0).unwrap().as_bytes(),
            &buf[..n]
        );
        // A response length that is not whole words is refused, as framed.
        assert_eq!(
            Framed::new(IB_USER_VERBS_CMD_QUERY_DEVICE, cmd, 3).err(),
            Some(Errno::EINVAL)
        );
    }

    #[test]
    fn query_port_carries_the_port_number() {
        let cmd = query_port_1();
        let (buf, n) = framed(IB_USER_VERBS_CMD_QUERY_PORT, cmd.as_bytes(), 40);
        assert_eq!(n, 24);
        assert_eq!(u32_at(&buf, 0), 2);
        assert_eq!(u16_at(&buf, 4), 6);
        assert_eq!(u16_at(&buf, 6), 10);
        assert_eq!(buf[16], 1);
    }

    #[test]
    fn query_device_asks_for_the_whole_176_byte_response() {
        let cmd = query_device(0);
        let (buf, _) = framed(IB_USER_VERBS_CMD_QUERY_DEVICE, cmd.as_bytes(), 176);
        assert_eq!((u32_at(&buf, 0), u16_at(&buf, 4), u16_at(&buf, 6)), (1, 4, 44));
    }

    #[test]
    fn extended_query_device_uses_8_byte_words_without_headers() {
        let cmd = ib_uverbs_ex_query_device {
            comp_mask: 0,
            reserved: 0,
        };
        let mut buf = [0u8; 64];
        let n = frame_write_ex(&mut buf, IB_USER_VERBS_EX_CMD_QUERY_DEVICE, cmd.as_bytes(), 0xabc0, 304).unwrap();
        assert_eq!(n, 8 + 16 + 8);
        assert_eq!(u32_at(&buf, 0), 0x8000_0001);
        assert_eq!(u16_at(&buf, 4), 1); // 8-byte body
        assert_eq!(u16_at(&buf, 6), 38); // 304 / 8
        assert_eq!(u64_at(&buf, 8), 0xabc0);
        assert_eq!((u16_at(&buf, 16), u16_at(&buf, 18), u32_at(&buf, 20)), (0, 0, 0));
    }

    #[test]
    fn extended_driver_response_length_goes_in_the_ex_header() {
        let mut buf = [0u8; 64];
        let n = frame_write_ex_drv(&mut buf, 18, &[0; 32], 0x1000, 16, 16).unwrap();
        assert_eq!(n, 8 + 16 + 32);
        assert_eq!((u32_at(&buf, 0), u16_at(&buf, 4), u16_at(&buf, 6)), (0x8000_0012, 4, 2));
        assert_eq!((u64_at(&buf, 8), u16_at(&buf, 16), u16_at(&buf, 18)), (0x1000, 0, 2));
        assert_eq!(
            frame_write_ex_drv(&mut buf, 18, &[0; 32], 0, 16, 12),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn framing_rejects_what_the_kernel_would() {
        let mut buf = [0u8; 64];
        // Not a whole number of words.
        assert_eq!(frame_write(&mut buf, 0, &[0; 6], 8), Err(Errno::EINVAL));
        assert_eq!(frame_write(&mut buf, 0, &[0; 8], 6), Err(Errno::EINVAL));
        assert_eq!(frame_write_ex(&mut buf, 1, &[0; 4], 0, 8), Err(Errno::EINVAL));
        assert_eq!(frame_write_ex(&mut buf, 1, &[0; 8], 0, 12), Err(Errno::EINVAL));
        // Does not fit the buffer, or the 16-bit word count.
        assert_eq!(frame_write(&mut buf, 0, &[0; 64], 8), Err(Errno::EINVAL));
        assert_eq!(frame_write(&mut buf, 0, &[0; 8], 4 * 65536), Err(Errno::EINVAL));
    }

    #[test]
    fn a_request_without_response_asks_for_no_output() {
        let body = [7u8; 24];
        let mut buf = [0u8; 64];
        let n = frame_write(&mut buf, 30, &body, 0).unwrap();
        assert_eq!(n, 32);
        assert_eq!((u32_at(&buf, 0), u16_at(&buf, 4), u16_at(&buf, 6)), (30, 8, 0));
        assert_eq!(&buf[8..32], &body);
    }

    #[test]
    fn an_ioctl_call_is_its_header_then_its_attributes() {
        let cmd = IoctlCmd::new(0, 4, 14, [attr_out(1, 0xdead_beef, 8)]).unwrap();
        assert_eq!(core::mem::size_of_val(&cmd), 24 + 16);
        assert_eq!(
            (cmd.hdr.length, cmd.hdr.object_id, cmd.hdr.method_id, cmd.hdr.num_attrs),
            (40, 0, 4, 1)
        );
        assert_eq!(cmd.hdr.driver_id, 14);
        let a = &cmd.attrs[0];
        // SAFETY: attr_out writes the `data` arm.
        let data = unsafe { a.value.data };
        assert_eq!((a.attr_id, a.len, a.flags, data), (1, 8, 0, 0xdead_beef));
        assert!(!output_valid(a));
        let written = ib_uverbs_attr {
            flags: UVERBS_ATTR_F_VALID_OUTPUT as u16,
            ..*a
        };
        assert!(output_valid(&written));
    }

    #[test]
    fn input_attributes_are_mandatory_and_encoded_as_libibverbs_fills_them() {
        fn data(attr: &ib_uverbs_attr) -> u64 {
            // SAFETY: the input helpers write the `data` arm.
            unsafe { attr.value.data }
        }
        let obj = attr_in_obj(0, 0xdead_beef);
        assert_eq!((obj.attr_id, obj.len, obj.flags, data(&obj)), (0, 0, 1, 0xdead_beef));
        let konst = attr_in_const(1, 2);
        assert_eq!((konst.len, konst.flags, data(&konst)), (8, 1, 2));
        let word = attr_in_u32(2, 0x0102_0304);
        let bytes = data(&word).to_ne_bytes();
        assert_eq!(word.len, 4);
        assert_eq!(
            (&bytes[..4], &bytes[4..]),
            (&0x0102_0304u32.to_ne_bytes()[..], &[0u8; 4][..])
        );
        #[allow(dead_code)]
        struct Twelve([u8; 12]);
        let array = attr_in_array::<Twelve>(3, 0x1000, 2).unwrap();
        assert_eq!((array.len, data(&array)), (24, 0x1000));
        let empty = attr_in_array::<Twelve>(3, 0x1000, 0).unwrap();
        assert_eq!((empty.len, data(&empty)), (0, 0));
        assert_eq!(attr_in_array::<Twelve>(3, 0x1000, 5462).err(), Some(Errno::EINVAL));
        assert_eq!(attr_in_array::<Twelve>(3, 0x1000, 5461).unwrap().len, 65532);
    }

    fn attr_data(attr: &ib_uverbs_attr) -> u64 {
        // SAFETY: every helper writes the `data` arm.
        unsafe { attr.value.data }
    }

    #[test]
    fn invoke_write_carries_the_command_its_parts_and_the_driver_parts() {
        // A create_cq as libibverbs' ioctl_write sends it: the command
        // number, the 32-byte core body by address, the 16-byte core
        // response and rxe's 32-byte mmap info past it.
        let req = [1u8; 32];
        let mut resp = [0u8; 48];
        let resp_at = resp.as_ptr() as usize as u64;
        let (attrs, n) = invoke_write_attrs(18, &req, 32, &mut resp, 16).unwrap();
        assert_eq!(n, 4);
        let ids: Vec<u16> = attrs[..n].iter().map(|a| a.attr_id).collect();
        assert_eq!(
            ids,
            [
                UVERBS_ATTR_WRITE_CMD as u16,
                UVERBS_ATTR_CORE_IN as u16,
                UVERBS_ATTR_CORE_OUT as u16,
                UVERBS_ATTR_UHW_OUT as u16
            ]
        );
        assert_eq!((attrs[0].len, attr_data(&attrs[0])), (8, 18));
        assert_eq!((attrs[1].len, attr_data(&attrs[1])), (32, req.as_ptr() as usize as u64));
        assert_eq!((attrs[2].len, attr_data(&attrs[2])), (16, resp_at));
        assert_eq!((attrs[3].len, attr_data(&attrs[3])), (32, resp_at + 16));
        assert!(attrs[..n].iter().all(|a| a.flags == UVERBS_ATTR_F_MANDATORY as u16));
    }

    #[test]
    fn invoke_write_puts_short_inputs_inline_and_skips_empty_parts() {
        // dealloc_pd: a 4-byte body, no response: inline, as the kernel
        // reads an input of up to 8 bytes from the attribute itself.
        let body = 0x0102_0304u32.to_ne_bytes();
        let (attrs, n) = invoke_write_attrs(4, &body, 4, &mut [], 0).unwrap();
        assert_eq!(n, 2);
        assert_eq!(attrs[1].len, 4);
        assert_eq!(&attr_data(&attrs[1]).to_ne_bytes()[..4], &body);
        // modify_srq: the core body, then rxe's 8-byte driver part as UHW_IN.
        let mut req = [0u8; 32];
        req[24..].copy_from_slice(&0xabcd_u64.to_ne_bytes());
        let (attrs, n) = invoke_write_attrs(38, &req, 24, &mut [], 0).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            (attrs[2].attr_id, attrs[2].len, attr_data(&attrs[2])),
            (UVERBS_ATTR_UHW_IN as u16, 8, 0xabcd)
        );
        // A split past the end is refused before any ioctl.
        assert_eq!(invoke_write_attrs(1, &req, 40, &mut [], 0).err(), Some(Errno::EINVAL));
    }

    #[test]
    fn the_post_send_doorbell_by_ioctl_is_its_body_and_the_bad_wr_word() {
        // POST_SEND without work requests: the kernel's 24-byte request (as
        // its req_size) by address, the 4-byte response (bad_wr) as CORE_OUT,
        // no driver parts.
        let body = [0u8; 24];
        let mut resp = [0u8; 4];
        let (attrs, n) = invoke_write_attrs(kernel_abi::IB_USER_VERBS_CMD_POST_SEND, &body, 24, &mut resp, 4).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            (attrs[0].attr_id, attr_data(&attrs[0])),
            (
                UVERBS_ATTR_WRITE_CMD as u16,
                u64::from(kernel_abi::IB_USER_VERBS_CMD_POST_SEND)
            )
        );
        assert_eq!(
            (attrs[1].attr_id, attrs[1].len, attr_data(&attrs[1])),
            (UVERBS_ATTR_CORE_IN as u16, 24, body.as_ptr() as usize as u64)
        );
        assert_eq!(
            (attrs[2].attr_id, attrs[2].len, attr_data(&attrs[2])),
            (UVERBS_ATTR_CORE_OUT as u16, 4, resp.as_ptr() as usize as u64)
        );
    }

    #[test]
    fn an_ioctl_call_can_send_fewer_attributes_than_it_has_room_for() {
        let mut cmd = IoctlCmd::new(0, 0, 14, [attr_in_const(2, 1); 5]).unwrap();
        cmd.use_first(2).unwrap();
        assert_eq!((cmd.hdr.num_attrs, cmd.hdr.length), (2, 24 + 2 * 16));
        assert_eq!(cmd.use_first(6), Err(Errno::EINVAL));
    }

    #[test]
    fn the_probe_learns_only_from_the_answers_libibverbs_reads() {
        assert_eq!(probe_says(Err(Errno::ENOSPC)), Some(true));
        assert_eq!(probe_says(Ok(())), Some(true));
        assert_eq!(probe_says(Err(Errno::ENOTTY)), Some(false));
        assert_eq!(probe_says(Err(Errno::EPROTONOSUPPORT)), Some(false));
        assert_eq!(probe_says(Err(Errno::ENOSYS)), Some(false));
        assert_eq!(probe_says(Err(Errno::EBADF)), None);
    }

    #[test]
    fn a_bad_fd_is_an_errno_not_a_crash() {
        let cmd = ib_uverbs_get_context {
            response: 0,
            driver_data: [],
        };
        assert_eq!(write_cmd(-1, cmd).err(), Some(Errno::EBADF));
    }
}
