//! The bytes behind a pool: an anonymous mapping reserved up front, memory a backend already
//! mapped (a u-dma-buf region), or device memory the CPU cannot address (a GPU's pool).
//!
//! Reserving once and carving buffers out of it is what keeps `alloc` free of system calls on
//! the hot path. An anonymous mapping is lazily committed by the kernel, so a large
//! reservation costs only the pages that are touched.

use crate::hal::{DeviceMemoryRef, MappedMemory, SpaceName};
use crate::hal::{Error, Result};
use memmap2::MmapMut;
use std::ptr::NonNull;

// SAFETY: `base` points into `map`, which the region owns; the pointer itself is only an
// address, and access to the bytes is governed by the pool and the buffers.
unsafe impl Send for Region {}
// SAFETY: as for `Send`: a shared region hands out addresses, never the bytes.
unsafe impl Sync for Region {}

/// A region of `len` bytes a pool carves.
pub(crate) enum Region {
    /// Reserved by the pool: page aligned, zero on first touch. `base` was taken from the
    /// mapping with `as_mut_ptr`, so pointers derived from it may write.
    Anonymous { map: MmapMut, base: NonNull<u8> },
    /// Mapped by a backend.
    Mapped(MappedMemory),
    /// Device memory: its addresses are never dereferenced on the host.
    Device(DeviceMemoryRef),
}

impl Region {
    pub(crate) fn reserve(space: &SpaceName, len: usize) -> Result<Region> {
        let mut map = MmapMut::map_anon(len).map_err(|source| Error::Reserve {
            space: space.clone(),
            bytes: len,
            source,
        })?;
        let Some(base) = NonNull::new(map.as_mut_ptr()) else {
            return Err(Error::Reserve {
                space: space.clone(),
                bytes: len,
                source: std::io::Error::other("the mapping has no address"),
            });
        };
        Ok(Region::Anonymous { map, base })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Region::Anonymous { map, .. } => map.len(),
            Region::Mapped(m) => m.len,
            Region::Device(d) => d.capacity(),
        }
    }

    /// The first byte: a pointer with the mapping's provenance where the CPU addresses the
    /// region, and a device address (a pointer with no provenance, never dereferenced) where
    /// it does not.
    pub(crate) fn base(&self) -> *mut u8 {
        match self {
            Region::Anonymous { base, .. } => base.as_ptr(),
            Region::Mapped(m) => m.base.as_ptr(),
            Region::Device(d) => std::ptr::without_provenance_mut(d.base()),
        }
    }
}
