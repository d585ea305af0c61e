//! The protocol over threads as ranks: every rank runs the same program on its own copy of a
//! distributed buffer and its own replica of the table, carries out each read's exchange over
//! the in-process transport, and compares digests after every call. Values must match a
//! sequential model, bytes per peer the plans (the minimum), and a rank that runs another
//! program makes every rank fail, naming the call.

use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestRng};
use rimms_dist::{
    corner_turn_bytes, execute, owner_computes, Distribution, Envelope, InProcess, Rank, RankTable,
    Transport, TransportError,
};
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    /// Rows `rows` get values from `seed`, computed by their owners.
    Write {
        rows: std::ops::Range<usize>,
        seed: u32,
    },
    /// `reader` reads `rows`.
    Read {
        reader: u16,
        rows: std::ops::Range<usize>,
    },
}

fn value(seed: u32, row: usize, col: usize) -> u32 {
    seed.wrapping_mul(2654435761) ^ (row as u32) << 12 ^ col as u32
}

fn program(seed: u64, ranks: usize, rows: usize, len: usize) -> Vec<Op> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let range = |rng: &mut TestRng| {
        let (a, b) = (
            (rng.next_u32() as usize) % (rows + 1),
            (rng.next_u32() as usize) % (rows + 1),
        );
        a.min(b)..a.max(b)
    };
    (0..len)
        .map(|_| {
            if rng.next_u32() % 3 == 0 {
                Op::Write {
                    rows: range(&mut rng),
                    seed: rng.next_u32(),
                }
            } else {
                Op::Read {
                    reader: (rng.next_u32() as usize % ranks) as u16,
                    rows: range(&mut rng),
                }
            }
        })
        .collect()
}

const COLS: usize = 16;
const ROW_BYTES: usize = COLS * 4;

/// What one rank saw: bytes it sent each peer, and what the plans said it would send.
struct Outcome {
    sent: Vec<u64>,
    planned: Vec<u64>,
}

/// Runs `ops` as rank `me` of `transport`'s job on a buffer of `rows` rows distributed by
/// `dist`, checking each read against the sequential model.
fn run_rank(
    transport: &InProcess,
    dist: Distribution,
    rows: usize,
    ops: &[Op],
) -> Result<Outcome, TransportError> {
    let (me, ranks) = (transport.rank(), transport.ranks());
    let mut table = RankTable::fresh(&dist, rows, 1, ranks).expect("table");
    let mut local = vec![0u8; rows * ROW_BYTES];
    let mut model = vec![0u32; rows * COLS];
    let mut planned = vec![0u64; ranks];
    let mut epoch = 0;
    for (k, op) in ops.iter().enumerate() {
        match op {
            Op::Write {
                rows: written,
                seed,
            } => {
                for span in
                    owner_computes(&dist, rows, ranks, written.clone(), true).expect("spans")
                {
                    for row in span.rows.clone() {
                        for col in 0..COLS {
                            let v = value(*seed, row, col);
                            model[row * COLS + col] = v;
                            if span.ranks.contains(me) {
                                let at = row * ROW_BYTES + col * 4;
                                local[at..at + 4].copy_from_slice(&v.to_le_bytes());
                            }
                        }
                    }
                    table.mark_written(span.ranks, span.rows).expect("mark");
                }
                epoch += 1;
            }
            Op::Read { reader, rows: read } => {
                let reader = Rank(*reader);
                let exchange = table.plan_read(reader, read.clone()).expect("plan");
                for send in exchange.sends.iter().filter(|s| s.from == me) {
                    planned[usize::from(send.to.0)] += (send.frags.len() * ROW_BYTES) as u64;
                }
                execute(transport, &exchange, 7, epoch, ROW_BYTES, &mut local)?;
                table.commit(&exchange);
                if reader == me {
                    for row in read.clone() {
                        for col in 0..COLS {
                            let at = row * ROW_BYTES + col * 4;
                            let got = u32::from_le_bytes(local[at..at + 4].try_into().expect("4"));
                            assert_eq!(
                                got,
                                model[row * COLS + col],
                                "{me} row {row} col {col} after op {k}"
                            );
                        }
                    }
                }
            }
        }
        transport.agree(table.digest(), &format!("op {k}: {op:?}"))?;
    }
    Ok(Outcome {
        sent: transport.sent_bytes(),
        planned,
    })
}

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
    let ops = vec![
        Op::Write {
            rows: 0..6,
            seed: 1,
        },
        Op::Write {
            rows: 4..8,
            seed: 2,
        },
        Op::Read {
            reader: 0,
            rows: 0..8,
        },
    ];
    let mut swapped = ops.clone();
    swapped.swap(0, 1);
    let outcomes = job(3, Duration::from_secs(10), |t| {
        let mine = if t.rank() == Rank(1) { &swapped } else { &ops };
        run_rank(t, Distribution::BlockRows, 8, mine)
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

/// A corner turn as one all-to-all: each rank packs, per destination, its rows' elements in
/// that destination's columns; the result is the transpose, and the bytes are the analytic
/// minimum.
#[test]
fn a_corner_turn_is_one_all_to_all_of_the_minimum_bytes() {
    let (rows, cols) = (10, 7);
    let m = |r: usize, c: usize| (r * 100 + c) as u32;
    for ranks in 1..=4 {
        let outcomes = job(ranks, Duration::from_secs(30), |t| {
            let me = t.rank();
            let my_rows = Distribution::BlockRows.rows_of(me, rows, ranks);
            let blocks: Vec<Vec<u8>> = (0..ranks)
                .map(|to| {
                    let cols_of = Distribution::BlockRows.rows_of(Rank(to as u16), cols, ranks);
                    let mut block = Vec::new();
                    for c in cols_of.into_iter().flatten() {
                        for r in my_rows.iter().cloned().flatten() {
                            block.extend_from_slice(&m(r, c).to_le_bytes());
                        }
                    }
                    block
                })
                .collect();
            let received = t.all_to_all(blocks)?;
            // Rows of the transpose this rank owns: its columns of the original, all rows.
            let my_cols = Distribution::BlockRows.rows_of(me, cols, ranks);
            let mut transposed = Vec::new();
            for c in my_cols.into_iter().flatten() {
                let mut row = Vec::new();
                for (from, block) in received.iter().enumerate() {
                    let from_rows = Distribution::BlockRows.rows_of(Rank(from as u16), rows, ranks);
                    let n: usize = from_rows.iter().map(|r| r.len()).sum();
                    let at = (c - Distribution::BlockRows.rows_of(me, cols, ranks)[0].start) * n;
                    for k in 0..n {
                        let i = (at + k) * 4;
                        row.push(u32::from_le_bytes(block[i..i + 4].try_into().expect("4")));
                    }
                }
                let expected: Vec<u32> = (0..rows).map(|r| m(r, c)).collect();
                assert_eq!(row, expected, "{me}, column {c}");
                transposed.push(row);
            }
            let expected_sent: Vec<u64> =
                corner_turn_bytes(rows, cols, 4, ranks)[usize::from(me.0)].clone();
            Ok(Outcome {
                sent: t.sent_bytes(),
                planned: expected_sent,
            })
        });
        for outcome in outcomes {
            let outcome = outcome.expect("rank");
            assert_eq!(outcome.sent, outcome.planned, "{ranks} ranks");
        }
    }
}
