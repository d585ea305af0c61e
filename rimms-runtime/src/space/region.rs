//! The bytes behind a pool: one anonymous mapping reserved up front.
//!
//! Reserving once and carving buffers out of it is what keeps `alloc` free of system calls on
//! the hot path. The mapping is lazily committed by the kernel, so a large reservation costs
//! only the pages that are touched.

use crate::error::{Error, Result};
use memmap2::MmapMut;
use std::ptr::NonNull;

/// A host-addressable region of `len` bytes, page aligned, zero on first touch.
pub(crate) struct Region {
    map: MmapMut,
}

impl Region {
    pub(crate) fn reserve(space: &str, len: usize) -> Result<Region> {
        let map = MmapMut::map_anon(len).map_err(|source| Error::Reserve {
            space: space.to_string(),
            bytes: len,
            source,
        })?;
        Ok(Region { map })
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        // The mapping is never empty (pools refuse a zero size), and mmap never returns null.
        NonNull::new(self.map.as_ptr() as *mut u8).unwrap_or(NonNull::dangling())
    }
}
