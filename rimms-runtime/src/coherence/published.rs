//! A buffer's fragment table behind its lock, with the summary word published for lock-free
//! readers.
//!
//! The resident fast path reads only the summary, so the summary must never claim more than the
//! table and the memory behind it hold. Every change to the table happens under the lock, and
//! the guard that gives access to it publishes the new summary (a release store) before the lock
//! is released; a reader whose acquire load sees that summary therefore also sees every copy
//! made under the lock before it. Keeping the store in the guard's `Drop` means no path that
//! changes the table can forget it. The loom model in `loom_model` checks this protocol with the
//! table itself under concurrent acquires and marks.

use super::sync::{AtomicU64, Mutex, MutexGuard, Ordering};
use super::FragmentTable;
use std::ops::{Deref, DerefMut};

/// What a lock guards: a fragment table and whatever belongs with it.
pub(crate) trait WithTable {
    fn table(&self) -> &FragmentTable;

    /// The summary to publish: the table's, unless what the table belongs with says the
    /// fast path must not be taken (a checksummed buffer, `data::checksum`).
    fn summary(&self) -> u64 {
        self.table().summary()
    }
}

pub(crate) struct Published<I> {
    summary: AtomicU64,
    inner: Mutex<I>,
}

impl<I: WithTable> Published<I> {
    pub(crate) fn new(inner: I) -> Published<I> {
        Published {
            summary: AtomicU64::new(inner.summary()),
            inner: Mutex::new(inner),
        }
    }

    /// The summary as last published: see [`super::resident`]. Sequentially consistent (on
    /// x86 and ARMv8 the same instruction as an acquire load) because it is one half of the
    /// pin handshake with an evictor: a caller pins the buffer (SeqCst) and then loads this;
    /// an evictor withdraws the summary ([`Locked::withdraw`], SeqCst) and then loads the
    /// pins. In the single order of those four operations one side sees the other.
    #[inline(always)]
    pub(crate) fn summary(&self) -> u64 {
        self.summary.load(Ordering::SeqCst)
    }

    /// The table, if no one else holds it now: an evictor, which may already hold another
    /// buffer's lock, never waits for one (two evictors waiting for each other's buffers
    /// would deadlock).
    pub(crate) fn try_lock(&self) -> Option<Locked<'_, I>> {
        let guard = match self.inner.try_lock() {
            Ok(guard) => guard,
            // As for `lock`: a poisoned lock guards a consistent table.
            Err(super::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(super::sync::TryLockError::WouldBlock) => return None,
        };
        Some(Locked {
            guard,
            summary: &self.summary,
        })
    }

    /// The table, locked; its summary is published when the guard goes.
    pub(crate) fn lock(&self) -> Locked<'_, I> {
        Locked {
            // Every update under this lock commits only after its copies succeeded, and copies
            // do not panic; a poisoned lock therefore guards a consistent table.
            guard: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
            summary: &self.summary,
        }
    }
}

pub(crate) struct Locked<'a, I: WithTable> {
    guard: MutexGuard<'a, I>,
    summary: &'a AtomicU64,
}

impl<I: WithTable> Deref for Locked<'_, I> {
    type Target = I;
    fn deref(&self) -> &I {
        &self.guard
    }
}

impl<I: WithTable> DerefMut for Locked<'_, I> {
    fn deref_mut(&mut self) -> &mut I {
        &mut self.guard
    }
}

impl<I: WithTable> Locked<'_, I> {
    /// Publishes a summary under which nothing is resident, until this guard goes (and
    /// publishes the table's own again): the first half of an evictor's pin handshake.
    pub(crate) fn withdraw(&self) {
        self.summary.store(super::WITHDRAWN, Ordering::SeqCst);
        super::sync::handshake_fence();
    }
}

impl<I: WithTable> Drop for Locked<'_, I> {
    fn drop(&mut self) {
        // Still under the lock: the guard field is released after this body.
        self.summary.store(self.guard.summary(), Ordering::Release);
    }
}
