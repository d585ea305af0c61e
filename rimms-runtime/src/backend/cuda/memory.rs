//! A GPU's memory space: one pool reserved up front, carved by the NF allocator, and the
//! copies in, out, within and between GPUs.
//!
//! # Why one pool
//!
//! `cuMemAlloc` and `cuMemFree` cost microseconds to milliseconds and `cuMemFree` synchronises
//! the whole device, which is exactly the cost RIMMS exists to take out of frame loops. So
//! the space makes one device allocation when it is created (the *arena*) and hands out
//! byte ranges of it with the project's NF allocator, in units of `unit_bytes`; the
//! allocator only knows unit indices, this module maps them to byte offsets. Nothing here
//! calls the driver's allocator after start-up.
//!
//! # Addressing and ordering
//!
//! Everything is addressed by byte ranges of the pool, [`DevRange`] `(offset, len)`, checked
//! against the pool before any driver call. Copies run on per-direction streams and kernels
//! on the compute stream; the `lanes` module puts each operation after the earlier ones that
//! touch the same bytes, so callers issue work in program order and get correct results with
//! as much overlap as the data allows.
//!
//! # Synchronous and asynchronous copies
//!
//! - [`GpuMemory::copy_to_device`] / [`GpuMemory::copy_to_host`] copy straight from or to the
//!   caller's (pageable) memory and return when the bytes have arrived.
//! - [`GpuMemory::copy_to_device_async`] stages through pinned buffers and returns a
//!   [`GpuEvent`] as soon as the source has been read; [`GpuMemory::copy_to_host_async`]
//!   returns a [`PendingRead`] that finishes the copy when waited for. Host code overlaps
//!   with the transfer in between.
//! - [`GpuMemory::copy_within`], [`GpuMemory::fill_zero`] and [`GpuMemory::copy_to_peer`]
//!   stay on the device(s) and return an event.

use super::cuda_error;
use super::hazard::Span;
use super::lanes::{GpuEvent, Lane, Lanes};
use super::staging::Staging;
use crate::alloc::{NfAllocator, UnitAllocator};
use crate::backend::BackendError;
use crate::error::{Error, Result};
use cudarc::driver::{result, sys, DriverError, PinnedHostSlice};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// A byte range of a GPU pool: `len` bytes from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevRange {
    /// First byte, from the start of the pool.
    pub offset: usize,
    /// Bytes.
    pub len: usize,
}

impl DevRange {
    /// `len` bytes from `offset`.
    pub fn new(offset: usize, len: usize) -> DevRange {
        DevRange { offset, len }
    }

    /// The sub-range of `len` bytes at `start` inside this one, if it fits.
    pub fn sub(self, start: usize, len: usize) -> Option<DevRange> {
        let end = start.checked_add(len)?;
        let offset = self.offset.checked_add(start)?;
        (end <= self.len).then_some(DevRange::new(offset, len))
    }

    /// One past the last byte, if that is representable.
    pub fn end(self) -> Option<usize> {
        self.offset.checked_add(self.len)
    }

    pub(crate) fn span(self) -> Span {
        Span::at(self.offset, self.len)
    }

    /// Whether the two ranges share a byte.
    pub fn overlaps(self, other: DevRange) -> bool {
        self.span().overlaps(other.span())
    }
}

/// A block of a GPU pool, from [`GpuMemory::alloc`]; give it back with [`GpuMemory::free`].
/// Its range may be used by any operation of the same space until then.
#[derive(Debug, PartialEq, Eq)]
pub struct GpuAlloc {
    range: DevRange,
    first_unit: usize,
    units: usize,
    pool: usize,
}

impl GpuAlloc {
    /// The bytes asked for (the block itself is rounded up to whole units).
    pub fn range(&self) -> DevRange {
        self.range
    }

    /// Offset of the block in the pool.
    pub fn offset(&self) -> usize {
        self.range.offset
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.range.len
    }

    /// Whether zero bytes were asked for (the block still holds one unit).
    pub fn is_empty(&self) -> bool {
        self.range.len == 0
    }
}

/// The one device allocation a space is carved from.
pub(crate) struct Arena {
    lanes: Arc<Lanes>,
    base: sys::CUdeviceptr,
    bytes: usize,
}

impl Arena {
    /// Reserves `bytes` of device memory (a single `cuMemAlloc`).
    pub(crate) fn reserve(lanes: Arc<Lanes>, bytes: usize) -> Result<Arena> {
        lanes.bind()?;
        // SAFETY: the context is current; the memory is uninitialised, which is fine for
        // bytes that are only ever written before they are read back.
        let base = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            cuda_error(
                format!(
                    "reserving the {bytes}-byte pool of {} (cuMemAlloc)",
                    lanes.device()
                ),
                e,
            )
        })?;
        Ok(Arena { lanes, base, bytes })
    }

    pub(crate) fn lanes(&self) -> &Arc<Lanes> {
        &self.lanes
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Device address of the pool's first byte.
    pub(crate) fn base(&self) -> sys::CUdeviceptr {
        self.base
    }

    /// The device address of `range`, once it is known to lie inside the pool.
    pub(crate) fn ptr(&self, range: DevRange, api: &'static str) -> Result<sys::CUdeviceptr> {
        match range.end() {
            Some(end) if end <= self.bytes => Ok(self.base + range.offset as u64),
            _ => Err(Error::OutOfBounds {
                start: range.offset,
                end: range.offset.saturating_add(range.len),
                len: self.bytes,
            })
            .map_err(|e| in_api(api, self.lanes.device(), e)),
        }
    }
}

/// Says which API a bounds error came from.
fn in_api(api: &'static str, device: &str, e: Error) -> Error {
    Error::Shape {
        api,
        device: device.to_string(),
        what: format!("byte range outside the pool: {e}"),
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Nothing may still be using the pool when it goes back to the driver.
        if let Err(e) = self.lanes.synchronize_all() {
            tracing::warn!("freeing the pool of {}: {e}", self.lanes.device());
        }
        if self.lanes.bind().is_ok() {
            // SAFETY: `base` came from `malloc_sync` and is freed exactly once, here, after
            // all streams of the device are idle.
            if let Err(e) = unsafe { result::free_sync(self.base) } {
                tracing::warn!("cuMemFree of the pool of {}: {e}", self.lanes.device());
            }
        }
    }
}

/// Sizes of a [`GpuMemory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Bytes of the pool, rounded down to whole units.
    pub pool_bytes: usize,
    /// Allocation unit, a power of two (default 4 KiB, the default fragment size).
    pub unit_bytes: usize,
    /// Bytes of one pinned staging buffer (default 4 MiB).
    pub staging_chunk_bytes: usize,
    /// Staging buffers kept per direction (default 4).
    pub staging_slots: usize,
}

impl MemoryConfig {
    /// A pool of `pool_bytes` with the default unit and staging.
    pub fn new(pool_bytes: usize) -> MemoryConfig {
        MemoryConfig {
            pool_bytes,
            unit_bytes: 4096,
            staging_chunk_bytes: 4 << 20,
            staging_slots: 4,
        }
    }

    fn validate(&self, device: &str) -> Result<usize> {
        let bad = |why: String| Err(Error::Config(format!("GPU space {device}: {why}")));
        if !self.unit_bytes.is_power_of_two() || self.unit_bytes < 256 {
            return bad(format!(
                "unit_bytes = {} must be a power of two of at least 256 (the alignment CUDA \
                 gives its own allocations)",
                self.unit_bytes
            ));
        }
        let units = self.pool_bytes / self.unit_bytes;
        if units == 0 {
            return bad(format!(
                "pool_bytes = {} is less than one unit of {} bytes",
                self.pool_bytes, self.unit_bytes
            ));
        }
        if self.staging_chunk_bytes == 0 || self.staging_chunk_bytes > 1 << 30 {
            return bad(format!(
                "staging_chunk_bytes = {} must be between 1 byte and 1 GiB",
                self.staging_chunk_bytes
            ));
        }
        if self.staging_slots == 0 {
            return bad("staging_slots must be at least 1".to_string());
        }
        Ok(units)
    }
}

/// Allocation figures of a space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Bytes in the pool.
    pub capacity: usize,
    /// Bytes in allocated units.
    pub in_use: usize,
    /// Most bytes ever in use at once.
    pub high_water: usize,
    /// Allocations made.
    pub allocations: u64,
    /// Allocations freed.
    pub frees: u64,
}

/// One GPU's memory space.
pub struct GpuMemory {
    index: usize,
    arena: Arc<Arena>,
    unit: usize,
    alloc: Mutex<(NfAllocator, MemoryUse)>,
    to_device: Staging,
    to_host: Staging,
    peers_enabled: Mutex<Vec<usize>>,
}

impl std::fmt::Debug for GpuMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMemory")
            .field("device", &self.name())
            .field("use", &self.usage())
            .finish()
    }
}

impl GpuMemory {
    /// Reserves the pool of device `index` on `lanes`' context.
    pub(crate) fn new(index: usize, lanes: Arc<Lanes>, config: MemoryConfig) -> Result<Self> {
        let units = config.validate(lanes.device())?;
        let bytes = units * config.unit_bytes;
        let arena = Arc::new(Arena::reserve(lanes.clone(), bytes)?);
        let staging = |chunk| {
            Staging::new(
                lanes.ctx().clone(),
                lanes.device(),
                chunk,
                config.staging_slots,
            )
        };
        Ok(GpuMemory {
            index,
            unit: config.unit_bytes,
            alloc: Mutex::new((
                NfAllocator::with_capacity(units),
                MemoryUse {
                    capacity: bytes,
                    ..MemoryUse::default()
                },
            )),
            to_device: staging(config.staging_chunk_bytes),
            to_host: staging(config.staging_chunk_bytes),
            peers_enabled: Mutex::new(Vec::new()),
            arena,
        })
    }

    pub(crate) fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }

    fn lanes(&self) -> &Lanes {
        self.arena.lanes()
    }

    /// The space's name, `gpuN`.
    pub fn name(&self) -> &str {
        self.lanes().device()
    }

    /// Bytes in the pool.
    pub fn capacity(&self) -> usize {
        self.arena.bytes()
    }

    /// The allocation unit in bytes.
    pub fn unit_bytes(&self) -> usize {
        self.unit
    }

    fn lock(&self) -> MutexGuard<'_, (NfAllocator, MemoryUse)> {
        // Allocator updates are validated before they change anything, so a poisoned lock
        // holds consistent state.
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allocation figures.
    pub fn usage(&self) -> MemoryUse {
        self.lock().1
    }

    /// A block of at least `bytes` (whole units; zero bytes get one unit). Exhaustion is
    /// [`Error::PoolExhausted`], naming the space, the request and what is free.
    pub fn alloc(&self, bytes: usize) -> Result<GpuAlloc> {
        let units = bytes.div_ceil(self.unit).max(1);
        let mut guard = self.lock();
        let (nf, usage) = &mut *guard;
        let first = match units.checked_mul(self.unit).and_then(|_| nf.alloc(units)) {
            Some(first) => first,
            None => {
                return Err(Error::PoolExhausted {
                    space: self.name().to_string(),
                    requested: units.saturating_mul(self.unit),
                    free: nf.free_units() * self.unit,
                    largest_free: nf.largest_free_run() * self.unit,
                })
            }
        };
        usage.in_use += units * self.unit;
        usage.high_water = usage.high_water.max(usage.in_use);
        usage.allocations += 1;
        Ok(GpuAlloc {
            range: DevRange::new(first * self.unit, bytes),
            first_unit: first,
            units,
            pool: self.pool_id(),
        })
    }

    fn pool_id(&self) -> usize {
        Arc::as_ptr(&self.arena) as usize
    }

    /// Gives a block back. Work already issued on its bytes still completes first: later work
    /// on the same bytes is ordered after it by byte range, whoever owns them then.
    pub fn free(&self, block: GpuAlloc) -> Result<()> {
        if block.pool != self.pool_id() {
            return Err(Error::Config(format!(
                "a block of another GPU pool was freed to {}",
                self.name()
            )));
        }
        let mut guard = self.lock();
        let (nf, usage) = &mut *guard;
        nf.free(block.first_unit, block.units)
            .map_err(|e| cuda_error(format!("freeing a block of {}", self.name()), e))?;
        usage.in_use -= block.units * self.unit;
        usage.frees += 1;
        Ok(())
    }

    /// Checks `range` against the pool and returns its device address.
    pub(crate) fn ptr(&self, range: DevRange, api: &'static str) -> Result<sys::CUdeviceptr> {
        self.arena.ptr(range, api)
    }

    fn check_len(&self, api: &'static str, range: DevRange, host: usize) -> Result<()> {
        if range.len == host {
            Ok(())
        } else {
            Err(Error::Shape {
                api,
                device: self.name().to_string(),
                what: format!(
                    "the device range holds {} bytes but the host slice {host}",
                    range.len
                ),
            })
        }
    }

    /// Copies `src` into `dst` (equal lengths) and returns when the bytes are on the device.
    pub fn copy_to_device(&self, dst: DevRange, src: &[u8]) -> Result<()> {
        const API: &str = "copy to device";
        self.check_len(API, dst, src.len())?;
        let ptr = self.ptr(dst, API)?;
        if src.is_empty() {
            return Ok(());
        }
        let ((), event) =
            self.lanes()
                .submit(Lane::HostToDevice, &[], &[dst.span()], |stream| {
                    // SAFETY: `ptr..ptr + src.len()` lies in the pool (checked above); `src`
                    // is pageable memory, which the driver copies out before returning, and
                    // it outlives this call anyway, since we wait for the event below.
                    unsafe { result::memcpy_htod_async(ptr, src, stream.cu_stream()) }
                        .map_err(|e| self.transfer_error("host", self.name(), src.len(), e))
                })?;
        event.wait()
    }

    /// Copies `src` into `dst` (equal lengths) and returns when the bytes are on the host.
    pub fn copy_to_host(&self, src: DevRange, dst: &mut [u8]) -> Result<()> {
        const API: &str = "copy to host";
        self.check_len(API, src, dst.len())?;
        let ptr = self.ptr(src, API)?;
        if dst.is_empty() {
            return Ok(());
        }
        let len = dst.len();
        let ((), event) =
            self.lanes()
                .submit(Lane::DeviceToHost, &[src.span()], &[], |stream| {
                    // SAFETY: the source lies in the pool (checked above); `dst` is borrowed
                    // mutably for this whole call, and we wait for the copy before returning.
                    unsafe { result::memcpy_dtoh_async(dst, ptr, stream.cu_stream()) }
                        .map_err(|e| self.transfer_error(self.name(), "host", len, e))
                })?;
        event.wait()
    }

    /// Starts copying `src` into `dst` (equal lengths) through pinned staging buffers. Returns
    /// once `src` has been read, with the event of the last chunk's transfer: the copy is on
    /// the device when it completes. Work issued later on `dst`'s bytes is ordered after it.
    pub fn copy_to_device_async(&self, dst: DevRange, src: &[u8]) -> Result<GpuEvent> {
        const API: &str = "copy to device (async)";
        self.check_len(API, dst, src.len())?;
        let base = self.ptr(dst, API)?;
        if src.is_empty() {
            return Ok(self
                .lanes()
                .submit(Lane::HostToDevice, &[], &[], |_| Ok(()))?
                .1);
        }
        let chunk = self.to_device.chunk();
        let mut last = None;
        for (i, piece) in src.chunks(chunk).enumerate() {
            let offset = i * chunk;
            let mut buf = self.to_device.take()?;
            let filled = fill(&mut buf, piece)
                .map_err(|e| self.transfer_error("host", self.name(), src.len(), e));
            if let Err(e) = filled {
                self.to_device.release(buf);
                return Err(e);
            }
            let span = Span::at(dst.offset + offset, piece.len());
            let submitted = self
                .lanes()
                .submit(Lane::HostToDevice, &[], &[span], |stream| {
                    let staged = buf
                        .as_slice()
                        .map_err(|e| self.transfer_error("host", self.name(), src.len(), e))?;
                    let staged = staged.get(..piece.len()).unwrap_or(staged);
                    // SAFETY: the destination lies in the pool (checked above); the pinned
                    // buffer stays alive and untouched until the event recorded after this
                    // copy completes (`release_after` below).
                    unsafe {
                        result::memcpy_htod_async(base + offset as u64, staged, stream.cu_stream())
                    }
                    .map_err(|e| self.transfer_error("host", self.name(), src.len(), e))
                });
            match submitted {
                Ok(((), event)) => {
                    self.to_device.release_after(buf, event.clone());
                    last = Some(event);
                }
                Err(e) => {
                    self.to_device.release(buf);
                    return Err(e);
                }
            }
        }
        match last {
            Some(event) => Ok(event),
            // `src` is not empty, so the loop ran at least once.
            None => Err(Error::Config("empty async copy".to_string())),
        }
    }

    /// Starts copying `src` into `dst` (equal lengths) through pinned staging buffers; the
    /// returned [`PendingRead`] finishes it (waits and copies the staged bytes into `dst`)
    /// when waited for or dropped. A copy larger than the staging buffers together partly
    /// completes here, before this returns.
    pub fn copy_to_host_async<'a>(
        &'a self,
        src: DevRange,
        dst: &'a mut [u8],
    ) -> Result<PendingRead<'a>> {
        const API: &str = "copy to host (async)";
        self.check_len(API, src, dst.len())?;
        let base = self.ptr(src, API)?;
        let total = dst.len();
        let mut pending = PendingRead {
            memory: self,
            dst,
            chunks: VecDeque::new(),
            last: None,
        };
        let chunk = self.to_host.chunk();
        let mut offset = 0;
        while offset < total {
            let len = chunk.min(total - offset);
            if pending.chunks.len() >= self.to_host.slots() {
                pending.finish_one()?;
            }
            let mut buf = self.to_host.take()?;
            let span = Span::at(src.offset + offset, len);
            let submitted = self
                .lanes()
                .submit(Lane::DeviceToHost, &[span], &[], |stream| {
                    let staged = buf
                        .as_mut_slice()
                        .map_err(|e| self.transfer_error(self.name(), "host", total, e))?;
                    let staged_len = len.min(staged.len());
                    let staged = &mut staged[..staged_len];
                    // SAFETY: the source lies in the pool (checked above); the pinned buffer
                    // is owned by the pending read and read only after this copy's event.
                    unsafe {
                        result::memcpy_dtoh_async(staged, base + offset as u64, stream.cu_stream())
                    }
                    .map_err(|e| self.transfer_error(self.name(), "host", total, e))
                });
            match submitted {
                Ok(((), event)) => {
                    pending.last = Some(event.clone());
                    pending.chunks.push_back(Staged {
                        offset,
                        len,
                        buf,
                        event,
                    });
                }
                Err(e) => {
                    self.to_host.release(buf);
                    return Err(e);
                }
            }
            offset += len;
        }
        Ok(pending)
    }

    /// Copies `src` to `dst` inside the pool (equal lengths, not overlapping) on the
    /// device-to-device stream.
    pub fn copy_within(&self, src: DevRange, dst: DevRange) -> Result<GpuEvent> {
        const API: &str = "copy within device";
        if src.len != dst.len || src.overlaps(dst) {
            return Err(Error::Shape {
                api: API,
                device: self.name().to_string(),
                what: format!(
                    "source {src:?} and destination {dst:?} must have equal lengths and not overlap"
                ),
            });
        }
        let (s, d) = (self.ptr(src, API)?, self.ptr(dst, API)?);
        Ok(self
            .lanes()
            .submit(
                Lane::DeviceToDevice,
                &[src.span()],
                &[dst.span()],
                |stream| {
                    // SAFETY: both ranges lie in the pool and do not overlap (checked above).
                    unsafe { result::memcpy_dtod_async(d, s, src.len, stream.cu_stream()) }
                        .map_err(|e| self.transfer_error(self.name(), self.name(), src.len, e))
                },
            )?
            .1)
    }

    /// Sets `dst` to zero bytes on the device (a fresh or reset fragment is materialised by a
    /// fill, never by a transfer).
    pub fn fill_zero(&self, dst: DevRange) -> Result<GpuEvent> {
        let d = self.ptr(dst, "fill zero")?;
        Ok(self
            .lanes()
            .submit(Lane::DeviceToDevice, &[], &[dst.span()], |stream| {
                // SAFETY: the range lies in the pool (checked above).
                unsafe { result::memset_d8_async(d, 0, dst.len, stream.cu_stream()) }
                    .map_err(|e| cuda_error(format!("zero fill on {}", self.name()), e))
            })?
            .1)
    }

    /// Copies `src` of this space into `dst` of another GPU's space (equal lengths), on the
    /// destination's device-to-device stream, after the conflicting work of both. Peer access
    /// is enabled the first time where the hardware has it; without it the driver stages the
    /// copy through the host.
    pub fn copy_to_peer(&self, src: DevRange, peer: &GpuMemory, dst: DevRange) -> Result<GpuEvent> {
        const API: &str = "peer copy";
        if std::ptr::eq(self, peer) {
            return self.copy_within(src, dst);
        }
        if src.len != dst.len {
            return Err(Error::Shape {
                api: API,
                device: self.name().to_string(),
                what: format!("source {src:?} and destination {dst:?} differ in length"),
            });
        }
        let (s, d) = (self.ptr(src, API)?, peer.ptr(dst, API)?);
        peer.enable_peer_access_from(self)?;
        let src_ctx = self.lanes().ctx().cu_ctx();
        let dst_ctx = peer.lanes().ctx().cu_ctx();
        Ok(Lanes::submit_peer(
            self.lanes(),
            self.index,
            &[src.span()],
            peer.lanes(),
            peer.index,
            &[dst.span()],
            |stream| {
                // SAFETY: both ranges lie in their pools (checked above); the contexts are
                // the two devices' live primary contexts.
                unsafe {
                    result::memcpy_peer_async(dst_ctx, d, src_ctx, s, src.len, stream.cu_stream())
                }
                .map_err(|e| self.transfer_error(self.name(), peer.name(), src.len, e))
            },
        )?
        .1)
    }

    /// Lets this device's context reach `src`'s memory directly, where the hardware allows.
    fn enable_peer_access_from(&self, src: &GpuMemory) -> Result<()> {
        let mut enabled = self.peers_enabled.lock().unwrap_or_else(|e| e.into_inner());
        if enabled.contains(&src.index) {
            return Ok(());
        }
        self.lanes().bind()?;
        let what = || {
            format!(
                "enabling peer access from {} to {}",
                self.name(),
                src.name()
            )
        };
        let mut can = 0;
        // SAFETY: the out-pointer is a live local; both device handles come from live
        // contexts.
        unsafe {
            sys::cuDeviceCanAccessPeer(
                &mut can,
                self.lanes().ctx().cu_device(),
                src.lanes().ctx().cu_device(),
            )
        }
        .result()
        .map_err(|e| cuda_error(what(), e))?;
        if can == 1 {
            // SAFETY: this device's context is current and `src`'s context is live.
            match unsafe { sys::cuCtxEnablePeerAccess(src.lanes().ctx().cu_ctx(), 0) }.result() {
                Ok(())
                | Err(DriverError(sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) => {}
                Err(e) => return Err(cuda_error(what(), e)),
            }
        }
        enabled.push(src.index);
        Ok(())
    }

    fn transfer_error(
        &self,
        from: &str,
        to: &str,
        bytes: usize,
        e: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Transfer {
            from: from.to_string(),
            to: to.to_string(),
            bytes,
            source: BackendError::driver(e),
        }
    }
}

/// Copies `piece` into the start of a staging buffer.
fn fill(buf: &mut PinnedHostSlice<u8>, piece: &[u8]) -> std::result::Result<(), DriverError> {
    let staged = buf.as_mut_slice()?;
    if let Some(dst) = staged.get_mut(..piece.len()) {
        dst.copy_from_slice(piece);
    }
    Ok(())
}

struct Staged {
    offset: usize,
    len: usize,
    buf: PinnedHostSlice<u8>,
    event: GpuEvent,
}

/// A device-to-host copy in flight; [`wait`](PendingRead::wait) finishes it. Dropping it
/// without waiting finishes it too (and logs an error it could not return).
#[must_use = "the bytes reach the host only when the read is waited for (or dropped)"]
pub struct PendingRead<'a> {
    memory: &'a GpuMemory,
    dst: &'a mut [u8],
    chunks: VecDeque<Staged>,
    last: Option<GpuEvent>,
}

impl PendingRead<'_> {
    /// The completion of the last transfer (the staged bytes still have to be copied to the
    /// destination by [`wait`](Self::wait)). `None` for an empty copy.
    pub fn event(&self) -> Option<&GpuEvent> {
        self.last.as_ref()
    }

    /// Whether every transfer has completed (then `wait` only copies on the host).
    pub fn is_done(&self) -> Result<bool> {
        match &self.last {
            Some(e) => e.is_done(),
            None => Ok(true),
        }
    }

    /// Waits for the transfers and copies the bytes into the destination.
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        while !self.chunks.is_empty() {
            self.finish_one()?;
        }
        Ok(())
    }

    fn finish_one(&mut self) -> Result<()> {
        let Some(staged) = self.chunks.pop_front() else {
            return Ok(());
        };
        if let Err(e) = staged.event.wait() {
            // A transfer in an unknown state keeps its memory (see `Staging::take`).
            std::mem::forget(staged.buf);
            return Err(e);
        }
        let copied = staged.buf.as_slice().map(|src| {
            let end = staged.offset + staged.len;
            if let (Some(d), Some(s)) =
                (self.dst.get_mut(staged.offset..end), src.get(..staged.len))
            {
                d.copy_from_slice(s);
            }
        });
        self.memory.to_host.release(staged.buf);
        copied.map_err(|e| {
            self.memory
                .transfer_error(self.memory.name(), "host", self.dst.len(), e)
        })
    }
}

impl Drop for PendingRead<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("finishing a dropped device-to-host copy: {e}");
        }
    }
}
