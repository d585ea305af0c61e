//! Cross-rank coherence for RIMMS: the replicated half of the multi-node design (issue 28).
//!
//! RIMMS across ranks follows StarPU-MPI: every rank runs the same program, sees every call on
//! a distributed buffer and makes the same decisions from the call sequence alone, so no
//! coherence message is ever sent. This crate is those decisions. It knows nothing of spaces,
//! devices or transports, as `coherence` inside a rank knows nothing of backends:
//!
//! - [`Distribution`]: which rank owns each row of a buffer (block rows, block-cyclic,
//!   replicated, on one rank).
//! - [`RankTable`]: per fragment, the owning rank and the set of ranks holding its newest bytes
//!   (the generalisation of StarPU-MPI's `cache_sent` / `cache_received`). A read on rank `r`
//!   plans one send per coalesced run of fragments `r` lacks, from the owner where it is valid;
//!   a write on rank `r` leaves the run valid on `r` alone, on every rank's copy of the table at
//!   once. [`RankTable::digest`] is what ranks compare to catch drift.
//! - [`owner_computes`]: which rank runs a call, split per rank where the written range spans
//!   several, and [`corner_turn_bytes`], the analytic minimum of a distributed transpose.
//! - [`Transport`]: how ranks exchange bytes (point-to-point by envelope, all-to-all, the
//!   digest agreement that turns drift into an error), with [`InProcess`], threads as ranks,
//!   the test double that runs the protocol without MPI; [`execute`] carries an exchange out.
//!
//! Everything but the transport is a pure function of its inputs: the same calls in the same
//! order give the same plans on every rank.

pub mod cluster;
mod distribution;
mod table;
pub mod transport;

pub use cluster::{on_threads, Cluster, ClusterError, DistData, SEAL_BYTES};
pub use distribution::{
    corner_turn_bytes, owner_computes, transpose_bytes, Distribution, Span, DISTRIBUTION_NAMES,
};
pub use table::{Exchange, RankTable, Send};
#[cfg(feature = "mpi")]
pub use transport::Mpi;
pub use transport::{
    execute, execute_on, Envelope, Fragments, InProcess, Packed, Transport, TransportError,
};

use std::fmt;

/// A process of the job, `0..ranks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(pub u16);

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.0)
    }
}

/// The most ranks a job may have: a [`RankSet`] is one word.
pub const MAX_RANKS: usize = 64;

/// A set of ranks, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RankSet(pub u64);

impl RankSet {
    /// No rank.
    pub const EMPTY: RankSet = RankSet(0);

    /// The bit of `rank`; none for a rank past the [`MAX_RANKS`] a set holds. A plain
    /// `1 << rank` would overflow there: a panic in debug builds, and in release a shift
    /// taken modulo 64, which names another rank (rank 70 as rank 6).
    fn bit(rank: Rank) -> u64 {
        1u64.checked_shl(u32::from(rank.0)).unwrap_or(0)
    }

    /// The set of `rank` alone (empty for a rank past [`MAX_RANKS`]).
    pub fn only(rank: Rank) -> RankSet {
        RankSet(Self::bit(rank))
    }

    /// Every rank of a job of `ranks`.
    pub fn all(ranks: usize) -> RankSet {
        RankSet(if ranks >= 64 {
            u64::MAX
        } else {
            (1 << ranks) - 1
        })
    }

    /// Whether `rank` is in the set.
    pub fn contains(self, rank: Rank) -> bool {
        self.0 & Self::bit(rank) != 0
    }

    /// The set with `rank` added (unchanged for a rank past [`MAX_RANKS`]).
    pub fn with(self, rank: Rank) -> RankSet {
        RankSet(self.0 | Self::bit(rank))
    }

    /// The lowest rank of the set, if any.
    pub fn first(self) -> Option<Rank> {
        (self.0 != 0).then(|| Rank(self.0.trailing_zeros() as u16))
    }
}

/// What a distribution or a call cannot do, named so that every rank reports the same error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DistError {
    /// More ranks than a job may have, or none.
    Ranks {
        /// The ranks asked for.
        ranks: usize,
    },
    /// A block distribution with more ranks than rows leaves a rank nothing.
    MoreRanksThanRows {
        /// Ranks of the job.
        ranks: usize,
        /// Rows of the buffer.
        rows: usize,
    },
    /// A block-cyclic distribution with blocks of no rows.
    EmptyBlock,
    /// A rank outside the job.
    NoSuchRank {
        /// The rank named.
        rank: Rank,
        /// Ranks of the job.
        ranks: usize,
    },
    /// A call that writes rows owned by several ranks, of an API that cannot be split by rows.
    SpansRanks {
        /// The owning ranks of the written rows, in row order.
        ranks: Vec<Rank>,
    },
    /// A range outside the buffer.
    OutOfRange {
        /// The range's end.
        end: usize,
        /// The buffer's length.
        len: usize,
    },
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistError::Ranks { ranks } => {
                write!(f, "a job of {ranks} ranks: between 1 and {MAX_RANKS} are supported")
            }
            DistError::MoreRanksThanRows { ranks, rows } => write!(
                f,
                "{ranks} ranks for {rows} rows: a block distribution would leave a rank no rows; use fewer ranks or block-cyclic"
            ),
            DistError::EmptyBlock => write!(f, "a block-cyclic distribution needs blocks of at least one row"),
            DistError::NoSuchRank { rank, ranks } => {
                write!(f, "{rank} is not in a job of {ranks} ranks")
            }
            DistError::SpansRanks { ranks } => {
                let names: Vec<String> = ranks.iter().map(Rank::to_string).collect();
                write!(
                    f,
                    "the call writes rows owned by {}; this API cannot be split by rows, so name one rank for it",
                    names.join(", ")
                )
            }
            DistError::OutOfRange { end, len } => {
                write!(f, "range ending at {end} is outside a buffer of {len}")
            }
        }
    }
}

impl std::error::Error for DistError {}
