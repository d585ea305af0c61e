//! Independent references for the driver tests: a direct DFT in f64, and the per-element
//! tolerance the facade's tests use (its file is included from there by path, so both crates
//! check against one rule).

use rimms_runtime::Complex32;
use std::f64::consts::PI;

#[path = "../../../tests/it/common/tolerance.rs"]
mod tolerance;
pub use tolerance::assert_close;

/// Direct DFT in f64; the inverse is scaled by 1/N.
pub fn dft(x: &[Complex32], inverse: bool) -> Vec<(f64, f64)> {
    let n = x.len();
    let sign = if inverse { 1.0 } else { -1.0 };
    let tw: Vec<(f64, f64)> = (0..n)
        .map(|k| {
            let a = sign * 2.0 * PI * k as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    (0..n)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, v) in x.iter().enumerate() {
                let (c, s) = tw[(j * k) % n];
                let (xr, xi) = (f64::from(v.re), f64::from(v.im));
                re += xr * c - xi * s;
                im += xr * s + xi * c;
            }
            if inverse {
                (re / n as f64, im / n as f64)
            } else {
                (re, im)
            }
        })
        .collect()
}
