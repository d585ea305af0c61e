//! What `rimms::parallel_for!` expands to: one sync per buffer before the loop, then the
//! iterations on rayon.
//!
//! Indexed names in a loop body may be managed buffers (synced here) or plain slices, vectors
//! and arrays (passed through), so the macro need not know types. Written buffers are handed to
//! the iterations as a [`LoopMut`], which gives out one element per index: the macro has
//! already proved that every write is at the loop variable, so no two iterations touch the same
//! element.

use crate::coherence::Access;
use crate::data::{HeteData, HeteSlice, HeteSliceMut};
use crate::error::{Error, Result};
use bytemuck::Pod;
use rayon::prelude::*;
use std::marker::PhantomData;
use std::ops::Range;

/// Iterations per rayon task when no buffer says otherwise; loops shorter than this run
/// sequentially, since handing work to other threads costs more than a few thousand
/// element-wise steps.
pub const LOOP_CHUNK: usize = 1 << 14;

/// Runs `body` over `range` cut into consecutive sub-ranges of `chunk` indices (the last may be
/// shorter): on the calling thread when one chunk covers it, on rayon otherwise. Each call gets
/// a disjoint sub-range, which is what lets the body take `&mut` slices of its part of every
/// written buffer.
pub fn run_loop(range: Range<usize>, chunk: usize, body: impl Fn(Range<usize>) + Sync + Send) {
    let chunk = chunk.max(1);
    if range.len() <= chunk {
        body(range);
    } else {
        let (start, end) = (range.start, range.end);
        (0..range.len().div_ceil(chunk))
            .into_par_iter()
            .for_each(|c| body(start + c * chunk..(start + (c + 1) * chunk).min(end)));
    }
}

/// Refuses a loop whose range runs past a buffer it indexes at the loop variable.
pub fn check_loop_bounds(name: &'static str, len: usize, range: &Range<usize>) -> Result<()> {
    if range.end > len && !range.is_empty() {
        tracing::debug!(buffer = name, "parallel_for! range exceeds a buffer");
        return Err(Error::OutOfBounds {
            start: range.start,
            end: range.end,
            len,
        });
    }
    Ok(())
}

/// A buffer a loop only reads.
pub trait LoopRead<T> {
    /// The contents on the host, synced once.
    fn __rimms_loop_read(&self) -> Result<&[T]>;
}

impl<T: Pod> LoopRead<T> for HeteData<T> {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        self.host()
    }
}
impl<T: Pod> LoopRead<T> for HeteSlice<'_, T> {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        self.host()
    }
}
impl<T: Pod> LoopRead<T> for HeteSliceMut<'_, T> {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        self.host()
    }
}
impl<T> LoopRead<T> for [T] {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        Ok(self)
    }
}
impl<T> LoopRead<T> for Vec<T> {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        Ok(self)
    }
}
impl<T, const N: usize> LoopRead<T> for [T; N] {
    fn __rimms_loop_read(&self) -> Result<&[T]> {
        Ok(self)
    }
}

/// A buffer a loop writes (and maybe reads) at the loop index.
pub trait LoopWrite<T> {
    /// The contents on the host, host-owned from now on: synced first if the loop reads them
    /// or does not overwrite all of them, discarded otherwise.
    fn __rimms_loop_write(&mut self, reads: bool, range: &Range<usize>) -> Result<LoopMut<'_, T>>;
}

fn host_for_loop<'a, T: Pod>(
    view: HeteSliceMut<'a, T>,
    reads: bool,
    range: &Range<usize>,
) -> Result<LoopMut<'a, T>> {
    let covers_all = range.start == 0 && range.end >= view.len();
    let chunk = (view.fragment_bytes() / std::mem::size_of::<T>()).max(1);
    let access = if reads || !covers_all {
        Access::ReadWrite
    } else {
        Access::Write
    };
    Ok(LoopMut::new(view.into_host_mut(access)?, chunk))
}

impl<T: Pod> LoopWrite<T> for HeteData<T> {
    fn __rimms_loop_write(&mut self, reads: bool, range: &Range<usize>) -> Result<LoopMut<'_, T>> {
        host_for_loop(self.as_slice_mut(), reads, range)
    }
}
impl<T: Pod> LoopWrite<T> for HeteSliceMut<'_, T> {
    fn __rimms_loop_write(&mut self, reads: bool, range: &Range<usize>) -> Result<LoopMut<'_, T>> {
        host_for_loop(self.reborrow(), reads, range)
    }
}
impl<T> LoopWrite<T> for [T] {
    fn __rimms_loop_write(&mut self, _: bool, _: &Range<usize>) -> Result<LoopMut<'_, T>> {
        Ok(LoopMut::new(self, LOOP_CHUNK))
    }
}
impl<T> LoopWrite<T> for Vec<T> {
    fn __rimms_loop_write(&mut self, _: bool, _: &Range<usize>) -> Result<LoopMut<'_, T>> {
        Ok(LoopMut::new(self, LOOP_CHUNK))
    }
}
impl<T, const N: usize> LoopWrite<T> for [T; N] {
    fn __rimms_loop_write(&mut self, _: bool, _: &Range<usize>) -> Result<LoopMut<'_, T>> {
        Ok(LoopMut::new(self, LOOP_CHUNK))
    }
}

/// A written buffer shared by the tasks of a loop, one disjoint part per task.
pub struct LoopMut<'a, T> {
    ptr: *mut T,
    len: usize,
    chunk: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a LoopMut hands out `&mut` only through `part`, whose contract is that each range is
// used by one task; the elements may then be sent to and changed from any thread.
unsafe impl<T: Send> Send for LoopMut<'_, T> {}
unsafe impl<T: Send> Sync for LoopMut<'_, T> {}

impl<'a, T> LoopMut<'a, T> {
    fn new(slice: &'a mut [T], chunk: usize) -> Self {
        LoopMut {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            chunk,
            _borrow: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Iterations per task that keep each task inside its own fragments.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Elements `range` as a slice.
    ///
    /// # Safety
    /// `range` lies inside `0..len`, and no other live reference to any of its elements exists
    /// (the loop hands each chunk to one task).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn part(&self, range: Range<usize>) -> &mut [T] {
        std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len())
    }
}
