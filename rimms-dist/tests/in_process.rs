//! The protocol over threads as ranks: every rank runs the same program on its own copy of a
//! distributed buffer and its own replica of the table, carries out each read's exchange over
//! the in-process transport, and compares digests after every call. Values must match a
//! sequential model, bytes per peer the plans (the minimum), and a rank that runs another
//! program makes every rank fail, naming the call.

mod common;

use common::{drifting_program, program, run_rank, Outcome};
use proptest::prelude::*;
use rimms_dist::{Distribution, Envelope, InProcess, Rank, Transport, TransportError};
use std::time::Duration;

/// Runs `program_of(rank)` on every rank of a job of `ranks` threads.
fn job(
    ranks: usize,
    timeout: Duration,
    work: impl Fn(&InProcess) -> Result<Outcome, TransportError> + Sync,
) -> Vec<Result<Outcome, TransportError>> {
    let world: Vec<InProcess> = InProcess::world(ranks)
        .into_iter()
        .map(|t| t.with_timeout(timeout))
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = world.iter().map(|t| s.spawn(|| work(t))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_programs_match_the_model_and_send_what_the_plans_say(
        ranks in 1usize..5,
        rows in 4usize..12,
        dist in prop_oneof![
            Just(Distribution::BlockRows),
            (1usize..3).prop_map(|block| Distribution::BlockCyclic { block }),
            Just(Distribution::Replicated),
            Just(Distribution::OnRank(Rank(0))),
        ],
        seed in any::<u64>(),
    ) {
        let ops = program(seed, ranks, rows, 24);
        for outcome in job(ranks, Duration::from_secs(30), |t| run_rank(t, dist, rows, &ops)) {
            let outcome = outcome.expect("no rank failed");
            prop_assert_eq!(outcome.sent, outcome.planned);
        }
    }
}

/// A rank that runs its writes in another order fails the agreement after the first call
/// where its table differs, and so does every other rank, naming that call.
#[test]
fn a_rank_that_drifts_fails_every_rank_naming_the_call() {
    let outcomes = job(3, Duration::from_secs(10), |t| {
        run_rank(t, Distribution::BlockRows, 8, &drifting_program(t.rank()))
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Err(TransportError::Drift { call, ranks }) => {
                assert!(call.starts_with("op 0:"), "rank {rank}: {call}");
                assert_eq!(ranks, vec![Rank(1)], "rank {rank}");
            }
            Err(other) => panic!("rank {rank}: {other}"),
            Ok(_) => panic!("rank {rank} did not see the drift"),
        }
    }
}

/// The sender far ahead: two messages arrive before their receives are posted, and are taken
/// in the other order.
#[test]
fn messages_that_arrive_early_wait_for_their_receive() {
    let mut world = InProcess::world(2);
    let envelope = |frags: std::ops::Range<usize>| Envelope {
        buffer: 1,
        frags,
        epoch: 3,
    };
    world[0]
        .send(Rank(1), envelope(0..1), &[1, 2])
        .expect("send");
    world[0]
        .send(Rank(1), envelope(1..2), &[3, 4])
        .expect("send");
    let mut second = [0u8; 2];
    world[1]
        .recv(Rank(0), &envelope(1..2), &mut second)
        .expect("recv");
    let mut first = [0u8; 2];
    world[1]
        .recv(Rank(0), &envelope(0..1), &mut first)
        .expect("recv");
    assert_eq!((first, second), ([1, 2], [3, 4]));
    assert_eq!(world[0].sent_bytes(), vec![0, 4]);
    // A message that never comes is an error naming it, not a hang.
    let lonely = world
        .pop()
        .expect("rank 1")
        .with_timeout(Duration::from_millis(50));
    let err = lonely
        .recv(Rank(0), &envelope(5..6), &mut first)
        .unwrap_err();
    assert!(
        err.to_string().contains("fragments 5..6 from rank 0"),
        "{err}"
    );
}
