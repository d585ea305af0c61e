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
        let mine = block(rows, ranks, me);
        let local = src.local.host().map_err(|e| self.runtime_error(&call, e))?;
        let blocks: Vec<Vec<u8>> = (0..ranks)
            .map(|to| {
                let theirs = block(cols, ranks, to);
                let mut packed = Vec::with_capacity(theirs.len() * mine.len());
                for c in theirs {
                    packed.extend(mine.clone().map(|r| local[r * cols + c]));
                }
                bytemuck::cast_slice(&packed).to_vec()
            })
            .collect();
        let received =
            self.transport
                .all_to_all(blocks)
                .map_err(|source| ClusterError::Transport {
                    call: call.clone(),
                    source,
                })?;
        let my_cols = block(cols, ranks, me);
        let out = dst
            .local
            .host_mut()
            .map_err(|e| self.runtime_error(&call, e))?;
        for (from, bytes) in received.iter().enumerate() {
            let theirs = block(rows, ranks, from);
            let expected = theirs.len() * my_cols.len() * size_of::<T>();
            if bytes.len() != expected {
                return Err(ClusterError::Shape {
                    call,
                    what: format!(
                        "rank {from} sent {} bytes, not the {expected} of its block",
                        bytes.len()
                    ),
                });
            }
            // Copied out rather than cast in place: a received block need not be aligned for T.
            let mut values = vec![T::zeroed(); theirs.len() * my_cols.len()];
            bytemuck::cast_slice_mut::<T, u8>(&mut values).copy_from_slice(bytes);
            for (i, c) in my_cols.clone().enumerate() {
                let row = &mut out[c * rows + theirs.start..c * rows + theirs.end];
                row.copy_from_slice(&values[i * theirs.len()..(i + 1) * theirs.len()]);
            }
        }
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
        self.agree(&call, &entry, false)
    }
}
