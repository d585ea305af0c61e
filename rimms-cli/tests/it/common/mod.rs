//! Independent references for the app tests: a direct DFT in f64, a CEDR-file reader of its
//! own, and where the CEDR data lives.
#![allow(dead_code)]

pub mod command;

use num_complex::Complex64;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The files the CEDR tests read.
pub const CEDR_FILES: [&str; 3] = [
    "pulse_doppler_pulses.txt",
    "pulse_doppler_pulse.txt",
    "SAR_rawdata_rda.txt",
];

/// The folder of CEDR's input files: `RIMMS_CEDR_DATA`, else `../shared/data/cedr` next to the
/// workspace. Tests that call this are `#[cfg_attr(not(cedr_data), ignore = ...)]`, so they
/// run only where the build found data (see `rimms-cli/build.rs`); here a folder that is not
/// there, or lacks a file, fails the test with the path rather than letting it pass without
/// running.
pub fn cedr_dir() -> PathBuf {
    cedr_dir_from(std::env::var_os("RIMMS_CEDR_DATA"))
}

/// [`cedr_dir`] with the variable's value passed in, so a wrong value can be tested without
/// changing the process's environment under other tests.
pub fn cedr_dir_from(var: Option<OsString>) -> PathBuf {
    let (dir, from) = match var {
        Some(dir) => (PathBuf::from(dir), "RIMMS_CEDR_DATA"),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cedr"),
            "the default folder",
        ),
    };
    assert!(
        dir.is_dir(),
        "{from} names {}, which is not a folder",
        dir.display()
    );
    for file in CEDR_FILES {
        assert!(
            dir.join(file).is_file(),
            "{from} names {}, which has no {file}",
            dir.display()
        );
    }
    dir
}

/// A CEDR text file as rows of complex values, parsed here rather than by the app.
pub fn read_cedr(path: &Path) -> Vec<Vec<Complex64>> {
    let text = std::fs::read_to_string(path).expect("CEDR file");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let nums: Vec<f64> = l
                .split_whitespace()
                .map(|t| t.parse().expect("number"))
                .collect();
            nums.chunks(2).map(|p| Complex64::new(p[0], p[1])).collect()
        })
        .collect()
}

/// Direct O(n²) DFT of a power-of-two length; the inverse is scaled by 1/n.
pub fn dft(x: &[Complex64], inverse: bool) -> Vec<Complex64> {
    let n = x.len();
    assert!(n.is_power_of_two());
    let sign = if inverse { 1.0 } else { -1.0 };
    let twiddle: Vec<(f64, f64)> = (0..n)
        .map(|k| {
            let a = sign * 2.0 * std::f64::consts::PI * k as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    (0..n)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, v) in x.iter().enumerate() {
                let (c, s) = twiddle[(j * k) & (n - 1)];
                re += v.re * c - v.im * s;
                im += v.re * s + v.im * c;
            }
            Complex64::new(re * scale, im * scale)
        })
        .collect()
}

/// numpy's fftshift of one row: element i moves to (i + n/2) mod n.
pub fn fftshift<T: Copy>(x: &[T]) -> Vec<T> {
    let n = x.len();
    (0..n).map(|i| x[(i + n - n / 2) % n]).collect()
}

/// Checks an f32 FFT chain's real output (magnitudes) element by element against its f64
/// reference. Element `i` may be off by `ε · passes · (|want_i| + scale)`, with `ε` the f32
/// machine epsilon, `passes` the radix-2 passes of the chain (log2 of each FFT's length,
/// summed): about one rounding per pass. Strong elements are held to that bound relative to
/// themselves; weak ones to an absolute floor at `scale`, the rms of the data the chain's
/// FFTs transform, where f32 rounding noise lives (an output much weaker than what its FFTs
/// transformed carries that noise whatever its own size). Never a bound relative to the
/// peak, which lets weak elements be wrong by many times their size. Panics naming the worst
/// element; returns its error as a fraction of its tolerance.
pub fn assert_close(got: &[f32], want: &[f64], passes: u32, scale: f64, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let k = f64::from(f32::EPSILON) * f64::from(passes);
    let (worst, at) = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs() / (k * (w.abs() + scale)))
        .enumerate()
        .fold(
            (0.0, 0),
            |best, (i, r)| if r > best.0 { (r, i) } else { best },
        );
    assert!(
        worst <= 1.0,
        "{what}: element {at} is {}, the reference {}: {worst:.1} times the tolerance",
        got[at],
        want[at]
    );
    eprintln!("{what}: the worst element is at {worst:.3} of its tolerance");
    worst
}

/// Root mean square of complex values.
pub fn rms<'a>(values: impl IntoIterator<Item = &'a Complex64>) -> f64 {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v.norm_sqr(), n + 1));
    (sum / n as f64).sqrt()
}

/// The image columns where a SAR scene's scatterers must focus, sorted, from the geometry
/// alone: each echo is centred at 2(R − Rmin)/c + Tr/2 into the window, and the fftshift
/// ahead of the range filter delays the compressed pulse by half the sampling rate over the
/// chirp rate.
pub fn scatterer_columns(scene: &rimms_cli::apps::sar::Scene) -> Vec<usize> {
    let (c, tr, kr, h) = (3e8, 2.5e-6, 2e13, 5000.0f64);
    let rmin = f64::hypot(9_500.0, h);
    let rmax = f64::hypot(10_500.0, h);
    let dt = (2.0 * rmax / c + tr - 2.0 * rmin / c) / 511.0;
    let mut columns: Vec<usize> = scene
        .scatterers
        .iter()
        .map(|s| {
            let tau = 2.0 * (f64::hypot(s.y, h) - rmin) / c + tr / 2.0;
            (tau / dt + 0.5 / (kr * dt * dt)).round() as usize
        })
        .collect();
    columns.sort();
    columns
}

/// Runs `cmd` with no input to its end and returns what it wrote, or kills it once `limit`
/// has passed and fails the test: a command that used to block forever (on a FIFO given as a
/// file) fails instead of hanging the suite. Its messages are short, so the pipes never fill
/// while it runs.
pub fn output_within(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rimms binary runs");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still runs after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("its output")
}

/// A FIFO at `path`, as a hostile user or another local user could plant one.
pub fn fifo(path: &Path) {
    use nix::sys::stat::Mode;
    nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR).expect("mkfifo");
}

/// Whether this process (and so a child it starts) ignores SIGINT: bit 1 of the
/// `SigIgn` mask in `/proc/self/status` (signal 2).
pub fn sigint_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << 1) != 0)
}

/// Runs `work` as every rank of a job of `ranks` threads (`rimms_dist::on_threads`), each
/// with its own CPU runtime, and returns what each rank returned, in rank order.
pub fn across_ranks<T: Send>(
    ranks: usize,
    work: impl Fn(&rimms_dist::Cluster<'_>) -> T + Sync,
) -> Vec<T> {
    rimms_dist::on_threads(ranks, std::time::Duration::from_secs(60), work)
        .expect("every rank's runtime starts")
}
