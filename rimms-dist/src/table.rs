//! The replicated table: per fragment of a distributed buffer, its owner and the ranks that
//! hold its newest bytes; and the exchanges a read needs.
//!
//! Every rank keeps the same table and applies the same calls to it in the same order, so each
//! rank knows, without asking, what every other rank holds. A read on rank `r` of fragments it
//! lacks becomes one send per coalesced run, from the owner where the owner holds the newest
//! bytes (it always does after an owner-computes write) and otherwise from the lowest rank that
//! does; both ends see the same plan, one posting the send and the other the receive. A write
//! leaves the fragments valid on the writers alone. This is StarPU-MPI's `cache_sent` /
//! `cache_received` generalised to fragments: a second read of unchanged data sends nothing.

use crate::{DistError, Distribution, Rank, RankSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct State {
    /// The rank that serves it when several hold it: its owner, or a replicated buffer's
    /// lowest rank.
    owner: Rank,
    /// Every rank the distribution gives it to: one, or every rank of a replicated buffer.
    owners: RankSet,
    valid: RankSet,
}

/// The cross-rank state of one distributed buffer, as every rank keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankTable {
    ranks: usize,
    frags: Vec<State>,
}

/// One message of an exchange: `from` sends `to` the fragments `frags`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Send {
    /// The rank that holds the newest bytes and sends them.
    pub from: Rank,
    /// The rank that reads them.
    pub to: Rank,
    /// A run of neighbouring fragments, one message.
    pub frags: Range<usize>,
}

/// What a read needs moved between ranks before it runs, in fragment order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exchange {
    /// One per coalesced run.
    pub sends: Vec<Send>,
}

impl Exchange {
    /// Fragments sent from `from` to `to`.
    pub fn fragments(&self, from: Rank, to: Rank) -> usize {
        self.sends
            .iter()
            .filter(|s| s.from == from && s.to == to)
            .map(|s| s.frags.len())
            .sum()
    }

    /// Whether nothing moves.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }
}

impl RankTable {
    /// A fresh buffer of `frags` fragments of `rows` rows (each row `frags / rows` fragments)
    /// distributed by `dist` over `ranks`: owned as the distribution says, and valid on every
    /// rank, since a fresh buffer is zeros everywhere.
    pub fn fresh(
        dist: &Distribution,
        rows: usize,
        frags_per_row: usize,
        ranks: usize,
    ) -> Result<RankTable, DistError> {
        dist.check(rows, ranks)?;
        let frags = (0..rows)
            .flat_map(|row| {
                // A replicated row's owner is the lowest rank: any holder may serve it.
                let owners = dist.owners(row, rows, ranks);
                let owner = owners.first().unwrap_or(Rank(0));
                std::iter::repeat_n(
                    State {
                        owner,
                        owners,
                        valid: RankSet::all(ranks),
                    },
                    frags_per_row,
                )
            })
            .collect();
        Ok(RankTable { ranks, frags })
    }

    /// Fragments in the buffer.
    pub fn len(&self) -> usize {
        self.frags.len()
    }

    /// Whether the buffer has no fragments.
    pub fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The ranks holding fragment `frag`'s newest bytes.
    pub fn valid(&self, frag: usize) -> Option<RankSet> {
        self.frags.get(frag).map(|s| s.valid)
    }

    /// The owner of fragment `frag`: the rank that serves it where several hold it.
    pub fn owner(&self, frag: usize) -> Option<Rank> {
        self.frags.get(frag).map(|s| s.owner)
    }

    /// The ranks the distribution gives fragment `frag` to.
    pub fn owners(&self, frag: usize) -> Option<RankSet> {
        self.frags.get(frag).map(|s| s.owners)
    }

    fn check(&self, rank: Rank, frags: &Range<usize>) -> Result<(), DistError> {
        if usize::from(rank.0) >= self.ranks {
            return Err(DistError::NoSuchRank {
                rank,
                ranks: self.ranks,
            });
        }
        if frags.end > self.frags.len() {
            return Err(DistError::OutOfRange {
                end: frags.end,
                len: self.frags.len(),
            });
        }
        Ok(())
    }

    /// What a read of `frags` on `reader` needs moved first: each fragment the reader lacks,
    /// from its owner if the owner holds its newest bytes, else from the lowest rank that
    /// does; neighbouring fragments with one source in one send. Plans, changes nothing.
    pub fn plan_read(&self, reader: Rank, frags: Range<usize>) -> Result<Exchange, DistError> {
        self.check(reader, &frags)?;
        let mut sends: Vec<Send> = Vec::new();
        for frag in frags {
            let state = self.frags[frag];
            if state.valid.contains(reader) {
                continue;
            }
            let from = if state.valid.contains(state.owner) {
                state.owner
            } else {
                // A fragment is never valid nowhere: a write leaves its writers valid.
                state.valid.first().unwrap_or(state.owner)
            };
            match sends.last_mut() {
                Some(send) if send.from == from && send.frags.end == frag => send.frags.end += 1,
                _ => sends.push(Send {
                    from,
                    to: reader,
                    frags: frag..frag + 1,
                }),
            }
        }
        Ok(Exchange { sends })
    }

    /// Records that every send of `exchange` arrived: its readers now hold those fragments.
    ///
    /// An exchange is public data, so one not planned by this table may hold sends past its
    /// fragments or to ranks outside the job: those parts are ignored (clipped, as
    /// [`Self::forget`] clips), rather than panicking on the slice or recording a rank the job
    /// does not have.
    pub fn commit(&mut self, exchange: &Exchange) {
        let len = self.frags.len();
        for send in &exchange.sends {
            if usize::from(send.to.0) >= self.ranks {
                continue;
            }
            let end = send.frags.end.min(len);
            for state in &mut self.frags[send.frags.start.min(end)..end] {
                state.valid = state.valid.with(send.to);
            }
        }
    }

    /// Records a completed write of `frags` by `writers` (one rank, or every rank of a
    /// replicated buffer): only they hold the newest bytes now.
    ///
    /// A write by no rank (an empty set) changes nothing: marking it would leave the fragments
    /// valid nowhere, and a later read would then plan a send from a rank without the bytes.
    /// Its range is still checked, so a range past the table is an error, never a panic.
    pub fn mark_written(&mut self, writers: RankSet, frags: Range<usize>) -> Result<(), DistError> {
        // Checked with any rank of the job when there is no writer: the range alone matters.
        self.check(writers.first().unwrap_or(Rank(0)), &frags)?;
        if writers == RankSet::EMPTY {
            return Ok(());
        }
        let outside = RankSet(writers.0 & !RankSet::all(self.ranks).0);
        if let Some(rank) = outside.first() {
            return Err(DistError::NoSuchRank {
                rank,
                ranks: self.ranks,
            });
        }
        for state in &mut self.frags[frags] {
            state.valid = writers;
        }
        Ok(())
    }

    /// Forgets `rank`'s copies of `frags` (a received copy used once, with the receive cache
    /// off), except where `rank` holds the only newest bytes: nothing is ever lost.
    pub fn forget(&mut self, rank: Rank, frags: Range<usize>) {
        let end = frags.end.min(self.frags.len());
        for state in &mut self.frags[frags.start.min(end)..end] {
            let without = RankSet(state.valid.0 & !RankSet::only(rank).0);
            if without != RankSet::EMPTY {
                state.valid = without;
            }
        }
    }

    /// Forgets every copy but the owners' (StarPU-MPI's cache flush): later reads send again.
    /// A replicated buffer's copies are all its owners', so it keeps them. Fragments no owner
    /// holds are left as they are, so nothing is lost.
    pub fn flush(&mut self) {
        for state in &mut self.frags {
            let kept = RankSet(state.valid.0 & state.owners.0);
            if kept != RankSet::EMPTY {
                state.valid = kept;
            }
        }
    }

    /// A digest of the whole table, the same on every rank that applied the same calls: ranks
    /// compare it after a distributed call to catch drift (calls applied in different orders)
    /// as an error instead of a hang.
    pub fn digest(&self) -> u64 {
        // `DefaultHasher::new` has fixed keys: every rank runs the same binary, so equal tables
        // hash equal everywhere.
        let mut hasher = DefaultHasher::new();
        self.ranks.hash(&mut hasher);
        self.frags.hash(&mut hasher);
        hasher.finish()
    }
}
