//! Distributed programs on real runtimes that every transport must carry out alike: each runs
//! as one rank of a job and checks its own part (values against independent references on the
//! rank that gathers them, bytes it sent each peer against the analytic minimum, errors it
//! must report), returning what went wrong. The in-process tests (`cluster.rs`) and the MPI
//! launcher (`mpi_ranks.rs`) run the same list; every program keeps the ranks' collectives in
//! step, failures included, so the next one starts clean on the same transport.

use rimms_dist::{corner_turn_bytes, Cluster, ClusterError, Distribution, Rank, TransportError};
use rimms_runtime::{Complex32, Device, FftDirection};

/// One program, as one rank.
pub type Program = fn(&Cluster<'_>) -> Result<(), String>;

/// Every program, by name.
pub const PROGRAMS: &[(&str, Program)] = &[
    ("corner_turn_10x7", |cl| corner_turn(cl, 10, 7)),
    ("corner_turn_64x1536", |cl| corner_turn(cl, 64, 1536)),
    ("owner_computes_block_rows", |cl| {
        owner_computes(cl, Distribution::BlockRows)
    }),
    ("owner_computes_block_cyclic", |cl| {
        owner_computes(cl, Distribution::BlockCyclic { block: 2 })
    }),
    ("read_cache", read_cache),
    ("fft_2d", fft_2d),
    ("drift", drift),
    ("failing_kernel", failing_kernel),
];

fn check(what: &str, ok: bool, detail: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {}", detail()))
    }
}

fn value(r: usize, c: usize) -> f32 {
    (r * 1000 + c) as f32
}

fn err(e: ClusterError) -> String {
    e.to_string()
}

/// The rows of each rank under block rows, from the rule written out: the first
/// `rows % ranks` ranks one row more.
fn blocks(rows: usize, ranks: usize) -> Vec<std::ops::Range<usize>> {
    let mut start = 0;
    (0..ranks)
        .map(|r| {
            let n = rows / ranks + usize::from(r < rows % ranks);
            start += n;
            start - n..start
        })
        .collect()
}

/// The transpose's values on rank 0, and each rank's bytes equal to the analytic minimum.
fn corner_turn(cl: &Cluster<'_>, rows: usize, cols: usize) -> Result<(), String> {
    if cl.ranks() > rows.min(cols) {
        return Ok(());
    }
    let mut a = cl
        .alloc::<f32>(rows, cols, Distribution::BlockRows)
        .map_err(err)?;
    let mut t = cl
        .alloc::<f32>(cols, rows, Distribution::BlockRows)
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, true, "fill", |_, rs, mut view| {
        let host = view.host_write()?;
        for (i, r) in rs.enumerate() {
            for c in 0..cols {
                host[i * cols + c] = value(r, c);
            }
        }
        Ok(())
    })
    .map_err(err)?;
    let before = cl.net_bytes();
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    let sent: Vec<u64> = cl
        .net_bytes()
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    let minimum = &corner_turn_bytes(rows, cols, 4, cl.ranks())[usize::from(cl.rank().0)];
    check("bytes per peer", &sent == minimum, || {
        format!("sent {sent:?}, the minimum is {minimum:?}")
    })?;
    cl.gather(&mut t, Rank(0)).map_err(err)?;
    if cl.rank() == Rank(0) {
        let whole = cl
            .here(&t, 0..cols)
            .map_err(err)?
            .host()
            .map_err(|e| e.to_string())?
            .to_vec();
        for c in 0..cols {
            for r in 0..rows {
                check("transpose", whole[c * rows + r] == value(r, c), || {
                    format!("[{c}][{r}] is {}, not {}", whole[c * rows + r], value(r, c))
                })?;
            }
        }
    }
    Ok(())
}

/// Each row written by its owner, uneven where the ranks do not divide the rows.
fn owner_computes(cl: &Cluster<'_>, dist: Distribution) -> Result<(), String> {
    let (rows, ranks) = (10, cl.ranks());
    let mut a = cl.alloc::<u32>(rows, 4, dist).map_err(err)?;
    let me = u32::from(cl.rank().0);
    cl.compute(&mut a, 0..rows, true, "who", |_, _, mut view| {
        view.host_write()?.fill(me + 1);
        Ok(())
    })
    .map_err(err)?;
    cl.gather(&mut a, Rank(0)).map_err(err)?;
    if me == 0 {
        let whole = cl
            .here(&a, 0..rows)
            .map_err(err)?
            .host()
            .map_err(|e| e.to_string())?
            .to_vec();
        for row in 0..rows {
            let owner = match dist {
                Distribution::BlockRows => {
                    blocks(rows, ranks).iter().position(|b| b.contains(&row))
                }
                Distribution::BlockCyclic { block } => Some(row / block % ranks),
                _ => None,
            };
            let expected = owner.map_or(0, |o| o as u32 + 1);
            check(
                "owner",
                whole[row * 4..row * 4 + 4] == [expected; 4],
                || format!("{dist:?} row {row} was written by {:?}", whole[row * 4]),
            )?;
        }
    }
    Ok(())
}

/// A buffer on rank 0 read by every rank: sent once to each, nothing the second time, again
/// after a flush, and every time with the receive cache off.
fn read_cache(cl: &Cluster<'_>) -> Result<(), String> {
    let (rows, cols) = (8, 256);
    let whole = (rows * cols * 4) as u64;
    let start = cl.net_bytes();
    let mut a = cl
        .alloc::<f32>(rows, cols, Distribution::OnRank(Rank(0)))
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, false, "fill", |_, _, mut view| {
        view.host_write()?.fill(2.5);
        Ok(())
    })
    .map_err(err)?;
    let mut sent = Vec::new();
    let since = |cl: &Cluster<'_>| -> Vec<u64> {
        cl.net_bytes()
            .iter()
            .zip(&start)
            .map(|(a, b)| a - b)
            .collect()
    };
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.flush(&mut a).map_err(err)?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.cache(false);
    cl.flush(&mut a).map_err(err)?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    let sum: f32 = cl
        .here(&a, 0..rows)
        .map_err(err)?
        .host()
        .map_err(|e| e.to_string())?
        .iter()
        .sum();
    let mut b = cl
        .alloc::<f32>(rows, cols, Distribution::Replicated)
        .map_err(err)?;
    cl.compute(&mut b, 0..rows, true, "use", |_, _, mut view| {
        view.host_write()?.fill(sum);
        Ok(())
    })
    .map_err(err)?;
    cl.fetch(&mut a, |_| 0..rows).map_err(err)?;
    sent.push(since(cl));
    cl.cache(true);
    check("values", sum == 2.5 * (rows * cols) as f32, || {
        format!("sum {sum}")
    })?;
    let once: Vec<u64> = (0..cl.ranks())
        .map(|to| {
            if cl.rank() == Rank(0) && to != 0 {
                whole
            } else {
                0
            }
        })
        .collect();
    for (i, (what, times)) in [
        ("the first read", 1),
        ("a second read (sends nothing)", 1),
        ("a read after a flush (sends again)", 2),
        ("reads with the cache off (each sends)", 4),
    ]
    .into_iter()
    .enumerate()
    {
        let expected: Vec<u64> = once.iter().map(|b| b * times).collect();
        check(what, sent[i] == expected, || {
            format!("sent {:?}, expected {expected:?}", sent[i])
        })?;
    }
    Ok(())
}

/// Rows, corner turn, rows: the runtime's FFT on each rank's rows against a naive 2-D DFT.
fn fft_2d(cl: &Cluster<'_>) -> Result<(), String> {
    let (rows, cols) = (8, 16);
    if cl.ranks() > rows {
        return Ok(());
    }
    let input =
        |r: usize, c: usize| Complex32::new((r * 3 + c) as f32 % 7.0, (r + 2 * c) as f32 % 5.0);
    let mut a = cl
        .alloc::<Complex32>(rows, cols, Distribution::BlockRows)
        .map_err(err)?;
    let mut t = cl
        .alloc::<Complex32>(cols, rows, Distribution::BlockRows)
        .map_err(err)?;
    cl.compute(&mut a, 0..rows, true, "fft rows", |rt, rs, mut view| {
        let host = view.host_write()?;
        for (i, r) in rs.enumerate() {
            for c in 0..cols {
                host[i * cols + c] = input(r, c);
            }
        }
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, cols, &mut view)?;
        Ok(())
    })
    .map_err(err)?;
    cl.corner_turn(&mut a, &mut t).map_err(err)?;
    cl.compute(&mut t, 0..cols, true, "fft columns", |rt, _, mut view| {
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, rows, &mut view)?;
        Ok(())
    })
    .map_err(err)?;
    cl.gather(&mut t, Rank(0)).map_err(err)?;
    if cl.rank() != Rank(0) {
        return Ok(());
    }
    let got = cl
        .here(&t, 0..cols)
        .map_err(err)?
        .host()
        .map_err(|e| e.to_string())?
        .to_vec();
    for (k, l) in (0..rows).flat_map(|k| (0..cols).map(move |l| (k, l))) {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (r, c) in (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))) {
            let x = input(r, c);
            let angle = -2.0
                * std::f64::consts::PI
                * ((k * r) as f64 / rows as f64 + (l * c) as f64 / cols as f64);
            let (xr, xi) = (f64::from(x.re), f64::from(x.im));
            re += xr * angle.cos() - xi * angle.sin();
            im += xr * angle.sin() + xi * angle.cos();
        }
        let g = got[l * rows + k];
        let off = ((f64::from(g.re) - re).powi(2) + (f64::from(g.im) - im).powi(2)).sqrt();
        check("2-D DFT", off < 1e-3, || {
            format!("[{l}][{k}] is {g}, the DFT {re}+{im}i")
        })?;
    }
    Ok(())
}

/// Rank 1 writes fewer rows than the others: every rank fails at that call, naming rank 1.
fn drift(cl: &Cluster<'_>) -> Result<(), String> {
    if cl.ranks() < 2 {
        return Ok(());
    }
    cl.check_drift(true);
    let mut a = cl
        .alloc::<f32>(9, 4, Distribution::BlockCyclic { block: 1 })
        .map_err(err)?;
    let rows = if cl.rank() == Rank(1) { 0..5 } else { 0..9 };
    match cl.compute(&mut a, rows, true, "scale", |_, _, _| Ok(())) {
        Err(ClusterError::Transport {
            call,
            source: TransportError::Drift { ranks, .. },
        }) if call.contains("(scale on rows") && ranks == vec![Rank(1)] => Ok(()),
        other => Err(format!(
            "expected a drift at the scale call naming rank 1, got {other:?}"
        )),
    }
}

/// A kernel that fails on rank 1 alone fails the call on every rank: rank 1 with the kernel's
/// error, the others with a drift naming rank 1.
fn failing_kernel(cl: &Cluster<'_>) -> Result<(), String> {
    if cl.ranks() < 2 {
        return Ok(());
    }
    cl.check_drift(true);
    let mut a = cl
        .alloc::<Complex32>(4, 8, Distribution::BlockCyclic { block: 1 })
        .map_err(err)?;
    let outcome = cl.compute(&mut a, 0..4, true, "fft", |rt, rows, mut view| {
        // 3 points do not divide a row of 8: only the rank owning row 1 asks for it.
        let points = if rows.start == 1 { 3 } else { 8 };
        rt.fft_in_place(Device::Cpu, FftDirection::Forward, points, &mut view)?;
        Ok(())
    });
    match (cl.rank(), outcome) {
        (
            Rank(1),
            Err(ClusterError::Runtime {
                call,
                rank: Rank(1),
                ..
            }),
        ) if call.contains("fft on rows 0..4") => Ok(()),
        (
            me,
            Err(ClusterError::Transport {
                source: TransportError::Drift { ranks, .. },
                ..
            }),
        ) if me != Rank(1) && ranks == vec![Rank(1)] => Ok(()),
        (_, other) => Err(format!(
            "expected the call to fail on every rank, got {other:?}"
        )),
    }
}
