//! `HeteData<T>` (the paper's `hete_Data`) and its views.
//!
//! A buffer cannot be indexed directly: host code reads and writes through views that sync
//! first (`host()`, `host_mut()`, `host_write()`), and kernels take the buffer or a view of a
//! sub-range. Views follow Rust's borrow rules, so a host view cannot be held across a kernel
//! call that writes the same buffer, and disjoint mutable views — split at fragment boundaries
//! so that no fragment is shared — can go to different devices at once.

mod buffer;
mod checksum;
mod evict;
mod in_flight;
#[cfg(all(test, loom))]
mod in_flight_loom;
mod lease;
#[cfg(all(test, loom))]
mod lease_loom;
mod secure;
mod validate;
mod window;

pub(crate) use buffer::RawBuffer;
pub(crate) use checksum::{Writer, WrittenBy};
pub(crate) use lease::{Held, Lease};
pub use secure::{Seal, SecureKey, SECURE_KEY_BYTES};

/// The memory system buffers live in: its spaces' holders are buffers.
pub(crate) type BufferMemorySystem = crate::space::MemorySystem<RawBuffer>;

use crate::coherence::{Access, FragmentState};
use crate::hal::Device;
use crate::hal::SpaceId;
use crate::hal::{Error, Result};
use crate::stats::Reason;
use bytemuck::Pod;
use std::any::type_name;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// Fragment size a buffer gets unless `fragment()` says otherwise, or the runtime was built to
/// take it from its devices (`RuntimeBuilder::fragments_from_devices`, `Runtime::fragment_rule`).
pub const DEFAULT_FRAGMENT_BYTES: usize = 4096;

/// A buffer of `len` elements of `T` managed by a runtime: allocated lazily in each memory space
/// that uses it, tracked per fragment, freed on drop.
///
/// This is the RIMMS paper's `hete_Data`. Its calls are methods here:
///
/// | RIMMS call | here |
/// |---|---|
/// | `hete_Malloc` | [`HeteData::alloc`] (zeros), [`HeteData::from_slice`] (a copy of host values) |
/// | `hete_Free` | [`HeteData::free`], or dropping the buffer |
/// | `hete_Sync` | [`HeteData::host`] (read), [`HeteData::host_mut`] (read and write), [`HeteData::host_write`] (overwrite); the views' methods of the same names for part of a buffer |
/// | `hete_Fragment` | [`HeteData::fragment`] |
/// | `hete_Reset` | [`HeteData::reset`], [`HeteSliceMut::reset`] for a view |
/// | `hete_Prefetch` | [`HeteData::prefetch`] |
/// | `hete_Validate` | [`HeteData::validate`] |
///
/// Kernels take the buffer or a view ([`HeteSlice`], [`HeteSliceMut`]) wherever the paper
/// passes a `hete_Data`; the runtime syncs what each call needs, so a program never calls
/// `hete_Sync` before a kernel.
#[doc(alias = "hete_Data")]
pub struct HeteData<T: Pod> {
    /// Shared with the eviction registries of the spaces it has blocks in (weakly): an
    /// evictor reaches the buffer through them, wherever the `HeteData` has moved.
    raw: Arc<RawBuffer>,
    len: usize,
    _elem: PhantomData<T>,
}

/// A read-only view of a sub-range of a [`HeteData`].
pub struct HeteSlice<'a, T: Pod> {
    raw: &'a RawBuffer,
    start: usize,
    len: usize,
    _elem: PhantomData<&'a [T]>,
}

/// A mutable view of a sub-range of a [`HeteData`]; its range covers whole fragments (except at
/// the buffer's end), so no other mutable view shares a fragment with it.
pub struct HeteSliceMut<'a, T: Pod> {
    raw: &'a RawBuffer,
    start: usize,
    len: usize,
    _elem: PhantomData<&'a mut [T]>,
}

impl<T: Pod> Clone for HeteSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Pod> Copy for HeteSlice<'_, T> {}

fn elem_size<T>() -> usize {
    std::mem::size_of::<T>()
}

fn check_fragment<T>(bytes: usize) -> Result<u32> {
    let why = if !bytes.is_power_of_two() {
        Some("it must be a power of two")
    } else if bytes % elem_size::<T>() != 0 {
        Some("it must be a whole number of elements")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::FragmentSize {
            bytes,
            type_name: type_name::<T>(),
            elem_size: elem_size::<T>(),
            why,
        }),
        None => Ok(bytes.trailing_zeros()),
    }
}

/// The rules an element type obeys wherever a typed view of a buffer's bytes is made
/// ([`HeteData::alloc`], a merge rule's typed arguments): not zero-sized (element counts are
/// byte counts divided by the size), aligned no more strictly than `granule` (blocks start on
/// pool granules, and views on element boundaries from there), and a power of two bytes in
/// size (so a fragment holds whole elements).
pub(crate) fn check_element<T>(granule: usize) -> Result<()> {
    let size = elem_size::<T>();
    if size == 0 {
        return Err(Error::EmptyBuffer {
            type_name: type_name::<T>(),
        });
    }
    if std::mem::align_of::<T>() > granule {
        return Err(Error::Alignment {
            type_name: type_name::<T>(),
            align: std::mem::align_of::<T>(),
            granule,
        });
    }
    if !size.is_power_of_two() {
        return Err(Error::FragmentSize {
            bytes: DEFAULT_FRAGMENT_BYTES,
            type_name: type_name::<T>(),
            elem_size: size,
            why: "fragments are a power of two bytes, which an element of this size cannot fill; pad the type to a power-of-two size",
        });
    }
    Ok(())
}

fn resolve(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfBounds { start, end, len });
    }
    Ok((start, end - start))
}

impl<T: Pod> HeteData<T> {
    /// A buffer of `len` zeros in `memory`: what `HeteData::alloc` (in `runtime/buffers.rs`,
    /// beside the handle it takes) makes.
    pub(crate) fn alloc_in(memory: &Arc<BufferMemorySystem>, len: usize) -> Result<HeteData<T>> {
        HeteData::alloc_keyed(memory, len, None)
    }

    /// A buffer of `len` zeros in `memory`, secure under `key` if given
    /// ([`HeteData::alloc_secure`]).
    pub(crate) fn alloc_keyed(
        memory: &Arc<BufferMemorySystem>,
        len: usize,
        key: Option<SecureKey>,
    ) -> Result<HeteData<T>> {
        let size = elem_size::<T>();
        check_element::<T>(memory.granule())?;
        let bytes = len
            .checked_mul(size)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(Error::LengthOverflow {
                len,
                type_name: type_name::<T>(),
                elem_size: size,
            })?;
        let fragment = if memory.fragments_from_devices() {
            memory.fragment_rule().bytes_for(size)
        } else {
            DEFAULT_FRAGMENT_BYTES.max(size)
        };
        let shift = check_fragment::<T>(fragment)?;
        Ok(HeteData {
            raw: RawBuffer::new(memory.clone(), bytes, shift, key)?,
            len,
            _elem: PhantomData,
        })
    }

    /// The buffer, borrowed mutably: no host view of it can be alive, so host views no longer
    /// keep its blocks from eviction.
    fn raw_mut(&mut self) -> &RawBuffer {
        self.raw.end_host_views();
        &self.raw
    }

    /// Records the checksums of host views' writes now (`data::checksum`): none is alive.
    pub(crate) fn settle_host_writes(&mut self) {
        self.raw.settle_host_writes();
    }

    /// The whole buffer as a mutable view, through [`Self::raw_mut`].
    fn whole_mut(&mut self) -> HeteSliceMut<'_, T> {
        let len = self.len;
        HeteSliceMut::new(self.raw_mut(), 0, len)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer as a read-only view.
    pub fn as_slice(&self) -> HeteSlice<'_, T> {
        HeteSlice::new(&self.raw, 0, self.len)
    }

    /// The whole buffer as a mutable view.
    pub fn as_slice_mut(&mut self) -> HeteSliceMut<'_, T> {
        self.whole_mut()
    }

    /// Sets the tracking granularity to `bytes` (a power of two, a whole number of elements).
    /// Smaller fragments let parts of the buffer live on different devices; larger ones make
    /// the bookkeeping cheaper. Where merging fragments would combine data held in different
    /// spaces, it is gathered on the host first.
    ///
    /// RIMMS: `hete_Fragment`.
    #[doc(alias = "hete_Fragment")]
    pub fn fragment(&mut self, bytes: usize) -> Result<()> {
        let shift = check_fragment::<T>(bytes)?;
        self.raw_mut().refragment(shift)
    }

    /// The tracking granularity in bytes.
    pub fn fragment_bytes(&self) -> usize {
        self.raw.fragment_bytes()
    }

    /// Whether this is a secure buffer ([`HeteData::alloc_secure`]).
    pub fn is_secure(&self) -> bool {
        self.raw.is_secure()
    }

    /// The key of a secure buffer, for a layer that moves its fragments itself (the network
    /// link): [`SecureKey::seal_run`] with [`Self::secure_id`] and [`Self::fragment_bytes`]
    /// seals a run as the runtime seals it for an untrusted space.
    pub fn secure_key(&self) -> Option<&SecureKey> {
        self.raw.key()
    }

    /// The buffer id a secure buffer's fragments are sealed under in this runtime (bound into
    /// every fragment's tag with the fragment's index); the id errors name the buffer by.
    pub fn secure_id(&self) -> u64 {
        self.raw.id()
    }

    /// Number of fragments.
    pub fn fragment_count(&self) -> usize {
        self.raw.fragment_count()
    }

    /// The coherence state of fragment `index`, or `None` past the end.
    pub fn fragment_state(&self, index: usize) -> Option<FragmentState> {
        self.raw.fragment_state(index)
    }

    /// Whether an access of `access` mode in `space` would find the whole buffer in place and
    /// need no work at all: the lock-free check every kernel call starts with.
    #[inline]
    pub fn is_resident(&self, space: SpaceId, access: Access) -> bool {
        self.raw.resident_exact(space, access)
    }

    /// Reads on the host: brings every fragment's newest bytes to host memory first.
    ///
    /// RIMMS: `hete_Sync` to the host, for reading.
    #[doc(alias = "hete_Sync")]
    pub fn host(&self) -> Result<&[T]> {
        self.as_slice().host()
    }

    /// Reads and writes on the host: syncs first, then the host holds the only valid copy.
    ///
    /// RIMMS: `hete_Sync` to the host, for reading and writing.
    #[doc(alias = "hete_Sync")]
    pub fn host_mut(&mut self) -> Result<&mut [T]> {
        self.whole_mut().into_host_mut(Access::ReadWrite)
    }

    /// Overwrites on the host (write-discard): nothing is copied in, so the contents handed out
    /// are unspecified and the caller must write every element.
    ///
    /// RIMMS: `hete_Sync` to the host for an overwrite, which copies nothing in.
    #[doc(alias = "hete_Sync")]
    pub fn host_write(&mut self) -> Result<&mut [T]> {
        self.whole_mut().into_host_mut(Access::Write)
    }

    /// Overwrites on the host like [`Self::host_write`], with the write's end in view: `fill`
    /// must write every element, and once it returns, the bytes start moving to where their
    /// owner history says they went after the last fill (a frame loop's device), so the copy
    /// overlaps whatever the program does before the call that needs them. Where no history
    /// predicts a place, or copies take no time, it is `host_write`. The write is recorded
    /// when `fill` returns: one that panics part-way keeps every other valid copy, as a
    /// `parallel_for!` that unwinds does.
    ///
    /// RIMMS: `hete_Sync` for an overwrite, then `hete_Sync_Async` to where it goes next.
    pub fn host_fill<R>(&mut self, fill: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        self.whole_mut().host_fill(fill)
    }

    /// A host copy of the contents.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.host()?.to_vec())
    }

    /// A read-only view of `range`.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<HeteSlice<'_, T>> {
        self.as_slice().slice(range)
    }

    /// A mutable view of `range`. Its ends may fall inside fragments: a call that writes it
    /// reads the fragments it covers only partly first (they are read-write, not write-only),
    /// so the bytes outside the view keep their values. Views that exist at the same time
    /// ([`Self::split_at_mut`], [`Self::chunks_mut`], [`Self::rows_mut`]) split on fragment
    /// boundaries, so two of them never share a fragment.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<HeteSliceMut<'_, T>> {
        self.whole_mut().into_slice_mut(range)
    }

    /// Read-only views of consecutive pieces of `chunk` elements (the last may be shorter).
    pub fn chunks(&self, chunk: usize) -> Result<Vec<HeteSlice<'_, T>>> {
        self.as_slice().chunks(chunk)
    }

    /// Mutable views of consecutive pieces of `chunk` elements, each starting on a fragment
    /// boundary.
    pub fn chunks_mut(&mut self, chunk: usize) -> Result<Vec<HeteSliceMut<'_, T>>> {
        self.whole_mut().into_chunks_mut(chunk)
    }

    /// Read-only views of the rows of a row-major matrix with rows of `row_len` elements.
    pub fn rows(&self, row_len: usize) -> Result<Vec<HeteSlice<'_, T>>> {
        self.as_slice().rows(row_len)
    }

    /// Mutable views of the rows of a row-major matrix with rows of `row_len` elements.
    pub fn rows_mut(&mut self, row_len: usize) -> Result<Vec<HeteSliceMut<'_, T>>> {
        Ok(self.iter_rows_mut(row_len)?.collect())
    }

    /// The views of [`Self::rows`] one by one, collected nowhere: a per-row loop of scope
    /// calls hands each to its call by value.
    pub fn iter_rows(
        &self,
        row_len: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSlice<'_, T>>> {
        self.as_slice().iter_rows(row_len)
    }

    /// The views of [`Self::rows_mut`] one by one, collected nowhere.
    ///
    /// ```
    /// # use rimms_runtime::{Complex32, Device, FftDirection, HeteData, Runtime};
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::new()?;
    /// let x = HeteData::from_slice(&rt, &vec![Complex32::new(1.0, 0.0); 8 * 512])?;
    /// let mut y = HeteData::<Complex32>::alloc(&rt, 8 * 512)?;
    /// rt.scope(|s| {
    ///     for (row, out) in x.iter_rows(512)?.zip(y.iter_rows_mut(512)?) {
    ///         s.fft(Device::Cpu, FftDirection::Forward, 512, row, out)?;
    ///     }
    ///     Ok::<(), rimms_runtime::Error>(())
    /// })??;
    /// assert_eq!(y.host()?[7 * 512].re, 512.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter_rows_mut(
        &mut self,
        row_len: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSliceMut<'_, T>>> {
        check_rows(self.len, row_len)?;
        self.whole_mut().into_iter_chunks_mut(row_len)
    }

    /// Two mutable views, `..mid` and `mid..`; `mid` must fall on a fragment boundary.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(HeteSliceMut<'_, T>, HeteSliceMut<'_, T>)> {
        self.whole_mut().into_split_at_mut(mid)
    }

    /// Frees the buffer's memory in every space now; the same as dropping it.
    ///
    /// RIMMS: `hete_Free`.
    #[doc(alias = "hete_Free")]
    pub fn free(self) {
        drop(self);
    }

    /// Makes the contents zero without freeing memory or moving a byte: the frame-loop reuse
    /// pattern. Allocate a frame's buffers once, before the loop, and reset them at the start
    /// of every frame: their blocks stay in every space that used them, so no frame pays for
    /// an allocation or a free, and the zero mark keeps the last frame's bytes from ever being
    /// read or copied. (`benches/frame_reuse.rs` measures it against allocating per frame.)
    ///
    /// RIMMS: `hete_Reset`.
    ///
    /// ```
    /// use rimms_runtime::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};
    ///
    /// # fn main() -> rimms_runtime::Result<()> {
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let n = 256;
    /// let (mut pulse, mut spectrum) = (HeteData::alloc(&rt, n)?, HeteData::alloc(&rt, n)?);
    /// for frame in 0..3 {
    ///     pulse.reset();
    ///     spectrum.reset();
    ///     pulse.host_mut()?[frame] = Complex32::new(1.0, 0.0);
    ///     rt.fft(Device::Sim(0), FftDirection::Forward, n, &pulse, &mut spectrum)?;
    ///     assert!((spectrum.host()?[0].re - 1.0).abs() < 1e-6);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "hete_Reset")]
    pub fn reset(&mut self) {
        self.raw_mut().reset();
    }

    /// Makes `device`'s memory the buffer's home: host code and CPU kernels that write it
    /// write it there when the CPU can reach that memory (an FPGA's u-dma-buf), so the device
    /// then reads it without a copy. Without a home set, a buffer lives where it is first
    /// written.
    pub fn set_home(&self, device: Device) -> Result<()> {
        self.raw.set_home(self.raw.memory().device_space(device)?);
        Ok(())
    }

    /// [`HeteData::set_home`], under its earlier name. "Place" also meant where a call runs
    /// and the space an argument is used in; a buffer's is its home.
    #[deprecated(
        since = "0.1.0",
        note = "renamed `set_home`: it sets the buffer's home"
    )]
    pub fn place(&self, device: Device) -> Result<()> {
        self.set_home(device)
    }

    /// Brings the newest bytes into `device`'s memory ahead of use.
    ///
    /// RIMMS: `hete_Prefetch`.
    #[doc(alias = "hete_Prefetch")]
    pub fn prefetch(&self, device: Device) -> Result<()> {
        let space = self.raw.memory().device_space(device)?;
        // A prefetch moves windows like any acquire, so it holds a lease as a call does: a
        // window a running kernel reads is then not its to move (`data::lease`).
        let _lease = self.raw.lease();
        self.raw.acquire(
            0,
            self.raw.bytes(),
            space,
            Access::Read,
            &Reason::Prefetch,
            Held::ONE,
        )?;
        Ok(())
    }

    /// Starts bringing the newest bytes into `device`'s memory and returns without waiting
    /// for them to arrive: the copies are in flight (`data::in_flight`) until the link's time
    /// has passed, and a call on `device` that reads the buffer meanwhile finds them there and
    /// waits only for what is left of that time, instead of copying and waiting in full. So
    /// a copy overlaps whatever runs until the call that needs it. It takes only free room
    /// in the device's memory and never evicts: where the bytes do not fit there now, it
    /// fails with [`Error::DoesNotFit`] and copies nothing.
    ///
    /// RIMMS: `hete_Sync_Async`.
    #[doc(alias = "hete_Sync_Async")]
    pub fn prefetch_async(&self, device: Device) -> Result<Prefetch> {
        let space = self.raw.memory().device_space(device)?;
        // As for `prefetch`: the acquire may move windows, so it holds a lease while it runs.
        let _lease = self.raw.lease();
        let lands = self
            .raw
            .acquire_async(0, self.raw.bytes(), space, &Reason::Prefetch)?;
        Ok(Prefetch { lands })
    }

    /// Compares every valid copy of every fragment (and zero-marked copies against zero) and
    /// names the first that differs: something wrote behind the runtime's back. Costs a pass
    /// over every copy; meant for checked builds and tests.
    ///
    /// RIMMS: `hete_Validate`.
    #[doc(alias = "hete_Validate")]
    pub fn validate(&self) -> Result<()> {
        self.raw.validate()
    }
}

impl<T: Pod> fmt::Debug for HeteData<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeteData")
            .field("type", &type_name::<T>())
            .field("len", &self.len)
            .field("fragment_bytes", &self.fragment_bytes())
            .field("secure", &self.raw.is_secure())
            .finish()
    }
}

impl<T: Pod> fmt::Debug for HeteSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeteSlice")
            .field("offset", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> fmt::Debug for HeteSliceMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeteSliceMut")
            .field("offset", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

fn check_rows(len: usize, row_len: usize) -> Result<()> {
    if row_len == 0 || len % row_len != 0 {
        return Err(Error::BadPieces {
            len,
            piece: row_len,
            why: "the row length must be non-zero and divide the length",
        });
    }
    Ok(())
}

/// The start and length of each consecutive piece of `chunk` (non-zero) elements of `len`,
/// the last maybe shorter. Counted up front from a range, so that collecting the views is
/// one exactly sized allocation filled in a tight loop (`step_by` pushed them one by one).
fn pieces(len: usize, chunk: usize) -> impl ExactSizeIterator<Item = (usize, usize)> {
    (0..len.div_ceil(chunk)).map(move |i| {
        let start = i * chunk;
        (start, chunk.min(len - start))
    })
}

fn check_chunk(len: usize, chunk: usize) -> Result<()> {
    if chunk == 0 {
        return Err(Error::BadPieces {
            len,
            piece: chunk,
            why: "the chunk length must be non-zero",
        });
    }
    Ok(())
}

impl<'a, T: Pod> HeteSlice<'a, T> {
    fn new(raw: &'a RawBuffer, start: usize, len: usize) -> Self {
        HeteSlice {
            raw,
            start,
            len,
            _elem: PhantomData,
        }
    }

    /// The view of bytes `start..start + len` of `raw`, which the caller has checked are
    /// whole elements of `T` (a merged call's argument, `kernel::merge`).
    pub(crate) fn from_bytes(raw: &'a RawBuffer, start: usize, len: usize) -> Self {
        HeteSlice::new(raw, start / elem_size::<T>(), len / elem_size::<T>())
    }

    pub(crate) fn raw(&self) -> &'a RawBuffer {
        self.raw
    }

    /// First element of the view in its buffer.
    pub fn offset(&self) -> usize {
        self.start
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn byte_range(&self) -> (usize, usize) {
        (self.start * elem_size::<T>(), self.len * elem_size::<T>())
    }

    /// Reads on the host: syncs the fragments of this view first (or reads them in place in a
    /// host-mapped space that holds all of them).
    pub fn host(&self) -> Result<&'a [T]> {
        if self.len == 0 {
            return Ok(&[]);
        }
        let (start, len) = self.byte_range();
        let space = self.raw.host_space(start, len, Access::Read)?;
        // SAFETY: the space's block holds the whole buffer, the range is inside it, `T` is Pod
        // and the block is aligned to the pool granule (checked at alloc to cover `T`). The
        // shared borrow of the view keeps writers away for `'a`.
        Ok(unsafe {
            std::slice::from_raw_parts(self.raw.ptr_in(space, start) as *const T, self.len)
        })
    }

    /// A read-only view of `range` of this view.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<HeteSlice<'a, T>> {
        let (start, len) = resolve(range, self.len)?;
        Ok(HeteSlice::new(self.raw, self.start + start, len))
    }

    /// Read-only views of consecutive pieces of `chunk` elements (the last may be shorter).
    pub fn chunks(&self, chunk: usize) -> Result<Vec<HeteSlice<'a, T>>> {
        Ok(self.iter_chunks(chunk)?.collect())
    }

    /// The views of [`Self::chunks`] one by one, collected nowhere.
    pub fn iter_chunks(
        &self,
        chunk: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSlice<'a, T>> + use<'a, T>> {
        check_chunk(self.len, chunk)?;
        let (raw, start) = (self.raw, self.start);
        Ok(pieces(self.len, chunk).map(move |(s, len)| HeteSlice::new(raw, start + s, len)))
    }

    /// Read-only views of rows of `row_len` elements.
    pub fn rows(&self, row_len: usize) -> Result<Vec<HeteSlice<'a, T>>> {
        Ok(self.iter_rows(row_len)?.collect())
    }

    /// The views of [`Self::rows`] one by one, collected nowhere.
    pub fn iter_rows(
        &self,
        row_len: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSlice<'a, T>> + use<'a, T>> {
        check_rows(self.len, row_len)?;
        self.iter_chunks(row_len)
    }
}

impl<'a, T: Pod> HeteSliceMut<'a, T> {
    fn new(raw: &'a RawBuffer, start: usize, len: usize) -> Self {
        HeteSliceMut {
            raw,
            start,
            len,
            _elem: PhantomData,
        }
    }

    /// The mutable view of bytes `start..start + len` of `raw`: whole elements of `T`, and
    /// the union of mutable views that were handed over exclusively for as long as this one
    /// lives (a merged call's written argument, `kernel::merge`).
    pub(crate) fn from_bytes(raw: &'a RawBuffer, start: usize, len: usize) -> Self {
        HeteSliceMut::new(raw, start / elem_size::<T>(), len / elem_size::<T>())
    }

    /// This view, read-only.
    pub fn as_slice(&self) -> HeteSlice<'_, T> {
        HeteSlice::new(self.raw, self.start, self.len)
    }

    /// A shorter-lived mutable view of the same range.
    pub fn reborrow(&mut self) -> HeteSliceMut<'_, T> {
        HeteSliceMut::new(self.raw, self.start, self.len)
    }

    /// First element of the view in its buffer.
    pub fn offset(&self) -> usize {
        self.start
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads on the host.
    pub fn host(&self) -> Result<&[T]> {
        self.as_slice().host()
    }

    /// The tracking granularity of the underlying buffer, in bytes.
    pub fn fragment_bytes(&self) -> usize {
        self.raw.fragment_bytes()
    }

    /// Reads and writes on the host: syncs first, then the host holds the only valid copy.
    pub fn host_mut(&mut self) -> Result<&mut [T]> {
        self.reborrow().into_host_mut(Access::ReadWrite)
    }

    /// Overwrites on the host (write-discard); the contents handed out are unspecified.
    pub fn host_write(&mut self) -> Result<&mut [T]> {
        self.reborrow().into_host_mut(Access::Write)
    }

    /// [`HeteData::host_fill`] of this view.
    pub fn host_fill<R>(&mut self, fill: impl FnOnce(&mut [T]) -> R) -> Result<R> {
        let (start, len) = self.as_slice().byte_range();
        // The write is recorded only once `fill` has returned (a `HostWrite`, as a host loop's
        // is): a fill that unwinds part-way is a failed write, which keeps every other valid
        // copy. Marked before `fill` ran, its half-written bytes became the only copy and the
        // newest values elsewhere were lost.
        let (slice, space, write) = self.reborrow().into_host_write(Access::Write)?;
        // No lock is held while `fill` runs: it may call back into the runtime.
        let filled = fill(slice);
        // The record sends the bytes on (`HostWrite::finish`); written where the only valid
        // copy was already, there is nothing to record, and they are sent from here.
        if write.map(HostWrite::finish).is_none() {
            self.raw.send_predicted(start, len, space);
        }
        Ok(filled)
    }

    pub(crate) fn into_host_mut(self, access: Access) -> Result<&'a mut [T]> {
        if self.len == 0 {
            return Ok(&mut []);
        }
        let (start, len) = self.as_slice().byte_range();
        let space = self.raw.host_space(start, len, access)?;
        Ok(self.host_slice_in(space))
    }

    /// The view's contents on the host, and the space they are in, for a write that is
    /// recorded only when the returned [`HostWrite`] finishes: until then the other valid
    /// copies stay valid, so a writer that fails or unwinds part-way loses nothing (what
    /// `parallel_for!` and `host_fill` need). No `HostWrite` where nothing is owed: an empty
    /// view, or a space that already holds the only valid copy.
    pub(crate) fn into_host_write(
        self,
        access: Access,
    ) -> Result<(&'a mut [T], SpaceId, Option<HostWrite<'a>>)> {
        if self.len == 0 {
            return Ok((&mut [], SpaceId::HOST, None));
        }
        let (start, len) = self.as_slice().byte_range();
        let host = self.raw.host_acquire(start, len, access)?;
        let space = host.space;
        let write = host.owed.map(|lease| HostWrite {
            raw: self.raw,
            start,
            len,
            space,
            recorded: false,
            _lease: lease,
        });
        Ok((self.host_slice_in(space), space, write))
    }

    fn host_slice_in(self, space: SpaceId) -> &'a mut [T] {
        let (start, _) = self.as_slice().byte_range();
        // SAFETY: the view is not empty (the callers return an empty slice first), `space` is
        // host-addressable (the host or a host-mapped space, as
        // `host_acquire` returns) and holds this view's bytes after the acquire; the block
        // holds the whole buffer, `T` is Pod and the block is aligned to the pool granule
        // (checked at alloc to cover `T`). The exclusive borrow of the view for `'a` (and its
        // fragment-aligned range) keeps every other reader and writer of these bytes away.
        unsafe {
            std::slice::from_raw_parts_mut(self.raw.ptr_in(space, start).cast::<T>(), self.len)
        }
    }

    /// Checks that element `at` of this view starts a fragment or ends the buffer.
    fn check_boundary(&self, at: usize) -> Result<()> {
        let byte_offset = (self.start + at) * elem_size::<T>();
        let fragment_bytes = self.raw.fragment_bytes();
        if byte_offset % fragment_bytes != 0 && byte_offset != self.raw.bytes() {
            return Err(Error::MisalignedSplit {
                at: self.start + at,
                byte_offset,
                fragment_bytes,
            });
        }
        Ok(())
    }

    /// A mutable view of `range` of this view; its ends may fall anywhere (see
    /// [`HeteData::slice_mut`]).
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<HeteSliceMut<'_, T>> {
        self.reborrow().into_slice_mut(range)
    }

    fn into_slice_mut(self, range: impl RangeBounds<usize>) -> Result<HeteSliceMut<'a, T>> {
        let (start, len) = resolve(range, self.len)?;
        // Its ends may fall inside fragments: it is the only mutable view of its parent while
        // it lives (it borrows the parent whole), and it lies inside the parent, whose own
        // ends are fragment boundaries wherever a sibling view exists (`split_at_mut`,
        // `chunks_mut` check them). So two mutable views alive at once never share a
        // fragment. A call writing it treats its partly covered fragments as read-write
        // (`FragmentSpan::is_partial`), which keeps the bytes outside it.
        Ok(HeteSliceMut::new(self.raw, self.start + start, len))
    }

    /// Two mutable views, `..mid` and `mid..`; `mid` must fall on a fragment boundary.
    pub fn split_at_mut(
        &mut self,
        mid: usize,
    ) -> Result<(HeteSliceMut<'_, T>, HeteSliceMut<'_, T>)> {
        self.reborrow().into_split_at_mut(mid)
    }

    fn into_split_at_mut(self, mid: usize) -> Result<(HeteSliceMut<'a, T>, HeteSliceMut<'a, T>)> {
        if mid > self.len {
            return Err(Error::OutOfBounds {
                start: mid,
                end: mid,
                len: self.len,
            });
        }
        // Splitting at either end leaves one side empty, which shares no byte with the other.
        if mid != 0 && mid != self.len {
            self.check_boundary(mid)?;
        }
        Ok((
            HeteSliceMut::new(self.raw, self.start, mid),
            HeteSliceMut::new(self.raw, self.start + mid, self.len - mid),
        ))
    }

    /// Mutable views of consecutive pieces of `chunk` elements, each starting on a fragment
    /// boundary.
    pub fn chunks_mut(&mut self, chunk: usize) -> Result<Vec<HeteSliceMut<'_, T>>> {
        self.reborrow().into_chunks_mut(chunk)
    }

    fn into_chunks_mut(self, chunk: usize) -> Result<Vec<HeteSliceMut<'a, T>>> {
        Ok(self.into_iter_chunks_mut(chunk)?.collect())
    }

    /// The views of [`Self::chunks_mut`], made one by one as the iterator is walked. Each
    /// piece is made once, and the iterator is not `Clone` (its type is opaque), so no two
    /// views it gives share an element.
    fn into_iter_chunks_mut(
        self,
        chunk: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSliceMut<'a, T>>> {
        check_chunk(self.len, chunk)?;
        // Every boundary `chunk`, `2 chunk`, … inside the view lies on a fragment boundary
        // when the first does and a chunk is whole fragments: one test for all the rows of a
        // per-row stage. Otherwise the first that does not is found for the error.
        // (Both lie within the buffer where `chunk < len`, so the products do not overflow.)
        let whole =
            |elems: usize| (elems * elem_size::<T>()) & (self.raw.fragment_bytes() - 1) == 0;
        if chunk < self.len && !(whole(self.start + chunk) && whole(chunk)) {
            for s in (chunk..self.len).step_by(chunk) {
                self.check_boundary(s)?;
            }
        }
        let (raw, start) = (self.raw, self.start);
        Ok(pieces(self.len, chunk).map(move |(s, len)| HeteSliceMut::new(raw, start + s, len)))
    }

    /// Mutable views of rows of `row_len` elements.
    pub fn rows_mut(&mut self, row_len: usize) -> Result<Vec<HeteSliceMut<'_, T>>> {
        Ok(self.iter_rows_mut(row_len)?.collect())
    }

    /// The views of [`Self::rows_mut`] one by one, collected nowhere.
    pub fn iter_rows_mut(
        &mut self,
        row_len: usize,
    ) -> Result<impl ExactSizeIterator<Item = HeteSliceMut<'_, T>>> {
        check_rows(self.len, row_len)?;
        self.reborrow().into_iter_chunks_mut(row_len)
    }

    /// Makes this view's contents zero, as [`HeteData::reset`] does for the whole buffer: the
    /// frame-loop reuse pattern for part of a buffer. The fragments the view covers whole get
    /// the zero mark and move no byte; a fragment it covers only partly (a view from
    /// [`HeteData::slice_mut`] with ends inside fragments) keeps its other bytes, so its part
    /// is zeroed on the host, after the fragment is brought there. That host step is the only
    /// one that can fail, and it comes first: on an error nothing changed.
    ///
    /// RIMMS: `hete_Reset` of part of a buffer.
    #[doc(alias = "hete_Reset")]
    pub fn reset(&mut self) -> Result<()> {
        let (start, len) = self.as_slice().byte_range();
        let end = start + len;
        let frag = self.raw.fragment_bytes();
        // The whole fragments inside the view: [whole_start, whole_end). The buffer's last
        // fragment may be short; a view that ends with the buffer covers it whole.
        let whole_start = start.next_multiple_of(frag).min(end);
        let whole_end = if end == self.raw.bytes() {
            end
        } else {
            end / frag * frag
        }
        .max(whole_start);
        let edges = [(start, whole_start), (whole_end, end)].map(|(s, e)| (s, e - s));
        let mut acquired = [None, None];
        for (slot, &(s, n)) in acquired.iter_mut().zip(&edges) {
            if n > 0 {
                *slot = Some(self.raw.host_acquire(s, n, Access::ReadWrite)?);
            }
        }
        for ((s, n), acquired) in edges.into_iter().zip(acquired) {
            let Some(host) = acquired else {
                continue;
            };
            let space = host.space;
            // SAFETY: `space` is host-addressable (what `host_acquire` returns) and its block
            // holds the whole buffer, so bytes `s..s + n` lie inside it; they are this view's
            // own bytes (the edge is inside the view), which the exclusive borrow of the view
            // keeps from every other reader and writer. Zero bytes are a valid `T` (Pod).
            unsafe { self.raw.ptr_in(space, s).write_bytes(0, n) };
            if let Some(_lease) = host.owed {
                self.raw
                    .mark_written(s, n, space, WrittenBy::Done(Writer::Host));
            }
        }
        if whole_end > whole_start {
            self.raw.reset_range(whole_start, whole_end - whole_start);
        }
        Ok(())
    }
}

/// A host write whose record is still owed: [`HostWrite::finish`] records it, dropping it
/// unfinished (an error or a panic part-way) records a failed write instead, which keeps every
/// other valid copy. It holds the buffer's lease until then, so no eviction writes the other
/// copies back into the bytes being written (`data::lease`).
pub(crate) struct HostWrite<'a> {
    raw: &'a RawBuffer,
    start: usize,
    len: usize,
    space: SpaceId,
    /// Set by [`Self::finish`] once the write is recorded as completed.
    recorded: bool,
    /// Given back after the record: fields drop after `Drop::drop` ran.
    _lease: Lease<'a>,
}

impl HostWrite<'_> {
    /// The write completed: `space` alone holds the newest bytes.
    pub(crate) fn finish(mut self) {
        let next = self.raw.mark_written_and_predict(
            self.start,
            self.len,
            self.space,
            WrittenBy::Done(Writer::Host),
        );
        self.recorded = true;
        // A loop's end is a host write's end the runtime sees, as a fill's is.
        if let Some(to) = next {
            self.raw.send_to(self.start, self.len, self.space, to);
        }
    }
}

impl Drop for HostWrite<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            self.raw.mark_failed(self.start, self.len, self.space);
        }
    }
}

/// Something a kernel can read: a buffer or a view of one.
pub trait Input<T: Pod> {
    /// The range the kernel reads.
    fn input(&self) -> HeteSlice<'_, T>;
}

/// Something a kernel can write: a buffer or a mutable view of one.
pub trait Output<T: Pod> {
    /// The range the kernel writes.
    fn output(&mut self) -> HeteSliceMut<'_, T>;
}

/// What a scope call holds until its scope closes: something a kernel can read, borrowed for
/// `'a` (`&x`, `&row`), or a view that lives for `'a` itself, by value (a row from
/// [`HeteData::iter_rows`]), so that a per-row loop needs no vector of views that outlives the
/// scope.
pub trait ScopeInput<'a, T: Pod> {
    /// The range the kernel reads, for `'a`.
    fn scope_input(self) -> HeteSlice<'a, T>;
}

/// What a scope call holds until its scope closes and writes: something a kernel can write,
/// borrowed mutably for `'a`, or a mutable view that lives for `'a`, by value (a row from
/// [`HeteData::iter_rows_mut`]).
pub trait ScopeOutput<'a, T: Pod> {
    /// The range the kernel writes, for `'a`.
    fn scope_output(self) -> HeteSliceMut<'a, T>;
}

impl<'a, T: Pod, I: Input<T> + ?Sized> ScopeInput<'a, T> for &'a I {
    #[inline(always)]
    fn scope_input(self) -> HeteSlice<'a, T> {
        self.input()
    }
}
impl<'a, T: Pod> ScopeInput<'a, T> for HeteSlice<'a, T> {
    #[inline(always)]
    fn scope_input(self) -> HeteSlice<'a, T> {
        self
    }
}
impl<'a, T: Pod, O: Output<T> + ?Sized> ScopeOutput<'a, T> for &'a mut O {
    #[inline(always)]
    fn scope_output(self) -> HeteSliceMut<'a, T> {
        self.output()
    }
}
impl<'a, T: Pod> ScopeOutput<'a, T> for HeteSliceMut<'a, T> {
    #[inline(always)]
    fn scope_output(self) -> HeteSliceMut<'a, T> {
        self
    }
}

impl<T: Pod> Input<T> for HeteData<T> {
    fn input(&self) -> HeteSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: Pod> Input<T> for HeteSlice<'_, T> {
    fn input(&self) -> HeteSlice<'_, T> {
        *self
    }
}
impl<T: Pod> Input<T> for HeteSliceMut<'_, T> {
    fn input(&self) -> HeteSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: Pod> Output<T> for HeteData<T> {
    fn output(&mut self) -> HeteSliceMut<'_, T> {
        self.as_slice_mut()
    }
}
impl<T: Pod> Output<T> for HeteSliceMut<'_, T> {
    fn output(&mut self) -> HeteSliceMut<'_, T> {
        self.reborrow()
    }
}

impl<'a, T: Pod> HeteSliceMut<'a, T> {
    pub(crate) fn into_raw(self) -> &'a RawBuffer {
        self.raw
    }
}

/// A prefetch in flight ([`HeteData::prefetch_async`]): done once its copies have landed.
/// Dropping it waits for nothing; the next call that needs the bytes waits for what is left.
#[derive(Clone, Copy, Debug)]
#[must_use = "a prefetch handle says when its copies land; drop it to let the next call wait instead"]
pub struct Prefetch {
    lands: crate::space::Pending,
}

impl Prefetch {
    /// Whether the copies have landed.
    pub fn is_done(&self) -> bool {
        self.lands
            .deadline()
            .is_none_or(|deadline| deadline <= std::time::Instant::now())
    }

    /// Waits until the copies have landed.
    pub fn wait(self) {
        self.lands.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::SimConfig;
    use crate::Runtime;
    use num_complex::Complex32;

    /// The pieces views are cut into, against the plain walk: every `chunk`-th start, the
    /// last piece what is left.
    #[test]
    fn pieces_are_every_chunk_and_the_rest() {
        for len in 0..40 {
            for chunk in 1..12 {
                let mut want = Vec::new();
                let mut start = 0;
                while start < len {
                    want.push((start, chunk.min(len - start)));
                    start += chunk;
                }
                let got: Vec<_> = pieces(len, chunk).collect();
                assert_eq!(got, want, "{len} elements in pieces of {chunk}");
                assert_eq!(pieces(len, chunk).len(), want.len());
            }
        }
    }

    /// Every way of cutting a buffer or a view into pieces, collected or one by one, read or
    /// written, gives the pieces of the plain walk: every `chunk`-th start from the view's own,
    /// the last piece what is left.
    #[test]
    fn every_cut_gives_the_plain_walks_pieces() {
        let rt = crate::runtime::small_test_runtime();
        let mut x = HeteData::<u32>::alloc(&rt, 96).expect("x");
        // 4 elements a fragment, so that every cut below falls on a fragment boundary.
        x.fragment(16).expect("fragments");
        let walk = |from: usize, len: usize, chunk: usize| {
            let mut want = Vec::new();
            let mut start = 0;
            while start < len {
                want.push((from + start, chunk.min(len - start)));
                start += chunk;
            }
            want
        };
        // Each view's offset and length, from a vector of views or an iterator of them (read
        // or written views, which share no trait).
        macro_rules! cut {
            ($views:expr) => {
                $views
                    .expect("a cut")
                    .into_iter()
                    .map(|v| (v.offset(), v.len()))
                    .collect::<Vec<_>>()
            };
        }
        for chunk in [4, 8, 12, 32, 96] {
            let want = walk(0, 96, chunk);
            assert_eq!(cut!(x.chunks(chunk)), want, "chunks({chunk})");
            assert_eq!(cut!(x.rows(chunk)), want, "rows({chunk})");
            assert_eq!(cut!(x.iter_rows(chunk)), want, "iter_rows({chunk})");
            assert_eq!(cut!(x.chunks_mut(chunk)), want, "chunks_mut({chunk})");
            assert_eq!(cut!(x.rows_mut(chunk)), want, "rows_mut({chunk})");
            assert_eq!(cut!(x.iter_rows_mut(chunk)), want, "iter_rows_mut({chunk})");
        }
        // Views of a view start from its own offset; the last piece may be shorter.
        let tail = x.slice(8..).expect("tail");
        assert_eq!(cut!(tail.chunks(12)), walk(8, 88, 12));
        assert_eq!(cut!(tail.iter_chunks(12)), walk(8, 88, 12));
        assert_eq!(cut!(tail.rows(8)), walk(8, 88, 8));
        assert_eq!(cut!(tail.iter_rows(8)), walk(8, 88, 8));
        let mut tail = x.slice_mut(8..).expect("tail");
        assert_eq!(cut!(tail.chunks_mut(12)), walk(8, 88, 12));
        assert_eq!(cut!(tail.rows_mut(8)), walk(8, 88, 8));
        assert_eq!(cut!(tail.iter_rows_mut(8)), walk(8, 88, 8));
    }

    /// Copies made ahead that a write makes stale before any read, or whose buffer is freed
    /// while they are on the link (under Miri in CI): the write waits for the copy and wastes
    /// it, the free wastes the other, and the bytes written are what the host reads.
    #[test]
    fn a_write_and_a_free_during_copies_ahead_waste_them_and_lose_nothing() {
        let rt = Runtime::builder()
            .sim(SimConfig {
                link: crate::LinkModel {
                    latency: std::time::Duration::from_micros(1),
                    bytes_per_second: 1e9,
                },
                simulate_link: true,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        let wasted = || {
            rt.stats()
                .space(Device::Sim(0).to_string().as_str())
                .map(|s| {
                    (
                        s.prefetched_bytes,
                        s.prefetch_used_bytes,
                        s.prefetch_wasted_bytes,
                    )
                })
                .expect("sim0")
        };
        let mut x = HeteData::from_slice(&rt, &[1u32; 2048]).expect("x");
        let first = x.prefetch_async(Device::Sim(0)).expect("prefetch");
        x.host_write().expect("write").fill(7);
        assert!(
            first.is_done(),
            "the write did not wait for the copy in flight"
        );
        assert_eq!(wasted(), (8192, 0, 8192));
        let _second = x.prefetch_async(Device::Sim(0)).expect("prefetch");
        assert_eq!(x.host().expect("x"), &[7u32; 2048][..]);
        drop(x);
        assert_eq!(wasted(), (16384, 0, 16384));
    }

    /// The host write in `HeteSliceMut::reset` (under Miri in CI): a view with both ends
    /// inside fragments, its data on sim0, is zeroed exactly and nothing else changes.
    #[test]
    fn resetting_a_view_inside_fragments_zeroes_exactly_its_elements() {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let values: Vec<u32> = (1..=3000).collect();
        let mut x = HeteData::from_slice(&rt, &values).expect("x");
        x.prefetch(Device::Sim(0)).expect("prefetch");
        // Elements 1000..2100 of u32: fragment 0 from byte 4000, fragment 1 to byte 8400.
        x.slice_mut(1000..2100)
            .expect("view")
            .reset()
            .expect("reset");
        let got = x.to_vec().expect("host");
        for (i, (got, want)) in got.iter().zip(&values).enumerate() {
            let want = if (1000..2100).contains(&i) { 0 } else { *want };
            assert_eq!(*got, want, "element {i}");
        }
        x.validate().expect("every copy agrees");
    }

    /// An element larger than the pool granule (here 8 KiB against 4 KiB) is allocated with
    /// fragments from the devices as without them: the devices' rule is bounded by the granule,
    /// but a fragment holds at least one element, or no fragment size would be valid for it.
    #[test]
    fn an_element_larger_than_the_granule_gets_a_fragment_from_the_devices_rule() {
        for from_devices in [false, true] {
            let rt = Runtime::builder()
                .host_pool(1 << 20)
                .granule(4096)
                .fragments_from_devices(from_devices)
                .build()
                .expect("runtime");
            let x = HeteData::<[u32; 2048]>::alloc(&rt, 3)
                .unwrap_or_else(|e| panic!("from devices {from_devices}: {e}"));
            assert_eq!(x.fragment_bytes(), 8192, "from devices {from_devices}");
            assert!(x.host().expect("host").iter().flatten().all(|&v| v == 0));
        }
    }

    #[test]
    fn validate_names_a_copy_changed_behind_the_runtimes_back() {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let values = vec![Complex32::new(1.0, 2.0); 1024];
        let x = HeteData::from_slice(&rt, &values).expect("x");
        x.prefetch(Device::Sim(0)).expect("prefetch");
        x.validate().expect("both copies agree");
        let sim = rt.space_of(Device::Sim(0)).expect("sim0");
        // Fragment 1 starts at byte 4096: poke a byte of it in sim0's copy only.
        // SAFETY: the sim0 block holds the whole 8 KiB buffer.
        unsafe { *x.raw.ptr_in(sim, 4096 + 3) ^= 0xff };
        let err = x.validate().unwrap_err();
        assert!(
            matches!(&err, Error::Diverged { fragment: 1, start: 4096, end: 8192, first, second }
                if first.as_ref().is_some_and(|f| f == "host") && second == "sim0"),
            "{err}"
        );
    }

    #[test]
    fn validate_checks_materialised_zeros() {
        let rt = Runtime::new().expect("runtime");
        let x = HeteData::<u32>::alloc(&rt, 16).expect("x");
        x.host().expect("fill on the host");
        // SAFETY: the host block holds the 64-byte buffer.
        unsafe { *x.raw.ptr_in(SpaceId::HOST, 0) = 7 };
        assert!(matches!(
            x.validate(),
            Err(Error::Diverged { fragment: 0, .. })
        ));
    }
}
