//! A corner turn that fails on some ranks before its all-to-all (a bad argument there, rows or
//! a runtime that fail there): every rank must fail that turn, naming the ranks that failed,
//! in bounded time, and every rank's collectives must stay in step, so that the next corner
//! turn moves that turn's blocks, never the failed one's (a rank that skipped the all-to-all
//! used to take the blocks the others had sent it for the failed turn as the next turn's:
//! stale values and no error).

use rimms_dist::{Cluster, ClusterError, Distribution, Envelope, InProcess, Packed, Rank};
use rimms_dist::{Transport, TransportError};
use rimms_runtime::Runtime;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Runs `work` on every rank of a job of `ranks` threads, each wait bounded by `timeout`; the
/// whole job must finish within `limit`, so a hang fails the test instead of blocking it.
fn job<T: std::marker::Send + 'static>(
    ranks: usize,
    timeout: Duration,
    limit: Duration,
    work: impl Fn(&Cluster<'_>) -> T + Sync + std::marker::Send + 'static,
) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcomes = rimms_dist::on_threads(ranks, timeout, work).expect("runtimes start");
        let _ = tx.send(outcomes);
    });
    rx.recv_timeout(limit)
        .expect("the job finished in bounded time (no rank hung)")
}

/// Element `[r][c]` of the source of turn `turn`.
fn value(turn: usize, r: usize, c: usize) -> f32 {
    (turn * 10_000 + r * 100 + c) as f32
}

const ROWS: usize = 6;
const COLS: usize = 9;

/// Fills `a` with turn `turn`'s values, each rank its own rows.
fn fill(cl: &Cluster<'_>, a: &mut rimms_dist::DistData<f32>, turn: usize) -> Result<(), String> {
    cl.compute(a, 0..ROWS, true, "fill", move |_, rows, mut view| {
        let host = view.host_write()?;
        for (i, r) in rows.enumerate() {
            for c in 0..COLS {
                host[i * COLS + c] = value(turn, r, c);
            }
        }
        Ok(())
    })
    .map_err(|e| e.to_string())
}

/// Whether this rank's rows `mine` of the transpose hold turn `turn`'s values; if not, which
/// turn's they hold.
fn check_rows(
    cl: &Cluster<'_>,
    t: &rimms_dist::DistData<f32>,
    mine: Range<usize>,
    turn: usize,
) -> Result<(), String> {
    let got = cl.read(t, mine.clone()).map_err(|e| e.to_string())?;
    let expect = |turn: usize| -> Vec<f32> {
        mine.clone()
            .flat_map(|c| (0..ROWS).map(move |r| value(turn, r, c)))
            .collect()
    };
    if got == expect(turn) {
        return Ok(());
    }
    let stale = (0..turn).find(|&earlier| {
        // Another rank's part from an earlier turn is enough to call it stale.
        got.iter()
            .zip(expect(earlier))
            .zip(expect(turn))
            .any(|((&g, old), new)| g == old && g != new)
    });
    Err(match stale {
        Some(earlier) => format!(
            "rows {mine:?} of the transpose hold turn {earlier}'s values after turn {turn} (stale blocks): {got:?}"
        ),
        None => format!("rows {mine:?} of the transpose are wrong after turn {turn}: {got:?}"),
    })
}

/// What each rank saw: the failed turn's outcome and the next turn's.
type Seen = (Result<(), String>, Result<(), String>);

/// Turn 1 with a destination of the wrong shape on the ranks `bad` (a bad argument there:
/// refused there before the exchange), then turn 2 alike on every rank.
fn stage(ranks: usize, bad: &'static [u16], drift_checks: bool) -> Vec<Seen> {
    job(
        ranks,
        Duration::from_secs(3),
        Duration::from_secs(60),
        move |cl| {
            cl.check_drift(drift_checks);
            let setup = || -> Result<_, ClusterError> {
                let a = cl.alloc::<f32>(ROWS, COLS, Distribution::BlockRows)?;
                let t = cl.alloc::<f32>(COLS, ROWS, Distribution::BlockRows)?;
                let wrong = cl.alloc::<f32>(COLS, ROWS + 1, Distribution::BlockRows)?;
                Ok((a, t, wrong))
            };
            let (mut a, mut t, mut wrong) = match setup() {
                Ok(buffers) => buffers,
                Err(e) => return (Err(format!("setup: {e}")), Err("not run".into())),
            };
            let first = fill(cl, &mut a, 1).and_then(|()| {
                let dst = match bad.contains(&cl.rank().0) {
                    true => &mut wrong,
                    false => &mut t,
                };
                cl.corner_turn(&mut a, dst).map_err(|e| e.to_string())
            });
            let second = fill(cl, &mut a, 2).and_then(|()| {
                cl.corner_turn(&mut a, &mut t).map_err(|e| e.to_string())?;
                let me = usize::from(cl.rank().0);
                // Block rows: the first `COLS % ranks` ranks one row more.
                let rows_of = |r: usize| COLS / ranks + usize::from(r < COLS % ranks);
                let start: usize = (0..me).map(rows_of).sum();
                check_rows(cl, &t, start..start + rows_of(me), 2)
            });
            (first, second)
        },
    )
}

/// Every rank fails turn 1 naming the ranks `bad` as the ones that failed before the
/// exchange, and every rank's turn 2 gives turn 2's values.
fn assert_fails_everywhere_then_recovers(seen: &[Seen], bad: &[u16]) {
    let report = || {
        seen.iter()
            .enumerate()
            .map(|(rank, (first, second))| {
                format!("rank {rank}: turn 1 {first:?}; turn 2 {second:?}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (rank, (first, second)) in seen.iter().enumerate() {
        let named = first.as_ref().err().is_some_and(|e| {
            e.contains("before the exchange")
                && bad.iter().all(|&b| e.contains(&Rank(b).to_string()))
        });
        assert!(
            named,
            "rank {rank}: turn 1 must fail naming {bad:?} as failed before the exchange\n{}",
            report()
        );
        assert!(
            second.is_ok(),
            "rank {rank}: turn 2 must give its own values\n{}",
            report()
        );
    }
}

/// The reproducer: rank 1 alone refuses turn 1 (a bad argument there) and skips the
/// all-to-all; drift checks off, as in release builds.
#[test]
fn a_rank_failing_before_the_exchange_fails_every_rank_and_the_next_turn_is_fresh() {
    let seen = stage(3, &[1], false);
    assert_fails_everywhere_then_recovers(&seen, &[1]);
}

/// The same with rank 0 failing (the rank every agreement compares with) and drift checks on.
#[test]
fn rank_0_failing_before_the_exchange_with_drift_checks_on() {
    let seen = stage(3, &[0], true);
    assert_fails_everywhere_then_recovers(&seen, &[0]);
}

/// Two ranks of four failing: every rank names both.
#[test]
fn two_ranks_failing_before_the_exchange_are_both_named() {
    let seen = stage(4, &[1, 3], false);
    assert_fails_everywhere_then_recovers(&seen, &[1, 3]);
}

/// The same failure on every rank (a bad argument passed alike everywhere) is that error on
/// every rank, as before any agreement: nobody is waiting for anybody.
#[test]
fn a_failure_on_every_rank_is_each_ranks_own_error() {
    let outcomes = job(3, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        let mut a = cl.alloc::<f32>(ROWS, COLS, Distribution::BlockRows)?;
        let mut wrong = cl.alloc::<f32>(COLS, ROWS + 1, Distribution::BlockRows)?;
        cl.corner_turn(&mut a, &mut wrong)
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(
            matches!(outcome, Err(ClusterError::Shape { .. })),
            "rank {rank}: {outcome:?}"
        );
    }
}

/// A network that loses what rank 2 sends rank 1 point-to-point while `losing`.
struct Losing {
    inner: InProcess,
    losing: AtomicBool,
}

impl Transport for Losing {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn ranks(&self) -> usize {
        self.inner.ranks()
    }
    fn send(&self, to: Rank, envelope: Envelope, bytes: &[u8]) -> Result<(), TransportError> {
        if self.losing.load(Ordering::Relaxed) && self.rank() == Rank(2) && to == Rank(1) {
            return Ok(());
        }
        self.inner.send(to, envelope, bytes)
    }
    fn recv(&self, from: Rank, envelope: &Envelope, into: &mut [u8]) -> Result<(), TransportError> {
        self.inner.recv(from, envelope, into)
    }
    fn all_to_all_overlapped(
        &self,
        send: Packed,
        recv: Packed,
        meanwhile: &mut dyn FnMut(),
    ) -> Result<(Packed, Packed), TransportError> {
        self.inner.all_to_all_overlapped(send, recv, meanwhile)
    }
    fn agree(&self, digest: u64, call: &str) -> Result<(), TransportError> {
        self.inner.agree(digest, call)
    }
    fn vote(&self, word: u64, call: &str) -> Result<Vec<u64>, TransportError> {
        self.inner.vote(word, call)
    }
    fn sent_bytes(&self) -> Vec<u64> {
        self.inner.sent_bytes()
    }
}

/// A fetch that fails on one rank alone: rank 1's rows of the source were last written on
/// rank 2, whose message back is lost, so rank 1's fetch waits out its timeout and fails while
/// the others are ready. Every rank fails the turn naming rank 1 and its fetch (the others'
/// vote outwaits rank 1's timeout), no rank's table records the failed fetch, and the next
/// turn, with the network whole again, moves the rows and gives the right transpose.
#[test]
fn a_fetch_failing_on_one_rank_fails_every_rank_and_the_next_turn_is_fresh() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let seen: Vec<Seen> = std::thread::scope(|s| {
            let handles: Vec<_> = InProcess::world(3)
                .into_iter()
                .map(|inner| {
                    s.spawn(move || {
                        let wire = Losing {
                            inner: inner.with_timeout(Duration::from_secs(1)),
                            losing: AtomicBool::new(true),
                        };
                        let cl = Cluster::new(Runtime::new().expect("runtime"), &wire);
                        cl.check_drift(false);
                        let setup = || -> Result<_, String> {
                            let e = |e: ClusterError| e.to_string();
                            let mut a = cl
                                .alloc::<f32>(ROWS, COLS, Distribution::BlockRows)
                                .map_err(e)?;
                            let t = cl
                                .alloc::<f32>(COLS, ROWS, Distribution::BlockRows)
                                .map_err(e)?;
                            fill(&cl, &mut a, 1)?;
                            // Rank 1's rows, written anew on rank 2: their newest bytes are there.
                            cl.compute_on(
                                Rank(2),
                                &mut a,
                                2..4,
                                "elsewhere",
                                |_, rows, mut view| {
                                    let host = view.host_write()?;
                                    for (i, r) in rows.enumerate() {
                                        for c in 0..COLS {
                                            host[i * COLS + c] = value(1, r, c);
                                        }
                                    }
                                    Ok(())
                                },
                            )
                            .map_err(e)?;
                            Ok((a, t))
                        };
                        let (mut a, mut t) = match setup() {
                            Ok(buffers) => buffers,
                            Err(e) => return (Err(format!("setup: {e}")), Err("not run".into())),
                        };
                        let first = cl.corner_turn(&mut a, &mut t).map_err(|e| e.to_string());
                        wire.losing.store(false, Ordering::Relaxed);
                        let second = cl
                            .corner_turn(&mut a, &mut t)
                            .map_err(|e| e.to_string())
                            .and_then(|()| {
                                let me = usize::from(cl.rank().0);
                                check_rows(&cl, &t, me * 3..me * 3 + 3, 1)
                            });
                        (first, second)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rank"))
                .collect()
        });
        let _ = tx.send(seen);
    });
    let seen = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the job finished in bounded time (no rank hung)");
    assert_fails_everywhere_then_recovers(&seen, &[1]);
    for (rank, (first, _)) in seen.iter().enumerate() {
        let first = first.as_ref().err().map(String::as_str).unwrap_or("");
        assert!(first.contains("its fetch"), "rank {rank}: {first}");
    }
}

/// A rank that passes another destination of the right shape is ready like the others, but
/// the vote's digests name both buffers: every rank fails the turn as a drift naming it, drift
/// checks on or off, instead of writing another buffer there.
#[test]
fn another_destination_on_one_rank_is_a_drift_at_the_vote() {
    let outcomes = job(3, Duration::from_secs(3), Duration::from_secs(60), |cl| {
        cl.check_drift(false);
        let mut a = cl.alloc::<f32>(ROWS, COLS, Distribution::BlockRows)?;
        let mut t = cl.alloc::<f32>(COLS, ROWS, Distribution::BlockRows)?;
        let mut other = cl.alloc::<f32>(COLS, ROWS, Distribution::BlockRows)?;
        let dst = if cl.rank() == Rank(1) {
            &mut other
        } else {
            &mut t
        };
        cl.corner_turn(&mut a, dst)
    });
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        assert!(
            matches!(
                &outcome,
                Err(ClusterError::Transport {
                    source: TransportError::Drift { ranks, .. },
                    ..
                }) if ranks == &[Rank(1)]
            ),
            "rank {rank}: {outcome:?}"
        );
    }
}
