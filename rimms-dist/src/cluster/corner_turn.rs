//! The corner turn: a matrix whose rows are spread over the ranks becomes its transpose, spread
//! the same way or another, as one all-to-all of one packed block per destination.
//!
//! Measured on this machine's Open MPI, one message per row segment is 4–9x slower than the
//! collective, so a corner turn is never lowered to fragment moves: each rank packs, for every
//! destination, the elements of its rows that fall in that destination's columns, already in
//! the destination's row order, and unpacks what it receives straight into its rows of the
//! transpose. The bytes are `corner_turn_bytes`'s minimum: the diagonal blocks stay home.

use super::sealed::{open_blocks, seal_blocks, seal_slot, sealing_id};
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

/// Rows in `runs`.
fn count(runs: &[Range<usize>]) -> usize {
    runs.iter().map(Range::len).sum()
}

/// Whether each row has one owner: what a corner turn's sides need.
fn one_owner(dist: Distribution) -> bool {
    !matches!(dist, Distribution::Replicated)
}

impl Cluster<'_> {
    /// `dst` becomes the transpose of `src`: `src` is `r × c` and `dst` `c × r`, each in a
    /// distribution whose rows have one owner each (block rows, block-cyclic, on one rank;
    /// not replicated). Each rank first holds its own rows of `src` (fetched from wherever
    /// their newest bytes are, if a write elsewhere left them there), then every rank sends
    /// each other one block, the elements of its rows in their rows of `dst`, and writes its
    /// rows of `dst`, which are then valid on their owners.
    pub fn corner_turn<T: Pod>(&self, src: &mut DistData<T>, dst: &mut DistData<T>) -> Result<()> {
        let (rows, cols, ranks) = (src.rows, src.row_len, self.ranks());
        let call = self.call(format_args!(
            "corner turn of buffer {} into buffer {}",
            src.id, dst.id
        ));
        if !one_owner(src.dist) || !one_owner(dst.dist) || dst.rows != cols || dst.row_len != rows {
            return Err(ClusterError::Shape {
                call,
                what: format!(
                    "needs a {rows} × {cols} source and a {cols} × {rows} destination, each row with one owner (not replicated); got {:?} and a {} × {} destination in {:?}",
                    src.dist, dst.rows, dst.row_len, dst.dist
                ),
            });
        }
        let runs_of = |dist: Distribution, n: usize| -> Vec<Vec<Range<usize>>> {
            (0..ranks)
                .map(|r| dist.rows_of(Rank(r as u16), n, ranks))
                .collect()
        };
        let (src_runs, dst_runs) = (runs_of(src.dist, rows), runs_of(dst.dist, cols));
        self.fetch_runs(src, &call, |rank| src_runs[usize::from(rank.0)].clone())?;
        let me = usize::from(self.rank().0);
        let (mine, my_cols) = (&src_runs[me], &dst_runs[me]);
        let (n_mine, n_my_cols) = (count(mine), count(my_cols));
        let size = size_of::<T>();
        // A secure side seals each block on the wire (the source's key, else the
        // destination's): its bytes, then a seal in a slot of whole elements.
        let key = src.key.as_ref().or(dst.key.as_ref()).cloned();
        let sealing = sealing_id("corner turn", dst.id, dst.entry.borrow().epoch);
        let with_slot = |len: usize| match &key {
            Some(_) if len > 0 => len + seal_slot(size),
            _ => len,
        };
        let send_plain: Vec<usize> = (0..ranks)
            .map(|to| (to != me) as usize * count(&dst_runs[to]) * n_mine * size)
            .collect();
        let recv_plain: Vec<usize> = (0..ranks)
            .map(|from| (from != me) as usize * count(&src_runs[from]) * n_my_cols * size)
            .collect();
        let send_counts = send_plain.iter().map(|&n| with_slot(n)).collect();
        let recv_counts = recv_plain.iter().map(|&n| with_slot(n)).collect();
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
        let runtime_error = |e| self.runtime_error(&call, e);
        // This rank's rows of `src`, each run with the place of its first row among them.
        let mut local = Vec::with_capacity(mine.len());
        let mut at = 0;
        for run in mine {
            let view = src.store.view(run).ok_or_else(|| ClusterError::NotHere {
                buffer: src.id,
                rows: run.clone(),
                rank: self.rank(),
            })?;
            local.push((
                run.clone(),
                at,
                view.map_err(runtime_error)?.host().map_err(runtime_error)?,
            ));
            at += run.len();
        }
        let (send, recv) = self.scratch.take();
        let mut send = send.reshape(send_counts);
        let offsets: Vec<usize> = (0..ranks).map(|to| send.offset(to) / size).collect();
        let packed = send.elements_mut::<T>().ok_or_else(misaligned)?;
        // For each destination, column by column of its rows of `dst`, this rank's rows.
        for (to, &base) in offsets.iter().enumerate().filter(|&(to, _)| to != me) {
            let mut first_col = 0;
            for theirs in &dst_runs[to] {
                for (_, row_at, values) in &local {
                    let from = base + first_col * n_mine + row_at;
                    transpose_into(values, cols, theirs.clone(), &mut packed[from..], n_mine);
                }
                first_col += theirs.len();
            }
        }
        if let Some(key) = &key {
            seal_blocks(key, sealing, &mut send, &send_plain, me).map_err(runtime_error)?;
        }
        // The diagonal stays home: transposed straight into this rank's rows of `dst` while
        // the other blocks are in flight.
        let mut diagonal_failed = None;
        let mut diagonal = || {
            for cols_run in my_cols {
                let written = dst.store.view_mut(cols_run).map(|view| {
                    let mut view = view?;
                    let out = view.host_mut()?;
                    for (run, _, values) in &local {
                        transpose_into(values, cols, cols_run.clone(), &mut out[run.start..], rows);
                    }
                    Ok::<(), rimms_runtime::Error>(())
                });
                if let Some(Err(e)) = written {
                    diagonal_failed = Some(e);
                }
            }
        };
        // Sealed blocks are all opened before `dst` is touched, so a block altered on the way
        // fails the turn with `dst` as it was; then the diagonal waits for them.
        let overlap = key.is_none();
        let (send, mut received) = self
            .transport
            .all_to_all_overlapped(send, recv.reshape(recv_counts), &mut || {
                if overlap {
                    diagonal()
                }
            })
            .map_err(|source| ClusterError::Transport {
                call: call.clone(),
                source,
            })?;
        if let Some(key) = &key {
            open_blocks(key, sealing, &mut received, &recv_plain, me).map_err(runtime_error)?;
            diagonal();
        }
        if let Some(e) = diagonal_failed {
            return Err(runtime_error(e));
        }
        let values = received.elements::<T>().ok_or_else(misaligned)?;
        // From each source, column by column of this rank's rows of `dst`, the source's rows.
        let mut col = 0;
        for cols_run in my_cols {
            let mut view = dst
                .store
                .view_mut(cols_run)
                .ok_or_else(|| ClusterError::NotHere {
                    buffer: dst.id,
                    rows: cols_run.clone(),
                    rank: self.rank(),
                })?
                .map_err(runtime_error)?;
            let out = view.host_mut().map_err(runtime_error)?;
            for i in 0..cols_run.len() {
                let row = &mut out[i * rows..(i + 1) * rows];
                for from in (0..ranks).filter(|&from| from != me) {
                    let mut at = received.offset(from) / size + (col + i) * count(&src_runs[from]);
                    for theirs in &src_runs[from] {
                        row[theirs.clone()].copy_from_slice(&values[at..at + theirs.len()]);
                        at += theirs.len();
                    }
                }
            }
            col += cols_run.len();
        }
        self.scratch.set((send, received));
        self.forget_uncached();
        let mut entry = dst.entry.borrow_mut();
        for (rank, runs) in dst_runs.iter().enumerate() {
            for run in runs {
                let frags = dst.frags(run);
                entry
                    .table
                    .mark_written(RankSet::only(Rank(rank as u16)), frags)
                    .map_err(|source| ClusterError::Dist {
                        call: call.clone(),
                        source,
                    })?;
            }
        }
        entry.epoch += 1;
        let state = entry.state();
        drop(entry);
        self.settle(dst);
        self.agree(&call, state, false)
    }
}
