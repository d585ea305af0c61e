//! The emulator as a separate process, driven from this one through its files, as a board
//! would be: the test binary re-executes itself (`std::env::current_exe()`) with
//! `RIMMS_FPGA_EMU_CHILD=<dir>` to run only `emulator_child`, which calls `run_standalone`
//! until a `stop` file appears (or 60 s pass, so it can never outlive a crashed parent).
//! The parent waits for `board.toml`, opens the board, runs FFTs and a ZIP, and checks the
//! results against a direct DFT and the complex product.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::reference::{assert_close, dft};
use rimms_runtime::backend::fpga::emulator::{config_file, run_standalone};
use rimms_runtime::backend::fpga::{BoardConfig, EmulatorLayout, FpgaBoard};
use rimms_runtime::{Complex32, FftDirection, ZipOp};

const CHILD_ENV: &str = "RIMMS_FPGA_EMU_CHILD";

/// The child's body; a no-op in an ordinary test run.
#[test]
fn emulator_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, dir) = (Arc::clone(&stop), dir.clone());
        thread::spawn(move || {
            let t = Instant::now();
            while !dir.join("stop").exists() && t.elapsed() < Duration::from_secs(60) {
                thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, Ordering::Release);
        })
    };
    run_standalone(&dir, &EmulatorLayout::zcu102_like(), &stop).unwrap();
    watcher.join().unwrap();
}

fn wait_for(path: &Path, limit: Duration) -> bool {
    let t = Instant::now();
    while !path.exists() {
        if t.elapsed() > limit {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn the_emulator_runs_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = crate::rerun_test(module_path!(), "emulator_child")
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let run = || {
        assert!(
            wait_for(&config_file(dir.path()), Duration::from_secs(20)),
            "the emulator process wrote no board.toml"
        );
        let cfg = BoardConfig::load(&config_file(dir.path())).unwrap();
        let board = FpgaBoard::open(&cfg).unwrap();
        let f = board.accelerator("fft1").unwrap();
        let n = 128;
        let x: Vec<Complex32> = (0..n)
            .map(|k| Complex32::new((k as f32 * 0.37).sin(), (k as f32 * 0.11).cos()))
            .collect();
        f.memory().write_complex(0, &x).unwrap();
        f.fft(FftDirection::Forward, n, 1, 0, 0x1000).unwrap();
        let mut y = vec![Complex32::new(0.0, 0.0); n];
        f.memory().read_complex(0x1000, &mut y).unwrap();
        // 128 points: 7 radix-2 passes.
        assert_close(&y, &dft(&x, false), 7, "forward");
        f.fft(FftDirection::Inverse, n, 1, 0x1000, 0x2000).unwrap();
        f.memory().read_complex(0x2000, &mut y).unwrap();
        let back: Vec<(f64, f64)> = x
            .iter()
            .map(|c| (f64::from(c.re), f64::from(c.im)))
            .collect();
        assert_close(&y, &back, 14, "round trip");

        let z = board.accelerator("zip0").unwrap();
        z.zip(ZipOp::Mul, n, 0, 0x1000, 0x3000).unwrap();
        let mut p = vec![Complex32::new(0.0, 0.0); n];
        z.memory().read_complex(0x3000, &mut p).unwrap();
        let spectrum = dft(&x, false);
        let want: Vec<(f64, f64)> = x
            .iter()
            .zip(&spectrum)
            .map(|(a, (br, bi))| {
                let (ar, ai) = (f64::from(a.re), f64::from(a.im));
                (ar * br - ai * bi, ar * bi + ai * br)
            })
            .collect();
        // The board's spectrum (7 passes) times the input (one more rounding).
        assert_close(&p, &want, 8, "zip");
    };
    let outcome = std::panic::catch_unwind(run);
    // Stop the child whatever happened, then wait for it (bounded).
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        thread::sleep(Duration::from_millis(5));
    };
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
    let status = status.expect("the emulator process did not stop");
    assert!(status.success(), "emulator process: {status}");
}
