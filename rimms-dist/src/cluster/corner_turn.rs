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
use crate::{Distribution, Packed, Rank, RankSet};
use bytemuck::Pod;
use rimms_runtime::SecureKey;
use std::hash::{DefaultHasher, Hash, Hasher};
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

/// What a rank prepared for a corner turn's exchange: its plan, its rows of the source, and
/// its blocks, packed (and sealed, where a side is secure).
struct Prepared<'s, T: Pod> {
    src_runs: Vec<Vec<Range<usize>>>,
    dst_runs: Vec<Vec<Range<usize>>>,
    /// This rank's rows of the source, each run with the place of its first row among them.
    local: Vec<(Range<usize>, usize, &'s [T])>,
    send: Packed,
    recv: Packed,
    recv_plain: Vec<usize>,
    key: Option<SecureKey>,
    sealing: u64,
}

impl Cluster<'_> {
    /// `dst` becomes the transpose of `src`: `src` is `r × c` and `dst` `c × r`, each in a
    /// distribution whose rows have one owner each (block rows, block-cyclic, on one rank;
    /// not replicated). Each rank first holds its own rows of `src` (fetched from wherever
    /// their newest bytes are, if a write elsewhere left them there), then every rank sends
    /// each other one block, the elements of its rows in their rows of `dst`, and writes its
    /// rows of `dst`, which are then valid on their owners.
    ///
    /// Before the exchange the ranks vote (one word per rank, `Transport::vote`): a rank whose
    /// part failed before it (a bad argument there, rows or a runtime failing there) fails the
    /// turn on every rank, as [`ClusterError::FailedBefore`] naming it, instead of leaving the
    /// all-to-all with some ranks in it and not others; `dst` is then as it was everywhere.
    pub fn corner_turn<T: Pod>(&self, src: &mut DistData<T>, dst: &mut DistData<T>) -> Result<()> {
        // The vote names the call by its place in the order alone, so that a rank that
        // passed other buffers fails it as what it is (a failure there, or a drift in the
        // digests below), not as a call of another name.
        let order = format!("distributed call {} (corner turn), vote", self.calls.get());
        let call = self.call(format_args!(
            "corner turn of buffer {} into buffer {}",
            src.id, dst.id
        ));
        // Everything up to the exchange is this rank's own work, which may fail here alone:
        // its result goes to the vote, never straight back, so every rank votes.
        // The fetch's moves are recorded only once every rank has voted to go on, so a turn
        // that fails leaves every rank's table of `src` as it was.
        let fetched = self.check_turn(src, dst, &call).and_then(|src_runs| {
            self.fetch_moves(src, &call, |rank| src_runs[usize::from(rank.0)].clone())
                .map(|exchange| (src_runs, exchange))
        });
        let src: &DistData<T> = src;
        let prepared = fetched.and_then(|(src_runs, exchange)| {
            let prepared = self.pack_turn(src, dst, &call, src_runs)?;
            Ok((prepared, exchange))
        });
        // What every rank that can go on must hold alike: both buffers and their states
        // before the turn (the vote stands in for the fetch's own agreement).
        let state = {
            let mut hasher = DefaultHasher::new();
            let states = (src.entry.borrow().state(), dst.entry.borrow().state());
            (src.id, dst.id, states).hash(&mut hasher);
            hasher.finish()
        };
        let (prepared, exchange) = self.vote(&call, &order, prepared, state)?;
        self.fetch_commit(src, &exchange);
        self.exchange_turn(src, dst, &call, prepared)
    }

    /// The shapes and distributions a corner turn needs, and then each rank's rows of `src`.
    fn check_turn<T: Pod>(
        &self,
        src: &DistData<T>,
        dst: &DistData<T>,
        call: &str,
    ) -> Result<Vec<Vec<Range<usize>>>> {
        let (rows, cols) = (src.rows, src.row_len);
        if !one_owner(src.dist) || !one_owner(dst.dist) || dst.rows != cols || dst.row_len != rows {
            return Err(ClusterError::Shape {
                call: call.into(),
                what: format!(
                    "needs a {rows} × {cols} source and a {cols} × {rows} destination, each row with one owner (not replicated); got {:?} and a {} × {} destination in {:?}",
                    src.dist, dst.rows, dst.row_len, dst.dist
                ),
            });
        }
        Ok(self.runs_of(src.dist, rows))
    }

    /// Each rank's runs of rows of a buffer of `n` rows spread by `dist`, in rank order.
    fn runs_of(&self, dist: Distribution, n: usize) -> Vec<Vec<Range<usize>>> {
        let ranks = self.ranks();
        (0..ranks)
            .map(|r| dist.rows_of(Rank(r as u16), n, ranks))
            .collect()
    }

    /// This rank's blocks of a corner turn, packed (and sealed where a side is secure), from
    /// its rows of `src`, which the fetch left here.
    fn pack_turn<'s, T: Pod>(
        &self,
        src: &'s DistData<T>,
        dst: &DistData<T>,
        call: &str,
        src_runs: Vec<Vec<Range<usize>>>,
    ) -> Result<Prepared<'s, T>> {
        let (cols, ranks) = (src.row_len, self.ranks());
        let dst_runs = self.runs_of(dst.dist, cols);
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
        let runtime_error = |e| self.runtime_error(call, e);
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
        // The buffers of the last turn, kept for this one (a turn that fails here drops them).
        let (send, recv) = self.scratch.take();
        let mut send = send.reshape(send_counts);
        let offsets: Vec<usize> = (0..ranks).map(|to| send.offset(to) / size).collect();
        let packed = send
            .elements_mut::<T>()
            .ok_or_else(|| misaligned::<T>(call))?;
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
        Ok(Prepared {
            src_runs,
            dst_runs,
            local,
            send,
            recv: recv.reshape(recv_counts),
            recv_plain,
            key,
            sealing,
        })
    }

    /// The exchange every rank voted for, and each rank's rows of `dst` from what it
    /// received. A rank that fails after the exchange (a sealed block that does not open, its
    /// runtime failing to write its rows) still records the turn's write, as every rank does,
    /// so the ranks' tables stay alike; with drift checks on, the others then fail at this
    /// call naming it.
    fn exchange_turn<T: Pod>(
        &self,
        src: &DistData<T>,
        dst: &mut DistData<T>,
        call: &str,
        prepared: Prepared<'_, T>,
    ) -> Result<()> {
        let Prepared {
            src_runs,
            dst_runs,
            local,
            send,
            recv,
            recv_plain,
            key,
            sealing,
        } = prepared;
        let (rows, cols, ranks) = (src.rows, src.row_len, self.ranks());
        let me = usize::from(self.rank().0);
        let my_cols = &dst_runs[me];
        let size = size_of::<T>();
        let runtime_error = |e| self.runtime_error(call, e);
        // The diagonal stays home: transposed straight into this rank's rows of `dst` while
        // the other blocks are in flight.
        let diagonal = |store: &mut super::store::RowStore<T>| {
            let mut failed = Ok(());
            for cols_run in my_cols {
                let written = store.view_mut(cols_run).map(|view| {
                    let mut view = view?;
                    let out = view.host_mut()?;
                    for (run, _, values) in &local {
                        transpose_into(values, cols, cols_run.clone(), &mut out[run.start..], rows);
                    }
                    Ok::<(), rimms_runtime::Error>(())
                });
                if let Some(Err(e)) = written {
                    failed = Err(e);
                }
            }
            failed
        };
        // Sealed blocks are all opened before `dst` is touched, so a block altered on the way
        // fails the turn with `dst` as it was; then the diagonal waits for them.
        let overlap = key.is_none();
        let mut diagonal_done = Ok(());
        let (send, mut received) = self
            .transport
            .all_to_all_overlapped(send, recv, &mut || {
                if overlap {
                    diagonal_done = diagonal(&mut dst.store);
                }
            })
            .map_err(|source| ClusterError::Transport {
                call: call.into(),
                source,
            })?;
        // What this rank does with what it received: its own part, which may fail here alone.
        let unpack = || -> Result<()> {
            if let Some(key) = &key {
                open_blocks(key, sealing, &mut received, &recv_plain, me).map_err(runtime_error)?;
                diagonal_done = diagonal(&mut dst.store);
            }
            diagonal_done.map_err(runtime_error)?;
            let values = received
                .elements::<T>()
                .ok_or_else(|| misaligned::<T>(call))?;
            // From each source, column by column of this rank's rows of `dst`, the source's
            // rows.
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
                        let mut at =
                            received.offset(from) / size + (col + i) * count(&src_runs[from]);
                        for theirs in &src_runs[from] {
                            row[theirs.clone()].copy_from_slice(&values[at..at + theirs.len()]);
                            at += theirs.len();
                        }
                    }
                }
                col += cols_run.len();
            }
            Ok(())
        };
        let failed = unpack().err();
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
                        call: call.into(),
                        source,
                    })?;
            }
        }
        entry.epoch += 1;
        let state = entry.state();
        drop(entry);
        self.settle(dst);
        if let Some(error) = failed {
            // Where the others agree on this call (drift checks on), a state none of them has
            // makes them fail at it too, naming this rank; otherwise they carry on.
            let _ = self.agree(call, !state, false);
            return Err(error);
        }
        self.agree(call, state, false)
    }
}

/// Elements a corner turn cannot pack in place (its buffers are aligned to 8 bytes).
fn misaligned<T>(call: &str) -> ClusterError {
    ClusterError::Shape {
        call: call.into(),
        what: format!(
            "elements of {} bytes aligned to {}: a corner turn packs elements aligned to at most 8",
            size_of::<T>(),
            align_of::<T>()
        ),
    }
}
