//! The macros at work: a user API with cpu and sim implementations moving exactly the
//! minimum, stand-alone kernels, and `parallel_for!` against plain sequential loops.

use crate::common::{self, signal};
use rimms::{Complex32, Device, HeteData, Runtime};

/// `y = a * x + y`, declared once and implemented for two kinds of device.
#[rimms::api]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]);

#[rimms::kernel(api = axpy, device = cpu)]
fn axpy_host(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// A different body for sims, to prove the dispatch picks by device kind.
#[rimms::kernel(api = axpy, device = sim)]
fn axpy_sim(a: f32, x: &[f32], y: &mut [f32]) {
    for i in 0..y.len().min(x.len()) {
        y[i] = a.mul_add(x[i], y[i]);
    }
}

/// A stand-alone kernel on the second sim device.
#[rimms::kernel(device = sim(1))]
fn fill_ramp(start: f32, #[out] y: &mut [f32]) {
    for (i, v) in y.iter_mut().enumerate() {
        *v = start + i as f32;
    }
}

fn runtime() -> Runtime {
    common::cpu_and_two_sims()
}

#[test]
fn a_kernel_pipeline_across_cpu_and_two_sims_moves_the_minimum() {
    let rt = runtime();
    let n = 5000;
    let mut x = HeteData::<f32>::alloc(&rt, n).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    fill_ramp(&rt, 1.0, &mut x).expect("x on sim1");
    // y is fresh (zero): sim0 fills it in place; x moves sim1 -> sim0 (host holds no copy).
    axpy(&rt, Device::Sim(0), 2.0, &x, &mut y).expect("axpy on sim0");
    // Now on the CPU: y comes back from sim0, x from sim1 (cheapest valid source, ties to the
    // lower id: sim0 holds x too now, and sim0 < sim1).
    axpy(&rt, Device::Cpu, 1.0, &x, &mut y).expect("axpy on cpu");
    let want: Vec<f32> = (0..n).map(|i| 3.0 * (1.0 + i as f32)).collect();
    assert_eq!(y.host().expect("host"), &want[..]);
    let s = rt.stats();
    let bytes = (n * 4) as u64;
    assert_eq!(s.bytes("sim1", "sim0").unwrap(), bytes, "x to sim0");
    assert_eq!(
        s.bytes("sim0", "host").unwrap(),
        2 * bytes,
        "x and y to the host, once each"
    );
    assert_eq!(
        s.bytes("host", "sim0").unwrap()
            + s.bytes("host", "sim1").unwrap()
            + s.bytes("sim1", "host").unwrap(),
        0
    );
    assert_eq!(s.total_copies(), 3);
    let api = s.api("axpy").expect("counted");
    assert_eq!((api.calls, api.hits), (2, 0));
}

#[test]
fn an_api_without_an_implementation_for_the_device_kind_is_refused() {
    #[rimms::api]
    fn only_on_cpu(x: &mut [f32]);
    #[rimms::kernel(api = only_on_cpu, device = cpu)]
    fn only_on_cpu_impl(x: &mut [f32]) {
        x.fill(1.0);
    }
    let rt = runtime();
    let mut x = HeteData::<f32>::alloc(&rt, 16).expect("x");
    let err = only_on_cpu(&rt, Device::Sim(0), &mut x).unwrap_err();
    assert_eq!(
        err.to_string(),
        "only_on_cpu has no implementation for sim0 (implemented for: [Cpu])"
    );
    only_on_cpu(&rt, Device::Cpu, &mut x).expect("cpu");
    assert!(x.host().expect("host").iter().all(|&v| v == 1.0));
}

#[test]
fn parallel_for_matches_the_sequential_loop_for_maps_stencils_and_several_outputs() {
    let rt = Runtime::new().expect("runtime");
    let n = 100_000; // above the sequential cut-off, so rayon runs it
    let xs: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25).collect();
    let x = HeteData::from_slice(&rt, &xs).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    let mut z = HeteData::<f32>::alloc(&rt, n).expect("z");
    let mut smooth = HeteData::<f32>::alloc(&rt, n).expect("smooth");
    let a = 3.0f32;
    rimms::parallel_for!(for i in 0..n {
        y[i] = a * x[i] + 1.0;
        z[i] = x[i] * x[i];
    })
    .expect("map");
    // A stencil that only reads its input at neighbouring indices.
    rimms::parallel_for!(for i in 1..n - 1 {
        smooth[i] = (x[i - 1] + x[i] + x[i + 1]) / 3.0;
    })
    .expect("stencil");
    let (mut ys, mut zs, mut ss) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    for i in 0..n {
        ys[i] = a * xs[i] + 1.0;
        zs[i] = xs[i] * xs[i];
    }
    for i in 1..n - 1 {
        ss[i] = (xs[i - 1] + xs[i] + xs[i + 1]) / 3.0;
    }
    assert_eq!(y.host().expect("y"), &ys[..]);
    assert_eq!(z.host().expect("z"), &zs[..]);
    assert_eq!(smooth.host().expect("smooth"), &ss[..]);
    assert_eq!(rt.stats().total_copies(), 0);
}

/// A loop that writes every element of a part of a buffer without reading it needs nothing
/// copied in for that part, but the rest of the buffer keeps its values: a prefix and a suffix,
/// each against the ramp a kernel left on sim1.
#[test]
fn a_write_only_loop_over_part_of_a_buffer_keeps_the_rest() {
    let rt = runtime();
    let n = 50_000;
    for (part, name) in [(0..n / 2, "prefix"), (n / 4..n, "suffix")] {
        let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
        fill_ramp(&rt, 1.0, &mut y).expect("ramp on sim1");
        let (lo, hi) = (part.start, part.end);
        rimms::parallel_for!(for i in lo..hi {
            y[i] = -1.0;
        })
        .expect("loop");
        let want: Vec<f32> = (0..n)
            .map(|i| {
                if part.contains(&i) {
                    -1.0
                } else {
                    1.0 + i as f32
                }
            })
            .collect();
        assert_eq!(y.host().expect("y"), &want[..], "{name}");
    }
}

/// A loop reads any view or plain container at the loop index: a view, a mutable view it
/// only reads, a vector, a Rust slice and an array, each element as a plain loop reads it.
#[test]
fn a_loop_reads_views_vectors_slices_and_arrays() {
    let rt = runtime();
    let n = 64;
    let x =
        HeteData::from_slice(&rt, &(0..2 * n).map(|i| i as f32).collect::<Vec<_>>()).expect("x");
    let mut w = HeteData::from_slice(&rt, &vec![3.0f32; 2 * n]).expect("w");
    let upper = x.slice(n..2 * n).expect("view");
    let lower = w.slice_mut(0..n).expect("mutable view");
    let tens: Vec<f32> = (0..n).map(|i| 10.0 * i as f32).collect();
    let hundreds: Vec<f32> = (0..n).map(|i| 100.0 * i as f32).collect();
    let slice: &[f32] = &hundreds;
    let halves = [0.5f32; 64];
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    rimms::parallel_for!(for i in 0..n {
        y[i] = upper[i] + lower[i] + tens[i] + slice[i] + halves[i];
    })
    .expect("loop");
    let want: Vec<f32> = (0..n)
        .map(|i| (n + i) as f32 + 3.0 + 10.0 * i as f32 + 100.0 * i as f32 + 0.5)
        .collect();
    assert_eq!(y.host().expect("y"), &want[..]);
}

#[test]
fn parallel_for_between_device_kernels_syncs_each_buffer_once() {
    let rt = runtime();
    let n = 50_000;
    let mut x = HeteData::<f32>::alloc(&rt, n).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    fill_ramp(&rt, 0.0, &mut x).expect("x on sim1");
    axpy(&rt, Device::Sim(0), 1.0, &x, &mut y).expect("y = x on sim0");
    rt.reset_stats();
    // Reads x (valid on sim0 and sim1), reads and writes y (valid on sim0).
    rimms::parallel_for!(for i in 0..n {
        y[i] = y[i] * 2.0 + x[i];
    })
    .expect("loop");
    let s = rt.stats();
    let bytes = (n * 4) as u64;
    assert_eq!(
        s.copies("sim0", "host").unwrap(),
        2,
        "x and y, once each, not once per element"
    );
    assert_eq!(s.bytes("sim0", "host").unwrap(), 2 * bytes);
    assert_eq!(s.total_copies(), 2);
    // y is host-owned after the loop: the next kernel on sim0 moves it back, once.
    axpy(&rt, Device::Sim(0), 1.0, &x, &mut y).expect("axpy");
    assert_eq!(rt.stats().bytes("host", "sim0").unwrap(), bytes);
    let want: Vec<f32> = (0..n).map(|i| 4.0 * i as f32).collect();
    assert_eq!(y.host().expect("host"), &want[..]);
}

#[test]
fn parallel_for_over_views_and_a_range_past_the_buffer() {
    let rt = Runtime::new().expect("runtime");
    let mut v = HeteData::from_slice(&rt, &signal(2048, 4)).expect("v");
    let before = v.to_vec().expect("host");
    {
        let mut half = v.slice_mut(0..1024).expect("aligned half");
        rimms::parallel_for!(for i in 0..1024 {
            half[i] = half[i] * 2.0;
        })
        .expect("loop over a view");
    }
    let after = v.to_vec().expect("host");
    assert!(after[..1024]
        .iter()
        .zip(&before)
        .all(|(a, b)| *a == *b * 2.0));
    assert_eq!(after[1024..], before[1024..]);
    // A range past the end is an error, not a panic, and nothing was written.
    let err = rimms::parallel_for!(for i in 0..4096 {
        v[i] = Complex32::new(0.0, 0.0);
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            rimms::Error::OutOfBounds {
                end: 4096,
                len: 2048,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(v.to_vec().expect("host"), after);
}
