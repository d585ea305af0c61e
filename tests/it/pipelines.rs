//! DESIGN.md's 2FFT and FZF chains on a sim device, in tracked and baseline modes: results
//! against a direct DFT in f64, element by element, bytes moved asserted exactly.

use crate::common::{self, assert_close, signal, to_f64};
use rimms::{Complex32, Device, ExecMode, FftDirection, HeteData, Runtime, SimConfig};

const N: usize = 256;
const ROWS: usize = 4;
const LEN: usize = N * ROWS;
const BYTES: u64 = (LEN * 8) as u64;
const DEV: Device = Device::Sim(0);
/// Radix-2 passes of a chain of two FFTs of N points.
const PASSES: u32 = 2 * N.trailing_zeros();

fn runtime(mode: ExecMode) -> Runtime {
    Runtime::builder()
        .sim(SimConfig::default())
        .mode(mode)
        .build()
        .expect("runtime")
}

/// FFT then inverse FFT on the device; returns the result and (bytes in, bytes out).
fn two_fft(mode: ExecMode) -> (Vec<Complex32>, u64, u64, u64) {
    let rt = runtime(mode);
    let x = HeteData::from_slice(&rt, &signal(LEN, 1)).expect("x");
    let mut spectrum = HeteData::alloc(&rt, LEN).expect("alloc");
    let mut y = HeteData::alloc(&rt, LEN).expect("alloc");
    rt.fft(DEV, FftDirection::Forward, N, &x, &mut spectrum)
        .expect("fft");
    rt.fft(DEV, FftDirection::Inverse, N, &spectrum, &mut y)
        .expect("ifft");
    let out = y.to_vec().expect("host");
    let s = rt.stats();
    (
        out,
        s.bytes("host", "sim0").unwrap(),
        s.bytes("sim0", "host").unwrap(),
        s.total_copies(),
    )
}

#[test]
fn two_fft_returns_the_input_and_moves_the_minimum_when_tracked() {
    let (y, to_dev, from_dev, copies) = two_fft(ExecMode::Tracked);
    assert_close(&y, &to_f64(&signal(LEN, 1)), PASSES, "tracked 2FFT");
    // x goes in once; only y comes back; the spectrum never leaves the device.
    assert_eq!((to_dev, from_dev, copies), (BYTES, BYTES, 2));
}

#[test]
fn two_fft_in_baseline_copies_every_argument_at_every_call() {
    let (y, to_dev, from_dev, copies) = two_fft(ExecMode::Baseline);
    assert_close(&y, &to_f64(&signal(LEN, 1)), PASSES, "baseline 2FFT");
    // Each of the two calls copies its input in and its output out.
    assert_eq!((to_dev, from_dev, copies), (2 * BYTES, 2 * BYTES, 4));
}

fn fzf(mode: ExecMode) -> (Vec<Complex32>, rimms::Stats) {
    let rt = runtime(mode);
    let y = common::fzf(&rt, [DEV; 3], LEN, N);
    (y, rt.stats())
}

fn fzf_reference() -> Vec<(f64, f64)> {
    common::fzf_reference(LEN, N)
}

#[test]
fn fzf_matches_the_direct_dft_and_moves_the_minimum_when_tracked() {
    let (y, s) = fzf(ExecMode::Tracked);
    assert_close(&y, &fzf_reference(), PASSES, "tracked FZF");
    assert_eq!(
        s.bytes("host", "sim0").unwrap(),
        2 * BYTES,
        "x and the filter, once each"
    );
    assert_eq!(s.bytes("sim0", "host").unwrap(), BYTES, "only y comes back");
    assert_eq!(s.total_copies(), 3);
    let fft = s.api("fft").expect("fft stats");
    assert_eq!(
        (fft.calls, fft.hits),
        (2, 1),
        "the inverse finds its input on the device"
    );
}

#[test]
fn fzf_in_baseline_moves_what_cedr_moves() {
    let (y, s) = fzf(ExecMode::Baseline);
    assert_close(&y, &fzf_reference(), PASSES, "baseline FZF");
    // fft: x in, spectrum out; zip: spectrum and filter in, product out; ifft: product in, y out.
    assert_eq!(s.bytes("host", "sim0").unwrap(), 4 * BYTES);
    assert_eq!(s.bytes("sim0", "host").unwrap(), 3 * BYTES);
    assert_eq!(s.total_copies(), 7);
    // One device allocation per argument per call, all freed.
    let sim = s.space("sim0").expect("sim0");
    assert_eq!((sim.allocations, sim.frees, sim.in_use), (7, 7, 0));
}

#[test]
fn fzf_on_the_cpu_moves_nothing() {
    let rt = runtime(ExecMode::Tracked);
    let y = common::fzf(&rt, [Device::Cpu; 3], LEN, N);
    assert_close(&y, &fzf_reference(), PASSES, "FZF on the CPU");
    assert_eq!(rt.stats().total_copies(), 0);
}

/// A `parallel_for!` that fills a buffer ends where the runtime sees it: from the second frame
/// its bytes leave for sim0, where the last frame's went, before the call that reads them
/// (behind a link that takes its time), and the FFT still reads the loop's values.
#[test]
fn a_loops_writes_leave_for_where_they_went_last_frame_as_it_ends() {
    let rt = Runtime::builder()
        .sim(SimConfig {
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let mut x = HeteData::<Complex32>::alloc(&rt, LEN).expect("x");
    let mut y = HeteData::<Complex32>::alloc(&rt, LEN).expect("y");
    for frame in 0..4 {
        let scale = frame as f32 + 1.0;
        let sent_before = rt.stats().space("sim0").expect("sim0").prefetched_bytes;
        rimms::parallel_for!(for i in 0..LEN {
            x[i] = Complex32::new(scale * (i % 5) as f32, 0.0);
        })
        .expect("loop");
        let sent = rt.stats().space("sim0").expect("sim0").prefetched_bytes - sent_before;
        let expected = if frame == 0 { 0 } else { BYTES };
        assert_eq!(
            sent, expected,
            "frame {frame}: bytes sent as the loop ended"
        );
        rt.fft(DEV, FftDirection::Forward, N, &x, &mut y)
            .expect("fft");
        // Row r's bin 0 is the sum of its samples.
        let y = y.host().expect("y");
        for r in 0..ROWS {
            let sum: f32 = (0..N).map(|k| scale * ((r * N + k) % 5) as f32).sum();
            assert!(
                (y[r * N].re - sum).abs() <= 1e-3 * sum,
                "frame {frame}, row {r}"
            );
        }
    }
}
