//! Which rank owns which rows of a distributed buffer, and which rank runs a call on them.

use crate::{DistError, Rank, RankSet, MAX_RANKS};
use std::ops::Range;

/// How a buffer of rows is spread over the ranks of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Contiguous blocks of rows, one per rank in rank order; the first `rows % ranks` ranks
    /// get one row more (pulses or range lines per rank).
    BlockRows,
    /// Blocks of `block` rows dealt to the ranks in turn.
    BlockCyclic {
        /// Rows per block.
        block: usize,
    },
    /// Every rank holds all of it and computes it (a matched filter or a window).
    Replicated,
    /// One rank owns all of it.
    OnRank(Rank),
}

/// The names [`Distribution`] parses from and prints as, for command lines.
pub const DISTRIBUTION_NAMES: &str = "block-rows, block-cyclic:ROWS, replicated, on-rank:RANK";

impl std::str::FromStr for Distribution {
    type Err = String;
    /// `block-rows`, `block-cyclic:ROWS`, `replicated` or `on-rank:RANK`.
    fn from_str(s: &str) -> Result<Distribution, String> {
        let number = |what: &str, n: &str| {
            n.parse::<usize>()
                .map_err(|_| format!("`{s}`: {what} must be a whole number, got `{n}`"))
        };
        match s.split_once(':') {
            None if s == "block-rows" => Ok(Distribution::BlockRows),
            None if s == "replicated" => Ok(Distribution::Replicated),
            Some(("block-cyclic", n)) => match number("the block's rows", n)? {
                0 => Err(format!("`{s}`: a block needs at least one row")),
                block => Ok(Distribution::BlockCyclic { block }),
            },
            Some(("on-rank", n)) => {
                let rank = number("the rank", n)?;
                u16::try_from(rank)
                    .ok()
                    .filter(|&r| usize::from(r) < MAX_RANKS)
                    .map(|r| Distribution::OnRank(Rank(r)))
                    .ok_or_else(|| format!("`{s}`: ranks go up to {}", MAX_RANKS - 1))
            }
            _ => Err(format!(
                "`{s}` is not a distribution; use one of {DISTRIBUTION_NAMES}"
            )),
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::BlockRows => write!(f, "block-rows"),
            Distribution::BlockCyclic { block } => write!(f, "block-cyclic:{block}"),
            Distribution::Replicated => write!(f, "replicated"),
            Distribution::OnRank(rank) => write!(f, "on-rank:{}", rank.0),
        }
    }
}

impl Distribution {
    /// Refuses a distribution that cannot spread `rows` over `ranks`.
    pub fn check(&self, rows: usize, ranks: usize) -> Result<(), DistError> {
        if ranks == 0 || ranks > MAX_RANKS {
            return Err(DistError::Ranks { ranks });
        }
        match *self {
            Distribution::BlockRows if ranks > rows => {
                Err(DistError::MoreRanksThanRows { ranks, rows })
            }
            Distribution::BlockCyclic { block: 0 } => Err(DistError::EmptyBlock),
            Distribution::OnRank(rank) if usize::from(rank.0) >= ranks => {
                Err(DistError::NoSuchRank { rank, ranks })
            }
            _ => Ok(()),
        }
    }

    /// The ranks that own `row` of a buffer of `rows` rows: one rank, or every rank for a
    /// replicated buffer. The distribution must have passed [`Self::check`].
    pub fn owners(&self, row: usize, rows: usize, ranks: usize) -> RankSet {
        match *self {
            Distribution::BlockRows => RankSet::only(block_owner(row, rows, ranks)),
            Distribution::BlockCyclic { block } => {
                RankSet::only(Rank((row / block.max(1) % ranks) as u16))
            }
            Distribution::Replicated => RankSet::all(ranks),
            Distribution::OnRank(rank) => RankSet::only(rank),
        }
    }

    /// The rows `rank` owns, as runs in row order.
    pub fn rows_of(&self, rank: Rank, rows: usize, ranks: usize) -> Vec<Range<usize>> {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for row in 0..rows {
            if !self.owners(row, rows, ranks).contains(rank) {
                continue;
            }
            match runs.last_mut() {
                Some(run) if run.end == row => run.end += 1,
                _ => runs.push(row..row + 1),
            }
        }
        runs
    }
}

/// The owner of `row` under [`Distribution::BlockRows`]: the first `rows % ranks` blocks have
/// `rows / ranks + 1` rows, the others `rows / ranks`.
fn block_owner(row: usize, rows: usize, ranks: usize) -> Rank {
    let (base, extra) = (rows / ranks, rows % ranks);
    let long = extra * (base + 1);
    let rank = if row < long {
        row / (base + 1)
    } else {
        extra + (row - long) / base.max(1)
    };
    Rank(rank.min(ranks - 1) as u16)
}

/// Where a call that writes `written` rows runs: on the rank that owns them (StarPU-MPI's
/// owner-computes). A write across ranks is split into one span per run of rows with one
/// owner when the API works row by row (`splits_by_rows`), and refused otherwise, naming the
/// ranks. A replicated buffer is written by every rank on its own copy.
pub fn owner_computes(
    dist: &Distribution,
    rows: usize,
    ranks: usize,
    written: Range<usize>,
    splits_by_rows: bool,
) -> Result<Vec<Span>, DistError> {
    dist.check(rows, ranks)?;
    if written.end > rows {
        return Err(DistError::OutOfRange {
            end: written.end,
            len: rows,
        });
    }
    let mut spans: Vec<Span> = Vec::new();
    for row in written {
        let owners = dist.owners(row, rows, ranks);
        match spans.last_mut() {
            Some(span) if span.ranks == owners && span.rows.end == row => span.rows.end += 1,
            _ => spans.push(Span {
                ranks: owners,
                rows: row..row + 1,
            }),
        }
    }
    if spans.len() > 1 && !splits_by_rows {
        return Err(DistError::SpansRanks {
            ranks: spans.iter().filter_map(|s| s.ranks.first()).collect(),
        });
    }
    Ok(spans)
}

/// Rows of a call that run on the ranks that own them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Who runs it: one rank, or every rank for a replicated buffer.
    pub ranks: RankSet,
    /// The rows.
    pub rows: Range<usize>,
}

/// The bytes a corner turn must move between ranks: a `rows` × `cols` matrix of
/// `elem_bytes`-byte elements, block rows over `ranks` before and block rows of its transpose
/// after. Entry `[from][to]` is what rank `from` sends rank `to`: the elements of its rows that
/// fall in `to`'s columns. The diagonal stays home; off it, even splits move (n−1)/n of the
/// matrix. This is the analytic minimum the transport's counters are held to.
pub fn corner_turn_bytes(
    rows: usize,
    cols: usize,
    elem_bytes: usize,
    ranks: usize,
) -> Vec<Vec<u64>> {
    let block_rows = Distribution::BlockRows;
    transpose_bytes((block_rows, block_rows), rows, cols, elem_bytes, ranks)
}

/// [`corner_turn_bytes`] from a `rows` × `cols` matrix spread by `from` to its transpose
/// spread by `to` (each row with one owner): rank `f` sends rank `t` the elements of its rows
/// in `t`'s rows of the transpose.
pub fn transpose_bytes(
    (from, to): (Distribution, Distribution),
    rows: usize,
    cols: usize,
    elem_bytes: usize,
    ranks: usize,
) -> Vec<Vec<u64>> {
    let count = |dist: Distribution, n: usize, rank: usize| -> usize {
        dist.rows_of(Rank(rank as u16), n, ranks)
            .iter()
            .map(Range::len)
            .sum()
    };
    (0..ranks)
        .map(|f| {
            (0..ranks)
                .map(|t| match f == t {
                    true => 0,
                    false => (count(from, rows, f) * count(to, cols, t) * elem_bytes) as u64,
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_the_distributions_they_print_as() {
        let dists = [
            Distribution::BlockRows,
            Distribution::BlockCyclic { block: 3 },
            Distribution::Replicated,
            Distribution::OnRank(Rank(2)),
        ];
        let names = ["block-rows", "block-cyclic:3", "replicated", "on-rank:2"];
        for (dist, name) in dists.iter().zip(names) {
            assert_eq!(dist.to_string(), name);
            assert_eq!(name.parse::<Distribution>(), Ok(*dist));
        }
        for bad in [
            "block-cyclic:0",
            "block-cyclic:x",
            "on-rank:64",
            "rows",
            "block-rows:2",
        ] {
            let e = bad.parse::<Distribution>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    /// Every row has exactly one owner under the owned distributions, blocks differ in length
    /// by at most one row, and block rows keep each rank's rows contiguous.
    #[test]
    fn block_rows_cover_every_row_once_in_near_even_blocks() {
        for ranks in 1..=6 {
            for rows in ranks..40 {
                let dist = Distribution::BlockRows;
                let runs: Vec<Vec<Range<usize>>> = (0..ranks)
                    .map(|r| dist.rows_of(Rank(r as u16), rows, ranks))
                    .collect();
                let lens: Vec<usize> = runs
                    .iter()
                    .map(|r| {
                        assert!(r.len() <= 1, "contiguous: {r:?}");
                        r.iter().map(|x| x.len()).sum()
                    })
                    .collect();
                assert_eq!(lens.iter().sum::<usize>(), rows);
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "{rows} rows over {ranks}: {lens:?}");
                // In rank order.
                let starts: Vec<usize> = runs.iter().map(|r| r[0].start).collect();
                assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
            }
        }
    }

    #[test]
    fn block_cyclic_deals_blocks_in_turn() {
        let dist = Distribution::BlockCyclic { block: 2 };
        assert_eq!(dist.rows_of(Rank(1), 11, 3), vec![2..4, 8..10]);
        assert_eq!(dist.rows_of(Rank(0), 11, 3), vec![0..2, 6..8]);
        assert_eq!(dist.rows_of(Rank(2), 11, 3), vec![4..6, 10..11]);
    }

    #[test]
    fn impossible_distributions_are_refused_by_name() {
        let err = Distribution::BlockRows.check(3, 4).unwrap_err();
        assert_eq!(err, DistError::MoreRanksThanRows { ranks: 4, rows: 3 });
        assert!(err.to_string().contains("4 ranks for 3 rows"), "{err}");
        assert_eq!(
            Distribution::BlockCyclic { block: 0 }.check(8, 2),
            Err(DistError::EmptyBlock)
        );
        assert_eq!(
            Distribution::OnRank(Rank(2)).check(8, 2),
            Err(DistError::NoSuchRank {
                rank: Rank(2),
                ranks: 2
            })
        );
        assert_eq!(
            Distribution::Replicated.check(8, 0),
            Err(DistError::Ranks { ranks: 0 })
        );
    }

    /// A row-wise call across three owners splits at the block edges; a call that cannot split
    /// is refused naming the ranks; a replicated write runs everywhere.
    #[test]
    fn owner_computes_splits_row_wise_calls_and_refuses_the_rest() {
        let dist = Distribution::BlockRows;
        let spans = owner_computes(&dist, 10, 3, 2..9, true).expect("row-wise");
        let got: Vec<(Option<Rank>, Range<usize>)> = spans
            .iter()
            .map(|s| (s.ranks.first(), s.rows.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(Rank(0)), 2..4),
                (Some(Rank(1)), 4..7),
                (Some(Rank(2)), 7..9)
            ]
        );
        let err = owner_computes(&dist, 10, 3, 2..9, false).unwrap_err();
        assert!(err.to_string().contains("rank 0, rank 1, rank 2"), "{err}");
        let whole = owner_computes(&Distribution::Replicated, 10, 3, 0..10, false).expect("one");
        assert_eq!(
            whole,
            vec![Span {
                ranks: RankSet::all(3),
                rows: 0..10
            }]
        );
        assert!(matches!(
            owner_computes(&dist, 10, 3, 5..11, true),
            Err(DistError::OutOfRange { end: 11, len: 10 })
        ));
    }

    /// The corner turn against a count element by element, and the (n−1)/n rule on even
    /// splits.
    #[test]
    fn corner_turn_bytes_match_an_element_count() {
        for (rows, cols, ranks) in [(8, 8, 2), (10, 7, 3), (16, 16, 4), (5, 9, 4)] {
            let bytes = corner_turn_bytes(rows, cols, 8, ranks);
            // Owners from the block lengths themselves: the first `n % ranks` one row longer.
            let owners = |n: usize| -> Vec<usize> {
                (0..ranks)
                    .flat_map(|r| std::iter::repeat_n(r, n / ranks + usize::from(r < n % ranks)))
                    .collect()
            };
            let (row_owner, col_owner) = (owners(rows), owners(cols));
            let mut count = vec![vec![0u64; ranks]; ranks];
            for &from in &row_owner {
                for &to in &col_owner {
                    if from != to {
                        count[from][to] += 8;
                    }
                }
            }
            assert_eq!(bytes, count, "{rows}x{cols} over {ranks}");
        }
        let total: u64 = corner_turn_bytes(16, 16, 1, 4).iter().flatten().sum();
        assert_eq!(total, 16 * 16 * 3 / 4);
    }
}
