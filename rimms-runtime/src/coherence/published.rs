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
}

pub(crate) struct Published<I> {
    summary: AtomicU64,
    inner: Mutex<I>,
}

impl<I: WithTable> Published<I> {
    pub(crate) fn new(inner: I) -> Published<I> {
        Published {
            summary: AtomicU64::new(inner.table().summary()),
            inner: Mutex::new(inner),
        }
    }

    /// The summary as last published: see [`super::resident`].
    #[inline(always)]
    pub(crate) fn summary(&self) -> u64 {
        self.summary.load(Ordering::Acquire)
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

impl<I: WithTable> Drop for Locked<'_, I> {
    fn drop(&mut self) {
        // Still under the lock: the guard field is released after this body.
        self.summary
            .store(self.guard.table().summary(), Ordering::Release);
    }
}
