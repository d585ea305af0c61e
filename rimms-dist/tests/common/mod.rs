//! What every transport must carry out identically: a random distributed program, run as one
//! rank on its own copy of a buffer and its own replica of the table, each read checked against
//! a sequential model and each call followed by the digest agreement.

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use rimms_dist::{
    execute, owner_computes, Distribution, Rank, RankTable, Transport, TransportError,
};

#[derive(Clone, Debug)]
pub enum Op {
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

pub fn program(seed: u64, ranks: usize, rows: usize, len: usize) -> Vec<Op> {
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

pub const COLS: usize = 16;
pub const ROW_BYTES: usize = COLS * 4;

/// What one rank saw: bytes it sent each peer, and what the plans said it would send.
pub struct Outcome {
    pub sent: Vec<u64>,
    pub planned: Vec<u64>,
}

/// Runs `ops` as rank `me` of `transport`'s job on a buffer of `rows` rows distributed by
/// `dist`, checking each read against the sequential model.
pub fn run_rank(
    transport: &dyn Transport,
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
    // A transport may have carried other programs before: this one's bytes are the difference.
    let before = transport.sent_bytes();
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
        sent: transport
            .sent_bytes()
            .iter()
            .zip(&before)
            .map(|(after, before)| after - before)
            .collect(),
        planned,
    })
}

/// Two overlapping writes and a read, with the writes in the other order on rank 1: the
/// tables part after the first call, which every rank's agreement must report.
pub fn drifting_program(rank: Rank) -> Vec<Op> {
    let mut ops = vec![
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
    if rank == Rank(1) {
        ops.swap(0, 1);
    }
    ops
}
