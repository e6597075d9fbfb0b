//! What the fuzz targets share: a reader of the fuzzer's bytes that never fails (an exhausted
//! input reads as zeroes), so every input is a valid program of calls.

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

    pub fn rest(&mut self) -> &'a [u8] {
        let r = self.data;
        self.data = &[];
        r
    }
}
