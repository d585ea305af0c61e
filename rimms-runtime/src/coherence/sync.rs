//! The lock and atomic the coherence state is published with: std's, or loom's when the crate
//! is built with `--cfg loom` for the model test.

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex, MutexGuard,
};
/// Loom's `try_lock` reports with std's error type too.
pub(crate) use std::sync::TryLockError;
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex, MutexGuard,
};

/// Stands between the two SeqCst accesses of each side of the lease handshake (`data::lease`):
/// a holder's lease and its summary load, a mover's withdrawal and its lease load. In real
/// builds it is nothing: those accesses are SeqCst, so they fall in one total order, which is
/// what the handshake needs. Loom treats SeqCst accesses as AcqRel (its README, "Unsupported
/// features"), under which the handshake's store-buffer pattern would let both sides miss each
/// other, but it does model SeqCst fences; under loom this fence gives the model the same total
/// order the real accesses have.
#[inline(always)]
pub(crate) fn handshake_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
