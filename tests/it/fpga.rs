//! The FPGA backend through the runtime, against the register-level emulator: FZF with FFT and
//! ZIP on the accelerators and the paper's CPU-FPGA split, in tracked and baseline mode, with
//! the copies counted; limits and faults refused or reported with the data intact; and the
//! emulator as a separate process driven by the runtime in this one.

use crate::common::{self, assert_close, dft_rows, signal};
use rimms::drivers::fpga::emulator::{config_file, run_standalone};
use rimms::drivers::fpga::{BoardConfig, Channel, DmaErrorBit, Emulator, InjectedFault};
use rimms::{
    BackendError, Device, Error, ExecMode, FftDirection, FpgaSource, HeteData, Runtime, ZipOp,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const N: usize = 256;
const ROWS: usize = 4;
const LEN: usize = N * ROWS;
const BYTES: u64 = (LEN * 8) as u64;
/// The ZCU102-like layout: fft0, fft1, zip0, zip1.
const FFT0: Device = Device::Fpga(0);
const FFT1: Device = Device::Fpga(1);
const ZIP0: Device = Device::Fpga(2);
const UDMABUF: &str = "udmabuf0";
/// Radix-2 passes of an FFT and an inverse of `N` points: the FZF chain's rounding depth.
const PASSES: u32 = 2 * N.trailing_zeros();

/// The emulated board, strict: any register or cache-maintenance rule the driver breaks fails
/// its call, so every passing test here also shows the driver broke none.
fn strict_layout() -> rimms::drivers::fpga::EmulatorLayout {
    let mut layout = FpgaSource::default_layout();
    layout.strict = true;
    layout
}

fn runtime(mode: ExecMode) -> Runtime {
    Runtime::builder()
        .fpga(FpgaSource::Emulated(strict_layout()))
        .mode(mode)
        .build()
        .expect("runtime with an emulated board")
}

fn fzf_reference() -> Vec<(f64, f64)> {
    common::fzf_reference(LEN, N)
}

/// FFT on `fft`, ZIP (multiply by the filter) on `zip`, inverse FFT on `ifft`.
fn fzf(rt: &Runtime, fft: Device, zip: Device, ifft: Device) -> Vec<rimms::Complex32> {
    common::fzf(rt, [fft, zip, ifft], LEN, N)
}

#[test]
fn fzf_on_the_fpga_copies_only_the_inputs_in_when_tracked() {
    let rt = runtime(ExecMode::Tracked);
    let y = fzf(&rt, FFT0, ZIP0, FFT1);
    assert_close(&y, &fzf_reference(), PASSES, "tracked FZF on the FPGA");
    let s = rt.stats();
    // x and the filter go into the u-dma-buf once each; spectrum and product never leave it;
    // the host reads y where the FPGA wrote it (cache maintenance, no copy).
    assert_eq!(
        (
            s.copies("host", UDMABUF).unwrap(),
            s.bytes("host", UDMABUF).unwrap()
        ),
        (2, 2 * BYTES)
    );
    assert_eq!(s.copies(UDMABUF, "host").unwrap(), 0);
    assert_eq!(s.total_copies(), 2);
}

#[test]
fn fzf_on_the_fpga_in_baseline_stages_every_argument_like_cedr() {
    let rt = runtime(ExecMode::Baseline);
    let y = fzf(&rt, FFT0, ZIP0, FFT1);
    assert_close(&y, &fzf_reference(), PASSES, "baseline FZF on the FPGA");
    let s = rt.stats();
    // fft: x in, spectrum out; zip: spectrum and filter in, product out; ifft: product in, y out.
    assert_eq!(
        (
            s.copies("host", UDMABUF).unwrap(),
            s.bytes("host", UDMABUF).unwrap()
        ),
        (4, 4 * BYTES)
    );
    assert_eq!(
        (
            s.copies(UDMABUF, "host").unwrap(),
            s.bytes(UDMABUF, "host").unwrap()
        ),
        (3, 3 * BYTES)
    );
    let pool = s.space(UDMABUF).expect("u-dma-buf pool");
    assert_eq!((pool.allocations, pool.in_use), (7, 0));
}

#[test]
fn fft_on_the_fpga_zip_on_the_cpu_the_papers_split() {
    let tracked = runtime(ExecMode::Tracked);
    let y = fzf(&tracked, FFT0, Device::Cpu, FFT1);
    assert_close(
        &y,
        &fzf_reference(),
        PASSES,
        "tracked FFT on the FPGA, ZIP on the CPU",
    );
    let s = tracked.stats();
    // x in; the CPU reads the spectrum in place in the u-dma-buf and writes the product in
    // host memory, which the inverse FFT then needs: one copy in; y is read in place.
    assert_eq!(
        (
            s.copies("host", UDMABUF).unwrap(),
            s.bytes("host", UDMABUF).unwrap()
        ),
        (2, 2 * BYTES)
    );
    assert_eq!(s.copies(UDMABUF, "host").unwrap(), 0);

    let baseline = runtime(ExecMode::Baseline);
    let y = fzf(&baseline, FFT0, Device::Cpu, FFT1);
    assert_close(
        &y,
        &fzf_reference(),
        PASSES,
        "baseline FFT on the FPGA, ZIP on the CPU",
    );
    let s = baseline.stats();
    // Each FFT stages its input in and its output out; the CPU ZIP copies nothing.
    assert_eq!(
        (
            s.copies("host", UDMABUF).unwrap(),
            s.copies(UDMABUF, "host").unwrap()
        ),
        (2, 2)
    );
    assert_eq!(
        s.bytes("host", UDMABUF).unwrap() + s.bytes(UDMABUF, "host").unwrap(),
        4 * BYTES
    );
}

#[test]
fn sizes_and_operations_the_cores_lack_are_refused_before_anything_moves() {
    let rt = runtime(ExecMode::Tracked);
    let x = HeteData::from_slice(&rt, &signal(4096, 5)).expect("x");
    let mut y = HeteData::alloc(&rt, 4096).expect("y");
    let err = rt
        .fft(FFT0, FftDirection::Forward, 4096, &x, &mut y)
        .unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { api: "fft", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("fpga0"), "{err}");
    let err = rt.zip(ZIP0, ZipOp::MulConj, &x, &x, &mut y).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { api: "zip", .. }),
        "{err}"
    );
    let err = rt.zip(FFT0, ZipOp::Mul, &x, &x, &mut y).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { .. }),
        "a ZIP on an FFT core: {err}"
    );
    let err = rt.conj(FFT0, &x, &mut y).unwrap_err();
    assert!(
        matches!(err, Error::NoImplementation { api: "conj", .. }),
        "{err}"
    );
    assert_eq!(rt.stats().total_copies(), 0);
    // The CPU does the same FFT.
    rt.fft(Device::Cpu, FftDirection::Forward, 4096, &x, &mut y)
        .expect("cpu");
}

#[test]
fn an_accelerator_fault_is_reported_and_the_data_keeps_its_last_valid_copy() {
    let dir = tempfile::tempdir().expect("dir");
    let emulator = Emulator::start(dir.path(), &strict_layout()).expect("emulator");
    let rt = Runtime::builder()
        .fpga(FpgaSource::Board(emulator.config().clone()))
        .build()
        .expect("runtime");
    let mut x = HeteData::from_slice(&rt, &signal(LEN, 6)).expect("x");
    emulator
        .inject(
            "fft0",
            InjectedFault::DmaError {
                channel: Channel::S2mm,
                bit: DmaErrorBit::Slave,
            },
        )
        .expect("inject");
    let started = Instant::now();
    let err = rt
        .fft_in_place(FFT0, FftDirection::Forward, N, &mut x)
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "bounded wait");
    assert!(
        matches!(
            err,
            Error::Kernel {
                source: BackendError::Fpga { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().to_lowercase().contains("slave"), "{err}");
    // The host copy is the last valid one: the u-dma-buf copy the failed kernel touched is no
    // longer trusted, and the data reads back unchanged.
    assert_eq!(x.host().expect("host"), &signal(LEN, 6)[..]);
    // The engine recovers: the next call succeeds.
    rt.fft_in_place(FFT0, FftDirection::Forward, N, &mut x)
        .expect("after the fault");
    let want = dft_rows(&signal(LEN, 6), N, false);
    assert_close(
        x.host().expect("host"),
        &want,
        N.trailing_zeros(),
        "the FFT after the fault",
    );
    drop((x, rt));
    assert_eq!(
        emulator.violations(),
        vec![],
        "an injected fault is no driver bug"
    );
    emulator.stop();
}

const CHILD_ENV: &str = "RIMMS_FPGA_RUNTIME_EMU_CHILD";

/// The emulator process's body when this binary is re-executed as it; a no-op otherwise.
#[test]
fn emulator_process() {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, dir) = (Arc::clone(&stop), dir.clone());
        std::thread::spawn(move || {
            let t = Instant::now();
            while !dir.join("stop").exists() && t.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::Release);
        })
    };
    run_standalone(&dir, &strict_layout(), &stop).expect("emulator");
    watcher.join().expect("watcher");
}

fn wait_for(path: &Path) -> bool {
    let t = Instant::now();
    while !path.exists() {
        if t.elapsed() > Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn the_runtime_drives_an_emulator_in_another_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let mut child = crate::rerun_test(module_path!(), "emulator_process")
        .env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("emulator process");
    let ready = wait_for(&config_file(dir.path()));
    let outcome = ready.then(|| {
        let config = BoardConfig::load(&config_file(dir.path())).expect("board.toml");
        let rt = Runtime::builder()
            .fpga(FpgaSource::Board(config))
            .build()
            .expect("runtime on the other process's board");
        let y = fzf(&rt, FFT0, ZIP0, FFT1);
        (y, rt.stats().total_copies())
    });
    std::fs::write(dir.path().join("stop"), b"").expect("stop file");
    let t = Instant::now();
    while child.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let (y, copies) = outcome.expect("the emulator process wrote its board.toml");
    assert_close(
        &y,
        &fzf_reference(),
        PASSES,
        "FZF on another process's emulator",
    );
    assert_eq!(copies, 2);
}

#[test]
fn placed_buffers_are_written_where_the_accelerator_reads_them_so_frames_copy_nothing() {
    let rt = runtime(ExecMode::Tracked);
    let filter = HeteData::from_slice(&rt, &signal(LEN, 3)).expect("filter");
    let mut x = HeteData::alloc(&rt, LEN).expect("x");
    let (mut spectrum, mut product, mut y) = (
        HeteData::alloc(&rt, LEN).expect("alloc"),
        HeteData::alloc(&rt, LEN).expect("alloc"),
        HeteData::alloc(&rt, LEN).expect("alloc"),
    );
    // The sensor's frames and the CPU's product are written straight into the u-dma-buf.
    x.set_home(FFT0).expect("home x");
    product.set_home(FFT1).expect("home product");
    rt.fft(FFT0, FftDirection::Forward, N, &filter, &mut spectrum)
        .expect("warm the filter up");
    rt.reset_stats();
    for _frame in 0..3 {
        x.host_write()
            .expect("in place")
            .copy_from_slice(&signal(LEN, 2));
        rt.fft(FFT0, FftDirection::Forward, N, &x, &mut spectrum)
            .expect("fft");
        rt.zip(Device::Cpu, ZipOp::Mul, &spectrum, &filter, &mut product)
            .expect("cpu zip");
        rt.fft(FFT1, FftDirection::Inverse, N, &product, &mut y)
            .expect("ifft");
        assert_close(
            y.host().expect("in place"),
            &fzf_reference(),
            PASSES,
            "a frame in placed buffers",
        );
    }
    // Nothing crosses between host memory and the u-dma-buf: only cache maintenance.
    assert_eq!(rt.stats().total_copies(), 0);
}

#[test]
fn zero_copy_puts_unplaced_host_and_cpu_data_in_the_u_dma_buf() {
    let build = |mode| {
        Runtime::builder()
            .fpga(FpgaSource::Emulated(strict_layout()))
            .mode(mode)
            .zero_copy(true)
            .build()
            .expect("runtime with an emulated board")
    };
    // The inputs, written by the host, and the CPU's product land where the FFT cores read
    // them: nothing is copied, tracked.
    let rt = build(ExecMode::Tracked);
    let y = fzf(&rt, FFT0, Device::Cpu, FFT1);
    assert_close(&y, &fzf_reference(), PASSES, "tracked FZF, zero copy");
    assert_eq!(rt.stats().total_copies(), 0);
    // CEDR keeps its data on the host whatever the option says: baseline stages as before.
    let rt = build(ExecMode::Baseline);
    let y = fzf(&rt, FFT0, ZIP0, FFT1);
    assert_close(&y, &fzf_reference(), PASSES, "baseline FZF, zero copy");
    let s = rt.stats();
    assert_eq!(
        (
            s.copies("host", UDMABUF).unwrap(),
            s.copies(UDMABUF, "host").unwrap()
        ),
        (4, 3)
    );
}

/// `zip_rows` runs on the ZIP core, one row at a time (the shared row and each row of `a` as
/// one packet): every element matches the formula, and the core's transfers count one per
/// row; an operation the core lacks (multiply by the conjugate) is refused before anything
/// moves, as for `zip`.
#[test]
fn zip_rows_runs_on_the_zip_core_one_row_at_a_time() {
    let dir = tempfile::tempdir().expect("dir");
    let emu = Emulator::start(dir.path(), &strict_layout()).expect("emulator");
    let rt = Runtime::builder()
        .fpga(FpgaSource::Board(emu.config().clone()))
        .build()
        .expect("runtime");
    let a_host = signal(LEN, 3);
    let row_host = signal(N, 4);
    let a = HeteData::from_slice(&rt, &a_host).unwrap();
    let row = HeteData::from_slice(&rt, &row_host).unwrap();
    let mut out = HeteData::<rimms::Complex32>::alloc(&rt, LEN).unwrap();
    let before = emu.transfers("zip0").unwrap();
    rt.zip_rows(ZIP0, ZipOp::Mul, &a, &row, &mut out).unwrap();
    assert_eq!(emu.transfers("zip0").unwrap() - before, ROWS as u64);
    let got = out.host().unwrap();
    for (i, g) in got.iter().enumerate() {
        let want = a_host[i] * row_host[i % N];
        assert!(
            (g - want).norm() <= 1e-6 * (1.0 + want.norm()),
            "{i}: {g} vs {want}"
        );
    }
    let err = rt
        .zip_rows(ZIP0, ZipOp::MulConj, &a, &row, &mut out)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unsupported {
                api: "zip_rows",
                ..
            }
        ),
        "{err}"
    );
    assert!(emu.violations().is_empty(), "{:?}", emu.violations());
    emu.stop();
}

/// An API a program implements on the FPGA with host code.
#[rimms::api]
fn conjugate_on_board(#[out] y: &mut [rimms::Complex32]);

#[rimms::kernel(api = conjugate_on_board, device = fpga)]
fn conjugate_on_board_host(#[out] y: &mut [rimms::Complex32]) {
    for v in y.iter_mut() {
        *v = v.conj();
    }
}

/// The board's devices look for device slices first (the built-ins, whose DMA engine writes
/// memory no reference may cover), and a program's own host code over the u-dma-buf still
/// runs there, between two accelerator calls, on the bytes they wrote and read in place.
#[test]
fn a_programs_host_code_runs_on_the_board_beside_the_built_ins() {
    let rt = runtime(ExecMode::Tracked);
    let x = HeteData::from_slice(&rt, &signal(LEN, 2)).expect("x");
    let mut spectrum = HeteData::alloc(&rt, LEN).expect("spectrum");
    let mut y = HeteData::alloc(&rt, LEN).expect("y");
    rt.fft(FFT0, FftDirection::Forward, N, &x, &mut spectrum)
        .expect("fft");
    conjugate_on_board(&rt, FFT0, &mut spectrum).expect("host code on fpga(0)");
    rt.fft(FFT1, FftDirection::Inverse, N, &spectrum, &mut y)
        .expect("ifft");
    // The inverse of the conjugated spectrum of a row is the row reversed circularly and
    // conjugated: y[r][k] = conj(x[r][(N - k) % N]).
    let x = signal(LEN, 2);
    let expected: Vec<(f64, f64)> = (0..LEN)
        .map(|i| {
            let (r, k) = (i / N, i % N);
            let v = x[r * N + (N - k) % N];
            (f64::from(v.re), -f64::from(v.im))
        })
        .collect();
    assert_close(
        y.host().expect("y"),
        &expected,
        PASSES,
        "FFT, conjugate, IFFT",
    );
    // The conjugate ran in the u-dma-buf: nothing left it between the calls.
    assert_eq!(rt.stats().total_copies(), 1, "only x goes in");
}
