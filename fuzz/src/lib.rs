//! What the fuzz targets share: a reader of the fuzzer's bytes that never fails (an exhausted
//! input reads as zeroes), so every input is a valid program of calls; the readable pattern
//! their SGEs point into; a byte view of plain C data.

use kernel_abi::rxe_send_wqe;
use rxe_rs::fuzzing::MwBind;
use rxe_rs::libibverbs::qp::ibv_sge;
use zerocopy::FromZeros;

/// `N` readable bytes, byte i being `i * mul + add` (mod 256): what SGEs and inline data point into.
pub const fn pattern<const N: usize>(mul: usize, add: usize) -> [u8; N] {
    let mut s = [0u8; N];
    let mut i = 0;
    while i < N {
        s[i] = (i * mul + add) as u8;
        i += 1;
    }
    s
}

/// A send slot whose previous contents are garbage (every byte `canary`), and `payload_room`
/// bytes of `canary` after its header.
pub fn garbage_send_slot(canary: u8, payload_room: usize) -> (rxe_send_wqe, Vec<u8>) {
    let mut hdr = rxe_send_wqe::new_zeroed();
    // SAFETY: plain integers; the write stays inside `hdr`.
    unsafe {
        core::ptr::write_bytes(
            &mut hdr as *mut rxe_send_wqe as *mut u8,
            canary,
            size_of::<rxe_send_wqe>(),
        )
    };
    (hdr, vec![canary; payload_room])
}

/// The bytes of `v`, for comparing plain C data (integers only, no padding) before and after.
pub fn bytes_of<T>(v: &T) -> &[u8] {
    // SAFETY: the callers' types are plain integers; a read-only view of initialised memory.
    unsafe { core::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        head
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let b = self.bytes(N);
        out[..b.len()].copy_from_slice(b);
        out
    }

    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// A value in `0..n` (n > 0), from one byte when n fits one.
    pub fn below(&mut self, n: u32) -> u32 {
        if n <= 256 {
            u32::from(self.u8()) % n
        } else {
            self.u32() % n
        }
    }

    /// Usually a small value (what limits and lengths mostly are), sometimes any u32: the edges
    /// are where the bugs are.
    pub fn len32(&mut self) -> u32 {
        match self.u8() % 8 {
            0 => self.u32(),
            1 => u32::MAX - u32::from(self.u8()),
            2 => u32::from(self.u16()),
            _ => u32::from(self.u8()),
        }
    }

    /// A limit such as a QP's `max_sge`: usually below 40, one time in four any u32.
    pub fn limit40(&mut self) -> u32 {
        if self.u8() % 4 == 0 {
            self.u32()
        } else {
            u32::from(self.u8() % 40)
        }
    }

    /// A list's length: usually below 40, one time in eight any byte.
    pub fn count40(&mut self) -> usize {
        if self.u8() % 8 == 0 {
            usize::from(self.u8())
        } else {
            usize::from(self.u8() % 40)
        }
    }

    /// An SGE of any address and key; its length a u16, or one time in `long_one_in` any u32.
    pub fn sge(&mut self, long_one_in: u8) -> ibv_sge {
        ibv_sge {
            addr: self.u64(),
            length: if self.u8() % long_one_in == 0 {
                self.u32()
            } else {
                u32::from(self.u16())
            },
            lkey: self.u32(),
        }
    }

    /// A memory window bind's operands, every field any value.
    pub fn mw_bind(&mut self) -> MwBind {
        MwBind {
            addr: self.u64(),
            length: self.u64(),
            mr_lkey: self.u32(),
            mw_rkey: self.u32(),
            new_rkey: self.u32(),
            access: self.u32(),
        }
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data;
        self.data = &[];
        r
    }
}
