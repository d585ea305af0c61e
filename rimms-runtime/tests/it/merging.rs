//! Calls submitted to a scope merge into one device call when they continue one another
//! (`kernel::merge`): the results are those of the calls one by one (and of an independent
//! DFT), no more bytes or copies move, calls that do not continue one another or run on
//! different devices stay apart, a failing member fails alone, and the stats count it all.

use rimms_runtime::{
    ApiDecl, ApiStats, BackendError, Complex32, Device, Error, ExecMode, FftDirection, HeteData,
    Joins, KernelArg, MergeRule, Runtime, SimConfig, ZipOp,
};

const N: usize = 64;
const ROWS: usize = 16;

fn runtime(merge: bool) -> Runtime {
    runtime_with(merge, ExecMode::Tracked, SimConfig::default())
}

fn runtime_with(merge: bool, mode: ExecMode, sim: SimConfig) -> Runtime {
    Runtime::builder()
        .host_pool(64 << 20)
        .sim(SimConfig {
            pool_bytes: 64 << 20,
            ..sim
        })
        .mode(mode)
        .merge_calls(merge)
        .build()
        .expect("runtime")
}

fn signal(len: usize, seed: u32) -> Vec<Complex32> {
    (0..len)
        .map(|i| {
            let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000;
            Complex32::new(
                x as f32 / 500.0 - 1.0,
                ((x * 7) % 1000) as f32 / 500.0 - 1.0,
            )
        })
        .collect()
}

/// An O(n²) DFT per row in f64: the reference, independent of rustfft.
fn dft_rows(x: &[Complex32], n: usize) -> Vec<Complex32> {
    x.chunks(n)
        .flat_map(|row| {
            (0..n).map(move |k| {
                let (mut re, mut im) = (0.0f64, 0.0f64);
                for (j, v) in row.iter().enumerate() {
                    let a = -2.0 * std::f64::consts::PI * (j * k % n) as f64 / n as f64;
                    re += v.re as f64 * a.cos() - v.im as f64 * a.sin();
                    im += v.re as f64 * a.sin() + v.im as f64 * a.cos();
                }
                Complex32::new(re as f32, im as f32)
            })
        })
        .collect()
}

/// A matrix of `len` elements whose fragments are rows of `N`, so each row can be a mutable
/// view of its own.
fn rows_of(rt: &Runtime, values: &[Complex32]) -> HeteData<Complex32> {
    let mut data = HeteData::from_slice(rt, values).expect("matrix");
    data.fragment(N * 8).expect("row fragments");
    data
}

fn zeros(rt: &Runtime, len: usize) -> HeteData<Complex32> {
    rows_of(rt, &vec![Complex32::new(0.0, 0.0); len])
}

fn api(rt: &Runtime, name: &str) -> ApiStats {
    rt.stats().api(name).expect("a built-in API")
}

/// Row-wise forward FFTs of `x` on `device`, one scope call per row taken in `order`.
fn scoped_fft(rt: &Runtime, device: Device, x: &[Complex32], order: &[usize]) -> Vec<Complex32> {
    let input = HeteData::from_slice(rt, x).expect("x");
    let mut output = zeros(rt, x.len());
    {
        let rows = input.rows(N).expect("rows");
        let mut outs: Vec<_> = output
            .rows_mut(N)
            .expect("rows")
            .into_iter()
            .map(Some)
            .collect();
        let mut pairs: Vec<_> = order
            .iter()
            .map(|&r| (&rows[r], outs[r].take().expect("each row once")))
            .collect();
        rt.scope(|s| {
            for (row, out) in pairs.iter_mut() {
                s.fft(device, FftDirection::Forward, N, *row, out)?;
            }
            Ok::<(), Error>(())
        })
        .expect("scope")
        .expect("calls accepted");
    }
    output.to_vec().expect("y")
}

fn in_order() -> Vec<usize> {
    (0..ROWS).collect()
}

fn close(a: &[Complex32], b: &[Complex32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).norm() < 1e-3)
}

#[test]
fn merged_ffts_equal_the_calls_one_by_one_and_a_dft() {
    let x = signal(ROWS * N, 1);
    let reference = dft_rows(&x, N);
    for device in [Device::Cpu, Device::Sim(0)] {
        let (on, off) = (runtime(true), runtime(false));
        let merged = scoped_fft(&on, device, &x, &in_order());
        let apart = scoped_fft(&off, device, &x, &in_order());
        assert_eq!(merged, apart, "{device}: merged and unmerged differ");
        assert!(close(&merged, &reference), "{device}: not the DFT");
        let fft = api(&on, "fft");
        assert_eq!(
            (fft.merged, fft.merged_into, fft.calls),
            (ROWS as u64, 1, 1)
        );
        let fft = api(&off, "fft");
        assert_eq!(
            (fft.merged, fft.merged_into, fft.calls),
            (0, 0, ROWS as u64)
        );
    }
}

#[test]
fn merging_moves_the_bytes_of_the_calls_one_by_one_in_no_more_copies() {
    let x = signal(ROWS * N, 2);
    // Fragments of one row, so the unmerged calls each copy their own row.
    let run = |rt: &Runtime, scoped: bool| {
        let mut input = HeteData::from_slice(rt, &x).expect("x");
        input.fragment(N * 8).expect("fragment");
        let mut output = zeros(rt, x.len());
        output.fragment(N * 8).expect("fragment");
        rt.reset_stats();
        {
            let rows = input.rows(N).expect("rows");
            let mut outs = output.rows_mut(N).expect("rows");
            if scoped {
                rt.scope(|s| {
                    for (row, out) in rows.iter().zip(outs.iter_mut()) {
                        s.fft(Device::Sim(0), FftDirection::Forward, N, row, out)?;
                    }
                    Ok::<(), Error>(())
                })
                .expect("scope")
                .expect("calls");
            } else {
                for (row, out) in rows.iter().zip(outs.iter_mut()) {
                    rt.fft(Device::Sim(0), FftDirection::Forward, N, row, out)
                        .expect("eager call");
                }
            }
        }
        let y = output.to_vec().expect("y");
        let stats = rt.stats();
        (y, stats.total_bytes(), stats.total_copies())
    };
    let (merged, merged_bytes, merged_copies) = run(&runtime(true), true);
    let (eager, eager_bytes, eager_copies) = run(&runtime(true), false);
    let (apart, apart_bytes, apart_copies) = run(&runtime(false), true);
    assert_eq!(merged, eager);
    assert_eq!(merged, apart);
    // The input in and the output back, once each, whichever way the calls ran.
    let matrix = (ROWS * N * 8) as u64;
    assert_eq!(
        (merged_bytes, eager_bytes, apart_bytes),
        (2 * matrix, 2 * matrix, 2 * matrix)
    );
    // Merged: one copy in (the whole range, coalesced) and one back; one by one: one per row
    // in, and the read-back coalesced into one.
    assert_eq!(merged_copies, 2);
    assert_eq!(eager_copies, ROWS as u64 + 1);
    assert_eq!(apart_copies, ROWS as u64 + 1);
}

#[test]
fn rows_out_of_order_or_with_gaps_do_not_merge_and_still_compute_right() {
    let x = signal(ROWS * N, 3);
    let reference = dft_rows(&x, N);
    let reversed: Vec<usize> = (0..ROWS).rev().collect();
    let strided: Vec<usize> = (0..ROWS).step_by(2).chain((1..ROWS).step_by(2)).collect();
    for order in [reversed, strided] {
        let rt = runtime(true);
        let y = scoped_fft(&rt, Device::Cpu, &x, &order);
        assert!(close(&y, &reference), "order {order:?}");
        let fft = api(&rt, "fft");
        assert_eq!((fft.merged, fft.calls), (0, ROWS as u64), "order {order:?}");
    }
}

/// A run of rows that breaks off (a gap, a step back) after a group holds several of them: the row that breaks the run starts a new group, each run merges
/// alone, and the results are the DFT's. (Joins after a group's second member take the lean
/// continuation check, `Group::continued_alike`; this is its refusal seen from a scope.)
#[test]
fn a_run_of_rows_that_breaks_off_after_several_starts_a_new_group() {
    let x = signal(ROWS * N, 4);
    let reference = dft_rows(&x, N);
    // Rows 0–4, then after a gap 6–15, then after a step back row 5.
    let order: Vec<usize> = (0..5).chain(6..ROWS).chain([5]).collect();
    for device in [Device::Cpu, Device::Sim(0)] {
        let rt = runtime(true);
        let y = scoped_fft(&rt, device, &x, &order);
        assert!(close(&y, &reference), "{device}: not the DFT");
        let fft = api(&rt, "fft");
        assert_eq!(
            (fft.merged, fft.merged_into, fft.calls),
            (ROWS as u64 - 1, 2, 3),
            "{device}: rows 0–4 and 6–15 merge apart, row 5 runs alone"
        );
    }
}

#[test]
fn calls_on_different_devices_are_grouped_per_device() {
    let x = signal(ROWS * N, 4);
    let reference = dft_rows(&x, N);
    let input = |rt: &Runtime| HeteData::from_slice(rt, &x).expect("x");
    // Alternating devices: each device sees every other row, which do not follow one another.
    let rt = runtime(true);
    let (xs, mut ys) = (input(&rt), zeros(&rt, x.len()));
    {
        let (rows, mut outs) = (xs.rows(N).expect("rows"), ys.rows_mut(N).expect("rows"));
        rt.scope(|s| {
            for (r, (row, out)) in rows.iter().zip(outs.iter_mut()).enumerate() {
                let device = if r % 2 == 0 {
                    Device::Cpu
                } else {
                    Device::Sim(0)
                };
                s.fft(device, FftDirection::Forward, N, row, out)?;
            }
            Ok::<(), Error>(())
        })
        .expect("scope")
        .expect("calls");
    }
    assert!(close(&ys.to_vec().expect("y"), &reference));
    assert_eq!(api(&rt, "fft").merged, 0);
    // First half on the CPU, second on the sim: one merged call on each.
    let rt = runtime(true);
    let (xs, mut ys) = (input(&rt), zeros(&rt, x.len()));
    {
        let (rows, mut outs) = (xs.rows(N).expect("rows"), ys.rows_mut(N).expect("rows"));
        rt.scope(|s| {
            for (r, (row, out)) in rows.iter().zip(outs.iter_mut()).enumerate() {
                let device = if r < ROWS / 2 {
                    Device::Cpu
                } else {
                    Device::Sim(0)
                };
                s.fft(device, FftDirection::Forward, N, row, out)?;
            }
            Ok::<(), Error>(())
        })
        .expect("scope")
        .expect("calls");
    }
    assert!(close(&ys.to_vec().expect("y"), &reference));
    let fft = api(&rt, "fft");
    assert_eq!(
        (fft.merged, fft.merged_into, fft.calls),
        (ROWS as u64, 2, 2)
    );
}

#[test]
fn zips_sharing_an_operand_merge_into_one_zip_rows() {
    let (a, f) = (signal(ROWS * N, 5), signal(N, 6));
    let expected: Vec<Complex32> = a
        .iter()
        .enumerate()
        .map(|(i, v)| v * f[i % N].conj())
        .collect();
    for merge in [true, false] {
        let rt = runtime(merge);
        let (xs, fs) = (
            HeteData::from_slice(&rt, &a).expect("a"),
            HeteData::from_slice(&rt, &f).expect("f"),
        );
        let mut ys = zeros(&rt, a.len());
        {
            let (rows, mut outs) = (xs.rows(N).expect("rows"), ys.rows_mut(N).expect("rows"));
            rt.scope(|s| {
                for (row, out) in rows.iter().zip(outs.iter_mut()) {
                    s.zip(Device::Sim(0), ZipOp::MulConj, row, &fs, out)?;
                }
                Ok::<(), Error>(())
            })
            .expect("scope")
            .expect("calls");
        }
        let y = ys.to_vec().expect("y");
        assert!(y.iter().zip(&expected).all(|(p, q)| (p - q).norm() < 1e-5));
        let (zip, rows) = (api(&rt, "zip"), api(&rt, "zip_rows"));
        if merge {
            assert_eq!(
                (zip.merged, zip.merged_into, zip.calls, rows.calls),
                (16, 1, 0, 1)
            );
        } else {
            assert_eq!((zip.merged, zip.calls, rows.calls), (0, ROWS as u64, 0));
        }
    }
}

#[test]
fn calls_made_directly_and_baseline_mode_never_merge() {
    let x = signal(ROWS * N, 7);
    let reference = dft_rows(&x, N);
    // Direct calls inside a job run when made: nothing is held.
    let rt = runtime(true);
    let xs = HeteData::from_slice(&rt, &x).expect("x");
    let mut ys = zeros(&rt, x.len());
    {
        let (rows, mut outs) = (xs.rows(N).expect("rows"), ys.rows_mut(N).expect("rows"));
        let pairs = &mut outs;
        rt.scope(|s| {
            s.spawn(move |rt| {
                for (row, out) in rows.iter().zip(pairs.iter_mut()) {
                    rt.fft(Device::Cpu, FftDirection::Forward, N, row, out)?;
                }
                Ok(())
            });
        })
        .expect("scope");
    }
    assert!(close(&ys.to_vec().expect("y"), &reference));
    assert_eq!(api(&rt, "fft").merged, 0);
    // Baseline (CEDR's behaviour) keeps its calls one by one even when submitted to a scope.
    let rt = runtime_with(true, ExecMode::Baseline, SimConfig::default());
    let y = scoped_fft(&rt, Device::Sim(0), &x, &in_order());
    assert!(close(&y, &reference));
    let fft = api(&rt, "fft");
    assert_eq!((fft.merged, fft.calls), (0, ROWS as u64));
}

/// `out = 2 · input` on u32, failing on any input of 13: a member that fails alone.
static DOUBLE: ApiDecl = ApiDecl::new("double_unless_13");
static DOUBLE_RULES: &[&MergeRule] = &[&MergeRule {
    api: &DOUBLE,
    runs_as: &DOUBLE,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, args| {
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        let calls = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        rt.launch_host(device, &DOUBLE, calls, |[i, o]| {
            let (i, o) = (i.into_slice::<u32>()?, o.into_slice_mut::<u32>()?);
            if i.contains(&13) {
                return Err(Error::Kernel {
                    api: "double_unless_13",
                    device,
                    source: BackendError::Invalid("13".into()),
                });
            }
            for (o, i) in o.iter_mut().zip(i) {
                *o = 2 * i;
            }
            Ok(())
        })
    },
}];

#[test]
fn a_failing_member_fails_alone_and_the_scope_reports_it() {
    const ROW: usize = 1024; // one 4 KiB fragment per row
    for merge in [true, false] {
        let rt = runtime(merge);
        let mut x: Vec<u32> = (100..100 + 4 * ROW as u32).collect();
        x[2 * ROW + 5] = 13;
        let xs = HeteData::from_slice(&rt, &x).expect("x");
        let mut ys = HeteData::from_slice(&rt, &vec![7u32; 4 * ROW]).expect("y");
        let outcome = {
            let (rows, mut outs) = (xs.rows(ROW).expect("rows"), ys.rows_mut(ROW).expect("rows"));
            rt.scope(|s| {
                for (row, out) in rows.iter().zip(outs.iter_mut()) {
                    let args = [KernelArg::read("input", row), KernelArg::write("out", out)];
                    s.call(Device::Sim(0), DOUBLE_RULES, [0, 0], args)?;
                }
                Ok::<(), Error>(())
            })
        };
        match outcome {
            Err(Error::Kernel {
                source: BackendError::Invalid(why),
                ..
            }) => assert_eq!(why, "13"),
            other => panic!("merge {merge}: expected the member's error, got {other:?}"),
        }
        let y = ys.to_vec().expect("y");
        for (i, (&y, &x)) in y.iter().zip(&x).enumerate() {
            let expected = if i / ROW == 2 { 7 } else { 2 * x };
            assert_eq!(y, expected, "merge {merge}: element {i}");
        }
        ys.validate().expect("one trusted copy per fragment");
    }
}

#[test]
fn a_faulting_device_fails_its_group_and_not_the_other_devices() {
    let x = signal(ROWS * N, 8);
    let reference = dft_rows(&x, N);
    let rt = runtime_with(
        true,
        ExecMode::Tracked,
        SimConfig {
            fail_kernels: true,
            ..SimConfig::default()
        },
    );
    let xs = HeteData::from_slice(&rt, &x).expect("x");
    let before = vec![Complex32::new(9.0, 9.0); x.len()];
    let mut ys = rows_of(&rt, &before);
    let outcome = {
        let (rows, mut outs) = (xs.rows(N).expect("rows"), ys.rows_mut(N).expect("rows"));
        rt.scope(|s| {
            for (r, (row, out)) in rows.iter().zip(outs.iter_mut()).enumerate() {
                let device = if r < ROWS / 2 {
                    Device::Cpu
                } else {
                    Device::Sim(0)
                };
                s.fft(device, FftDirection::Forward, N, row, out)?;
            }
            Ok::<(), Error>(())
        })
    };
    assert!(matches!(outcome, Err(Error::Kernel { .. })), "{outcome:?}");
    let y = ys.to_vec().expect("y");
    let half = ROWS / 2 * N;
    assert!(close(&y[..half], &reference[..half]), "the CPU's rows");
    assert_eq!(
        &y[half..],
        &before[half..],
        "the sim's rows keep their last valid copy"
    );
    // The sim's merged call, then each of its rows again on its own.
    let fft = api(&rt, "fft");
    assert_eq!((fft.merged, fft.merged_into), (ROWS as u64, 2));
    assert_eq!(fft.calls, 2 + (ROWS / 2) as u64);
}

#[test]
fn bad_shapes_are_refused_when_submitted() {
    let rt = runtime(true);
    let xs = HeteData::from_slice(&rt, &signal(3 * 10, 9)).expect("x");
    let mut ys = HeteData::<Complex32>::alloc(&rt, 30).expect("y");
    let outcome = rt
        .scope(|s| s.fft(Device::Cpu, FftDirection::Forward, 16, &xs, &mut ys))
        .expect("no job failed");
    assert!(matches!(outcome, Err(Error::Shape { .. })), "{outcome:?}");
    assert_eq!(api(&rt, "fft").calls, 0);
}
