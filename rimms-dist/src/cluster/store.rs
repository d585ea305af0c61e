//! Where a rank keeps a distributed buffer's rows: the rows it owns, always, and the rows it
//! received, only while the table says it holds them.
//!
//! A rank that kept a local buffer of the whole distributed buffer would hold, per rank, the
//! memory of the whole job's data, and a flush could forget copies in the table without giving
//! a byte back. So the rows are cut into **segments**, the runs of rows with one set of owners
//! (one per rank for block rows, one per block for block-cyclic, one for a replicated buffer
//! or a buffer on one rank), and each segment is a buffer of the local runtime of its own:
//!
//! - a segment this rank owns is allocated with the distributed buffer and lives as long;
//! - another segment is allocated when rows of it first arrive (or when a fetch asks for rows
//!   of a fresh buffer, which are zeros everywhere and need no bytes), and is freed as soon as
//!   the table says this rank holds none of its fragments (after a flush, or once used with
//!   the receive cache off).
//!
//! So a rank's memory is its owned rows plus what it has received and still holds, and a flush
//! returns it to the owned rows: the baseline. Segment edges are owner edges, which are the
//! edges owner-computes splits calls at, so a call's rows are always one segment's rows.

use bytemuck::Pod;
use rimms_runtime::{HeteData, HeteSlice, HeteSliceMut, Runtime, SecureKey};
use std::ops::Range;

use crate::{owner_computes, DistError, Distribution, Rank};

/// One run of rows with one set of owners.
struct Segment<T: Pod> {
    rows: Range<usize>,
    owned: bool,
    data: Option<HeteData<T>>,
}

/// A rank's rows of one distributed buffer.
pub(super) struct RowStore<T: Pod> {
    row_len: usize,
    segments: Vec<Segment<T>>,
    /// Where empty views come from on a rank that owns no rows (the runtime has no empty
    /// buffers): one element, only there.
    spare: Option<HeteData<T>>,
    /// A secure buffer's key: every segment is a secure buffer of the local runtime.
    key: Option<SecureKey>,
}

impl<T: Pod> RowStore<T> {
    /// The segments of `rows` rows of `row_len` elements under `dist`, with `me`'s own ones
    /// allocated (zeros) on `rt`.
    pub(super) fn new(
        rt: &Runtime,
        dist: &Distribution,
        rows: usize,
        row_len: usize,
        ranks: usize,
        me: Rank,
        key: Option<&SecureKey>,
    ) -> Result<RowStore<T>, StoreError> {
        let spans = owner_computes(dist, rows, ranks, 0..rows, true)?;
        let mut segments = Vec::with_capacity(spans.len());
        for span in spans {
            let owned = span.ranks.contains(me);
            let data = owned
                .then(|| alloc(rt, &span.rows, row_len, key))
                .transpose()?;
            segments.push(Segment {
                rows: span.rows,
                owned,
                data,
            });
        }
        let spare = match segments.iter().any(|s| s.owned) {
            true => None,
            false => Some(alloc(rt, &(0..1), 1, key)?),
        };
        Ok(RowStore {
            row_len,
            segments,
            spare,
            key: key.cloned(),
        })
    }

    /// The index of the segment holding `row`.
    fn segment_of(&self, row: usize) -> Option<usize> {
        let i = self.segments.partition_point(|s| s.rows.end <= row);
        (i < self.segments.len() && self.segments[i].rows.contains(&row)).then_some(i)
    }

    /// The segment holding all of `rows`, where one does.
    fn segment_for(&self, rows: &Range<usize>) -> Option<usize> {
        let i = self.segment_of(rows.start)?;
        (rows.end <= self.segments[i].rows.end).then_some(i)
    }

    /// Whether `rows` lie in one segment.
    pub(super) fn one_segment(&self, rows: &Range<usize>) -> bool {
        rows.is_empty() || self.segment_for(rows).is_some()
    }

    /// The local elements of `rows` inside segment `i`.
    fn local(&self, i: usize, rows: &Range<usize>) -> Range<usize> {
        let first = self.segments[i].rows.start;
        (rows.start - first) * self.row_len..(rows.end - first) * self.row_len
    }

    /// A view of `rows`, where one allocated segment holds them all.
    pub(super) fn view(
        &self,
        rows: &Range<usize>,
    ) -> Option<rimms_runtime::Result<HeteSlice<'_, T>>> {
        if rows.is_empty() {
            let any = self.segments.iter().find_map(|s| s.data.as_ref());
            return any.or(self.spare.as_ref()).map(|data| data.slice(0..0));
        }
        let i = self.segment_for(rows)?;
        let data = self.segments[i].data.as_ref()?;
        Some(data.slice(self.local(i, rows)))
    }

    /// A writable view of `rows`, where one allocated segment holds them all.
    pub(super) fn view_mut(
        &mut self,
        rows: &Range<usize>,
    ) -> Option<rimms_runtime::Result<HeteSliceMut<'_, T>>> {
        let i = self.segment_for(rows)?;
        let local = self.local(i, rows);
        let data = self.segments[i].data.as_mut()?;
        Some(data.slice_mut(local))
    }

    /// Allocates (zeros) every segment that `rows` touch and that is not allocated yet.
    pub(super) fn materialise(
        &mut self,
        rt: &Runtime,
        rows: &Range<usize>,
    ) -> Result<(), StoreError> {
        let (row_len, key) = (self.row_len, self.key.clone());
        for segment in self.touching_mut(rows) {
            if segment.data.is_none() {
                segment.data = Some(alloc(rt, &segment.rows, row_len, key.as_ref())?);
            }
        }
        Ok(())
    }

    fn touching_mut(&mut self, rows: &Range<usize>) -> impl Iterator<Item = &mut Segment<T>> {
        let first = self.segment_of(rows.start).unwrap_or(self.segments.len());
        let end = rows.end;
        self.segments[first..]
            .iter_mut()
            .take_while(move |s| s.rows.start < end)
    }

    /// Calls `f` with the host bytes of `rows`: the segment's own where one segment holds
    /// them all, else a copy gathered from the segments (rows of a segment not allocated read
    /// as the zeros a fresh buffer holds).
    pub(super) fn read_bytes<E>(
        &self,
        rows: &Range<usize>,
        f: impl FnOnce(&[u8]) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<rimms_runtime::Error>,
    {
        if let Some(i) = self.segment_for(rows) {
            if let Some(data) = self.segments[i].data.as_ref() {
                let host = data.host()?;
                return f(bytemuck::cast_slice(&host[self.local(i, rows)]));
            }
        }
        f(bytemuck::cast_slice(&self.gather(rows)?))
    }

    /// Calls `f` with the host bytes of `rows`, all of which must be allocated
    /// ([`Self::materialise`]), and keeps what it leaves there: in place where one segment
    /// holds them all, else through a copy scattered back to the segments.
    pub(super) fn write_bytes<E>(
        &mut self,
        rows: &Range<usize>,
        f: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<(), E>
    where
        E: From<rimms_runtime::Error>,
    {
        if let Some(i) = self.segment_for(rows) {
            let local = self.local(i, rows);
            if let Some(data) = self.segments[i].data.as_mut() {
                let host = data.host_mut()?;
                return f(bytemuck::cast_slice_mut(&mut host[local]));
            }
        }
        let mut copy = self.gather(rows)?;
        f(bytemuck::cast_slice_mut(&mut copy))?;
        let row_len = self.row_len;
        let mut at = 0;
        for segment in self.touching_mut(rows) {
            let part = clip(&segment.rows, rows);
            let n = part.len() * row_len;
            if let Some(data) = segment.data.as_mut() {
                let first = segment.rows.start;
                data.host_mut()?[(part.start - first) * row_len..(part.end - first) * row_len]
                    .copy_from_slice(&copy[at..at + n]);
            }
            at += n;
        }
        Ok(())
    }

    /// A copy of `rows`, across segments; rows of a segment not allocated are zeros.
    pub(super) fn gather(&self, rows: &Range<usize>) -> rimms_runtime::Result<Vec<T>> {
        let row_len = self.row_len;
        let mut copy: Vec<T> = Vec::with_capacity(rows.len() * row_len);
        for segment in self.touching(rows) {
            let part = clip(&segment.rows, rows);
            match segment.data.as_ref() {
                Some(data) => {
                    let first = segment.rows.start;
                    copy.extend_from_slice(
                        &data.host()?[(part.start - first) * row_len..(part.end - first) * row_len],
                    );
                }
                None => copy.resize(copy.len() + part.len() * row_len, T::zeroed()),
            }
        }
        Ok(copy)
    }

    fn touching(&self, rows: &Range<usize>) -> impl Iterator<Item = &Segment<T>> {
        let first = self.segment_of(rows.start).unwrap_or(self.segments.len());
        let end = rows.end;
        self.segments[first..]
            .iter()
            .take_while(move |s| s.rows.start < end)
    }

    /// Frees every segment this rank does not own and of whose rows `held` says it holds
    /// none: received copies the table forgot.
    pub(super) fn release(&mut self, held: impl Fn(&Range<usize>) -> bool) {
        for segment in &mut self.segments {
            if !segment.owned && segment.data.is_some() && !held(&segment.rows) {
                segment.data = None;
            }
        }
    }

    /// Elements this rank keeps allocated for the buffer.
    pub(super) fn resident(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| s.data.is_some())
            .map(|s| s.rows.len() * self.row_len)
            .sum()
    }
}

/// The rows of `a` that are also in `b`.
fn clip(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    a.start.max(b.start)..a.end.min(b.end).max(a.start.max(b.start))
}

fn alloc<T: Pod>(
    rt: &Runtime,
    rows: &Range<usize>,
    row_len: usize,
    key: Option<&SecureKey>,
) -> Result<HeteData<T>, StoreError> {
    let len = rows
        .len()
        .checked_mul(row_len)
        .ok_or(StoreError::Overflow)?;
    Ok(match key {
        Some(key) => HeteData::alloc_secure(rt, len, key)?,
        None => HeteData::alloc(rt, len)?,
    })
}

/// Why a store could not be made or grown.
#[derive(Debug)]
pub(super) enum StoreError {
    Dist(DistError),
    Runtime(rimms_runtime::Error),
    Overflow,
}

impl From<DistError> for StoreError {
    fn from(e: DistError) -> Self {
        StoreError::Dist(e)
    }
}

impl From<rimms_runtime::Error> for StoreError {
    fn from(e: rimms_runtime::Error) -> Self {
        StoreError::Runtime(e)
    }
}
