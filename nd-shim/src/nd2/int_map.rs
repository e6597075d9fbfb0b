//! Maps keyed by numbers the shim makes itself (QP numbers, handle values, CQ addresses, epoll
//! tokens), looked up on every completion and wait: SipHash's protection against chosen keys
//! buys nothing for keys no caller chooses, and costs instructions on every lookup
//! (docs/nd2-performance.md). Where the shim picks the numbers densely (handle values, SRQ
//! receive records), a slot vector indexed by them.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A HashMap with [`IntHasher`].
pub(crate) type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// Fibonacci hashing of one integer: the top bits, which hashbrown uses too, depend on every
/// bit of the key.
#[derive(Default)]
pub(crate) struct IntHasher(u64);

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(GOLDEN);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(GOLDEN);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Stores `value` in the freed slot `free` of a slot vector, or in a new slot at its end when
/// there is none to reuse (which freed slot, if any, is the owner's rule): its index.
#[inline]
pub(crate) fn store_in_slot<T>(slots: &mut Vec<Option<T>>, free: Option<usize>, value: T) -> usize {
    match free {
        Some(slot) => {
            slots[slot] = Some(value);
            slot
        }
        None => {
            slots.push(Some(value));
            slots.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_keys_spread_over_the_top_bits() {
        // Handles are multiples of 4 and addresses multiples of 8: the low bits are all zero.
        let tops: std::collections::HashSet<u64> = (0..64u64)
            .map(|i| {
                let mut h = IntHasher::default();
                h.write_usize(0x5555_0000 + i as usize * 64);
                h.finish() >> 57
            })
            .collect();
        assert!(tops.len() > 32, "{} distinct top-7-bit values of 64 keys", tops.len());
    }

    #[test]
    fn a_map_finds_what_it_holds() {
        let mut m: IntMap<usize, u32> = IntMap::default();
        for i in 0..1000 {
            m.insert(i * 4, i as u32);
        }
        assert!((0..1000).all(|i| m[&(i * 4)] == i as u32));
    }
}
