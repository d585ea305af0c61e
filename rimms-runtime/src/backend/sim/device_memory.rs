//! The memory of a sim device that plays a discrete GPU: bytes the CPU cannot address.
//!
//! Its addresses are made up (a high range no mapping uses), so a runtime path that wrongly
//! dereferenced a device address would fault rather than quietly work; the bytes live in a
//! host allocation that only this interface reads and writes.

use crate::backend::BackendError;
use crate::space::DeviceMemory;
use std::any::Any;
use std::sync::Mutex;

/// Where sim device `n`'s addresses start: 2^44 apart, aligned to any granule.
const BASE: usize = 0x5000_0000_0000;
const STRIDE: usize = 1 << 44;

pub(crate) struct SimDeviceMemory {
    base: usize,
    bytes: Mutex<Vec<u8>>,
}

impl SimDeviceMemory {
    pub(crate) fn new(index: u8, len: usize) -> SimDeviceMemory {
        SimDeviceMemory {
            base: BASE + usize::from(index) * STRIDE,
            // Zeroed allocations are lazily committed, like a reserved device pool.
            bytes: Mutex::new(vec![0; len]),
        }
    }

    /// The offsets of `len` bytes at device address `addr`, if they lie inside.
    fn range(
        &self,
        addr: usize,
        len: usize,
        total: usize,
    ) -> Result<std::ops::Range<usize>, BackendError> {
        addr.checked_sub(self.base)
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= total)
            .ok_or_else(|| BackendError::OutOfRange {
                addr,
                len,
                memory: format!("this device's memory ({:#x}, {total} bytes)", self.base),
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Every operation is a single copy that cannot leave the bytes half-valid for the
        // runtime (which commits nothing after a failed copy), so a poisoned lock is usable.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DeviceMemory for SimDeviceMemory {
    fn base(&self) -> usize {
        self.base
    }

    fn capacity(&self) -> usize {
        self.lock().len()
    }

    fn copy_in(&self, addr: usize, src: &[u8]) -> Result<(), BackendError> {
        let mut bytes = self.lock();
        let range = self.range(addr, src.len(), bytes.len())?;
        bytes[range].copy_from_slice(src);
        Ok(())
    }

    fn copy_out(&self, addr: usize, dst: &mut [u8]) -> Result<(), BackendError> {
        let bytes = self.lock();
        let range = self.range(addr, dst.len(), bytes.len())?;
        dst.copy_from_slice(&bytes[range]);
        Ok(())
    }

    fn fill_zero(&self, addr: usize, len: usize) -> Result<(), BackendError> {
        let mut bytes = self.lock();
        let range = self.range(addr, len, bytes.len())?;
        bytes[range].fill(0);
        Ok(())
    }

    /// Between two sim cards, as between two GPUs with peer access: straight across.
    fn copy_to_peer(
        &self,
        src: usize,
        peer: &dyn DeviceMemory,
        dst: usize,
        len: usize,
    ) -> Option<Result<(), BackendError>> {
        let peer = peer.as_any().downcast_ref::<SimDeviceMemory>()?;
        // Both locks, always in address order, so two copies in opposite directions cannot
        // deadlock.
        let (mut first, mut second) = if self.base < peer.base {
            let a = self.lock();
            (a, peer.lock())
        } else {
            let b = peer.lock();
            (self.lock(), b)
        };
        let (source, target) = (&mut *first, &mut *second);
        Some((|| {
            let from = self.range(src, len, source.len())?;
            let to = peer.range(dst, len, target.len())?;
            target[to].copy_from_slice(&source[from]);
            Ok(())
        })())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
