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
