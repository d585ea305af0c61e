//! Asynchronous prefetch (`HeteData::prefetch_async`, RIMMS's `hete_Sync_Async`) on a sim
//! device whose link takes its modelled time: one copy, in flight until its time has passed;
//! the call that needs the bytes shares that copy and starts only once it has landed; a write
//! meanwhile waits for it; and values always match a plain model. An eviction that needs the
//! room of a block a copy still lands in waits for the landing rather than failing.

use rimms_runtime::{Access, Device, HeteData, LinkModel, Runtime, SimConfig, ZipOp};
use std::time::Duration;

/// A runtime with one sim device behind a slow, timed link (1 MiB takes about 50 ms), to build.
fn slow_link_builder() -> rimms_runtime::RuntimeBuilder {
    Runtime::builder().sim(SimConfig {
        link: LinkModel {
            latency: Duration::from_micros(10),
            bytes_per_second: 20e6,
        },
        simulate_link: true,
        ..SimConfig::default()
    })
}

/// [`slow_link_builder`]'s runtime.
fn slow_link() -> Runtime {
    slow_link_builder().build().expect("runtime")
}

fn copies_to_sim(rt: &Runtime) -> (u64, u64) {
    rt.stats()
        .links
        .iter()
        .filter(|l| l.from == "host" && l.to == "sim0")
        .fold((0, 0), |(c, b), l| (c + l.copies, b + l.bytes))
}

#[test]
fn a_prefetch_in_flight_is_one_copy_the_next_call_shares_and_waits_for() {
    let rt = slow_link();
    let sim = rt.space_of(Device::Sim(0)).expect("sim0");
    let n = 1 << 17;
    let input: Vec<rimms_runtime::Complex32> = (0..n)
        .map(|i| rimms_runtime::Complex32::new(i as f32 * 0.5, 3.0))
        .collect();
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    let p = x.prefetch_async(Device::Sim(0)).expect("prefetch");
    assert_eq!(
        copies_to_sim(&rt),
        (1, (n * 8) as u64),
        "the copy is made at once"
    );
    if !p.is_done() {
        // In flight: no call may take the bytes in place without waiting for them.
        assert!(
            !x.is_resident(sim, Access::Read),
            "resident while in flight"
        );
    }
    rt.magnitude(Device::Sim(0), &x, &mut y).expect("magnitude");
    // The call found the bytes there (no second copy) and started after they landed.
    assert!(p.is_done(), "the call ran before its input landed");
    assert_eq!(copies_to_sim(&rt).0, 1, "the call copied again");
    assert!(
        x.is_resident(sim, Access::Read),
        "landed bytes are resident again"
    );
    let got = y.host().expect("y");
    for (i, (v, z)) in got.iter().zip(&input).enumerate() {
        let want = f64::from(z.re).hypot(f64::from(z.im));
        assert!(
            (f64::from(*v) - want).abs() <= 1e-6 * want.max(1.0),
            "{i}: {v} vs {want}"
        );
    }
}

#[test]
fn a_write_during_a_prefetch_waits_for_it_and_the_next_call_reads_the_new_bytes() {
    let rt = slow_link();
    let n = 1 << 17;
    let mut x =
        HeteData::from_slice(&rt, &vec![rimms_runtime::Complex32::new(1.0, 0.0); n]).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    let p = x.prefetch_async(Device::Sim(0)).expect("prefetch");
    x.host_write()
        .expect("write")
        .fill(rimms_runtime::Complex32::new(0.0, 2.0));
    assert!(p.is_done(), "the write did not wait for the copy in flight");
    rt.magnitude(Device::Sim(0), &x, &mut y).expect("magnitude");
    // The prefetched copy was stale after the write: the call copied the new bytes (in
    // parts, each ahead of the part of the call that reads it).
    assert_eq!(copies_to_sim(&rt).1, 2 * (n * 8) as u64);
    assert!(y.host().expect("y").iter().all(|&v| v == 2.0));
}

/// Random programs of host writes, asynchronous prefetches to either of two sim devices,
/// kernels on them (one call, cut in parts on sim0, or a scope's row calls, merged or in
/// pieces), and host reads,
/// against a plain model of the values; run with copies ahead of their calls (scope
/// submission, prediction) on and off, the bytes moved with them on are at most those with
/// them off plus the bytes they report wasted.
#[test]
fn random_programs_with_copies_ahead_keep_every_value_and_waste_only_what_they_report() {
    let run = |seed: u64, on: bool| {
        let rt = Runtime::builder()
            .sim(SimConfig {
                // Slow enough that x (32 KiB, 655 µs) cuts a direct call into parts.
                link: LinkModel {
                    latency: Duration::from_micros(5),
                    bytes_per_second: 50e6,
                },
                simulate_link: true,
                ..SimConfig::default()
            })
            .sim(SimConfig {
                simulate_link: true,
                ..SimConfig::default()
            })
            .prefetch(on)
            .build()
            .expect("runtime");
        let (n, row) = (4096, 512);
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        };
        let mut model = vec![rimms_runtime::Complex32::new(0.0, 0.0); n];
        let mut x = HeteData::from_slice(&rt, &model).expect("x");
        let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
        y.fragment(row * 4).expect("a row per fragment");
        let mut handles = Vec::new();
        let check = |y: &HeteData<f32>, model: &[rimms_runtime::Complex32], step: usize| {
            let got = y.host().expect("y");
            for (i, z) in model.iter().enumerate() {
                assert_eq!(
                    got[i],
                    z.re.hypot(z.im),
                    "seed {seed} on {on} step {step} [{i}]"
                );
            }
        };
        for step in 0..40 {
            let device = Device::Sim(next(2) as u8);
            match next(5) {
                0 => {
                    let (at, len) = (next(n as u64) as usize, 1 + next(512) as usize);
                    let end = (at + len).min(n);
                    let v = rimms_runtime::Complex32::new(step as f32, seed as f32);
                    x.slice_mut(at..end)
                        .expect("slice")
                        .host_write()
                        .expect("write")
                        .fill(v);
                    model[at..end].fill(v);
                }
                1 => handles.push(x.prefetch_async(device).expect("prefetch")),
                2 => {
                    rt.magnitude(device, &x, &mut y).expect("magnitude");
                    check(&y, &model, step);
                }
                3 => {
                    let (ins, mut outs) =
                        (x.rows(row).expect("rows"), y.rows_mut(row).expect("rows"));
                    rt.scope(|s| {
                        for (r, out) in ins.iter().zip(outs.iter_mut()) {
                            s.magnitude(device, r, out)?;
                        }
                        Ok::<(), rimms_runtime::Error>(())
                    })
                    .expect("scope")
                    .expect("rows");
                    drop(outs);
                    check(&y, &model, step);
                }
                _ => assert_eq!(x.host().expect("x"), &model[..], "seed {seed} step {step}"),
            }
        }
        handles.into_iter().for_each(|h| h.wait());
        let stats = rt.stats();
        let wasted: u64 = stats.spaces.iter().map(|s| s.prefetch_wasted_bytes).sum();
        (stats.total_bytes(), wasted)
    };
    for seed in 0..4u64 {
        let (moved, wasted) = run(seed, true);
        let (moved_off, _) = run(seed, false);
        assert!(
            moved <= moved_off + wasted,
            "seed {seed}: {moved} bytes moved with copies ahead, {moved_off} without, {wasted} wasted"
        );
    }
}

/// A runtime like [`slow_link`], with copies ahead of their calls switched `on` or off.
fn slow_link_prefetching(on: bool) -> Runtime {
    slow_link_builder().prefetch(on).build().expect("runtime")
}

/// The forward FFT of `x` into `y` on sim0, in rows of `points`.
fn forward_on_sim0(
    rt: &Runtime,
    points: usize,
    x: &HeteData<rimms_runtime::Complex32>,
    y: &mut HeteData<rimms_runtime::Complex32>,
) {
    rt.fft(
        Device::Sim(0),
        rimms_runtime::FftDirection::Forward,
        points,
        x,
        y,
    )
    .expect("fft");
}

/// The forward FFT of every row of `points` of `x` into `y` on sim0, one scope call a row.
fn row_ffts_on_sim0(
    rt: &Runtime,
    points: usize,
    x: &HeteData<rimms_runtime::Complex32>,
    y: &mut HeteData<rimms_runtime::Complex32>,
) {
    let (ins, mut outs) = (
        x.rows(points).expect("rows"),
        y.rows_mut(points).expect("rows"),
    );
    rt.scope(|s| {
        for (row, out) in ins.iter().zip(outs.iter_mut()) {
            s.fft(
                Device::Sim(0),
                rimms_runtime::FftDirection::Forward,
                points,
                row,
                out,
            )?;
        }
        Ok::<(), rimms_runtime::Error>(())
    })
    .expect("scope")
    .expect("ffts");
}

/// Every row of `points` of `got` is the DFT of its row of `input`; `what` names the run.
fn assert_row_spectra(
    input: &[rimms_runtime::Complex32],
    got: &[rimms_runtime::Complex32],
    points: usize,
    what: impl std::fmt::Display,
) {
    for (r, (row, got)) in input.chunks(points).zip(got.chunks(points)).enumerate() {
        assert_spectrum(got, &naive_dft(row), format!("{what}, row {r}"));
    }
}

/// `got` is `want` (an f64 DFT) within single precision's error; `what` names it.
fn assert_spectrum(
    got: &[rimms_runtime::Complex32],
    want: &[(f64, f64)],
    what: impl std::fmt::Display,
) {
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g.re) - w.0).hypot(f64::from(g.im) - w.1);
        assert!(
            err <= 1e-3 * (1.0 + w.0.hypot(w.1)),
            "{what} bin {k}: {g} vs {w:?}"
        );
    }
}

/// The DFT of `x`, straight from its definition, in f64.
fn naive_dft(x: &[rimms_runtime::Complex32]) -> Vec<(f64, f64)> {
    let n = x.len();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold((0.0, 0.0), |(re, im), (t, v)| {
                let angle = -2.0 * std::f64::consts::PI * (k * t % n) as f64 / n as f64;
                let (s, c) = angle.sin_cos();
                let (a, b) = (f64::from(v.re), f64::from(v.im));
                (re + a * c - b * s, im + a * s + b * c)
            })
        })
        .collect()
}

/// A scope's row FFTs whose input is on the host, on a sim device behind a slow link: with
/// copies ahead, the merged group runs in pieces (each starting once its own rows landed);
/// off, as one call that waits for every row. The same bytes move either way, one copy per
/// piece, and every row is its DFT.
#[test]
fn a_merged_group_behind_a_slow_link_runs_in_pieces_moving_the_same_bytes() {
    let (rows, points) = (32, 128);
    let input: Vec<rimms_runtime::Complex32> = (0..rows * points)
        .map(|i| rimms_runtime::Complex32::new((i % 13) as f32 - 6.0, (i % 5) as f32))
        .collect();
    let run = |on: bool| {
        let rt = slow_link_prefetching(on);
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, rows * points).expect("y");
        y.fragment(points * 8).expect("a row per fragment");
        row_ffts_on_sim0(&rt, points, &x, &mut y);
        let (merged, pieces) = merges(&rt, "fft");
        let values = y.host().expect("y").to_vec();
        (values, merged, pieces, copies_to_sim(&rt))
    };
    let (ahead, merged, pieces, copies) = run(true);
    let (waited, merged_off, calls_off, copies_off) = run(false);
    // 32 KiB over 20 MB/s is 1.6 ms, 164 latencies of 10 µs: 8 pieces of 4 rows, at most.
    assert_eq!((merged, pieces), (32, 8), "pieces of the merged group");
    assert_eq!(
        (merged_off, calls_off),
        (32, 1),
        "one merged call without copies ahead"
    );
    assert_eq!(
        copies,
        (8, (rows * points * 8) as u64),
        "one copy per piece, every byte once"
    );
    assert_eq!(copies_off, (1, (rows * points * 8) as u64));
    assert_eq!(ahead, waited, "pieces change no value");
    assert_row_spectra(&input, &ahead, points, "with copies ahead");
}

/// The same row FFTs as one direct call (`Runtime::fft`), input on the host: behind the slow
/// link the call runs as the group a scope would hold for its rows, in pieces that each
/// start once their rows landed, with the same bytes and values as without copies ahead. A
/// small call, whose copies are short, runs whole.
#[test]
fn a_direct_row_call_behind_a_slow_link_runs_in_parts_moving_the_same_bytes() {
    let (rows, points) = (32, 128);
    let input: Vec<rimms_runtime::Complex32> = (0..rows * points)
        .map(|i| rimms_runtime::Complex32::new((i % 9) as f32 - 4.0, (i % 7) as f32))
        .collect();
    let run = |on: bool, rows: usize, fragment: usize| {
        let rt = slow_link_prefetching(on);
        let x = HeteData::from_slice(&rt, &input[..rows * points]).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, rows * points).expect("y");
        y.fragment(fragment).expect("y's fragments");
        forward_on_sim0(&rt, points, &x, &mut y);
        let pieces = merges(&rt, "fft").1;
        let values = y.host().expect("y").to_vec();
        (values, pieces, copies_to_sim(&rt), ahead(&rt, "sim0"))
    };
    let bytes = (rows * points * 8) as u64;
    let row = points * 8;
    let (cut, pieces, copies, copied_ahead) = run(true, rows, row);
    let (whole, pieces_off, copies_off, _) = run(false, rows, row);
    // 32 KiB over 20 MB/s is 1.6 ms, 164 latencies of 10 µs: 16 parts, in 8 pieces.
    assert_eq!(
        (pieces, pieces_off),
        (8, 0),
        "pieces with copies ahead, none without"
    );
    assert_eq!(copies, (8, bytes), "one copy per piece, every byte once");
    assert_eq!(copies_off, (1, bytes));
    assert_eq!(
        copied_ahead,
        (bytes, bytes, 0),
        "every piece's rows came ahead, used"
    );
    assert_eq!(cut, whole, "parts change no value");
    assert_row_spectra(&input, &cut, points, "cut");
    // Parts end on y's fragments (here 8 rows): a part that wrote half of one would copy
    // the other half in first.
    let (eight, pieces, copies, _) = run(true, rows, 8 * row);
    assert_eq!(
        (pieces, copies),
        (2, (2, bytes)),
        "4 parts of 8 rows, in 2 pieces"
    );
    assert_eq!(eight, whole);
    // Two rows: 2 KiB take about 100 µs, under the 64 latencies a cut must be worth.
    let (_, pieces, copies, _) = run(true, 2, row);
    assert_eq!((pieces, copies.0), (0, 1), "a short call runs whole");
    // The bound itself: 8 rows' 8 KiB take about 420 µs, 42 latencies, and run whole; 16
    // rows' 16 KiB take 830 µs, 83 latencies, and are cut.
    let (_, pieces, copies, _) = run(true, 8, row);
    assert_eq!((pieces, copies.0), (0, 1), "42 latencies run whole");
    let (_, pieces, _, _) = run(true, 16, row);
    assert!(pieces > 1, "83 latencies are cut, into {pieces} pieces");
    // A ZIP of 4,096 elements (32 KiB an argument, in 4 KiB fragments) is cut on the
    // output's fragments: 8 parts, in 4 pieces of two.
    let rt = slow_link_prefetching(true);
    let n = rows * points;
    let a = HeteData::from_slice(&rt, &input).expect("a");
    let b: Vec<_> = input.iter().rev().copied().collect();
    let b = HeteData::from_slice(&rt, &b).expect("b");
    let mut sum = HeteData::<rimms_runtime::Complex32>::alloc(&rt, n).expect("sum");
    rt.zip(Device::Sim(0), rimms_runtime::ZipOp::Add, &a, &b, &mut sum)
        .expect("zip");
    let want: Vec<_> = input
        .iter()
        .zip(input.iter().rev())
        .map(|(x, y)| x + y)
        .collect();
    assert_eq!(sum.host().expect("sum"), &want[..]);
    assert_eq!(merges(&rt, "zip"), (8, 4));
    // Another runtime's buffer is refused whole, before any copy ahead touches it.
    let other = slow_link_prefetching(true);
    let foreign = HeteData::from_slice(&other, &input).expect("foreign");
    let refused = rt.fft(
        Device::Sim(0),
        rimms_runtime::FftDirection::Forward,
        points,
        &foreign,
        &mut sum,
    );
    assert!(
        matches!(refused, Err(rimms_runtime::Error::ForeignBuffer { .. })),
        "{refused:?}"
    );
    assert_eq!(
        sum.host().expect("sum"),
        &want[..],
        "the output is unchanged"
    );
    assert_eq!(
        other.stats().total_bytes(),
        0,
        "nothing of the other runtime moved"
    );
}

/// Calls of `api` merged, and the merged calls they ran as (0, 0 where none ran).
fn merges(rt: &Runtime, api: &str) -> (u64, u64) {
    let stats = rt.stats();
    let api = stats.apis.iter().find(|a| a.name == api);
    api.map_or((0, 0), |a| (a.merged, a.merged_into))
}

/// Bytes copied ahead into `space`: (issued, used, wasted).
fn ahead(rt: &Runtime, space: &str) -> (u64, u64, u64) {
    let stats = rt.stats();
    let s = stats.space(space).expect("space");
    (
        s.prefetched_bytes,
        s.prefetch_used_bytes,
        s.prefetch_wasted_bytes,
    )
}

/// A steady frame loop (the FFT of `x` on sim0, read on the host): from the second frame on
/// the owner history predicts the host, so every copy back is made the moment the FFT has
/// written, ahead of the read, and the read uses it. Off, the same bytes move, none ahead.
#[test]
fn a_frame_loop_copies_each_output_to_where_it_went_last_frame_ahead_of_its_read() {
    let points = 256;
    let input: Vec<rimms_runtime::Complex32> = (0..points)
        .map(|i| rimms_runtime::Complex32::new((i % 7) as f32, -((i % 3) as f32)))
        .collect();
    let want = naive_dft(&input);
    let run = |on: bool| {
        let rt = slow_link_prefetching(on);
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("y");
        for frame in 0..6 {
            if frame == 3 {
                rt.reset_stats();
            }
            forward_on_sim0(&rt, points, &x, &mut y);
            assert_spectrum(y.host().expect("y"), &want, format!("frame {frame}"));
        }
        let back = rt.stats().bytes("sim0", "host").expect("link");
        (back, ahead(&rt, "host"))
    };
    let bytes = (points * 8) as u64;
    assert_eq!(
        run(true),
        (3 * bytes, (3 * bytes, 3 * bytes, 0)),
        "frames 3..6, on"
    );
    assert_eq!(run(false), (3 * bytes, (0, 0, 0)), "frames 3..6, off");
}

/// A frame loop of a scope's row FFTs on sim0, read on the host: the input stays on sim0,
/// so only the output crosses the link. Once the owner history predicts the host, the group
/// runs in pieces for its output's sake, and each piece's rows start back as soon as they are
/// written (one copy per piece, every one used by the read), while the next piece computes.
#[test]
fn a_group_whose_output_goes_back_each_frame_sends_it_piece_by_piece() {
    let (rows, points) = (32, 128);
    let input: Vec<rimms_runtime::Complex32> = (0..rows * points)
        .map(|i| rimms_runtime::Complex32::new((i % 11) as f32 - 5.0, (i % 4) as f32))
        .collect();
    let rt = slow_link_prefetching(true);
    let mut x = HeteData::<rimms_runtime::Complex32>::alloc(&rt, rows * points).expect("x");
    x.host_write().expect("x").copy_from_slice(&input);
    x.prefetch(Device::Sim(0)).expect("x to sim0, once");
    let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, rows * points).expect("y");
    y.fragment(points * 8).expect("a row per fragment");
    for frame in 0..4 {
        if frame == 2 {
            rt.reset_stats();
        }
        row_ffts_on_sim0(&rt, points, &x, &mut y);
        let got = y.host().expect("y");
        assert_row_spectra(&input, got, points, format!("frame {frame}"));
    }
    let stats = rt.stats();
    let back = stats
        .links
        .iter()
        .find(|l| l.from == "sim0" && l.to == "host")
        .expect("copies back");
    let bytes = (2 * rows * points * 8) as u64;
    // 32 KiB back over 20 MB/s is 1.6 ms, 164 latencies of 10 µs: 8 pieces of 4 rows.
    assert_eq!(
        merges(&rt, "fft"),
        (64, 16),
        "frames 2 and 3 in 8 pieces each"
    );
    assert_eq!(
        (back.copies, back.bytes),
        (16, bytes),
        "one copy back per piece"
    );
    assert_eq!(
        ahead(&rt, "host"),
        (bytes, bytes, 0),
        "every copy back made ahead and used"
    );
}

/// A prediction that proves wrong costs one copy, counted as wasted, and never a value: the
/// loop reads `y` on the host for three frames, then writes it four times before the next
/// read (only the first of those writes is followed by a copy ahead).
/// The bytes moved are those of the same program without copies ahead plus the wasted ones.
#[test]
fn a_wrong_prediction_costs_one_counted_copy_and_no_value() {
    let points = 256;
    let input: Vec<rimms_runtime::Complex32> = (0..points)
        .map(|i| rimms_runtime::Complex32::new(1.0 + (i % 5) as f32, 0.5))
        .collect();
    let want = naive_dft(&input);
    let run = |on: bool| {
        let rt = slow_link_prefetching(on);
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("y");
        let fft = |y: &mut HeteData<rimms_runtime::Complex32>| forward_on_sim0(&rt, points, &x, y);
        for _ in 0..3 {
            fft(&mut y);
            y.host().expect("y");
        }
        // The host copy the history predicts after this write is never read; the next write
        // makes it stale, and the history then predicts nothing more until a read:
        for _ in 0..4 {
            fft(&mut y);
        }
        let got = y.host().expect("y").to_vec();
        (got, rt.stats().total_bytes(), ahead(&rt, "host"))
    };
    let (got, moved, (issued, used, wasted)) = run(true);
    let (got_off, moved_off, _) = run(false);
    let bytes = (points * 8) as u64;
    assert_eq!(wasted, bytes, "the one wrong prediction");
    assert_eq!(issued, used + wasted, "every copy ahead used or wasted");
    assert_eq!(
        moved,
        moved_off + wasted,
        "bytes moved: the synchronous ones plus the wasted"
    );
    assert_eq!(got, got_off);
    assert_spectrum(&got, &want, "the last frame");
}

/// Races with a copy in flight: the buffer freed while its predicted copy is on the link
/// (wasted, nothing else touched); a copy fault in a scope's copy at submission (the call
/// then makes the copy itself and reports the fault, as without copies ahead, and the input
/// is intact); and a block evicted while the copy made ahead into it is unused (wasted, and
/// the call that needs the bytes copies them again and computes the right values).
#[test]
fn a_free_a_fault_and_an_eviction_during_a_copy_ahead_lose_nothing() {
    let points = 1024;
    let input: Vec<rimms_runtime::Complex32> = (0..points)
        .map(|i| rimms_runtime::Complex32::new((i % 11) as f32, 1.0))
        .collect();
    // A free while the predicted copy of `y` to the host is in flight.
    let rt = slow_link_prefetching(true);
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("y");
    for _ in 0..2 {
        forward_on_sim0(&rt, points, &x, &mut y);
        y.host().expect("y");
    }
    forward_on_sim0(&rt, points, &x, &mut y);
    drop(y);
    let bytes = (points * 8) as u64;
    assert_eq!(
        ahead(&rt, "host").2,
        bytes,
        "the freed buffer's copy ahead is wasted"
    );
    assert_eq!(x.host().expect("x"), &input[..], "the input is untouched");

    // A fault in a scope's copies at submission, with and without copies ahead.
    let faulty = |on: bool| {
        let rt = slow_link_prefetching(on);
        let sim = rt.space_of(Device::Sim(0)).expect("sim0");
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("y");
        y.fragment(64 * 8).expect("rows of 64");
        rt.inject_copy_faults(sim, true).expect("faults");
        let outcome = {
            let (ins, mut outs) = (x.rows(64).expect("rows"), y.rows_mut(64).expect("rows"));
            rt.scope(|s| {
                for (row, out) in ins.iter().zip(outs.iter_mut()) {
                    s.fft(
                        Device::Sim(0),
                        rimms_runtime::FftDirection::Forward,
                        64,
                        row,
                        out,
                    )?;
                }
                Ok::<(), rimms_runtime::Error>(())
            })
            .and_then(|submitted| submitted)
        };
        rt.inject_copy_faults(sim, false).expect("faults off");
        let error = outcome.expect_err("the copy fault is reported").to_string();
        (
            error,
            x.host().expect("x").to_vec(),
            rt.stats().total_bytes(),
        )
    };
    let (error_on, x_on, moved_on) = faulty(true);
    let (error_off, x_off, moved_off) = faulty(false);
    assert_eq!(
        error_on, error_off,
        "the same fault as a synchronous copy's"
    );
    assert_eq!((x_on.as_slice(), moved_on), (&input[..], moved_off));
    assert_eq!(x_off, input);

    // An eviction of the block a prefetch filled, before any read there.
    let rt = slow_link_builder()
        .pool("sim0", 3 * points * 8)
        .build()
        .expect("runtime");
    let a = HeteData::from_slice(&rt, &input).expect("a");
    let (b, c) = (
        HeteData::from_slice(&rt, &input).expect("b"),
        HeteData::from_slice(&rt, &input).expect("c"),
    );
    let mut out = HeteData::<f32>::alloc(&rt, points).expect("out");
    let landed = a.prefetch_async(Device::Sim(0)).expect("prefetch");
    landed.wait();
    // b, c and the result take all of sim0, so a's block is evicted unread.
    let mut scratch = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("s");
    rt.zip(
        Device::Sim(0),
        rimms_runtime::ZipOp::Add,
        &b,
        &c,
        &mut scratch,
    )
    .expect("zip");
    // a's copy is wasted; b's and c's came ahead of the zip's parts, and were used.
    let (issued, used, wasted) = ahead(&rt, "sim0");
    assert_eq!(
        (issued, used, wasted),
        (3 * bytes, 2 * bytes, bytes),
        "evicted unread: wasted"
    );
    // With sim0 full, a copy ahead is refused rather than evict what calls use.
    let evictions = rt.stats().space("sim0").expect("sim0").evictions;
    let refused = a.prefetch_async(Device::Sim(0));
    assert!(
        matches!(refused, Err(rimms_runtime::Error::DoesNotFit { .. })),
        "{refused:?}"
    );
    assert_eq!(rt.stats().space("sim0").expect("sim0").evictions, evictions);
    rt.magnitude(Device::Sim(0), &a, &mut out)
        .expect("magnitude");
    for (i, (m, z)) in out.host().expect("out").iter().zip(&input).enumerate() {
        assert!((f64::from(*m) - f64::from(z.norm())).abs() <= 1e-5, "{i}");
    }
}

/// Two threads calling kernels that read one buffer whose copy to sim0 is in flight: one finds
/// it on the locked path and waits for it to land, the other may find its bit back in the
/// summary and take the lock-free path. Repeated so that ThreadSanitizer (which CI runs on
/// this file) sees the copy, its landing and a fast-path read interleave many ways; every
/// result is the input's magnitude, computed here in f64.
#[test]
fn threads_reading_a_buffer_in_flight_see_only_its_landed_bytes() {
    let rt = slow_link();
    // 256 KiB: about 13 ms on the link, longer than a thread takes to start and call even
    // under ThreadSanitizer, so the calls find the copy still in flight.
    let n = 1 << 15;
    for round in 0..8 {
        let input: Vec<rimms_runtime::Complex32> = (0..n)
            .map(|i| rimms_runtime::Complex32::new((i + round) as f32, 2.0))
            .collect();
        let x = HeteData::from_slice(&rt, &input).expect("x");
        let p = x.prefetch_async(Device::Sim(0)).expect("prefetch");
        let results = std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
                        rt.magnitude(Device::Sim(0), &x, &mut y).expect("magnitude");
                        // Whichever path it took, the call started after the copy landed.
                        assert!(
                            p.is_done(),
                            "round {round}: a call ran before its input landed"
                        );
                        y.host().expect("y").to_vec()
                    })
                })
                .collect();
            readers
                .into_iter()
                .map(|r| r.join().expect("reader"))
                .collect::<Vec<_>>()
        });
        for got in results {
            for (i, (v, z)) in got.iter().zip(&input).enumerate() {
                let want = f64::from(z.re).hypot(f64::from(z.im));
                assert!(
                    (f64::from(*v) - want).abs() <= 1e-6 * want,
                    "round {round}, {i}: {v} vs {want}"
                );
            }
        }
    }
}

/// `n` deterministic complex samples, distinct per `seed`.
fn samples(n: usize, seed: usize) -> Vec<rimms_runtime::Complex32> {
    (0..n)
        .map(|i| {
            rimms_runtime::Complex32::new(
                ((i * 7 + seed) % 13) as f32,
                ((i + 3 * seed) % 5) as f32 - 2.0,
            )
        })
        .collect()
}

/// A nearly full pool: `a`'s prefetch is still on the link when a call on other buffers needs
/// the room `a`'s block takes. `a` is used by no call, so the call must get the room (once the
/// copy has landed, as the evictor may not free a block a copy lands in), exactly as it does
/// when the program waits for the prefetch first. It must not fail with `DoesNotFit` because
/// the link happened to be slower than the program.
#[test]
fn a_call_needing_the_room_of_a_block_still_landing_waits_rather_than_fails() {
    let n = 1 << 15; // 256 KiB of complex samples: ~13 ms on the link.
    for wait_first in [true, false] {
        let rt = slow_link_builder()
            .pool("sim0", 2 * n * 8)
            .build()
            .expect("runtime");
        let a = HeteData::from_slice(&rt, &samples(n, 1)).expect("a");
        let b_in = samples(n, 2);
        let b = HeteData::from_slice(&rt, &b_in).expect("b");
        let mut out = HeteData::<f32>::alloc(&rt, n).expect("out");
        // `b` is on sim0 already: the call's only other need is room for `out`.
        b.prefetch(Device::Sim(0)).expect("b on sim0");
        let p = a.prefetch_async(Device::Sim(0)).expect("prefetch");
        if wait_first {
            p.wait();
        }
        rt.magnitude(Device::Sim(0), &b, &mut out)
            .unwrap_or_else(|e| panic!("wait_first {wait_first}: {e}"));
        let got = out.host().expect("out");
        for (i, (m, z)) in got.iter().zip(&b_in).enumerate() {
            assert!((f64::from(*m) - f64::from(z.norm())).abs() <= 1e-5, "{i}");
        }
        assert_eq!(a.host().expect("a"), &samples(n, 1)[..]);
    }
}

/// A link with no latency cuts every direct row call into parts, however short: zero-length,
/// odd-length and offset views, and views whose ends fall inside fragments, keep every value
/// and never panic.
#[test]
fn direct_calls_on_a_zero_latency_link_keep_values_for_odd_views() {
    let rt = Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::ZERO,
                bytes_per_second: 1e8,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let n = 1024;
    let (xa, xb) = (samples(n, 4), samples(n, 9));
    let a = HeteData::from_slice(&rt, &xa).expect("a");
    let b = HeteData::from_slice(&rt, &xb).expect("b");
    let mut out = HeteData::<rimms_runtime::Complex32>::alloc(&rt, n).expect("out");
    out.fragment(64).expect("8 elements a fragment");
    let mut mag = HeteData::<f32>::alloc(&rt, n).expect("mag");
    mag.fragment(32).expect("8 elements a fragment");
    let mut model = vec![rimms_runtime::Complex32::new(0.0, 0.0); n];
    let mut model_mag = vec![0.0f32; n];
    for (k, (start, len)) in [
        (0usize, 0usize),
        (8, 0),
        (3, 0),
        (0, 16),
        (8, 128),
        (0, 1024),
        (16, 256),
        (512, 512),
        (8, 8),
        (0, 256),
    ]
    .into_iter()
    .enumerate()
    {
        let ra = a.slice(start..start + len).expect("a view");
        // The input views start off the output's fragments.
        let sb = (start + 5) % (n - len + 1);
        let rb = b.slice(sb..sb + len).expect("b view");
        {
            let mut o = out.slice_mut(start..start + len).expect("out view");
            rt.zip(Device::Sim(0), ZipOp::Add, &ra, &rb, &mut o)
                .unwrap_or_else(|e| panic!("{k}: zip {start}+{len}: {e}"));
        }
        for i in 0..len {
            model[start + i] = xa[start + i] + xb[sb + i];
        }
        {
            let mut m = mag.slice_mut(start..start + len).expect("mag view");
            rt.magnitude(Device::Sim(0), &rb, &mut m)
                .unwrap_or_else(|e| panic!("{k}: magnitude {start}+{len}: {e}"));
        }
        for i in 0..len {
            model_mag[start + i] = xb[sb + i].norm();
        }
        assert_eq!(out.host().expect("out"), &model[..], "step {k}");
        for (i, (g, w)) in mag.host().expect("mag").iter().zip(&model_mag).enumerate() {
            assert!((g - w).abs() <= 1e-5, "step {k} [{i}]: {g} vs {w}");
        }
    }
    // The views that cut cleanly did run in parts: the path under test was taken.
    let stats = rt.stats();
    for api in ["zip", "magnitude"] {
        let merged = stats
            .apis
            .iter()
            .find(|a| a.name == api)
            .map_or(0, |a| a.merged);
        assert!(merged > 0, "no {api} call was cut into parts");
    }
}

/// The end of a host write the runtime sees: a frame loop whose input the host fills
/// (`host_fill`) and sim0's FFT reads. From the second frame the owner history predicts sim0,
/// so each fill's bytes leave for it as the fill returns, ahead of the call, which uses them;
/// a loop that writes through `host_write` (no end in view) or with copies ahead off moves
/// the same bytes, none ahead. Values are the DFT's every frame.
#[test]
fn a_host_fill_sends_its_bytes_where_the_last_fill_went_as_it_ends() {
    let points = 256;
    let input = |frame: usize| -> Vec<rimms_runtime::Complex32> {
        (0..points)
            .map(|i| rimms_runtime::Complex32::new(((i + frame) % 7) as f32, -((i % 3) as f32)))
            .collect()
    };
    // Bytes sent into sim0 between a fill's start and its end, and all bytes into sim0, over
    // frames 3..6.
    let run = |fill: bool, on: bool| {
        let rt = slow_link_prefetching(on);
        let mut x = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("x");
        let mut y = HeteData::<rimms_runtime::Complex32>::alloc(&rt, points).expect("y");
        let mut sent_by_fills = 0;
        for frame in 0..6 {
            if frame == 3 {
                rt.reset_stats();
            }
            let values = input(frame);
            let before = ahead(&rt, "sim0").0;
            if fill {
                x.host_fill(|x| x.copy_from_slice(&values)).expect("fill");
            } else {
                x.host_write().expect("write").copy_from_slice(&values);
            }
            if frame >= 3 {
                sent_by_fills += ahead(&rt, "sim0").0 - before;
            }
            forward_on_sim0(&rt, points, &x, &mut y);
            assert_spectrum(
                y.host().expect("y"),
                &naive_dft(&values),
                format!("frame {frame}"),
            );
        }
        (sent_by_fills, copies_to_sim(&rt).1, ahead(&rt, "sim0").2)
    };
    let bytes = (points * 8) as u64;
    assert_eq!(
        run(true, true),
        (3 * bytes, 3 * bytes, 0),
        "each fill's bytes leave as it ends"
    );
    assert_eq!(
        run(false, true),
        (0, 3 * bytes, 0),
        "host_write: no end in view"
    );
    assert_eq!(run(true, false), (0, 3 * bytes, 0), "copies ahead off");
}
