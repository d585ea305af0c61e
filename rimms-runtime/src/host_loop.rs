//! What `rimms::parallel_for!` expands to: one sync per buffer before the loop, then the
//! iterations on rayon, each task with its own parts of the buffers.
//!
//! Safety here holds by construction, not by the macro's analysis of the loop body: every
//! buffer the loop indexes at the loop variable is cut into disjoint `&mut [T]` / `&[T]` parts
//! ([`LoopParts`]), each task gets its own parts by value, and the rewritten body indexes them
//! with ordinary checked indexing. A body that computes a wrong index (however it shadows,
//! rebinds or hides the loop variable) therefore panics inside its own part; it can neither
//! write out of bounds nor reach another task's elements. The macro's analysis only adds
//! compile errors for patterns it recognises and picks the access mode.
//!
//! A loop with a reduction ([`Reduction`]) keeps that design: each task folds its own
//! iterations into an accumulator it owns, and neighbouring accumulators are combined after
//! both tasks ended ([`run_reduce`]); no task sees another's.
//!
//! Indexed names in a loop body may be managed buffers (synced here) or plain slices, vectors
//! and arrays (passed through), so the macro need not know types.

use crate::coherence::Access;
use crate::data::{HeteData, HeteSlice, HeteSliceMut, HostWrite};
use crate::hal::{Error, Result};
use bytemuck::Pod;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ops::{Add, Range};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

/// Iterations per rayon task when no buffer says otherwise; loops shorter than this run
/// sequentially, since handing work to other threads costs more than a few thousand
/// element-wise steps.
pub const LOOP_CHUNK: usize = 1 << 14;

/// The indices `start..end` of a loop; a reversed range is empty, as in a `for` loop, but
/// still starts at `start`, so that it is checked against the buffers like any other.
pub fn loop_range(start: usize, end: usize) -> Result<Range<usize>> {
    Ok(start..end.max(start))
}

/// The indices `start..=end` of a loop, as a half-open range.
pub fn loop_range_inclusive(start: usize, end: usize) -> Result<Range<usize>> {
    match end.checked_add(1) {
        Some(end) => loop_range(start, end),
        None => Err(Error::OutOfBounds {
            start,
            end,
            len: usize::MAX,
        }),
    }
}

/// Refuses a loop whose range, empty or not, runs past a buffer it indexes at the loop
/// variable.
pub fn check_loop_bounds(name: &'static str, len: usize, range: &Range<usize>) -> Result<()> {
    if range.start > range.end || range.end > len {
        tracing::debug!(buffer = name, "parallel_for! range exceeds a buffer");
        return Err(Error::OutOfBounds {
            start: range.start,
            end: range.end,
            len,
        });
    }
    Ok(())
}

/// The parts of a loop's buffers one task works on: a slice per buffer, all of the same
/// length, split together so that every task gets the same indices of each.
pub trait LoopParts: Send + Sized {
    /// The first `mid` elements of every part, and the rest.
    fn split_at(self, mid: usize) -> (Self, Self);
}

impl LoopParts for () {
    fn split_at(self, _: usize) -> ((), ()) {
        ((), ())
    }
}

impl<T: Send> LoopParts for &mut [T] {
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.split_at_mut(mid)
    }
}

impl<T: Sync> LoopParts for &[T] {
    fn split_at(self, mid: usize) -> (Self, Self) {
        <[T]>::split_at(self, mid)
    }
}

impl<A: LoopParts, B: LoopParts> LoopParts for (A, B) {
    fn split_at(self, mid: usize) -> (Self, Self) {
        let (a, b) = (self.0.split_at(mid), self.1.split_at(mid));
        ((a.0, b.0), (a.1, b.1))
    }
}

/// Runs `body` over `range`, cut at multiples of `chunk` indices into sub-ranges, each with the
/// matching elements of `parts` (which hold `range.len()` elements each): on the calling thread
/// when one chunk covers it, on rayon otherwise.
///
/// The range is split the way rayon's own adaptive splitter splits an indexed iterator: into
/// about as many pieces as there are threads, and again wherever a piece is stolen, never
/// below one chunk. Each piece then runs as one call of `body`, so a loop of a thousand chunks
/// costs a handful of `join`s, not a thousand.
pub fn run_loop<P: LoopParts>(
    range: Range<usize>,
    chunk: usize,
    parts: P,
    body: impl Fn(Range<usize>, P) + Sync,
) {
    let splits = rayon::current_num_threads();
    split(range, chunk.max(1), parts, &Nothing, splits, &body);
}

/// [`run_loop`] for a loop with a reduction: each chunk's `body` folds its iterations' values
/// into an accumulator of its own, and the accumulators of neighbouring chunks are combined
/// low before high, so the result is in index order and the same on any number of threads.
/// Unlike a plain loop, it is always cut into single chunks, since how values are grouped
/// changes a floating-point sum: the pieces depend only on `range` and `chunk`.
pub fn run_reduce<P: LoopParts, R: Reduction>(
    range: Range<usize>,
    chunk: usize,
    parts: P,
    reduction: &R,
    body: impl Fn(Range<usize>, P) -> R::Acc + Sync,
) -> R::Output {
    let acc = split(range, chunk.max(1), parts, reduction, usize::MAX, &body);
    reduction.finish(acc)
}

/// Cuts `range` in two at a chunk boundary while it holds more than one chunk and `splits`
/// allows (halved at each level, renewed to the thread count where a half was stolen).
fn split<P: LoopParts, R: Reduction>(
    range: Range<usize>,
    chunk: usize,
    parts: P,
    reduction: &R,
    splits: usize,
    body: &(impl Fn(Range<usize>, P) -> R::Acc + Sync),
) -> R::Acc {
    let chunks = range.len().div_ceil(chunk);
    if chunks <= 1 || splits == 0 {
        return body(range, parts);
    }
    let mid = chunks / 2 * chunk;
    let (low, high) = parts.split_at(mid);
    let at = range.start + mid;
    let threads = rayon::current_num_threads();
    let (low, high) = rayon::join_context(
        |_| split(range.start..at, chunk, low, reduction, splits / 2, body),
        // A stolen half has a thread of its own to keep busy: split it further.
        |ctx| {
            let splits = if ctx.migrated() {
                (splits / 2).max(threads)
            } else {
                splits / 2
            };
            split(at..range.end, chunk, high, reduction, splits, body)
        },
    );
    reduction.combine(low, high)
}

/// How `parallel_for!(REDUCTION for i in … { value })` combines the values its iterations
/// give, in the spirit of rayon's `sum`, `min`, `max`, `collect` and `reduce`: every task
/// folds its own iterations into an accumulator ([`step`](Reduction::step)), and
/// accumulators are merged pairwise ([`combine`](Reduction::combine)), so nothing is shared
/// between tasks while they run. An iteration that `continue`s gives no value.
pub trait Reduction: Sync {
    /// The value one iteration gives.
    type Item;
    /// What a task accumulates.
    type Acc: Send;
    /// What the loop evaluates to.
    type Output;
    /// The accumulator of a task that has seen nothing.
    fn identity(&self) -> Self::Acc;
    /// `acc` after one more iteration's value.
    fn step(&self, acc: Self::Acc, item: Self::Item) -> Self::Acc;
    /// The accumulators of two neighbouring runs of iterations, `low` before `high`.
    fn combine(&self, low: Self::Acc, high: Self::Acc) -> Self::Acc;
    /// The loop's result.
    fn finish(&self, acc: Self::Acc) -> Self::Output;
}

/// A loop without a reduction.
struct Nothing;

impl Reduction for Nothing {
    type Item = ();
    type Acc = ();
    type Output = ();
    fn identity(&self) {}
    fn step(&self, _: (), _: ()) {}
    fn combine(&self, _: (), _: ()) {}
    fn finish(&self, _: ()) {}
}

/// `sum`: the sum of the values (`T::default()`, zero, for a loop without any).
pub struct Sum<T>(PhantomData<fn(T) -> T>);

impl<T> Sum<T> {
    /// The reduction; its item type comes from the loop body.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Sum(PhantomData)
    }
}

impl<T: Add<Output = T> + Default + Send> Reduction for Sum<T> {
    type Item = T;
    type Acc = T;
    type Output = T;
    fn identity(&self) -> T {
        T::default()
    }
    fn step(&self, acc: T, item: T) -> T {
        acc + item
    }
    fn combine(&self, low: T, high: T) -> T {
        low + high
    }
    fn finish(&self, acc: T) -> T {
        acc
    }
}

/// `min` and `max`: the least or greatest value, `None` for a loop without any. Of equal
/// values the first (lowest index) wins, so `(value, i)` pairs give the arg-min or arg-max;
/// a value not comparable with itself (a NaN) is skipped.
pub struct Extreme<T> {
    /// `Less` for `min`, `Greater` for `max`.
    keep: Ordering,
    item: PhantomData<fn(T) -> T>,
}

impl<T> Extreme<T> {
    /// `min`.
    pub fn min() -> Self {
        Extreme {
            keep: Ordering::Less,
            item: PhantomData,
        }
    }

    /// `max`.
    pub fn max() -> Self {
        Extreme {
            keep: Ordering::Greater,
            item: PhantomData,
        }
    }

    fn pick(&self, low: Option<T>, high: Option<T>) -> Option<T>
    where
        T: PartialOrd,
    {
        match (low, high) {
            (Some(l), Some(h)) => Some(if h.partial_cmp(&l) == Some(self.keep) {
                h
            } else {
                l
            }),
            (l, h) => l.or(h),
        }
    }
}

impl<T: PartialOrd + Send> Reduction for Extreme<T> {
    type Item = T;
    type Acc = Option<T>;
    type Output = Option<T>;
    fn identity(&self) -> Option<T> {
        None
    }
    fn step(&self, acc: Option<T>, item: T) -> Option<T> {
        if item.partial_cmp(&item).is_none() {
            return acc;
        }
        self.pick(acc, Some(item))
    }
    fn combine(&self, low: Option<T>, high: Option<T>) -> Option<T> {
        self.pick(low, high)
    }
    fn finish(&self, acc: Option<T>) -> Option<T> {
        acc
    }
}

/// `collect`: every value in index order.
pub struct Collect<T>(PhantomData<fn(T) -> T>);

impl<T> Collect<T> {
    /// The reduction; its item type comes from the loop body.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Collect(PhantomData)
    }
}

impl<T: Send> Reduction for Collect<T> {
    type Item = T;
    type Acc = Vec<T>;
    type Output = Vec<T>;
    fn identity(&self) -> Vec<T> {
        Vec::new()
    }
    fn step(&self, mut acc: Vec<T>, item: T) -> Vec<T> {
        acc.push(item);
        acc
    }
    fn combine(&self, mut low: Vec<T>, mut high: Vec<T>) -> Vec<T> {
        low.append(&mut high);
        low
    }
    fn finish(&self, acc: Vec<T>) -> Vec<T> {
        acc
    }
}

/// `reduce(identity, op)`: a user fold, as rayon's `reduce`. `op` must be associative and
/// `identity()` its neutral value, since tasks start from it and their results are combined
/// with `op` in an order that depends on the range, not on `op`.
pub struct Fold<T, I, F> {
    identity: I,
    op: F,
    item: PhantomData<fn(T) -> T>,
}

impl<T, I: Fn() -> T, F: Fn(T, T) -> T> Fold<T, I, F> {
    /// The fold of `op` from `identity()`.
    pub fn new(identity: I, op: F) -> Self {
        Fold {
            identity,
            op,
            item: PhantomData,
        }
    }
}

impl<T: Send, I: Fn() -> T + Sync, F: Fn(T, T) -> T + Sync> Reduction for Fold<T, I, F> {
    type Item = T;
    type Acc = T;
    type Output = T;
    fn identity(&self) -> T {
        (self.identity)()
    }
    fn step(&self, acc: T, item: T) -> T {
        (self.op)(acc, item)
    }
    fn combine(&self, low: T, high: T) -> T {
        (self.op)(low, high)
    }
    fn finish(&self, acc: T) -> T {
        acc
    }
}

/// How many of a loop's iterations ran to their end, over all its tasks: what proves a loop's
/// overwrite of a buffer ([`LoopMut::finish_overwrite`]). Each task counts its own
/// ([`Completed::task`]) and adds them when its count goes, which it does however the task
/// ends (to its end, through a `?`, or unwinding).
pub struct Completed(AtomicUsize);

impl Completed {
    /// A count of none.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Completed(AtomicUsize::new(0))
    }

    /// A task's own count.
    pub fn task(&self) -> TaskCount<'_> {
        TaskCount {
            all: &self.0,
            finished: 0,
        }
    }

    /// Iterations finished by tasks whose count is gone.
    pub fn get(&self) -> usize {
        self.0.load(AtomicOrdering::Relaxed)
    }
}

/// One task's finished iterations, added to the loop's [`Completed`] when it goes.
pub struct TaskCount<'a> {
    all: &'a AtomicUsize,
    finished: usize,
}

impl TaskCount<'_> {
    /// One more iteration ran to its end.
    #[inline(always)]
    pub fn step(&mut self) {
        self.finished += 1;
    }
}

impl Drop for TaskCount<'_> {
    fn drop(&mut self) {
        self.all.fetch_add(self.finished, AtomicOrdering::Relaxed);
    }
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
    /// The buffer, borrowed as a method call borrows it (whether the loop names a buffer or a
    /// `&mut` to one), so that the macro takes it outside its `unsafe` block.
    fn __rimms_loop_target(&mut self) -> &mut Self {
        self
    }

    /// The contents on the host, for writing, once `range` is checked against them (named
    /// `name` in the error). `discard` says the loop writes every element of `range` without
    /// reading it; where `range` is the whole buffer, nothing is then copied in. The write is
    /// recorded by [`LoopMut::finish`] or [`LoopMut::finish_overwrite`]; a loop that errs or
    /// unwinds before that leaves the other copies valid.
    ///
    /// # Safety
    ///
    /// The runtime takes the caller's word for what the loop writes, so only `parallel_for!`,
    /// whose analysis proves it, calls this:
    /// - `discard` only where every iteration of `range` that runs to its end writes this
    ///   buffer at its index without reading it there first;
    /// - the guard ends in [`LoopMut::finish`] only where `discard` is false, in
    ///   [`LoopMut::finish_overwrite`] with the true count of iterations that ran to their end,
    ///   or in a drop, and is never leaked (`mem::forget`).
    ///
    /// Otherwise fragments would be recorded as the host's newest bytes that no iteration
    /// wrote, and every other copy of them, perhaps the last valid one, dropped; or bytes the
    /// loop did write would be left unrecorded and a stale copy read in their place.
    unsafe fn __rimms_loop_write(
        &mut self,
        name: &'static str,
        discard: bool,
        range: &Range<usize>,
    ) -> Result<LoopMut<'_, T>>;
}

fn host_for_loop<'a, T: Pod>(
    view: HeteSliceMut<'a, T>,
    name: &'static str,
    discard: bool,
    range: &Range<usize>,
) -> Result<LoopMut<'a, T>> {
    check_loop_bounds(name, view.len(), range)?;
    let covers_all = range.start == 0 && range.end >= view.len();
    let fragment = (view.fragment_bytes() / std::mem::size_of::<T>()).max(1);
    // Tasks of whole fragments, but never fewer than `LOOP_CHUNK` iterations: a task per
    // fragment made a 16 Ki-iteration loop over 1 KiB rows into 128 rayon tasks, a wake-up of
    // the pool for work a plain loop does in a few µs (the hand-written twins run it inline).
    let chunk = LOOP_CHUNK.next_multiple_of(fragment);
    let access = if discard && covers_all {
        Access::Write
    } else {
        Access::ReadWrite
    };
    let (slice, _, write) = view.into_host_write(access)?;
    Ok(LoopMut {
        slice,
        chunk,
        write,
    })
}

/// Managed buffers and their mutable views are synced for the loop; `$view` turns one into the
/// view that covers it.
macro_rules! managed_loop_write {
    ($($ty:ty => $view:ident),* $(,)?) => {
        $(
            impl<T: Pod> LoopWrite<T> for $ty {
                unsafe fn __rimms_loop_write(
                    &mut self,
                    name: &'static str,
                    discard: bool,
                    range: &Range<usize>,
                ) -> Result<LoopMut<'_, T>> {
                    host_for_loop(self.$view(), name, discard, range)
                }
            }
        )*
    };
}

managed_loop_write!(HeteData<T> => as_slice_mut, HeteSliceMut<'_, T> => reborrow);

/// Plain slices, vectors and arrays are written in place; `discard` does not matter to them.
macro_rules! plain_loop_write {
    ($($ty:ty => [$($generics:tt)*]),* $(,)?) => {
        $(
            impl<$($generics)*> LoopWrite<T> for $ty {
                unsafe fn __rimms_loop_write(
                    &mut self,
                    name: &'static str,
                    _: bool,
                    range: &Range<usize>,
                ) -> Result<LoopMut<'_, T>> {
                    LoopMut::plain(self, name, range)
                }
            }
        )*
    };
}

plain_loop_write!([T] => [T], Vec<T> => [T], [T; N] => [T, const N: usize]);

/// A buffer a loop writes: its host contents, and for a managed buffer the write still to be
/// recorded.
pub struct LoopMut<'a, T> {
    slice: &'a mut [T],
    chunk: usize,
    write: Option<HostWrite<'a>>,
}

impl<'a, T> LoopMut<'a, T> {
    fn plain(slice: &'a mut [T], name: &'static str, range: &Range<usize>) -> Result<Self> {
        check_loop_bounds(name, slice.len(), range)?;
        Ok(LoopMut {
            slice,
            chunk: LOOP_CHUNK,
            write: None,
        })
    }

    /// Iterations per task: at least [`LOOP_CHUNK`], and for a managed buffer a whole number
    /// of its fragments, so tasks do not share one.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Elements `range` (checked), which the loop's tasks split among themselves.
    pub fn part(&mut self, range: Range<usize>) -> &mut [T] {
        &mut self.slice[range]
    }

    /// Records the loop's writes: the host now holds the only valid copy.
    pub fn finish(self) {
        if let Some(write) = self.write {
            write.finish();
        }
    }

    /// Records the writes of a loop that overwrote this buffer without reading it (named
    /// `name`), once `completed` of its `total` iterations ran to their end. Nothing was copied
    /// in for it, so the overwrite holds only if every iteration finished: the macro's
    /// analysis proposes write-discard, and this count proves it. A loop cut short records a
    /// failed write instead, which keeps every other valid copy (the bytes the loop did not
    /// write were never brought in), and fails.
    pub fn finish_overwrite(
        self,
        name: &'static str,
        completed: usize,
        total: usize,
    ) -> Result<()> {
        if completed == total {
            self.finish();
            return Ok(());
        }
        // Dropping the unrecorded write records it as failed.
        drop(self);
        Err(Error::LoopCutShort {
            buffer: name,
            completed,
            total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Runtime;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs `value(i)` for every index of `range` under `reduction`, with the chunk size given,
    /// as `parallel_for!` expands a reduction (no buffers).
    fn reduce<R: Reduction>(
        range: Range<usize>,
        chunk: usize,
        reduction: &R,
        value: impl Fn(usize) -> Option<R::Item> + Sync,
    ) -> R::Output {
        run_reduce(range, chunk, (), reduction, |sub: Range<usize>, ()| {
            let mut acc = reduction.identity();
            for i in sub {
                if let Some(v) = value(i) {
                    acc = reduction.step(acc, v);
                }
            }
            acc
        })
    }

    /// Each reduction against a sequential fold, on ranges cut into one, several and many
    /// chunks, with iterations that give no value (`continue`).
    #[test]
    fn reductions_match_sequential_folds() {
        // Short under Miri, which runs every rayon task it spawns.
        let len = if cfg!(miri) { 40 } else { 1000 };
        let data: Vec<i64> = (0..len as i64).map(|i| (i * 7919 % 1009) - 500).collect();
        let given = |i: usize| (i % 3 != 0).then(|| data[i]);
        for (start, end, chunk) in [
            (0, 0, 4),
            (3, 4, 4),
            (0, len, len),
            (5, len, 7),
            (0, len, 1),
        ] {
            let kept: Vec<(usize, i64)> = (start..end)
                .filter_map(|i| given(i).map(|v| (i, v)))
                .collect();
            let case = format!("{start}..{end} by {chunk}");
            let sum = reduce(start..end, chunk, &Sum::new(), given);
            assert_eq!(sum, kept.iter().map(|(_, v)| v).sum::<i64>(), "{case}");
            let min = reduce(start..end, chunk, &Extreme::min(), |i| {
                given(i).map(|v| (v, i))
            });
            let want_min = kept.iter().map(|&(i, v)| (v, i)).min();
            assert_eq!(min, want_min, "{case}");
            let max = reduce(start..end, chunk, &Extreme::max(), |i| {
                given(i).map(|v| (v, i))
            });
            // Of equal values the first wins: the greatest value at its lowest index.
            let want_max = kept
                .iter()
                .map(|&(i, v)| (v, usize::MAX - i))
                .max()
                .map(|(v, j)| (v, usize::MAX - j));
            assert_eq!(max, want_max, "{case}");
            let all = reduce(start..end, chunk, &Collect::new(), |i| given(i).map(|_| i));
            assert_eq!(
                all,
                kept.iter().map(|&(i, _)| i).collect::<Vec<_>>(),
                "{case}"
            );
            let fold = reduce(
                start..end,
                chunk,
                &Fold::new(|| 0i64, |a: i64, b: i64| a.max(b.abs())),
                given,
            );
            assert_eq!(
                fold,
                kept.iter().map(|(_, v)| v.abs()).max().unwrap_or(0),
                "{case}"
            );
        }
    }

    /// A NaN is neither the least nor the greatest value; ties keep the first.
    #[test]
    fn min_and_max_skip_nan_and_keep_the_first_of_equals() {
        let v = [f32::NAN, 2.0, -1.0, f32::NAN, -1.0, 2.0];
        let min = reduce(0..v.len(), 2, &Extreme::min(), |i| Some((v[i], i)));
        let max = reduce(0..v.len(), 2, &Extreme::max(), |i| Some(v[i]));
        assert_eq!(min, Some((-1.0, 2)));
        assert_eq!(max, Some(2.0));
        let only_nan = reduce(0..1, 2, &Extreme::min(), |_| Some(f32::NAN));
        assert_eq!(only_nan, None);
    }

    /// Every index of the range is visited exactly once, with the matching element of every
    /// part, however the range is cut.
    #[test]
    fn run_loop_hands_each_index_its_own_elements() {
        for (len, chunk) in [(0, 4), (1, 4), (7, 3), (64, 8), (65, 8), (100, 1)] {
            let start = 5;
            let mut written = vec![0usize; len];
            let read: Vec<usize> = (0..len).map(|k| 3 * k).collect();
            let calls = AtomicUsize::new(0);
            run_loop(
                start..start + len,
                chunk,
                (written.as_mut_slice(), (read.as_slice(), ())),
                |sub: Range<usize>, (w, (r, ())): (&mut [usize], (&[usize], ()))| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    assert_eq!((sub.start - start) % chunk, 0, "pieces start on a chunk");
                    assert_eq!((w.len(), r.len()), (sub.len(), sub.len()));
                    for (k, i) in sub.enumerate() {
                        w[k] = i + r[k] + 1;
                    }
                },
            );
            let want: Vec<usize> = (0..len).map(|k| start + k + 3 * k + 1).collect();
            assert_eq!(written, want, "len {len}, chunk {chunk}");
            let calls = calls.into_inner();
            assert!(
                calls >= 1 && calls <= len.div_ceil(chunk).max(1),
                "{calls} pieces"
            );
        }
    }

    #[test]
    fn bounds_are_checked_for_empty_ranges_too() {
        assert!(check_loop_bounds("y", 4, &(0..4)).is_ok());
        assert!(check_loop_bounds("y", 4, &(4..4)).is_ok());
        assert!(check_loop_bounds("y", 4, &(0..5)).is_err());
        assert!(check_loop_bounds("y", 4, &(5..5)).is_err());
        assert_eq!(loop_range(5, 2).ok(), Some(5..5));
        assert!(loop_range_inclusive(0, usize::MAX).is_err());
        assert_eq!(loop_range_inclusive(2, 3).ok(), Some(2..4));
    }

    /// The sub-ranges `body` was called with, sorted by start.
    fn pieces_of(run: impl FnOnce(&(dyn Fn(Range<usize>) + Sync))) -> Vec<Range<usize>> {
        let seen = std::sync::Mutex::new(Vec::new());
        run(&|r: Range<usize>| seen.lock().expect("pieces").push(r));
        let mut seen = seen.into_inner().expect("pieces");
        seen.sort_by_key(|r| r.start);
        seen
    }

    /// `chunk`-long pieces of `0..len`, the last one shorter.
    fn chunks_of(len: usize, chunk: usize) -> Vec<Range<usize>> {
        (0..len)
            .step_by(chunk)
            .map(|s| s..(s + chunk).min(len))
            .collect()
    }

    /// A reduction is cut into single chunks whatever the pool does (how values are grouped
    /// changes a floating-point sum), also where a thief took the upper half: the first piece
    /// waits until a piece of that half has started, which only another thread can start.
    #[test]
    fn a_reduction_runs_one_body_per_chunk_even_where_work_is_stolen() {
        let (len, chunk) = if cfg!(miri) { (70, 10) } else { (6400, 100) };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        let upper_started = AtomicUsize::new(0);
        let pieces = pieces_of(|record| {
            pool.install(|| {
                run_reduce(0..len, chunk, (), &Nothing, |r: Range<usize>, ()| {
                    if r.start >= len / 2 {
                        upper_started.store(1, Ordering::SeqCst);
                    } else if r.start == 0 {
                        let since = std::time::Instant::now();
                        while upper_started.load(Ordering::SeqCst) == 0
                            && since.elapsed() < std::time::Duration::from_secs(10)
                        {
                            std::thread::yield_now();
                        }
                    }
                    record(r);
                })
            })
        });
        assert_eq!(upper_started.load(Ordering::SeqCst), 1);
        assert_eq!(pieces, chunks_of(len, chunk));
    }

    /// A plain loop splits once per thread (more only where work is stolen): on a pool of
    /// one thread, a loop of many chunks is two pieces, cut at a chunk boundary.
    #[test]
    fn a_loop_on_one_thread_is_cut_once() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let pieces = pieces_of(|record| {
            pool.install(|| run_loop(0..1050, 100, (), |r: Range<usize>, ()| record(r)))
        });
        // 11 chunks: 5 below the cut, 6 above.
        assert_eq!(pieces, [0..500, 500..1050]);
        // One chunk or less runs as one piece.
        let pieces = pieces_of(|record| {
            pool.install(|| run_loop(0..100, 100, (), |r: Range<usize>, ()| record(r)))
        });
        assert_eq!(pieces, vec![Range { start: 0, end: 100 }]);
    }

    /// A loop over a managed buffer is cut into tasks of whole fragments (no two tasks share
    /// one) and of at least `LOOP_CHUNK` iterations (no pool wake-up per small fragment).
    #[test]
    fn loop_tasks_are_whole_fragments_of_at_least_loop_chunk_iterations() {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .build()
            .expect("runtime");
        // f32 fragments of 256 elements (a 64th of LOOP_CHUNK) and of 65,536 (four times it).
        for (fragment_bytes, want) in [(1 << 10, 1 << 14), (1 << 18, 1 << 16)] {
            let mut y = HeteData::<f32>::alloc(&rt, 1 << 17).expect("y");
            y.fragment(fragment_bytes).expect("fragment");
            let n = y.len();
            // SAFETY: the guard is dropped, which records nothing as written.
            let loop_mut = unsafe { y.__rimms_loop_write("y", true, &(0..n)) }.expect("write");
            assert_eq!(loop_mut.chunk(), want, "{fragment_bytes}-byte fragments");
        }
    }

    /// A loop's write is recorded only when it finishes: an unfinished one leaves the copy
    /// it did not overwrite valid.
    #[test]
    fn an_unfinished_loop_write_keeps_the_other_copy() {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .sim(crate::SimConfig {
                pool_bytes: 1 << 20,
                ..crate::SimConfig::default()
            })
            .build()
            .expect("runtime");
        let mut y = HeteData::from_slice(&rt, &[3u32; 8]).expect("y");
        y.prefetch(crate::hal::Device::Sim(0)).expect("on sim0 too");
        // SAFETY: the guard is dropped unfinished: the write is recorded as failed.
        let mut loop_mut = unsafe { y.__rimms_loop_write("y", true, &(0..8)) }.expect("write");
        loop_mut.part(0..8).fill(9);
        drop(loop_mut);
        y.validate()
            .expect("the host's unrecorded write is not trusted");
        assert_eq!(y.host().expect("y"), &[3; 8]);
        // SAFETY: not `discard`, and the guard ends in `finish`.
        let mut loop_mut = unsafe { y.__rimms_loop_write("y", false, &(0..8)) }.expect("write");
        loop_mut.part(0..8).fill(9);
        loop_mut.finish();
        assert_eq!(y.host().expect("y"), &[9; 8]);
        y.validate().expect("a finished write is the only copy");
    }
}
