//! Distributed buffers on real runtimes, ranks as threads: the programs every transport runs
//! (`scenarios/`), at 1 to 4 ranks, and the bad calls that only a job of threads can stage
//! cheaply (a rank skipping an allocation leaves its collectives out of step), each an error
//! on every rank within a bounded time.

mod scenarios;

use proptest::strategy::Strategy as _;
use rimms_dist::{Cluster, ClusterError, DistError, Distribution, Rank, TransportError};
use std::time::Duration;

/// Runs `work` as every rank of a job of `ranks` threads, each with its own CPU runtime.
fn job<T: Send>(
    ranks: usize,
    timeout: Duration,
    work: impl Fn(&Cluster<'_>) -> Result<T, ClusterError> + Sync,
) -> Vec<Result<T, ClusterError>> {
    rimms_dist::on_threads(ranks, timeout, work).expect("every rank's runtime starts")
}

#[test]
fn every_program_holds_at_one_to_four_ranks() {
    let mut failures = Vec::new();
    for ranks in 1..=4 {
        for (name, program) in scenarios::PROGRAMS {
            let outcomes = job(ranks, Duration::from_secs(60), |cl| Ok(program(cl)));
            for (rank, outcome) in outcomes.into_iter().enumerate() {
                if let Ok(Err(why)) | Err(why) = outcome.map_err(|e| e.to_string()) {
                    failures.push(format!("{name}, rank {rank} of {ranks}: {why}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Random programs at 2–4 ranks, against the sequential model: values and bytes per peer.
    #[test]
    fn random_programs_match_the_model_in_values_and_bytes(
        ranks in 2usize..5,
        rows in 4usize..12,
        cols in proptest::prop_oneof![proptest::strategy::Just(16usize), proptest::strategy::Just(1536)],
        dist in proptest::prop_oneof![
            proptest::strategy::Just(Distribution::BlockRows),
            (1usize..3).prop_map(|block| Distribution::BlockCyclic { block }),
            proptest::strategy::Just(Distribution::Replicated),
            proptest::strategy::Just(Distribution::OnRank(Rank(1))),
        ],
        seed in proptest::prelude::any::<u64>(),
    ) {
        let outcomes = job(ranks, Duration::from_secs(60), |cl| {
            Ok(scenarios::random_program(cl, seed, dist, rows, cols))
        });
        for (rank, outcome) in outcomes.into_iter().enumerate() {
            let outcome = outcome.map_err(|e| e.to_string()).and_then(|o| o);
            proptest::prop_assert!(outcome.is_ok(), "rank {}: {:?}", rank, outcome);
        }
    }
}

#[test]
fn rows_a_rank_does_not_hold_are_an_error_not_stale_bytes() {
    let outcomes = job(2, Duration::from_secs(30), |cl| {
        let mut a = cl.alloc::<f32>(4, 8, Distribution::BlockRows)?;
        cl.compute(&mut a, 0..4, true, "fill", |_, _, mut view| {
            view.host_write()?.fill(1.0);
            Ok(())
        })?;
        let theirs = if cl.rank() == Rank(0) { 2..4 } else { 0..2 };
        cl.here(&a, theirs).map(|_| ())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Err(ClusterError::NotHere { rank: r, .. }) => assert_eq!(r, Rank(rank as u16)),
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn a_buffer_allocated_on_only_some_ranks_fails_every_rank() {
    let outcomes = job(3, Duration::from_secs(10), |cl| {
        cl.alloc::<f32>(6, 4, Distribution::BlockRows)?;
        if cl.rank() != Rank(2) {
            cl.alloc::<f32>(6, 8, Distribution::BlockRows)?;
        }
        cl.alloc::<f32>(6, 4, Distribution::Replicated).map(|_| ())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let err = outcome.expect_err("every rank fails");
        assert!(
            matches!(
                err,
                ClusterError::Transport {
                    source: TransportError::Drift { .. },
                    ..
                }
            ),
            "rank {rank}: {err}"
        );
        assert!(
            err.to_string()
                .contains("distributed call 1 (alloc buffer 1"),
            "rank {rank}: {err}"
        );
    }
}

fn ok<T>(outcomes: Vec<Result<T, ClusterError>>) -> Vec<T> {
    outcomes
        .into_iter()
        .enumerate()
        .map(|(rank, o)| o.unwrap_or_else(|e| panic!("rank {rank}: {e}")))
        .collect()
}

#[test]
fn more_ranks_than_rows_and_writes_across_owners_are_refused_on_every_rank() {
    let outcomes = job(4, Duration::from_secs(10), |cl| {
        let short = cl.alloc::<f32>(3, 4, Distribution::BlockRows).map(|_| ());
        let mut a = cl.alloc::<f32>(8, 4, Distribution::BlockRows)?;
        let across = cl.compute(&mut a, 1..5, false, "gemm", |_, _, _| Ok(()));
        Ok((short, across))
    });
    for (rank, outcome) in ok(outcomes).into_iter().enumerate() {
        match outcome {
            (
                Err(ClusterError::Dist {
                    source: DistError::MoreRanksThanRows { ranks: 4, rows: 3 },
                    ..
                }),
                Err(ClusterError::Dist {
                    source: DistError::SpansRanks { ranks },
                    call,
                }),
            ) => {
                assert_eq!(ranks, vec![Rank(0), Rank(1), Rank(2)], "rank {rank}");
                assert!(call.contains("gemm on rows 1..5"), "rank {rank}: {call}");
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}
