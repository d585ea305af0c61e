//! The memory of a sim device that plays a discrete GPU: bytes the CPU cannot address.
//!
//! Its addresses are made up (a high range no mapping uses), so a runtime path that wrongly
//! dereferenced a device address would fault rather than quietly work; the bytes live in a
//! host allocation that only this interface reads and writes.

use crate::hal::BackendError;
use crate::hal::DeviceMemory;
use std::any::Any;
use std::sync::Mutex;

/// Where sim device `n`'s addresses start: 2^44 apart, aligned to any granule.
const BASE: usize = 0x5000_0000_0000;
const STRIDE: usize = 1 << 44;

pub(crate) struct SimVram {
    base: usize,
    bytes: Mutex<Vec<u8>>,
}

impl SimVram {
    pub(crate) fn new(index: u8, len: usize) -> SimVram {
        SimVram {
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

impl DeviceMemory for SimVram {
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

    /// Between two sim cards, as between two GPUs with peer access: straight across. Within
    /// one card (a window that moves inside its pool) the copy takes the one lock once.
    fn copy_to_peer(
        &self,
        src: usize,
        peer: &dyn DeviceMemory,
        dst: usize,
        len: usize,
    ) -> Option<Result<(), BackendError>> {
        let peer = peer.as_any().downcast_ref::<SimVram>()?;
        if std::ptr::eq(self, peer) {
            // Locking `peer` too would wait forever for the lock this thread already holds.
            let mut bytes = self.lock();
            return Some((|| {
                let from = self.range(src, len, bytes.len())?;
                let to = self.range(dst, len, bytes.len())?;
                // Overlap-safe, though the runtime's two blocks never overlap.
                bytes.copy_within(from, to.start);
                Ok(())
            })());
        }
        // Both locks, always in the same order (by where the memories live, which no two
        // share), so two copies in opposite directions cannot deadlock.
        let self_first = std::ptr::from_ref(self).addr() < std::ptr::from_ref(peer).addr();
        let (mut first, mut second) = if self_first {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy within one memory (what a window's move is) takes its lock once, and overlapping
    /// ranges copy as `memmove` does.
    #[test]
    fn a_copy_within_one_memory_locks_once_and_may_overlap() {
        let memory = SimVram::new(0, 64);
        let values: Vec<u8> = (0..64).collect();
        memory.copy_in(BASE, &values).expect("copy in");
        memory
            .copy_to_peer(BASE, &memory, BASE + 8, 16)
            .expect("same kind")
            .expect("in range");
        let mut got = vec![0; 64];
        memory.copy_out(BASE, &mut got).expect("copy out");
        let mut want = values;
        want.copy_within(0..16, 8);
        assert_eq!(got, want);
        let outside = memory.copy_to_peer(BASE, &memory, BASE + 60, 16);
        assert!(matches!(
            outside,
            Some(Err(BackendError::OutOfRange { .. }))
        ));
    }
}
