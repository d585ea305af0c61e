//! Memory the CPU cannot address: a discrete GPU's pool, a simulated card that plays one.
//!
//! A pool over such memory hands out *device addresses*: numbers the runtime carries around
//! like pointers (so a buffer's block, its fragment table and the fast path look the same in
//! every space) but never dereferences. Bytes reach them only through the backend's
//! [`DeviceMemory`]: copies in and out, zero fills, and the read-back that `validate` compares.
//! Kernels get them as [`crate::DevSlice`]s, which a device implementation hands to its driver.

use super::backend_error::BackendError;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

/// A device's memory that only its backend can read and write. Device implementations reach
/// it through its kernel context (`KernelCtx`) (a sim that plays a GPU stages through it);
/// the runtime copies and fills through it.
pub trait DeviceMemory: Send + Sync {
    /// Device address of the first byte: nonzero, aligned to any pool granule the runtime
    /// allows (4 KiB at least), and the start of [`DeviceMemory::capacity`] usable bytes.
    fn base(&self) -> usize;
    /// Bytes available to the pool.
    fn capacity(&self) -> usize;
    /// Writes `src` at device address `addr`; returns when the bytes are there.
    fn copy_in(&self, addr: usize, src: &[u8]) -> Result<(), BackendError>;
    /// Reads `dst.len()` bytes at device address `addr` into `dst`.
    fn copy_out(&self, addr: usize, dst: &mut [u8]) -> Result<(), BackendError>;
    /// Sets `len` bytes at device address `addr` to zero.
    fn fill_zero(&self, addr: usize, len: usize) -> Result<(), BackendError>;
    /// Copies `len` bytes at `src` here to `dst` in `peer` without the host, where the two
    /// memories can (two GPUs with peer access); `None` where they cannot, and the runtime
    /// bounces the bytes through the host instead.
    fn copy_to_peer(
        &self,
        _src: usize,
        _peer: &dyn DeviceMemory,
        _dst: usize,
        _len: usize,
    ) -> Option<Result<(), BackendError>> {
        None
    }
    /// This memory as `Any`, for a `copy_to_peer` that must know its peer's kind.
    fn as_any(&self) -> &dyn Any;
}

/// A space's device memory, shared by its pool's region and the runtime's copy paths.
pub(crate) type DeviceMemoryRef = Arc<dyn DeviceMemory>;

/// Host-addressable memory that a backend maps and keeps alive: `len` bytes at `base`, valid
/// while `owner` lives.
#[derive(Clone)]
pub struct MappedMemory {
    /// First byte.
    pub base: NonNull<u8>,
    /// Bytes available to the pool.
    pub len: usize,
    /// Keeps the mapping alive as long as any pool uses it.
    pub owner: Arc<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for MappedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedMemory")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

// SAFETY: the memory is a shared mapping owned by `owner` (Send + Sync); who reads and writes
// which bytes is governed by the pool and the buffers, as for an anonymous mapping.
unsafe impl Send for MappedMemory {}
// SAFETY: as for `Send`: `&MappedMemory` gives out only the address, never the bytes.
unsafe impl Sync for MappedMemory {}
