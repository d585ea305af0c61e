//! A GPU's memory as a space of the runtime: one device allocation made when the device is
//! opened, which the runtime's pool carves (`space::Pool`, as in every other space), and the
//! copies and fills the runtime moves bytes with.
//!
//! # Why one allocation
//!
//! `cuMemAlloc` and `cuMemFree` cost microseconds to milliseconds and `cuMemFree` synchronises
//! the whole device, which is exactly the cost RIMMS exists to take out of frame loops. So the
//! space makes one device allocation (the [`Arena`]) and the runtime hands out granules of it;
//! nothing calls the driver's allocator after start-up.
//!
//! # Addresses and ordering
//!
//! The runtime addresses the space by device address. Every copy and fill checks its range
//! against the pool before any driver call, goes on the device's copy stream (kernels have
//! the compute stream, so a copy runs while a kernel does) and is waited for before it
//! returns, so the bytes are there (or on the host) when the runtime goes on; which stream,
//! event and wait each step uses is decided in [`super::ordering`], where the reasons are.
//! Copies in stage through pinned buffers, so the host's memcpy of one chunk overlaps the
//! transfer of the last.

use super::kernels::{Arg, GpuKernels};
use super::ordering;
use super::staging::Staging;
use super::stream::{GpuStreams, Streams, Work};
use super::{cuda_error, Result};
use crate::hal::BackendError;
use crate::hal::Device;
use crate::hal::DeviceMemory;
use crate::hal::{During, Error};
use cudarc::driver::{result, sys, DriverError, PinnedHostSlice};
use std::any::Any;
use std::fmt::Display;
use std::sync::{Arc, Mutex};

/// Bytes of one pinned staging buffer for copies in.
const STAGING_CHUNK: usize = 4 << 20;
/// Staging buffers kept before a copy in waits for a busy one.
const STAGING_SLOTS: usize = 4;
/// The alignment CUDA gives its own allocations, and the least the pool's unit may be.
const MIN_UNIT: usize = 256;

/// The one device allocation a space is carved from; freed when the space goes, after both
/// of the device's streams are idle.
struct Arena {
    streams: Arc<GpuStreams>,
    base: sys::CUdeviceptr,
}

impl Arena {
    /// Reserves `bytes` of device memory (a single `cuMemAlloc`).
    fn reserve(streams: Arc<GpuStreams>, bytes: usize) -> Result<Arena> {
        streams.bind()?;
        // SAFETY: the context is current; the memory is uninitialised, which is fine for
        // device memory that only copies, fills and kernels the runtime orders write first.
        let base = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            cuda_error(
                format!(
                    "reserving a pool of {} MiB on {}",
                    bytes >> 20,
                    streams.device()
                ),
                e,
            )
        })?;
        Ok(Arena { streams, base })
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Nothing may still be using the pool when it goes back to the driver: neither a
        // kernel (compute stream) nor a copy or fill landing in it (copy stream).
        if let Err(e) = ordering::quiesce(&*self.streams) {
            tracing::warn!("freeing the pool of {}: {e}", self.streams.device());
        }
        if self.streams.bind().is_ok() {
            // SAFETY: `base` came from `malloc_sync` and is freed exactly once, here, after
            // both of the device's streams are idle.
            if let Err(e) = unsafe { result::free_sync(self.base) } {
                tracing::warn!("cuMemFree of the pool of {}: {e}", self.streams.device());
            }
        }
    }
}

/// One GPU's memory space and its kernels, which the device's implementations reach through
/// `KernelCtx::device_handle`.
pub(crate) struct GpuSpace {
    index: usize,
    streams: Arc<GpuStreams>,
    /// First usable device address: the allocation's base rounded up to the pool's granule.
    base: usize,
    capacity: usize,
    // Declared before `arena`, so the plans, the module and the staging buffers are released
    // before the pool.
    kernels: GpuKernels,
    to_device: Staging,
    peers_enabled: Mutex<Vec<usize>>,
    arena: Arena,
}

impl std::fmt::Debug for GpuSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSpace")
            .field("device", &self.device())
            .field("allocation", &format_args!("{:#x}", self.arena.base))
            .field("base", &format_args!("{:#x}", self.base))
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl GpuSpace {
    /// Reserves a pool of about `pool_bytes` on GPU `index` (whose work goes on `streams`),
    /// whose usable part starts and ends on a multiple of `granule` (a power of two), and
    /// loads the kernels.
    pub(crate) fn open(
        index: usize,
        streams: Arc<GpuStreams>,
        pool_bytes: usize,
        granule: usize,
    ) -> crate::hal::Result<GpuSpace> {
        let setup = |e| Error::from_backend(During::Setup, e);
        let name = streams.device();
        let bad = |why: String| Err(Error::Config(format!("GPU space {name}: {why}")));
        let unit = granule.max(MIN_UNIT);
        let bytes = pool_bytes / unit * unit;
        if bytes == 0 {
            return bad(format!(
                "pool_bytes = {pool_bytes} is less than one unit of {unit} bytes"
            ));
        }
        let arena = Arena::reserve(streams.clone(), bytes).map_err(setup)?;
        let start = arena.base as usize;
        let base = start.next_multiple_of(granule);
        let capacity = bytes.saturating_sub(base - start) / granule * granule;
        if capacity == 0 {
            return Err(Error::Config(format!(
                "gpu{index}: a pool of {bytes} bytes holds no {granule}-byte granule"
            )));
        }
        let kernels = GpuKernels::new(streams.clone()).map_err(setup)?;
        let to_device = Staging::new(
            streams.ctx().clone(),
            streams.device(),
            STAGING_CHUNK,
            STAGING_SLOTS,
        );
        Ok(GpuSpace {
            index,
            streams,
            base,
            capacity,
            kernels,
            to_device,
            peers_enabled: Mutex::new(Vec::new()),
            arena,
        })
    }

    /// The device whose memory this is.
    pub(crate) fn device(&self) -> Device {
        self.streams.device()
    }

    /// Waits for the device's compute stream and reports how the kernels queued so far
    /// ended, and any asynchronous error of the copy stream (without waiting for it, so a
    /// copy in flight does not hold up a kernel's caller).
    pub(crate) fn status(&self) -> Result<()> {
        ordering::completion(&*self.streams)
    }

    /// The device's streams, for the tests that watch work on them.
    #[cfg(test)]
    pub(crate) fn streams(&self) -> &GpuStreams {
        &self.streams
    }

    /// The built-in APIs on the device.
    pub(crate) fn kernels(&self) -> &GpuKernels {
        &self.kernels
    }

    /// `len` bytes at device address `addr`, once they are known to lie in the pool.
    pub(crate) fn arg(&self, addr: usize, len: usize) -> std::result::Result<Arg, BackendError> {
        let end = self.base + self.capacity;
        match addr.checked_add(len) {
            Some(stop) if addr >= self.base && stop <= end => Ok(Arg {
                ptr: addr as u64,
                bytes: len,
            }),
            _ => Err(BackendError::OutOfRange {
                addr,
                len,
                memory: format!("{}'s pool", self.device()),
            }),
        }
    }

    /// Copies `src` to `dst` through the pinned staging buffers, chunk by chunk, and returns
    /// when the bytes are on the device.
    fn stage_in(&self, dst: Arg, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let fail = |e| copy_failed("host", self.device(), src.len(), e);
        let chunk = self.to_device.chunk();
        ordering::stage_in(
            &*self.streams,
            &self.to_device,
            src.len().div_ceil(chunk),
            |i, buf, queue| {
                let start = i * chunk;
                let piece = &src[start..src.len().min(start + chunk)];
                let at = dst.ptr + start as u64;
                fill(buf, piece).map_err(fail)?;
                self.streams.bind()?;
                let staged = buf.as_slice().map_err(fail)?;
                let staged = staged.get(..piece.len()).unwrap_or(staged);
                // SAFETY: `at..at + piece.len()` lies in the pool (checked by the caller); the
                // pinned buffer stays alive and untouched until the event recorded after this
                // copy completes (`ordering::stage_in` returns it with that event).
                unsafe { result::memcpy_htod_async(at, staged, queue.cu_stream()) }.map_err(fail)
            },
        )
    }

    /// Copies `src` into `dst` (equal lengths) and returns when the bytes are on the host.
    fn read_out(&self, src: Arg, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let len = dst.len();
        ordering::copy(&*self.streams, Work::CopyOut, |queue| {
            self.streams.bind()?;
            // SAFETY: the source lies in the pool (checked by the caller); `dst` is borrowed
            // mutably for this whole call, and the copy is waited for before it returns (or
            // the copy stream is, should even that fail: `ordering::copy`).
            unsafe { result::memcpy_dtoh_async(dst, src.ptr, queue.cu_stream()) }
                .map_err(|e| copy_failed(self.device(), "host", len, e))
        })
    }

    /// Sets `dst` to zero bytes and returns when that is done.
    fn zero(&self, dst: Arg) -> Result<()> {
        ordering::copy(&*self.streams, Work::Fill, |queue| {
            self.streams.bind()?;
            // SAFETY: the range lies in the pool (checked by the caller).
            unsafe { result::memset_d8_async(dst.ptr, 0, dst.bytes, queue.cu_stream()) }
                .map_err(|e| cuda_error(format!("zero fill on {}", self.device()), e))
        })
    }

    /// Copies `src` of this space into `dst` of `peer`'s (equal lengths) on the peer's copy
    /// stream, after the copies already queued on this device (`ordering::peer_copy` says why
    /// not after its kernels), and returns when it is done. Peer access
    /// is enabled the first time where the hardware has it; without it the driver stages the
    /// copy through the host.
    fn peer_copy(&self, src: Arg, peer: &GpuSpace, dst: Arg) -> Result<()> {
        if src.bytes == 0 {
            return Ok(());
        }
        if std::ptr::eq(self, peer) {
            return self.copy_within(src, dst);
        }
        peer.enable_peer_access_from(self)?;
        ordering::peer_copy(&*self.streams, &*peer.streams, |queue| {
            peer.streams.bind()?;
            let (src_ctx, dst_ctx) = (self.streams.ctx().cu_ctx(), peer.streams.ctx().cu_ctx());
            // SAFETY: both ranges lie in their pools (checked by the caller); the contexts are
            // the two devices' live primary contexts; the copy is waited for before returning
            // (or the peer's copy stream is, should even that fail: `ordering::copy`).
            unsafe {
                result::memcpy_peer_async(
                    dst_ctx,
                    dst.ptr,
                    src_ctx,
                    src.ptr,
                    src.bytes,
                    queue.cu_stream(),
                )
            }
            .map_err(|e| copy_failed(self.device(), peer.device(), src.bytes, e))
        })
    }

    /// Copies `src` to `dst` inside the pool (equal lengths, not overlapping).
    fn copy_within(&self, src: Arg, dst: Arg) -> Result<()> {
        let (s_end, d_end) = (src.ptr + src.bytes as u64, dst.ptr + dst.bytes as u64);
        if src.bytes != dst.bytes || (src.ptr < d_end && dst.ptr < s_end) {
            return Err(BackendError::Invalid(format!(
                "copy within device on {}: source {src:?} and destination {dst:?} must have equal lengths and not overlap",
                self.device()
            )));
        }
        ordering::copy(&*self.streams, Work::CopyWithin, |queue| {
            self.streams.bind()?;
            // SAFETY: both ranges lie in the pool and do not overlap (checked above).
            unsafe { result::memcpy_dtod_async(dst.ptr, src.ptr, src.bytes, queue.cu_stream()) }
                .map_err(|e| copy_failed(self.device(), self.device(), src.bytes, e))
        })
    }

    /// Lets this device's context reach `src`'s memory directly, where the hardware allows.
    fn enable_peer_access_from(&self, src: &GpuSpace) -> Result<()> {
        let mut enabled = self.peers_enabled.lock().unwrap_or_else(|e| e.into_inner());
        if enabled.contains(&src.index) {
            return Ok(());
        }
        self.streams.bind()?;
        let what = || {
            format!(
                "enabling peer access from {} to {}",
                self.device(),
                src.device()
            )
        };
        let mut can = 0;
        // SAFETY: the out-pointer is a live local; both device handles come from live
        // contexts.
        unsafe {
            sys::cuDeviceCanAccessPeer(
                &mut can,
                self.streams.ctx().cu_device(),
                src.streams.ctx().cu_device(),
            )
        }
        .result()
        .map_err(|e| cuda_error(what(), e))?;
        if can == 1 {
            // SAFETY: this device's context is current and `src`'s context is live.
            match unsafe { sys::cuCtxEnablePeerAccess(src.streams.ctx().cu_ctx(), 0) }.result() {
                Ok(())
                | Err(DriverError(sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) => {}
                Err(e) => return Err(cuda_error(what(), e)),
            }
        }
        enabled.push(src.index);
        Ok(())
    }
}

impl Drop for GpuSpace {
    fn drop(&mut self) {
        // The plans, the kernels' module and the staging buffers go first (then the pool):
        // nothing queued on either stream may still be using them.
        if let Err(e) = ordering::quiesce(&*self.streams) {
            tracing::warn!("{}: work failed before shutdown: {e}", self.device());
        }
    }
}

impl DeviceMemory for GpuSpace {
    fn base(&self) -> usize {
        self.base
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn copy_in(&self, addr: usize, src: &[u8]) -> std::result::Result<(), BackendError> {
        let dst = self.arg(addr, src.len())?;
        self.stage_in(dst, src)
    }

    fn copy_out(&self, addr: usize, dst: &mut [u8]) -> std::result::Result<(), BackendError> {
        let src = self.arg(addr, dst.len())?;
        self.read_out(src, dst)
    }

    fn fill_zero(&self, addr: usize, len: usize) -> std::result::Result<(), BackendError> {
        let dst = self.arg(addr, len)?;
        self.zero(dst)
    }

    /// GPU to GPU: a peer copy (through the host by the driver where the pair has no peer
    /// access).
    fn copy_to_peer(
        &self,
        src: usize,
        peer: &dyn DeviceMemory,
        dst: usize,
        len: usize,
    ) -> Option<std::result::Result<(), BackendError>> {
        let peer = peer.as_any().downcast_ref::<GpuSpace>()?;
        Some((|| {
            let from = self.arg(src, len)?;
            let to = peer.arg(dst, len)?;
            self.peer_copy(from, peer, to)
        })())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A failed copy, as the CUDA call that failed: the runtime names the spaces when it reports
/// the transfer.
fn copy_failed(from: impl Display, to: impl Display, bytes: usize, e: DriverError) -> BackendError {
    cuda_error(format!("copy of {bytes} bytes from {from} to {to}"), e)
}

/// Copies `piece` into the start of a staging buffer.
fn fill(buf: &mut PinnedHostSlice<u8>, piece: &[u8]) -> std::result::Result<(), DriverError> {
    let staged = buf.as_mut_slice()?;
    if let Some(dst) = staged.get_mut(..piece.len()) {
        dst.copy_from_slice(piece);
    }
    Ok(())
}
