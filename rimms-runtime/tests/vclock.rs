//! The virtual clock against a hand computation from the timing model's constants.
//!
//! Its own test binary: the clock is one per process, and no other test may charge it while
//! this one reads it.

#![cfg(feature = "fpga-emulator")]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use num_complex::Complex32;
use rimms_runtime::backend::fpga::{FpgaParts, FpgaSource, TimingModel};
use rimms_runtime::vclock::{self, Term};
use rimms_runtime::{Device, FftDirection, HeteData, Runtime};

/// The clock is one per process: the tests take turns.
static TURN: Mutex<()> = Mutex::new(());

/// The emulator's default layout under the ZCU102 timing model.
fn zcu102() -> FpgaSource {
    let mut layout = FpgaSource::default_layout();
    layout.timing = Some(TimingModel::zcu102());
    FpgaSource::Emulated(layout)
}

/// A runtime on the emulated board under the ZCU102 timing model.
fn zcu102_runtime() -> Runtime {
    Runtime::builder().fpga(zcu102()).build().unwrap()
}

/// One 256-point FFT on `fft0` of an emulated ZCU102 under the zcu102 model charges exactly:
///
/// - three syncs of 2,048 bytes (input and output for the device, output for the CPU), each
///   5 µs + 2,048 B / 2 GB/s = 6,024 ns: 18,072 ns;
/// - one transfer: 1 µs of DMA start-up + 256 clocks in + 256 of latency + 256 out at 100 MHz:
///   8,680 ns;
/// - registers: 11 writes (5 for the GPIO config, 2 per channel for address and LENGTH, 2 IOC
///   acknowledgements) at 30 ns and 4 reads (the config read-back, the two status reads that
///   see the transfer done, S2MM LENGTH) at 200 ns: 1,130 ns;
///
/// 27,882 ns in all; the inverse adds the 1/N pass over 2,048 bytes at the cached A53 memcpy
/// rate, 2 µs + 2,048 B / 1.2 GB/s = 3,706 ns (cut to whole nanoseconds, as a link's copy
/// is). The emulator's own account per core and channel holds the transfer's parts. However long the emulator took on this machine, the
/// modelled time is the same every time, and the call's wall time is excluded.
#[test]
fn an_emulated_fft_charges_the_hand_computed_model_time() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let parts = FpgaParts::open(zcu102()).unwrap();
    assert!(vclock::is_on());
    let acc = &parts.board().accelerators()[0];
    assert_eq!(acc.name(), "fft0");
    let input: Vec<Complex32> = (0..256).map(|k| Complex32::new(k as f32, 0.0)).collect();
    acc.memory().write_complex(0, &input).unwrap();
    for (dir, want) in [
        (FftDirection::Forward, 27_882),
        (FftDirection::Inverse, 27_882 + 3_706),
    ] {
        for _ in 0..3 {
            let before = vclock::read();
            acc.fft(dir, 256, 1, 0, 4096).unwrap();
            let after = vclock::read();
            assert_eq!(
                before.modelled_until(after),
                Duration::from_nanos(want),
                "{dir:?}"
            );
            assert!(
                after.excluded_ns > before.excluded_ns,
                "the call's wall time is excluded"
            );
        }
    }
    let emu = parts.emulator().unwrap();
    let p = emu.modelled("fft0").unwrap();
    // Six transfers so far (plus none at open: resets move no data).
    assert_eq!(p.setup, Duration::from_nanos(6 * 1_000));
    assert_eq!(p.mm2s, Duration::from_nanos(6 * 2_560));
    assert_eq!(p.core, Duration::from_nanos(6 * 2_560));
    assert_eq!(p.s2mm, Duration::from_nanos(6 * 2_560));
    assert_eq!(emu.modelled("zip0").unwrap().total(), Duration::ZERO);

    // However long the emulator takes (here at least 2 ms a transfer), the charge is the same
    // and that wall time is excluded: a frame around the call is the rest of its wall time
    // plus the modelled 27,882 ns.
    let mut slow = FpgaSource::default_layout();
    slow.timing = Some(TimingModel::zcu102());
    slow.transfer_floor_us = 2_000;
    let slow = FpgaParts::open(FpgaSource::Emulated(slow)).unwrap();
    let acc = &slow.board().accelerators()[0];
    acc.memory().write_complex(0, &input).unwrap();
    let started = Instant::now();
    let before = vclock::read();
    acc.fft(FftDirection::Forward, 256, 1, 0, 4096).unwrap();
    let after = vclock::read();
    let wall = started.elapsed();
    assert_eq!(before.modelled_until(after), Duration::from_nanos(27_882));
    assert!(after.excluded_ns - before.excluded_ns >= 2_000_000);
    let frame = before.frame_time(after, wall);
    assert!(
        frame + Duration::from_micros(1_900) < wall,
        "{frame:?} of {wall:?}"
    );
}

/// The runtime's copy of a host buffer into the u-dma-buf is an A53 memcpy on the clock:
/// 2 µs + 2,048 B / 1.2 GB/s = 3,706 ns (cut to whole nanoseconds) for the FFT's 256-point
/// input, charged as a host copy
/// and waited out nowhere; the FFT's own terms come on top, as above.
#[test]
fn a_runtime_copy_into_the_u_dma_buf_charges_the_a53_memcpy() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let rt = zcu102_runtime();
    let input: Vec<Complex32> = (0..256).map(|k| Complex32::new(k as f32, 1.0)).collect();
    let x = HeteData::from_slice(&rt, &input).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    let before = vclock::read();
    rt.fft(Device::Fpga(0), FftDirection::Forward, 256, &x, &mut y)
        .unwrap();
    let terms = before.terms_until(vclock::read());
    assert_eq!(terms[Term::Copy as usize], Duration::from_nanos(3_706));
    assert_eq!(terms[Term::Transfer as usize], Duration::from_nanos(8_680));
}

/// One forward 256-point FFT on `acc`, made on a thread whose lane starts at `from` and does
/// not measure host work (only modelled time moves it): where it ends.
fn fft_from(
    from: vclock::Mark,
    acc: &rimms_runtime::backend::fpga::Accelerator,
    output: usize,
) -> vclock::Mark {
    vclock::join(from);
    acc.fft(FftDirection::Forward, 256, 1, 0, output).unwrap();
    vclock::mark()
}

/// The critical path, by hand from the FFT above (27,882 ns a call): two independent FFTs on
/// the two FFT cores, made from two threads at once, end together 27,882 ns after they were
/// sent; on one core the second waits for the first (2 · 27,882 = 55,764 ns); a chain, the
/// second sent where the first ended, adds up (55,764 ns) even on two cores. The modelled work
/// (the terms) is 55,764 ns in every case.
#[test]
fn two_independent_ffts_on_two_cores_overlap_and_a_chain_adds_up() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let parts = FpgaParts::open(zcu102()).unwrap();
    let board = parts.board();
    let (fft0, fft1) = (
        board.accelerator("fft0").unwrap(),
        board.accelerator("fft1").unwrap(),
    );
    let input: Vec<Complex32> = (0..256).map(|k| Complex32::new(k as f32, 0.0)).collect();
    fft0.memory().write_complex(0, &input).unwrap();
    let one = 27_882;
    let cases: [(
        &str,
        [&rimms_runtime::backend::fpga::Accelerator; 2],
        bool,
        u64,
    ); 3] = [
        ("two cores, at once", [fft0, fft1], false, one),
        ("one core, at once", [fft0, fft0], false, 2 * one),
        ("two cores, a chain", [fft0, fft1], true, 2 * one),
    ];
    for (what, [a, b], chain, want) in cases {
        // The test's thread never reads the clock, so it measures nothing: its lane is
        // modelled time only (the board's resets at open included).
        let start = vclock::mark();
        let before = vclock::terms();
        let end = std::thread::scope(|s| {
            if chain {
                let first = s.spawn(|| fft_from(start, a, 4096)).join().unwrap();
                s.spawn(move || fft_from(first, b, 8192)).join().unwrap()
            } else {
                let x = s.spawn(|| fft_from(start, a, 4096));
                let y = s.spawn(|| fft_from(start, b, 8192));
                let (x, y) = (x.join().unwrap(), y.join().unwrap());
                vclock::join(x);
                vclock::join(y);
                vclock::mark()
            }
        });
        assert_eq!(end.ns() - start.ns(), want, "{what}");
        let work: u64 = vclock::terms().iter().zip(before).map(|(a, b)| a - b).sum();
        assert_eq!(work, 2 * one, "{what}: the modelled work");
        // The next case starts after both cores are free.
        vclock::join(end);
    }
}

/// The same through the runtime: two FFTs submitted to one scope on `fpga(0)` and `fpga(1)`
/// overlap. The one on `fpga(0)` copies its input into the u-dma-buf (3,706 ns) and runs
/// (27,882 ns): 31,588 ns; the one on `fpga(1)` finds its input there already (an earlier call
/// put it there): 27,882 ns. The scope takes the longer, 31,588 ns, not 59,470 — whichever
/// thread ran which call (the scope runs one on the waiting thread). A second scope, its FFT
/// on the first's output (in the u-dma-buf: no copy), adds up: 31,588 + 27,882 = 59,470 ns.
#[test]
fn a_scope_of_ffts_on_two_cores_overlaps_and_scopes_in_a_row_add_up() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let rt = zcu102_runtime();
    let input: Vec<Complex32> = (0..256).map(|k| Complex32::new(k as f32, 1.0)).collect();
    let x0 = HeteData::from_slice(&rt, &input).unwrap();
    let x1 = HeteData::from_slice(&rt, &input).unwrap();
    let mut y0 = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    let mut y1 = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    // `fpga(1)` is the board's second accelerator, fft1; x1 goes into the u-dma-buf now.
    rt.fft(Device::Fpga(1), FftDirection::Forward, 256, &x1, &mut y1)
        .unwrap();
    // This thread never reads the clock: its lane (and its jobs') is modelled time only.
    let start = vclock::mark();
    rt.scope(|s| {
        s.fft(Device::Fpga(0), FftDirection::Forward, 256, &x0, &mut y0)?;
        s.fft(Device::Fpga(1), FftDirection::Forward, 256, &x1, &mut y1)
    })
    .unwrap()
    .unwrap();
    assert_eq!(vclock::mark().ns() - start.ns(), 31_588);

    let mut z = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    rt.scope(|s| s.fft(Device::Fpga(1), FftDirection::Forward, 256, &y0, &mut z))
        .unwrap()
        .unwrap();
    assert_eq!(vclock::mark().ns() - start.ns(), 31_588 + 27_882);
}

/// Work a thread runs beside its own lane (`vclock::beside`: another device's jobs that a
/// waiting thread runs for it) runs from the origin of the axis, so that each job starts where
/// it was sent, and the thread's lane stands where it stood afterwards: when the work returns
/// and when it unwinds. Without that, a waiting thread that ran two devices' jobs added them up
/// on the axis.
#[test]
fn work_run_beside_a_lane_leaves_it_where_it_stood() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let _parts = FpgaParts::open(zcu102()).unwrap();
    assert!(vclock::is_on());
    vclock::charge(Term::Copy, Duration::from_micros(40));
    let stood = vclock::mark().ns();
    assert!(stood >= 40_000, "{stood}");
    let inside = vclock::beside(|| {
        let from = vclock::mark().ns();
        vclock::charge(Term::Copy, Duration::from_micros(7));
        (from, vclock::mark().ns())
    });
    assert_eq!(inside, (0, 7_000), "beside runs from the origin");
    assert_eq!(vclock::mark().ns(), stood, "and the lane comes back");
    let unwound = std::panic::catch_unwind(|| {
        vclock::beside(|| {
            vclock::charge(Term::Copy, Duration::from_micros(9));
            panic!("a job that unwinds");
        })
    });
    assert!(unwound.is_err());
    assert_eq!(
        vclock::mark().ns(),
        stood,
        "the lane comes back on unwinding too"
    );
}
