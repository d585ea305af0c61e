//! The corner turn: a matrix in block rows over the ranks becomes its transpose in block rows,
//! as one all-to-all of one packed block per destination.
//!
//! Measured on this machine's Open MPI, one message per row segment is 4–9x slower than the
//! collective, so a corner turn is never lowered to fragment moves: each rank packs, for every
//! destination, the elements of its rows that fall in that destination's columns, already in
//! the destination's row order, and unpacks what it receives straight into its rows of the
//! transpose. The bytes are `corner_turn_bytes`'s minimum: the diagonal blocks stay home.

use super::{Cluster, ClusterError, DistData, Result};
use crate::{Distribution, Rank, RankSet};
use bytemuck::Pod;
use std::ops::Range;

/// Columns `cols` of `rows` (rows of `row_len` elements), transposed: column `c` lands in
/// `out` from `(c − cols.start) · stride` on, as long as `rows` has rows (a packed block:
/// `stride` is that length; rows of the transpose: `stride` is their length). In tiles, so
/// that reads and writes both stay in cache however long the rows are.
fn transpose_into<T: Copy>(
    rows: &[T],
    row_len: usize,
    cols: Range<usize>,
    out: &mut [T],
    stride: usize,
) {
    const TILE: usize = 32;
    let n = rows.len() / row_len.max(1);
    for c0 in cols.clone().step_by(TILE) {
        let c1 = (c0 + TILE).min(cols.end);
        for r0 in (0..n).step_by(TILE) {
            let r1 = (r0 + TILE).min(n);
            for c in c0..c1 {
                let column = &mut out[(c - cols.start) * stride..];
                for r in r0..r1 {
                    column[r] = rows[r * row_len + c];
                }
            }
        }
    }
}

/// The one run of rows a block-rows distribution gives `rank`.
fn block(rows: usize, ranks: usize, rank: usize) -> Range<usize> {
    Distribution::BlockRows
        .rows_of(Rank(rank as u16), rows, ranks)
        .into_iter()
        .next()
        .unwrap_or(0..0)
}

impl Cluster<'_> {
    /// `dst` becomes the transpose of `src`. Both are in block rows: `src` is `r × c` and
    /// `dst` `c × r`. Each rank first holds its own rows of `src` (fetched from wherever their
    /// newest bytes are, if a write elsewhere left them there), then every rank sends each
    /// other its block and writes its rows of `dst`, which are then valid on their owners.
    pub fn corner_turn<T: Pod>(&self, src: &mut DistData<T>, dst: &mut DistData<T>) -> Result<()> {
        let (rows, cols, ranks) = (src.rows, src.row_len, self.ranks());
        let call = self.call(format_args!(
            "corner turn of buffer {} into buffer {}",
            src.id, dst.id
        ));
        if src.dist != Distribution::BlockRows
            || dst.dist != Distribution::BlockRows
            || dst.rows != cols
            || dst.row_len != rows
        {
            return Err(ClusterError::Shape {
                call,
                what: format!(
                    "needs a {rows} × {cols} source and a {cols} × {rows} destination, both in block rows; got {:?} and a {} × {} destination in {:?}",
                    src.dist, dst.rows, dst.row_len, dst.dist
                ),
            });
        }
        self.fetch(src, |rank| block(rows, ranks, usize::from(rank.0)))?;
        let me = usize::from(self.rank().0);
        let (mine, my_cols) = (block(rows, ranks, me), block(cols, ranks, me));
        let size = size_of::<T>();
        // The diagonal block stays home: transposed straight into this rank's rows of `dst`
        // while the others are in flight.
        let send_counts = (0..ranks)
            .map(|to| (to != me) as usize * block(cols, ranks, to).len() * mine.len() * size)
            .collect();
        let recv_counts = (0..ranks)
            .map(|from| {
                (from != me) as usize * block(rows, ranks, from).len() * my_cols.len() * size
            })
            .collect();
        let misaligned = || {
            ClusterError::Shape {
            call: call.clone(),
            what: format!(
                "elements of {} bytes aligned to {}: a corner turn packs elements aligned to at most 8",
                size,
                align_of::<T>()
            ),
        }
        };
        let local = src.local.host().map_err(|e| self.runtime_error(&call, e))?;
        let local = &local[mine.start * cols..mine.end * cols];
        let (send, recv) = self.scratch.take();
        let mut send = send.reshape(send_counts);
        let offsets: Vec<usize> = (0..ranks).map(|to| send.offset(to) / size).collect();
        let packed = send.elements_mut::<T>().ok_or_else(misaligned)?;
        for (to, &at) in offsets.iter().enumerate().filter(|&(to, _)| to != me) {
            let theirs = block(cols, ranks, to);
            let len = theirs.len() * mine.len();
            transpose_into(local, cols, theirs, &mut packed[at..at + len], mine.len());
        }
        let out = dst
            .local
            .host_mut()
            .map_err(|e| self.runtime_error(&call, e))?;
        let mut diagonal = || {
            if !my_cols.is_empty() {
                let first = my_cols.start * rows + mine.start;
                transpose_into(local, cols, my_cols.clone(), &mut out[first..], rows);
            }
        };
        let (send, received) = self
            .transport
            .all_to_all_overlapped(send, recv.reshape(recv_counts), &mut diagonal)
            .map_err(|source| ClusterError::Transport {
                call: call.clone(),
                source,
            })?;
        let values = received.elements::<T>().ok_or_else(misaligned)?;
        for from in (0..ranks).filter(|&from| from != me) {
            let theirs = block(rows, ranks, from);
            let at = received.offset(from) / size;
            for (i, c) in my_cols.clone().enumerate() {
                let row = &mut out[c * rows + theirs.start..c * rows + theirs.end];
                row.copy_from_slice(&values[at + i * theirs.len()..at + (i + 1) * theirs.len()]);
            }
        }
        self.scratch.set((send, received));
        self.forget_uncached();
        let mut entry = dst.entry.borrow_mut();
        for rank in 0..ranks {
            let frags = dst.frags(&block(cols, ranks, rank));
            entry
                .table
                .mark_written(RankSet::only(Rank(rank as u16)), frags)
                .map_err(|source| ClusterError::Dist {
                    call: call.clone(),
                    source,
                })?;
        }
        entry.epoch += 1;
        self.agree(&call, entry.state(), false)
    }
}
