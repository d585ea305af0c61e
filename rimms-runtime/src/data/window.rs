//! A buffer's block in one space, which may hold only part of the buffer: a window.
//!
//! A buffer gets a block for the whole of itself wherever that fits, which is what every run
//! with room does. A device pool smaller than what one call needs at once (a SAR range-filter
//! call reads a row of one 1 MiB matrix and writes a row of another) cannot hold whole buffers,
//! so there a block may cover a fragment-aligned byte range of the buffer instead. A buffer has
//! at most one window per space, and every fragment valid in a space lies inside the buffer's
//! window there (the buffer layer keeps that invariant: it acquires only inside the window and
//! evicts a window's valid fragments before giving the window up).
//!
//! Addresses: a view at buffer offset `o` lives at `block + (o - start)`. The buffer publishes
//! [`Window::base`], the address offset 0 would have (`block - start`, computed with wrapping
//! arithmetic: it may lie before the block's region and is never dereferenced itself), so the
//! lock-free `ptr_in(space, o) = base + o` stays one add for whole blocks and windows alike.

use crate::space::Block;
use std::ops::Range;

/// A block holding bytes `start..end` of a buffer. Its first byte is the buffer's byte
/// `origin` (at most `start`: a window cut down in place keeps the granule it starts in).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub block: Block,
    pub origin: usize,
    pub start: usize,
    pub end: usize,
}

impl Window {
    /// A block holding `bytes` of the buffer.
    pub(crate) fn new(block: Block, bytes: Range<usize>) -> Window {
        Window {
            block,
            origin: bytes.start,
            start: bytes.start,
            end: bytes.end,
        }
    }

    /// The address the buffer's byte 0 would have in this block's space: add a buffer offset
    /// inside the window to get that byte's address.
    pub(crate) fn base(&self) -> *mut u8 {
        self.block.ptr().wrapping_sub(self.origin)
    }

    pub(crate) fn covers(&self, bytes: &Range<usize>) -> bool {
        self.start <= bytes.start && bytes.end <= self.end
    }

    /// The smallest range holding both the window and `bytes`.
    pub(crate) fn hull(&self, bytes: &Range<usize>) -> Range<usize> {
        self.start.min(bytes.start)..self.end.max(bytes.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::{SpaceId, SpaceName};
    use crate::space::Pool;

    /// Byte `o` of the buffer sits at `o - start` in the block, through the published base.
    #[test]
    fn base_plus_offset_is_the_bytes_place_in_the_block() {
        let pool = Pool::new(&SpaceName::new(SpaceId(1), "t"), 1 << 16, 4096).expect("pool");
        let block = pool.alloc(8192).expect("block");
        let w = Window::new(block, 12288..20480);
        for o in [12288usize, 12289, 16384, 20479] {
            assert_eq!(
                w.base().wrapping_add(o),
                block.ptr().wrapping_add(o - 12288)
            );
        }
        // SAFETY: byte 16384 - 12288 = 4096 lies inside the 8192-byte block, which the pool
        // (alive here) owns and no one else uses.
        unsafe { w.base().wrapping_add(16384).write(7) };
        // SAFETY: as above, the same byte read through the block's own address.
        assert_eq!(unsafe { block.ptr().add(4096).read() }, 7);
        assert!(w.covers(&(12288..20480)) && !w.covers(&(8192..16384)));
        assert_eq!(w.hull(&(4096..8192)), 4096..20480);
        pool.free(block);
    }

    /// Through the runtime (under Miri in CI): a window made for fragment 0, grown over
    /// fragment 1 (its bytes moved inside sim0), then retired for fragment 3 (its last copies
    /// written back); every value lands where it belongs.
    #[test]
    fn a_window_made_grown_and_retired_keeps_every_value() {
        use crate::backend::sim::SimConfig;
        use crate::hal::Device;
        use crate::runtime::Runtime;
        use crate::HeteData;
        use num_complex::Complex32;
        const N: usize = 512;
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .granule(4096)
            .sim(SimConfig {
                pool_bytes: 3 * 4096,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        let values: Vec<Complex32> = (0..4 * N).map(|i| Complex32::new(i as f32, 0.5)).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        let mut expected = values.clone();
        for (frag, by) in [(0usize, 2.0f32), (1, 3.0), (3, 5.0)] {
            let mut view = x.slice_mut(frag * N..(frag + 1) * N).expect("view");
            rt.scale(Device::Sim(0), Complex32::new(by, 0.0), &mut view)
                .expect("scale");
            expected[frag * N..(frag + 1) * N]
                .iter_mut()
                .for_each(|v| *v *= by);
        }
        let sim0 = rt.space_of(Device::Sim(0)).expect("sim0");
        let sim = rt.stats().space("sim0").expect("sim0").clone();
        assert_eq!(
            (sim.evictions, sim.written_back_bytes),
            (1, 2 * 4096),
            "the grown window was retired once, writing back fragments 0 and 1"
        );
        assert!(x.fragment_state(3).expect("frag").valid.contains(sim0));
        x.validate().expect("copies agree");
        assert_eq!(x.host().expect("host"), &expected[..]);
    }
}
