//! What a careless or hostile program does to `rimms-dist`, on the in-process transport: each
//! test stages one sequence of SPMD calls that a correct program may make (or one bad argument
//! a user may pass) and asserts that it gives the right values or an error on every rank,
//! never a lost message, a panic in library code or an unbounded wait.

use rimms_dist::{
    Cluster, ClusterError, DistError, Distribution, Envelope, Exchange, InProcess, Rank, RankSet,
    RankTable, Send, Transport, TransportError,
};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `work` on every rank of a job of `ranks` threads; the whole job must finish within
/// `limit`, so a hang fails the test instead of blocking it.
fn job<T: std::marker::Send + 'static>(
    ranks: usize,
    timeout: Duration,
    limit: Duration,
    work: impl Fn(&Cluster<'_>) -> Result<T, ClusterError> + Sync + std::marker::Send + 'static,
) -> Vec<Result<T, String>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcomes =
            rimms_dist::on_threads(ranks, timeout, |cl| work(cl).map_err(|e| e.to_string()))
                .expect("every rank's runtime starts");
        let _ = tx.send(outcomes);
    });
    rx.recv_timeout(limit)
        .expect("the job finished in bounded time")
}

/// Two fetches of the same rows by the same reader with only a flush between them carry the
/// same envelope (buffer, fragments, epoch). With drift checks off, the sender may post both
/// before the reader has taken the first: a reader busy waiting for a third rank files both
/// among its early arrivals. The second must not overwrite the first, or the reader's second
/// receive waits for a message already swallowed and times out.
#[test]
fn two_messages_with_one_envelope_both_arrive() {
    let outcomes = job(3, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        cl.check_drift(false);
        let mut a = cl.alloc::<u32>(3, 4, Distribution::BlockRows)?;
        let mut b = cl.alloc::<u32>(3, 4, Distribution::BlockRows)?;
        // Row 0 of `a` written by rank 0, so reading it elsewhere moves bytes.
        cl.compute(&mut a, 0..1, true, "fill a", |_, _, mut view| {
            view.host_write()?.fill(7);
            Ok(())
        })?;
        // Rank 2 is slow to write row 2 of `b`, which rank 1 then waits for.
        cl.compute(&mut b, 2..3, true, "slow fill b", |_, _, mut view| {
            std::thread::sleep(Duration::from_millis(500));
            view.host_write()?.fill(9);
            Ok(())
        })?;
        cl.fetch(&mut b, |r| if r == Rank(1) { 2..3 } else { 0..0 })?;
        // Meanwhile rank 0 sends rank 1 row 0 of `a` twice, under one envelope.
        cl.fetch(&mut a, |r| if r == Rank(1) { 0..1 } else { 0..0 })?;
        cl.flush(&mut a)?;
        cl.fetch(&mut a, |r| if r == Rank(1) { 0..1 } else { 0..0 })?;
        if cl.rank() == Rank(1) {
            assert_eq!(cl.read(&a, 0..1)?, vec![7; 4]);
            assert_eq!(cl.read(&b, 2..3)?, vec![9; 4]);
        }
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// The same at the transport: two messages from one rank under one envelope are two
/// messages, received in the order sent, even when both arrived before either receive.
#[test]
fn in_process_keeps_every_early_message_of_one_envelope() {
    let mut world = InProcess::world(2).into_iter();
    let (zero, one) = (world.next().unwrap(), world.next().unwrap());
    let (zero, one) = (
        zero.with_timeout(Duration::from_secs(2)),
        one.with_timeout(Duration::from_secs(2)),
    );
    let envelope = Envelope {
        buffer: 3,
        frags: 0..1,
        epoch: 1,
    };
    let other = Envelope {
        buffer: 4,
        ..envelope.clone()
    };
    zero.send(Rank(1), envelope.clone(), &[1]).unwrap();
    zero.send(Rank(1), envelope.clone(), &[2]).unwrap();
    zero.send(Rank(1), other.clone(), &[3]).unwrap();
    let mut byte = [0u8];
    // Receiving `other` first files both messages of `envelope` as early arrivals.
    one.recv(Rank(0), &other, &mut byte).unwrap();
    assert_eq!(byte, [3]);
    one.recv(Rank(0), &envelope, &mut byte).unwrap();
    assert_eq!(byte, [1]);
    one.recv(Rank(0), &envelope, &mut byte)
        .expect("the second message");
    assert_eq!(byte, [2]);
}

/// Two same-shaped buffers of different element types allocated in another order on another
/// rank: the allocation agreement must catch it (the element type is part of what every rank
/// must allocate alike), not a later fetch as a length error on one rank and a timeout on the
/// other, or, for types of one size, bytes silently reinterpreted.
#[test]
fn buffers_of_other_element_types_in_another_order_are_drift_at_alloc() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        if cl.rank() == Rank(0) {
            cl.alloc::<f32>(4, 4, Distribution::BlockRows)?;
            cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
        } else {
            cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
            cl.alloc::<f32>(4, 4, Distribution::BlockRows)?;
        }
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let err = outcome.expect_err("every rank fails at the first allocation");
        assert!(err.contains("drifted apart"), "rank {rank}: {err}");
        assert!(
            err.contains("distributed call 0 (alloc buffer 0"),
            "rank {rank}: {err}"
        );
    }
}

/// A fetch of a range far past the buffer, of rows several fragments long: refused on every
/// rank as out of range, never an arithmetic overflow in the library.
#[test]
fn a_fetch_far_out_of_range_is_refused_not_a_panic() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        // 4096 f32 per row: 4 fragments of 4 KiB per row.
        let mut a = cl.alloc::<f32>(2, 4096, Distribution::BlockRows)?;
        let far = usize::MAX / 2 + 1;
        match cl.fetch(&mut a, |_| 0..far) {
            Err(ClusterError::Dist {
                source: DistError::OutOfRange { .. },
                ..
            }) => Ok(()),
            other => panic!("{other:?}"),
        }
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// `valid_on` of a row past the buffer is `None`, not an overflow.
#[test]
fn valid_on_a_row_far_past_the_buffer_is_none() {
    let outcomes = job(1, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let a = cl.alloc::<f32>(2, 4096, Distribution::BlockRows)?;
        assert_eq!(a.valid_on(1), Some(RankSet::all(1)));
        assert_eq!(a.valid_on(2), None);
        assert_eq!(a.valid_on(usize::MAX), None);
        Ok(())
    });
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
}

/// A gather to a rank outside the job is refused on every rank, naming it, rather than
/// succeeding with nothing moved.
#[test]
fn a_gather_to_a_rank_outside_the_job_is_refused() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<f32>(4, 4, Distribution::BlockRows)?;
        match cl.gather(&mut a, Rank(5)) {
            Err(ClusterError::Dist {
                source: DistError::NoSuchRank { rank: Rank(5), .. },
                ..
            }) => Ok(()),
            other => panic!("{other:?}"),
        }
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// Rank sets of ranks past the 64 a set holds: no shift overflow, and never another rank.
#[test]
fn rank_sets_ignore_ranks_past_the_last() {
    assert_eq!(RankSet::only(Rank(64)), RankSet::EMPTY);
    assert!(!RankSet::all(64).contains(Rank(70)));
    assert_eq!(
        RankSet::only(Rank(1)).with(Rank(65)),
        RankSet::only(Rank(1))
    );
    assert!(RankSet::only(Rank(63)).contains(Rank(63)));
}

/// The public table refuses writes out of range or by nobody instead of panicking or leaving
/// fragments valid nowhere (which would plan a send from a rank without the bytes).
#[test]
fn the_table_refuses_bad_writes_and_commits() {
    let mut table = RankTable::fresh(&Distribution::BlockRows, 4, 1, 2).unwrap();
    assert!(table.mark_written(RankSet::EMPTY, 0..100).is_err());
    assert!(table.mark_written(RankSet::only(Rank(0)), 2..100).is_err());
    // A write by nobody leaves the fragment valid where it was, never valid nowhere.
    let _ = table.mark_written(RankSet::EMPTY, 0..1);
    assert_eq!(table.valid(0), Some(RankSet::all(2)));
    table.mark_written(RankSet::only(Rank(1)), 0..1).unwrap();
    // A commit of sends outside the table or to ranks outside the job changes nothing.
    table.commit(&Exchange {
        sends: vec![
            Send {
                from: Rank(1),
                to: Rank(0),
                frags: 3..100,
            },
            Send {
                from: Rank(1),
                to: Rank(9),
                frags: 0..1,
            },
        ],
    });
    assert_eq!(table.valid(0), Some(RankSet::only(Rank(1))));
    assert_eq!(table.valid(3), Some(RankSet::all(2)));
}

/// Zero-length rows and zero-row buffers: every call is a no-op or an error, never a panic.
#[test]
fn zero_length_buffers_are_harmless() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut empty_rows = cl.alloc::<f32>(4, 0, Distribution::BlockRows)?;
        cl.compute(&mut empty_rows, 0..4, true, "nothing", |_, _, _| Ok(()))?;
        cl.fetch(&mut empty_rows, |_| 0..4)?;
        assert!(cl.read(&empty_rows, 0..4)?.is_empty());
        let mut no_rows = cl.alloc::<f32>(0, 4, Distribution::BlockCyclic { block: 1 })?;
        cl.fetch(&mut no_rows, |_| 0..0)?;
        cl.flush(&mut no_rows)?;
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// A write on rank 1 through an explicit placement leaves the owner's copy stale in every
/// rank's table: the owner's next read is refused until fetched, and the fetch brings rank 1's
/// bytes, not the owner's old ones.
#[test]
fn a_placement_elsewhere_makes_the_owners_copy_stale() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
        cl.compute(&mut a, 0..2, true, "owner", |_, _, mut v| {
            v.host_write()?.fill(1);
            Ok(())
        })?;
        cl.compute_on(Rank(1), &mut a, 0..2, "elsewhere", |_, _, mut v| {
            let host = v.host_mut()?;
            assert_eq!(host[0], 1, "the placement first receives the newest bytes");
            host.fill(2);
            Ok(())
        })?;
        if cl.rank() == Rank(0) {
            assert!(matches!(
                cl.here(&a, 0..2),
                Err(ClusterError::NotHere { .. })
            ));
        }
        cl.fetch(&mut a, |_| 0..2)?;
        assert_eq!(cl.read(&a, 0..2)?, vec![2; 8]);
        // An invalid explicit rank is refused on every rank.
        let bad = cl.compute_on(Rank(7), &mut a, 0..2, "nowhere", |_, _, _| Ok(()));
        assert!(
            matches!(
                bad,
                Err(ClusterError::Dist {
                    source: DistError::NoSuchRank { .. },
                    ..
                })
            ),
            "{bad:?}"
        );
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// Ranks whose calls differ (a fetch on one, a flush on the other) fail in bounded time on
/// both, each naming its call.
#[test]
fn mismatched_calls_fail_every_rank_in_bounded_time() {
    let outcomes = job(2, Duration::from_secs(2), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
        cl.compute(&mut a, 0..4, true, "fill", |_, _, mut v| {
            v.host_write()?.fill(3);
            Ok(())
        })?;
        if cl.rank() == Rank(0) {
            cl.fetch(&mut a, |_| 0..4)
        } else {
            cl.flush(&mut a)
        }
    });
    let errors: Vec<String> = outcomes
        .into_iter()
        .map(|o| o.expect_err("every rank fails"))
        .collect();
    assert!(errors[0].contains("fetch rows of buffer 0"), "{errors:?}");
    assert!(errors[1].contains("flush buffer 0"), "{errors:?}");
}

/// A transport whose all-to-all is handed blocks for fewer ranks than the job has fails with
/// an error, not a panic.
#[test]
fn an_all_to_all_with_too_few_blocks_is_an_error() {
    let world: Vec<InProcess> = InProcess::world(2)
        .into_iter()
        .map(|t| t.with_timeout(Duration::from_millis(300)))
        .collect();
    let got = std::thread::scope(|s| {
        let handles: Vec<_> = world
            .iter()
            .map(|t| {
                s.spawn(move || {
                    t.all_to_all(
                        rimms_dist::Packed::zeroed(vec![0, 0]),
                        rimms_dist::Packed::zeroed(vec![0]),
                    )
                    .map(|_| ())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "panicked"))
            .collect::<Vec<_>>()
    });
    for (rank, outcome) in got.into_iter().enumerate() {
        let outcome = outcome.unwrap_or_else(|p| panic!("rank {rank} {p}"));
        assert!(
            matches!(outcome, Err(TransportError::BlockLength { .. })),
            "rank {rank}: {outcome:?}"
        );
    }
}

/// Two programs one after the other on one transport, each with its own `Cluster` (as the MPI
/// launcher runs its programs on one handle). The first drifts: rank 0 fetches rows to rank 1
/// while rank 1 flushes, so rank 0's message is never taken. The second program's buffer 0 at
/// the same epoch must not receive that stale message in place of the one its own fetch sends.
#[test]
fn a_message_left_by_an_earlier_program_is_not_taken_by_a_later_one() {
    let world: Vec<InProcess> = InProcess::world(2)
        .into_iter()
        .map(|t| t.with_timeout(Duration::from_secs(3)))
        .collect();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let got: Vec<Result<Vec<u32>, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = world
                .iter()
                .map(|t| {
                    s.spawn(move || {
                        let program = |fill: u32, drift: bool| -> Result<Vec<u32>, ClusterError> {
                            let rt = rimms_runtime::Runtime::new().expect("a runtime");
                            let cl = Cluster::new(rt, t);
                            cl.check_drift(true);
                            let mut a = cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
                            cl.compute(&mut a, 0..2, true, "fill", |_, _, mut v| {
                                v.host_write()?.fill(fill);
                                Ok(())
                            })?;
                            let to_one = |r: Rank| if r == Rank(1) { 0..2 } else { 0..0 };
                            if drift && cl.rank() == Rank(1) {
                                cl.flush(&mut a)?;
                            } else {
                                cl.fetch(&mut a, to_one)?;
                            }
                            cl.read(&a, 0..2)
                        };
                        let first = program(111, true);
                        assert!(first.is_err(), "the first program drifts: {first:?}");
                        program(222, false).map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let _ = tx.send(got);
    });
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("bounded time");
    for (rank, outcome) in got.into_iter().enumerate() {
        assert_eq!(outcome, Ok(vec![222; 8]), "rank {rank}");
    }
}

/// Empty row ranges in every call that takes one, on rows of another rank: no-ops, never a
/// panic, and every rank agrees.
#[test]
fn empty_ranges_everywhere_are_no_ops() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<u32>(4, 4, Distribution::BlockRows)?;
        cl.compute(&mut a, 2..2, true, "none", |_, _, _| Ok(()))?;
        cl.compute_on(Rank(1), &mut a, 1..1, "none there", |_, _, _| Ok(()))?;
        cl.fetch(&mut a, |_| 3..3)?;
        assert!(cl.here(&a, 1..1)?.is_empty());
        assert!(cl.read(&a, 3..3)?.is_empty());
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}

/// A corner turn of elements of no bytes (its packing divides by the element size): refused
/// on every rank at the allocation already, so it never gets there.
#[test]
fn a_corner_turn_of_zero_sized_elements_is_not_a_panic() {
    let outcomes = job(2, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<()>(4, 2, Distribution::BlockRows)?;
        let mut b = cl.alloc::<()>(2, 4, Distribution::BlockRows)?;
        cl.corner_turn(&mut a, &mut b)
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let err = outcome.expect_err("refused on every rank");
        assert!(err.contains("alloc buffer 0"), "rank {rank}: {err}");
    }
}

/// Corner turns of degenerate shapes (no columns, no rows, fewer rows than ranks under
/// block-cyclic): an empty result, never a panic or a hang.
#[test]
fn corner_turns_of_degenerate_shapes_are_harmless() {
    let outcomes = job(3, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let cyclic = Distribution::BlockCyclic { block: 2 };
        for (rows, cols) in [(3, 0), (0, 3), (1, 2), (2, 1)] {
            let mut a = cl.alloc::<u32>(rows, cols, Distribution::OnRank(Rank(0)))?;
            let mut b = cl.alloc::<u32>(cols, rows, cyclic)?;
            cl.compute(&mut a, 0..rows, true, "fill", |_, rs, mut v| {
                let host = v.host_write()?;
                for (i, x) in host.iter_mut().enumerate() {
                    *x = (rs.start * cols + i) as u32;
                }
                Ok(())
            })?;
            cl.corner_turn(&mut a, &mut b)?;
            cl.gather(&mut b, Rank(2))?;
            if cl.rank() == Rank(2) {
                let got = cl.read(&b, 0..cols)?;
                let want: Vec<u32> = (0..cols)
                    .flat_map(|c| (0..rows).map(move |r| (r * cols + c) as u32))
                    .collect();
                assert_eq!(got, want, "{rows} x {cols}");
            }
        }
        Ok(())
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(outcome.is_ok(), "rank {rank}: {outcome:?}");
    }
}
