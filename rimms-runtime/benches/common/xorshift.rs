//! xorshift64 for the allocator benches: a few instructions, good enough to scatter frees,
//! no dependency. Shared by `alloc.rs` and `alloc_rivals.rs` so both draw the same sequences.

pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform enough in `0..n` for `n` far below 2^64.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
