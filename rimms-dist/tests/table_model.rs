//! Random distributed programs on 1–6 ranks against a plain model that keeps, per fragment,
//! the newest version and the version each rank holds. Every read must leave the reader with
//! the newest bytes, move exactly the fragments it lacked (the minimum), each from a rank that
//! held the newest version, in coalesced runs; two tables fed the same calls agree.

use proptest::prelude::*;
use rimms_dist::{Distribution, Rank, RankSet, RankTable};

#[derive(Clone, Debug)]
enum Op {
    Read {
        rank: usize,
        a: usize,
        b: usize,
    },
    /// `rank` None: every rank writes (a replicated computation).
    Write {
        rank: Option<usize>,
        a: usize,
        b: usize,
    },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..64, 0usize..1000, 0usize..1000).prop_map(|(rank, a, b)| Op::Read { rank, a, b }),
        3 => (proptest::option::weighted(0.8, 0usize..64), 0usize..1000, 0usize..1000)
            .prop_map(|(rank, a, b)| Op::Write { rank, a, b }),
        1 => Just(Op::Flush),
    ]
}

fn dist() -> impl Strategy<Value = Distribution> {
    prop_oneof![
        Just(Distribution::BlockRows),
        (1usize..4).prop_map(|block| Distribution::BlockCyclic { block }),
        Just(Distribution::Replicated),
        (0u16..6).prop_map(|r| Distribution::OnRank(Rank(r))),
    ]
}

/// The plain model: the newest version of each fragment, and each rank's version of it.
struct Model {
    newest: Vec<u64>,
    held: Vec<Vec<u64>>,
}

const STALE: u64 = u64::MAX;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn reads_move_exactly_what_the_reader_lacks(
        ranks in 1usize..7,
        rows in 6usize..16,
        frags_per_row in 1usize..3,
        dist in dist(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let dist = match dist {
            Distribution::OnRank(r) => Distribution::OnRank(Rank(r.0 % ranks as u16)),
            d => d,
        };
        let mut table = RankTable::fresh(&dist, rows, frags_per_row, ranks).expect("table");
        let mut twin = table.clone();
        let len = rows * frags_per_row;
        let mut model = Model { newest: vec![0; len], held: vec![vec![0; len]; ranks] };
        let mut version = 0;
        for op in ops {
            match op {
                Op::Read { rank, a, b } => {
                    let reader = rank % ranks;
                    let (a, b) = (a % (len + 1), b % (len + 1));
                    let range = a.min(b)..a.max(b);
                    let exchange = table.plan_read(Rank(reader as u16), range.clone()).expect("plan");
                    let lacked: Vec<usize> = range
                        .clone()
                        .filter(|&f| model.held[reader][f] != model.newest[f])
                        .collect();
                    let sent: Vec<usize> = exchange.sends.iter().flat_map(|s| s.frags.clone()).collect();
                    prop_assert_eq!(&sent, &lacked, "the fewest fragments, in order");
                    for pair in exchange.sends.windows(2) {
                        prop_assert!(
                            !(pair[0].from == pair[1].from && pair[0].frags.end == pair[1].frags.start),
                            "runs coalesced: {:?}", exchange.sends
                        );
                    }
                    for send in &exchange.sends {
                        prop_assert_eq!(send.to, Rank(reader as u16));
                        for f in send.frags.clone() {
                            prop_assert_eq!(model.held[send.from.0 as usize][f], model.newest[f], "a stale source");
                            model.held[reader][f] = model.newest[f];
                        }
                    }
                    table.commit(&exchange);
                    twin.commit(&exchange);
                    prop_assert!(table.plan_read(Rank(reader as u16), range).expect("plan").is_empty(),
                        "a second read of unchanged data sends nothing");
                }
                Op::Write { rank, a, b } => {
                    let (a, b) = (a % (len + 1), b % (len + 1));
                    let range = a.min(b)..a.max(b);
                    let writers = match rank {
                        Some(r) => RankSet::only(Rank((r % ranks) as u16)),
                        None => RankSet::all(ranks),
                    };
                    version += 1;
                    for f in range.clone() {
                        model.newest[f] = version;
                        for r in 0..ranks {
                            model.held[r][f] = if writers.contains(Rank(r as u16)) { version } else { STALE };
                        }
                    }
                    table.mark_written(writers, range.clone()).expect("write");
                    twin.mark_written(writers, range).expect("write");
                }
                Op::Flush => {
                    // The owners that hold the newest bytes keep them, everyone else forgets;
                    // where no owner holds them, nothing changes.
                    for f in 0..len {
                        let owners = table.owners(f).expect("owners");
                        let owner_holds = (0..ranks)
                            .any(|r| owners.contains(Rank(r as u16)) && model.held[r][f] == model.newest[f]);
                        if owner_holds {
                            for r in 0..ranks {
                                if !owners.contains(Rank(r as u16)) {
                                    model.held[r][f] = STALE;
                                }
                            }
                        }
                    }
                    table.flush();
                    twin.flush();
                }
            }
            for f in 0..len {
                let valid = table.valid(f).expect("valid");
                for r in 0..ranks {
                    prop_assert_eq!(valid.contains(Rank(r as u16)), model.held[r][f] == model.newest[f],
                        "fragment {} on rank {}", f, r);
                }
            }
            prop_assert_eq!(table.digest(), twin.digest());
        }
    }
}

/// Drift: two ranks that applied the same two writes in different orders hold different
/// tables, and the digests say so.
#[test]
fn calls_in_another_order_change_the_digest() {
    let fresh = RankTable::fresh(&Distribution::BlockRows, 8, 1, 2).expect("table");
    let (mut a, mut b) = (fresh.clone(), fresh);
    a.mark_written(RankSet::only(Rank(0)), 0..6).expect("w");
    a.mark_written(RankSet::only(Rank(1)), 4..8).expect("w");
    b.mark_written(RankSet::only(Rank(1)), 4..8).expect("w");
    b.mark_written(RankSet::only(Rank(0)), 0..6).expect("w");
    assert_ne!(a, b);
    assert_ne!(a.digest(), b.digest());
}

/// A replicated read sends once to each rank that lacks it, from the owner.
#[test]
fn a_replicated_read_sends_once_to_each_rank_that_lacks_it() {
    let mut table = RankTable::fresh(&Distribution::OnRank(Rank(2)), 4, 2, 4).expect("table");
    table.mark_written(RankSet::only(Rank(2)), 0..8).expect("w");
    for reader in [0u16, 1, 3] {
        let exchange = table.plan_read(Rank(reader), 0..8).expect("plan");
        assert_eq!(exchange.sends.len(), 1, "one coalesced message");
        assert_eq!(exchange.fragments(Rank(2), Rank(reader)), 8);
        table.commit(&exchange);
    }
    assert!(table.plan_read(Rank(0), 0..8).expect("plan").is_empty());
    table.flush();
    assert_eq!(
        table
            .plan_read(Rank(0), 0..8)
            .expect("plan")
            .fragments(Rank(2), Rank(0)),
        8,
        "with the cache flushed the read sends again"
    );
}

#[test]
fn bad_ranks_and_ranges_are_errors() {
    let table = RankTable::fresh(&Distribution::BlockRows, 4, 1, 2).expect("table");
    assert!(table.plan_read(Rank(2), 0..1).is_err());
    assert!(table.plan_read(Rank(0), 0..5).is_err());
    let mut t = table.clone();
    assert!(t.mark_written(RankSet::only(Rank(5)), 0..1).is_err());
    assert_eq!(t, table, "a refused write changes nothing");
}
