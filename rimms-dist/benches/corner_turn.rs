//! The corner turn through RIMMS against the same bytes moved bare, in one run, at np 2 and 4
//! under `mpirun` (shared memory): `cargo bench -p rimms-dist --features mpi --bench
//! corner_turn [-- ROWS COLS REPS]` (default 2048 × 2048 complex, 32 MiB, 15 repetitions).
//!
//! Each rank times, interleaved repetition by repetition so that load hits all alike:
//! - **bare**: one all-to-all of the off-diagonal blocks already packed (the collective
//!   alone, the floor: the same bytes cross between ranks);
//! - **by hand**: the straightforward hand-written corner turn on plain vectors: a plain
//!   (untiled) transpose into one block per destination, the all-to-all, the blocks copied
//!   into the rows of the transpose;
//! - **rimms**: `Cluster::corner_turn` on distributed buffers (a tiled transpose into the
//!   off-diagonal blocks, the diagonal block transposed in place while they are in flight,
//!   plus the runtime's host views and the replicated table);
//! - **per row**: the naive lowering, one point-to-point message per row segment, which the
//!   design forbids, for scale.
//!
//! Rank 0 prints the medians and the ratios to bare and to by-hand. Ratios, not times, are
//! the figures: np 4 on a 2-core machine is oversubscribed.

use rimms_dist::{Cluster, Distribution, Envelope, Mpi, Packed, Rank, Transport};
use rimms_runtime::{Complex32, Runtime};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

fn block(n: usize, ranks: usize, rank: usize) -> std::ops::Range<usize> {
    Distribution::BlockRows
        .rows_of(Rank(rank as u16), n, ranks)
        .into_iter()
        .next()
        .unwrap_or(0..0)
}

fn main() -> ExitCode {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (rows, cols, reps) = (
        args.first().copied().unwrap_or(2048),
        args.get(1).copied().unwrap_or(2048),
        args.get(2).copied().unwrap_or(15),
    );
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return rank_main(rows, cols, reps);
    }
    let exe = std::env::current_exe().expect("this bench binary");
    for np in [2, 4] {
        let status = Command::new("mpirun")
            .args([
                "--oversubscribe",
                "-np",
                &np.to_string(),
                "--mca",
                "btl",
                "self,vader",
            ])
            .arg(&exe)
            .args([rows, cols, reps].map(|n| n.to_string()))
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("np {np}: {s}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("corner_turn bench: cannot run mpirun ({e}); install openmpi-bin");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn rank_main(rows: usize, cols: usize, reps: usize) -> ExitCode {
    let t = Mpi::start().expect("MPI");
    let (me, ranks) = (usize::from(t.rank().0), t.ranks());
    let size = size_of::<Complex32>();
    let mine = block(rows, ranks, me);
    let my_cols = block(cols, ranks, me);
    let value = |r: usize, c: usize| Complex32::new(r as f32, c as f32);
    let local: Vec<Complex32> = mine
        .clone()
        .flat_map(|r| (0..cols).map(move |c| value(r, c)))
        .collect();
    let send_counts: Vec<usize> = (0..ranks)
        .map(|to| block(cols, ranks, to).len() * mine.len() * size)
        .collect();
    let recv_counts: Vec<usize> = (0..ranks)
        .map(|from| block(rows, ranks, from).len() * my_cols.len() * size)
        .collect();
    // The bytes that cross between ranks: the diagonal block stays home in every variant.
    let off_diagonal = |counts: &[usize]| -> Vec<usize> {
        counts
            .iter()
            .enumerate()
            .map(|(rank, &n)| if rank == me { 0 } else { n })
            .collect()
    };
    // Buffers reused from one repetition to the next, as the hand-written code's are.
    let mut bare = (
        Packed::zeroed(off_diagonal(&send_counts)),
        Packed::zeroed(off_diagonal(&recv_counts)),
    );
    let mut hand = (
        Packed::zeroed(send_counts.clone()),
        Packed::zeroed(recv_counts.clone()),
    );

    let cl = Cluster::new(Runtime::new().expect("runtime"), &t);
    cl.check_drift(false);
    let mut a = cl
        .alloc::<Complex32>(rows, cols, Distribution::BlockRows)
        .expect("alloc");
    let mut turned = cl
        .alloc::<Complex32>(cols, rows, Distribution::BlockRows)
        .expect("alloc");
    cl.compute(&mut a, 0..rows, true, "fill", |_, rs, mut view| {
        let host = view.host_write()?;
        for (i, r) in rs.enumerate() {
            for c in 0..cols {
                host[i * cols + c] = value(r, c);
            }
        }
        Ok(())
    })
    .expect("fill");

    let mut out = vec![Complex32::new(0.0, 0.0); my_cols.len() * rows];
    let (mut bare_times, mut by_hand, mut rimms, mut per_row) = (vec![], vec![], vec![], vec![]);
    for rep in 0..reps + 2 {
        let start = Instant::now();
        bare = t.all_to_all(bare.0, bare.1).expect("bare");
        let bare_time = start.elapsed();

        let start = Instant::now();
        let (mut send, recv) = hand;
        {
            let packed = send.elements_mut::<Complex32>().expect("aligned");
            let mut at = 0;
            for to in 0..ranks {
                for c in block(cols, ranks, to) {
                    for r in 0..mine.len() {
                        packed[at] = local[r * cols + c];
                        at += 1;
                    }
                }
            }
        }
        let (send, received) = t.all_to_all(send, recv).expect("by hand");
        let values = received.elements::<Complex32>().expect("aligned");
        for from in 0..ranks {
            let theirs = block(rows, ranks, from);
            let at = received.offset(from) / size;
            for i in 0..my_cols.len() {
                out[i * rows + theirs.start..i * rows + theirs.end]
                    .copy_from_slice(&values[at + i * theirs.len()..at + (i + 1) * theirs.len()]);
            }
        }
        let hand_time = start.elapsed();
        hand = (send, received);

        let start = Instant::now();
        cl.corner_turn(&mut a, &mut turned).expect("corner turn");
        let rimms_time = start.elapsed();

        // One message per row segment: each of my rows' part in each destination's columns.
        let start = Instant::now();
        let mut scratch = Vec::new();
        for to in (0..ranks).filter(|&to| to != me) {
            let theirs = block(cols, ranks, to);
            for r in 0..mine.len() {
                let segment = &local[r * cols + theirs.start..r * cols + theirs.end];
                let envelope = Envelope {
                    buffer: rep as u64,
                    frags: r..r + 1,
                    epoch: 0,
                };
                t.send(Rank(to as u16), envelope, bytemuck::cast_slice(segment))
                    .expect("send");
            }
        }
        for from in (0..ranks).filter(|&from| from != me) {
            for r in 0..block(rows, ranks, from).len() {
                scratch.resize(my_cols.len() * size, 0u8);
                let envelope = Envelope {
                    buffer: rep as u64,
                    frags: r..r + 1,
                    epoch: 0,
                };
                t.recv(Rank(from as u16), &envelope, &mut scratch)
                    .expect("recv");
            }
        }
        let row_time = start.elapsed();
        if rep >= 2 {
            bare_times.push(bare_time);
            by_hand.push(hand_time);
            rimms.push(rimms_time);
            per_row.push(row_time);
        }
    }
    // The turned matrix is the transpose: checked on this rank's rows, once.
    let got = cl
        .here(&turned, my_cols.clone())
        .expect("mine")
        .host()
        .expect("host")
        .to_vec();
    for (i, c) in my_cols.clone().enumerate() {
        for r in 0..rows {
            assert_eq!(got[i * rows + r], value(r, c), "[{c}][{r}]");
        }
    }
    if me == 0 {
        let (b, h, r, p) = (
            median(bare_times),
            median(by_hand),
            median(rimms),
            median(per_row),
        );
        println!(
            "np {ranks}, {rows} × {cols} complex ({} MiB): bare all-to-all {b:.2} ms, by hand {h:.2} ms, rimms {r:.2} ms, one message per row {p:.2} ms; rimms / bare {:.2}x, rimms / by hand {:.2}x, per row / by hand {:.2}x",
            (rows * cols * size) >> 20,
            r / b,
            r / h,
            p / h
        );
    }
    ExitCode::SUCCESS
}
