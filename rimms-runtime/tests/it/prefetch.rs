//! Asynchronous prefetch (`HeteData::prefetch_async`, RIMMS's `hete_Sync_Async`) on a sim
//! device whose link takes its modelled time: one copy, in flight until its time has passed;
//! the call that needs the bytes shares that copy and starts only once it has landed; a write
//! meanwhile waits for it; and values always match a plain model.

use rimms_runtime::{Access, Device, HeteData, LinkModel, Runtime, SimConfig};
use std::time::Duration;

/// A runtime with one sim device behind a slow, timed link: 1 MiB takes about 50 ms.
fn slow_link() -> Runtime {
    Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(10),
                bytes_per_second: 20e6,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime")
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
    // The prefetched copy was stale after the write: the call copied the new bytes.
    assert_eq!(copies_to_sim(&rt).0, 2);
    assert!(y.host().expect("y").iter().all(|&v| v == 2.0));
}

/// Random programs of host writes, asynchronous prefetches to either of two sim devices,
/// kernels on them and host reads, against a plain model of the values.
#[test]
fn random_programs_with_prefetches_in_flight_keep_every_value() {
    let rt = Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(5),
                bytes_per_second: 200e6,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .sim(SimConfig {
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let n = 4096;
    for seed in 0..4u64 {
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
        let mut handles = Vec::new();
        for step in 0..40 {
            let device = Device::Sim(next(2) as u8);
            match next(4) {
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
                    let got = y.host().expect("y");
                    for (i, z) in model.iter().enumerate() {
                        let want = z.re.hypot(z.im);
                        assert_eq!(got[i], want, "seed {seed} step {step} [{i}]");
                    }
                }
                _ => assert_eq!(x.host().expect("x"), &model[..], "seed {seed} step {step}"),
            }
        }
        handles.into_iter().for_each(|h| h.wait());
    }
}

/// A runtime like [`slow_link`], with copies ahead of their calls switched `on` or off.
fn slow_link_prefetching(on: bool) -> Runtime {
    Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(10),
                bytes_per_second: 20e6,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .prefetch(on)
        .build()
        .expect("runtime")
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
        drop(outs);
        let fft = rt
            .stats()
            .apis
            .into_iter()
            .find(|a| a.name == "fft")
            .expect("fft ran");
        let values = y.host().expect("y").to_vec();
        (values, fft.merged, fft.merged_into, copies_to_sim(&rt))
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
    for (r, row) in input.chunks(points).enumerate() {
        for (k, want) in naive_dft(row).into_iter().enumerate() {
            let got = ahead[r * points + k];
            let err = (f64::from(got.re) - want.0).hypot(f64::from(got.im) - want.1);
            assert!(
                err <= 1e-3 * (1.0 + want.0.hypot(want.1)),
                "row {r} bin {k}: {got} vs {want:?}"
            );
        }
    }
}
