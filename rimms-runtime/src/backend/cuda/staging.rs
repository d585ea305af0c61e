//! Pinned host buffers for asynchronous copies.
//!
//! A copy from or to ordinary (pageable) host memory cannot run asynchronously: the driver
//! has to stage it through pinned memory of its own and the call returns only when the bytes
//! have left or arrived. To let host code go on while a copy runs, the backend stages through
//! pinned buffers of its own: the host copies a chunk into one and the DMA engine takes it
//! from there while the host fills the next, so the host memcpy and the transfer overlap.
//!
//! One [`Staging`] per direction hands out fixed-size chunk buffers. A buffer lent to a DMA is
//! returned with the event that says when the DMA is done, and is reused only after that
//! event has completed. Buffers are allocated lazily, up to `slots`; beyond that a request
//! waits for the oldest busy buffer (back-pressure, since pinned memory is scarce), except
//! that a request finding none busy (all held by other callers) gets a new one rather than
//! waiting for something it cannot see.

use super::ordering::StagingPool;
use super::stream::GpuEvent;
use super::{cuda_error, Result};
use crate::hal::Device;
use cudarc::driver::{CudaContext, PinnedHostSlice};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

struct State {
    /// Idle buffers.
    free: Vec<PinnedHostSlice<u8>>,
    /// Buffers lent to a DMA, oldest first, with the DMA's completion. One stream (the
    /// device's copy stream) serves each direction, so they complete in this order.
    busy: VecDeque<(PinnedHostSlice<u8>, GpuEvent)>,
    /// Buffers in existence (free, busy and held by callers).
    count: usize,
}

/// Pinned chunk buffers of one direction.
pub(crate) struct Staging {
    ctx: Arc<CudaContext>,
    device: Device,
    chunk: usize,
    slots: usize,
    state: Mutex<State>,
}

impl Staging {
    /// Buffers of `chunk` bytes (at least one byte), about `slots` of them (at least one).
    pub(crate) fn new(ctx: Arc<CudaContext>, device: Device, chunk: usize, slots: usize) -> Self {
        Staging {
            ctx,
            device,
            chunk: chunk.max(1),
            slots: slots.max(1),
            state: Mutex::new(State {
                free: Vec::new(),
                busy: VecDeque::new(),
                count: 0,
            }),
        }
    }

    /// Bytes per buffer.
    pub(crate) fn chunk(&self) -> usize {
        self.chunk
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each update is a single push or pop: a poisoned lock holds consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of [`chunk`](Self::chunk) bytes that no DMA is using.
    pub(crate) fn take(&self) -> Result<PinnedHostSlice<u8>> {
        let mut st = self.lock();
        while let Some((_, event)) = st.busy.front() {
            if !event.is_done()? {
                break;
            }
            if let Some((buf, _)) = st.busy.pop_front() {
                st.free.push(buf);
            }
        }
        if let Some(buf) = st.free.pop() {
            return Ok(buf);
        }
        if st.count >= self.slots {
            if let Some((buf, event)) = st.busy.pop_front() {
                drop(st);
                if let Err(e) = event.wait() {
                    // The DMA's state is unknown: never hand this memory out or free it
                    // under a transfer that might still write it.
                    std::mem::forget(buf);
                    self.lock().count -= 1;
                    return Err(e);
                }
                return Ok(buf);
            }
        }
        st.count += 1;
        drop(st);
        match self.allocate() {
            Ok(buf) => Ok(buf),
            Err(e) => {
                self.lock().count -= 1;
                Err(e)
            }
        }
    }

    fn allocate(&self) -> Result<PinnedHostSlice<u8>> {
        let what = || {
            format!(
                "allocating a {}-byte pinned staging buffer for {}",
                self.chunk, self.device
            )
        };
        // SAFETY: the memory is uninitialised; it is zeroed below before any slice of it is
        // made. Flags 0: plain page-locked memory, fast to read back on the host (unlike
        // write-combined memory).
        let mut buf = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(self.chunk, 0) }
            .map_err(|e| cuda_error(what(), e))?;
        let ptr = buf.as_mut_ptr().map_err(|e| cuda_error(what(), e))?;
        // SAFETY: `ptr` points to `chunk` bytes of host memory that this buffer owns and no
        // one else uses yet.
        unsafe { std::ptr::write_bytes(ptr, 0, self.chunk) };
        Ok(buf)
    }

    /// Returns a buffer that a DMA uses until `event` completes.
    pub(crate) fn release_after(&self, buf: PinnedHostSlice<u8>, event: GpuEvent) {
        self.lock().busy.push_back((buf, event));
    }

    /// Returns an idle buffer.
    pub(crate) fn release(&self, buf: PinnedHostSlice<u8>) {
        self.lock().free.push(buf);
    }
}

impl StagingPool<GpuEvent> for Staging {
    type Buffer = PinnedHostSlice<u8>;

    fn take(&self) -> Result<PinnedHostSlice<u8>> {
        Staging::take(self)
    }

    fn release(&self, buffer: PinnedHostSlice<u8>) {
        Staging::release(self, buffer)
    }

    fn release_after(&self, buffer: PinnedHostSlice<u8>, event: GpuEvent) {
        Staging::release_after(self, buffer, event)
    }

    fn leak(&self, buffer: PinnedHostSlice<u8>) {
        // As in `take`: a transfer that might still run keeps its memory.
        std::mem::forget(buffer);
        self.lock().count -= 1;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        while let Some((buf, event)) = st.busy.pop_front() {
            if event.wait().is_err() {
                // As in `take`: a transfer that might still run keeps its memory.
                std::mem::forget(buf);
            }
        }
    }
}
