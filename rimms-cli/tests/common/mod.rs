//! Independent references for the app tests: a direct DFT in f64, a CEDR-file reader of its
//! own, and where the CEDR data lives.
#![allow(dead_code)]

use num_complex::Complex64;
use std::path::{Path, PathBuf};

/// The folder of CEDR's input files: `RIMMS_CEDR_DATA`, else `../shared/data/cedr` next to the
/// workspace; `None` (after saying so) when neither exists, so a fresh clone skips these tests.
pub fn cedr_dir(test: &str) -> Option<PathBuf> {
    let from_env = std::env::var_os("RIMMS_CEDR_DATA").map(PathBuf::from);
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cedr");
    for dir in from_env.iter().chain(std::iter::once(&beside)) {
        if dir.is_dir() {
            return Some(dir.clone());
        }
    }
    eprintln!(
        "{test}: skipped, no CEDR data (set RIMMS_CEDR_DATA or provide {})",
        beside.display()
    );
    None
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
