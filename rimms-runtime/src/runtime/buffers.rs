//! The buffer constructors that take a runtime: they live beside the handle, so that the
//! buffers (`data`) reach the memory system they are carved from without importing the
//! runtime.

use super::Runtime;
use crate::data::{HeteData, SecureKey};
use crate::hal::Result;
use bytemuck::Pod;

impl<T: Pod> HeteData<T> {
    /// A buffer of `len` zeros. No memory is touched until a space uses it, and reading zeros
    /// anywhere costs a fill there, never a transfer. An empty buffer (`len` 0) is valid: it
    /// is never allocated anywhere, and every operation on it is a no-op.
    ///
    /// RIMMS: `hete_Malloc`.
    #[doc(alias = "hete_Malloc")]
    pub fn alloc(rt: &Runtime, len: usize) -> Result<HeteData<T>> {
        HeteData::alloc_in(rt.shared().memory(), len)
    }

    /// A secure buffer of `len` zeros: its fragments are encrypted with AES-256-GCM under
    /// `key` whenever they are in a space the runtime does not trust
    /// ([`crate::RuntimeBuilder::trust`]; a shared u-dma-buf mapping is untrusted unless
    /// marked), and authenticated when they come back: a fragment changed there is
    /// [`crate::Error::Tampered`], never wrong bytes. Kernels and host views use it only in
    /// trusted spaces (elsewhere [`crate::Error::Untrusted`]); its freed blocks are zeroised.
    /// `docs/security.md` states what this protects against.
    ///
    /// RIMMS: `hete_Malloc_Secure(size, AES256_KEY)`.
    #[doc(alias = "hete_Malloc_Secure")]
    pub fn alloc_secure(rt: &Runtime, len: usize, key: &SecureKey) -> Result<HeteData<T>> {
        HeteData::alloc_keyed(rt.shared().memory(), len, Some(key.clone()))
    }

    /// A secure buffer ([`Self::alloc_secure`]) holding a copy of `values`, written on the
    /// host.
    pub fn from_slice_secure(rt: &Runtime, values: &[T], key: &SecureKey) -> Result<HeteData<T>> {
        let mut data = HeteData::alloc_secure(rt, values.len(), key)?;
        data.host_write()?.copy_from_slice(values);
        data.settle_host_writes();
        Ok(data)
    }

    /// A buffer holding a copy of `values`, written on the host.
    ///
    /// RIMMS: `hete_Malloc`, then writing the values on the host.
    #[doc(alias = "hete_Malloc")]
    pub fn from_slice(rt: &Runtime, values: &[T]) -> Result<HeteData<T>> {
        let mut data = HeteData::alloc(rt, values.len())?;
        data.host_write()?.copy_from_slice(values);
        // The view has ended: its checksums (if on) are recorded now, not at the first read.
        data.settle_host_writes();
        Ok(data)
    }
}
