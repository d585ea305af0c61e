//! Every app on cpu and sim in all three modes (and on the GPU in baseline and rimms mode where
//! there is one): rimms moves exactly the minimum (the
//! constants once, each frame's input in and its result out), baseline moves what CEDR moves
//! (every call's inputs in and its output out), native moves the minimum too, and all agree on
//! the result. The expected figures are worked out here from each app's data flow. Where the
//! generated input comes with an independent truth (the correlator's delay, pulse Doppler's
//! bins, SAR's scatterer ranges), every mode on every mapping is also held to it, so modes
//! that agree on a wrong answer fail.

use rimms_cli::apps::{
    correlator, fzf, pulse_doppler, sar, two_fft, zip3x, AppError, Mapping, Mode, Options, Run,
};
use std::fmt::Debug;

use crate::common;

const FRAMES: u64 = 2;
/// Bytes of a complex f32 and of an f32.
const C: u64 = 8;
const F: u64 = 4;

/// `times` kernel calls, each reading arguments of these byte sizes and writing one output.
struct Call<'a> {
    times: u64,
    reads: &'a [u64],
    writes: u64,
}

const fn call(times: u64, reads: &[u64], writes: u64) -> Call<'_> {
    Call {
        times,
        reads,
        writes,
    }
}

/// An app's data flow per frame.
struct Flow<'a> {
    /// Written once by the host, read by kernels every frame.
    constants: u64,
    /// Written by the host every frame.
    input: u64,
    /// Read by the host every frame.
    output: u64,
    calls: &'a [Call<'a>],
}

/// The mappings to check, each with its card's space name and its modes: cpu and sim
/// always, and GPU 0 where there is one (whose hand-written code is an example of its own).
fn mappings() -> Vec<(Mapping, &'static str, Vec<Mode>)> {
    let all = vec![Mode::Baseline, Mode::Rimms, Mode::Native];
    let mut mappings = vec![
        (Mapping::Cpu, "sim0", all.clone()),
        (Mapping::Sim, "sim0", all),
    ];
    if rimms::Runtime::builder().gpu(0).build().is_ok() {
        mappings.push((Mapping::Gpu, "gpu0", vec![Mode::Baseline, Mode::Rimms]));
    }
    mappings
}

/// No independent truth for this app's result (a checksum of the output, whose kernels
/// `tests/it/pipelines.rs` checks against direct DFTs): the runs are only compared with each
/// other.
fn no_truth<R>(_: &R, _: &str) {}

fn check<R: PartialEq + Debug>(
    flow: Flow<'_>,
    run: impl Fn(&Options) -> Result<Run<R>, AppError>,
    truth: impl Fn(&R, &str),
) {
    let mut results = Vec::new();
    for (mapping, card, modes) in mappings() {
        for mode in modes {
            let opts = Options::new(mode, mapping).frames(FRAMES as usize);
            let r = run(&opts).unwrap_or_else(|e| panic!("{mode:?} on {mapping:?}: {e}"));
            assert_eq!(r.frames(), FRAMES as usize);
            let what = format!("{} {mode:?} on {mapping:?}", r.app.name());
            let (to_dev, from_dev) = (r.bytes("host", card), r.bytes(card, "host"));
            let copies = |from: &str, to: &str| -> u64 {
                r.links
                    .iter()
                    .filter(|l| l.from == from && l.to == to)
                    .map(|l| l.copies)
                    .sum()
            };
            match (mapping, mode) {
                (Mapping::Cpu, _) => assert!(r.links.is_empty(), "{what}: {:?}", r.links),
                (_, Mode::Baseline) => {
                    let per_frame = |f: &dyn Fn(&Call) -> u64| -> u64 {
                        flow.calls.iter().map(|c| c.times * f(c)).sum::<u64>() * FRAMES
                    };
                    assert_eq!(to_dev, per_frame(&|c| c.reads.iter().sum()), "{what}");
                    assert_eq!(from_dev, per_frame(&|c| c.writes), "{what}");
                    assert_eq!(
                        copies("host", card),
                        per_frame(&|c| c.reads.len() as u64),
                        "{what}"
                    );
                    assert_eq!(
                        copies(card, "host"),
                        per_frame(&|_| 1),
                        "{what}: one copy out per call"
                    );
                    assert_eq!(
                        r.total_bytes(),
                        to_dev + from_dev,
                        "{what}: nothing else moves"
                    );
                }
                (_, Mode::Rimms | Mode::Native) => {
                    assert_eq!(to_dev, flow.constants + FRAMES * flow.input, "{what}");
                    assert_eq!(from_dev, FRAMES * flow.output, "{what}");
                    assert_eq!(
                        copies(card, "host"),
                        FRAMES,
                        "{what}: the result, once a frame"
                    );
                    assert_eq!(
                        r.total_bytes(),
                        to_dev + from_dev,
                        "{what}: nothing else moves"
                    );
                }
            }
            truth(&r.result, &what);
            results.push((mapping == Mapping::Gpu, what, r.result));
        }
    }
    // Runs on the same kernels agree exactly: the CPU's (cpu and sim), and cuFFT's and the
    // GPU's (gpu), each group among itself.
    for gpu in [false, true] {
        let group: Vec<_> = results.iter().filter(|r| r.0 == gpu).collect();
        if let Some((_, first, want)) = group.first() {
            for (_, what, got) in &group[1..] {
                assert_eq!(got, want, "{what} disagrees with {first}");
            }
        }
    }
}

const CHAIN: two_fft::Params = two_fft::Params {
    points: 1024,
    rows: 4,
};
const CHAIN_BYTES: u64 = 1024 * 4 * C;

#[test]
fn two_fft() {
    const B: u64 = CHAIN_BYTES;
    let flow = Flow {
        constants: 0,
        input: B,
        output: B,
        calls: &[call(2, &[B], B)],
    };
    let input = two_fft::Input::generate(CHAIN);
    check(flow, |o| two_fft::run(&input, o), no_truth);
}

#[test]
fn fzf() {
    const B: u64 = CHAIN_BYTES;
    let flow = Flow {
        constants: B,
        input: B,
        output: B,
        calls: &[call(1, &[B], B), call(1, &[B, B], B), call(1, &[B], B)],
    };
    let input = fzf::generate(CHAIN);
    check(flow, |o| fzf::run(&input, o), no_truth);
}

#[test]
fn zip3x() {
    const B: u64 = zip3x::LEN as u64 * C;
    let flow = Flow {
        constants: 0,
        input: 4 * B,
        output: B,
        calls: &[call(3, &[B, B], B)],
    };
    let input = zip3x::Input::generate(zip3x::LEN);
    check(flow, |o| zip3x::run(&input, o), no_truth);
}

#[test]
fn correlator() {
    // Signals are zero-padded to 512: FFT, FFT, multiply by the conjugate, IFFT, |·|.
    const B: u64 = 512 * C;
    let flow = Flow {
        constants: B,
        input: B,
        output: 512 * F,
        calls: &[
            call(2, &[B], B),
            call(1, &[B, B], B),
            call(1, &[B], B),
            call(1, &[B], 512 * F),
        ],
    };
    let (input, truth) = correlator::generate(&correlator::Params::default()).expect("input");
    check(
        flow,
        |o| correlator::run(&input, o),
        |got, what| assert_eq!(got, &truth, "{what}: the delay generated"),
    );
}

#[test]
fn pulse_doppler() {
    // 128 pulses, matched filters of 128: FFT(d); per pulse FFT, multiply by conj(FFT(d)),
    // IFFT; transpose; per range bin FFT across the pulses; fftshift; |·|.
    const ROW: u64 = 128 * C;
    const MATRIX: u64 = 128 * ROW;
    let flow = Flow {
        constants: ROW,
        input: MATRIX,
        output: 128 * 128 * F,
        calls: &[
            call(1, &[ROW], ROW),
            call(128, &[ROW], ROW),
            call(128, &[ROW, ROW], ROW),
            call(128, &[ROW], ROW),
            call(1, &[MATRIX], MATRIX),
            call(128, &[ROW], ROW),
            call(1, &[MATRIX], MATRIX),
            call(1, &[MATRIX], 128 * 128 * F),
        ],
    };
    let (input, truth) = pulse_doppler::generate(&pulse_doppler::Params::default()).expect("input");
    check(
        flow,
        |o| pulse_doppler::run(&input, o),
        |got, what| assert_eq!(got, &truth.expected, "{what}: the target generated"),
    );
}

#[test]
fn sar() {
    // G = FFT(g); per row of 512: FFT, (fftshift of all), ×G, IFFT; transpose; per row of
    // 256: FFT, (fftshift), ×H, IFFT, (fftshift); transpose back; |·|. 2,305 FFT and ZIP
    // calls and 6 whole-matrix ones a frame.
    const RANGE: u64 = 512 * C;
    const AZIMUTH: u64 = 256 * C;
    const MATRIX: u64 = 256 * RANGE;
    const IMAGE: u64 = 256 * 512 * F;
    let calls = [
        call(1, &[RANGE], RANGE),
        call(256, &[RANGE], RANGE),
        call(256, &[RANGE, RANGE], RANGE),
        call(256, &[RANGE], RANGE),
        call(512, &[AZIMUTH], AZIMUTH),
        call(512, &[AZIMUTH, AZIMUTH], AZIMUTH),
        call(512, &[AZIMUTH], AZIMUTH),
        call(3, &[MATRIX], MATRIX),
        call(2, &[MATRIX], MATRIX),
        call(1, &[MATRIX], IMAGE),
    ];
    assert_eq!(
        calls[..7].iter().map(|c| c.times).sum::<u64>(),
        2305,
        "CEDR's count of FFT and ZIP calls"
    );
    let flow = Flow {
        constants: RANGE + AZIMUTH,
        input: MATRIX,
        output: IMAGE,
        calls: &calls,
    };
    let scene = sar::Scene::default();
    let columns = common::scatterer_columns(&scene);
    let input = sar::Input::simulate(&scene);
    check(
        flow,
        |o| sar::run(&input, o),
        |got: &sar::Output, what| {
            assert!(
                columns.iter().any(|c| c.abs_diff(got.peak_col) <= 1),
                "{what}: the brightest pixel (column {}) is at none of the scatterers' \
                 columns {columns:?}",
                got.peak_col
            )
        },
    );
}
