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

/// The network as an attacker on it sees and changes it: what crosses is recorded, and the
/// byte at `flip` of each message rank 0 sends is flipped where asked.
struct OnTheWire {
    inner: rimms_dist::InProcess,
    seen: std::sync::Mutex<Vec<u8>>,
    flip: Option<usize>,
    /// Flip the first byte of each block an all-to-all sends.
    flip_blocks: bool,
    /// Send the first message again in place of each later one of its length (a replay).
    replay: bool,
}

impl rimms_dist::Transport for OnTheWire {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn ranks(&self) -> usize {
        self.inner.ranks()
    }
    fn send(
        &self,
        to: Rank,
        envelope: rimms_dist::Envelope,
        bytes: &[u8],
    ) -> Result<(), TransportError> {
        let mut bytes = bytes.to_vec();
        if let Some(at) = self.flip.filter(|&at| at < bytes.len()) {
            bytes[at] ^= 1;
        }
        let mut seen = self.seen.lock().expect("not poisoned");
        let len = bytes.len();
        if self.replay && seen.len() >= len {
            bytes.copy_from_slice(&seen[..len]);
        }
        seen.extend_from_slice(&bytes);
        drop(seen);
        self.inner.send(to, envelope, &bytes)
    }
    fn recv(
        &self,
        from: Rank,
        envelope: &rimms_dist::Envelope,
        into: &mut [u8],
    ) -> Result<(), TransportError> {
        self.inner.recv(from, envelope, into)
    }
    fn all_to_all_overlapped(
        &self,
        mut send: rimms_dist::Packed,
        recv: rimms_dist::Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(rimms_dist::Packed, rimms_dist::Packed), TransportError> {
        if self.flip_blocks {
            let starts: Vec<usize> = (0..self.ranks())
                .filter(|&to| send.counts()[to] > 0)
                .map(|to| send.offset(to))
                .collect();
            for at in starts {
                send.bytes_mut()[at] ^= 1;
            }
        }
        self.inner.all_to_all_overlapped(send, recv, meanwhile)
    }
    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        self.inner.agree(digest, call)
    }
    fn sent_bytes(&self) -> Vec<u64> {
        self.inner.sent_bytes()
    }
}

/// A secure buffer's rows cross the network as ciphertext (the plaintext's bytes appear
/// nowhere in what rank 0 sent), and a bit flipped on the way is an error on the reader naming
/// the fragment, with the rows still not there: never wrong values.
#[test]
fn secure_rows_cross_as_ciphertext_and_a_flipped_bit_is_an_error_not_bytes() {
    use rimms_runtime::{Error, Runtime, SecureKey};
    let (rows, cols) = (4, 256);
    // A recognisable plaintext: 1024-byte rows of one repeated marker.
    let marker = f32::from_bits(0x5EC2_E7A1);
    for flip in [None, Some(1500)] {
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = rimms_dist::InProcess::world(2)
                .into_iter()
                .map(|inner| {
                    s.spawn(move || {
                        let wire = OnTheWire {
                            inner: inner.with_timeout(Duration::from_secs(30)),
                            seen: Default::default(),
                            flip,
                            flip_blocks: false,
                            replay: false,
                        };
                        let rt = Runtime::new().expect("runtime");
                        let cl = Cluster::new(rt, &wire);
                        cl.check_drift(false);
                        let key = SecureKey::new([3u8; 32]);
                        let mut a = cl
                            .alloc_secure::<f32>(rows, cols, Distribution::OnRank(Rank(0)), &key)
                            .expect("alloc");
                        cl.compute(&mut a, 0..rows, false, "fill", |_, _, mut v| {
                            v.host_write()?.fill(marker);
                            Ok(())
                        })
                        .expect("fill");
                        let fetched = cl.fetch(&mut a, |_| 0..rows);
                        let read = cl.read(&a, 0..rows);
                        let seen = wire.seen.lock().expect("not poisoned").clone();
                        (fetched, read, seen)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank"))
                .collect()
        });
        let (_, _, sent) = &outcomes[0];
        assert!(
            sent.len() > rows * cols * 4,
            "{flip:?}: rank 0 sent the rows"
        );
        let pattern = marker.to_le_bytes();
        assert!(
            !sent.windows(4).any(|w| w == pattern),
            "{flip:?}: plaintext on the wire"
        );
        let (fetched, read, _) = &outcomes[1];
        match flip {
            None => {
                fetched.as_ref().expect("the fetch");
                let values = read.as_ref().expect("the rows");
                assert!(values.iter().all(|&v| v == marker));
            }
            Some(at) => {
                // Byte 1500 lies in the second 1024-byte fragment: fragment 1.
                match fetched {
                    Err(ClusterError::Runtime { source, .. }) => match &**source {
                        Error::Tampered { fragment, .. } => assert_eq!(*fragment, at / 1024),
                        other => panic!("not Tampered: {other}"),
                    },
                    other => panic!("a flipped bit was taken: {other:?}"),
                }
                assert!(
                    matches!(read, Err(ClusterError::NotHere { .. })),
                    "{read:?}"
                );
            }
        }
    }
}

/// A corner turn of secure buffers whose blocks are altered on the way fails on the ranks
/// that receive them, naming the altered block, and leaves their rows of the transpose as
/// they were: the diagonal waits until every block has opened.
#[test]
fn a_sealed_corner_turn_altered_on_the_way_fails_and_changes_nothing() {
    use rimms_runtime::{Error, Runtime, SecureKey};
    let (rows, cols) = (4, 256);
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = rimms_dist::InProcess::world(2)
            .into_iter()
            .map(|inner| {
                s.spawn(move || {
                    let wire = OnTheWire {
                        inner: inner.with_timeout(Duration::from_secs(30)),
                        seen: Default::default(),
                        flip: None,
                        flip_blocks: true,
                        replay: false,
                    };
                    let cl = Cluster::new(Runtime::new().expect("runtime"), &wire);
                    cl.check_drift(false);
                    let key = SecureKey::new([5u8; 32]);
                    let block = Distribution::BlockRows;
                    let mut a = cl.alloc_secure::<f32>(rows, cols, block, &key).expect("a");
                    let mut t = cl.alloc_secure::<f32>(cols, rows, block, &key).expect("t");
                    cl.compute(&mut t, 0..cols, true, "before", |_, _, mut v| {
                        v.host_write()?.fill(-1.0);
                        Ok(())
                    })
                    .expect("fill t");
                    let turned = cl.corner_turn(&mut a, &mut t);
                    let mine = if cl.rank() == Rank(0) {
                        0..128
                    } else {
                        128..256
                    };
                    let kept = cl
                        .here(&t, mine)
                        .expect("own rows")
                        .host()
                        .expect("host")
                        .to_vec();
                    (turned, kept)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    });
    for (rank, (turned, kept)) in outcomes.into_iter().enumerate() {
        match turned {
            Err(ClusterError::Runtime { source, .. }) => match *source {
                // Rank `from`'s block to `to` is numbered from · ranks + to.
                Error::Tampered { fragment, .. } => assert_eq!(fragment, (1 - rank) * 2 + rank),
                other => panic!("rank {rank}: not Tampered: {other}"),
            },
            other => panic!("rank {rank}: an altered block was taken: {other:?}"),
        }
        assert!(
            kept.iter().all(|&v| v == -1.0),
            "rank {rank}: its rows changed"
        );
    }
}

/// A sealed run recorded in one exchange and sent again in a later one (after the rows were
/// written anew) does not open: the seals bind the buffer's write epoch, so the reader gets an
/// error, never the old values.
#[test]
fn a_sealed_run_replayed_from_an_earlier_write_is_an_error_not_old_values() {
    use rimms_runtime::{Error, Runtime, SecureKey};
    let (rows, cols) = (2, 256);
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = rimms_dist::InProcess::world(2)
            .into_iter()
            .map(|inner| {
                s.spawn(move || {
                    let wire = OnTheWire {
                        inner: inner.with_timeout(Duration::from_secs(30)),
                        seen: Default::default(),
                        flip: None,
                        flip_blocks: false,
                        replay: true,
                    };
                    let cl = Cluster::new(Runtime::new().expect("runtime"), &wire);
                    cl.check_drift(false);
                    let key = SecureKey::new([9u8; 32]);
                    let on_0 = Distribution::OnRank(Rank(0));
                    let mut a = cl.alloc_secure::<f32>(rows, cols, on_0, &key).expect("a");
                    let write = |a: &mut rimms_dist::DistData<f32>, v: f32| {
                        cl.compute(a, 0..rows, false, "write", |_, _, mut view| {
                            view.host_write()?.fill(v);
                            Ok(())
                        })
                    };
                    write(&mut a, 1.0).expect("first write");
                    cl.fetch(&mut a, |_| 0..rows).expect("first fetch");
                    write(&mut a, 2.0).expect("second write");
                    let again = cl.fetch(&mut a, |_| 0..rows);
                    let read = cl.read(&a, 0..rows);
                    (again, read)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    });
    let (again, read) = &outcomes[1];
    match again {
        Err(ClusterError::Runtime { source, .. }) => {
            assert!(matches!(**source, Error::Tampered { .. }), "{source}")
        }
        other => panic!(
            "a replayed run was taken: {other:?}, then read {:?}",
            read.as_ref().map(|v| v.first())
        ),
    }
    assert!(
        matches!(read, Err(ClusterError::NotHere { .. })),
        "{read:?}"
    );
}
