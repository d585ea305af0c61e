//! What the chains (2fft, fzf, zip3x) should print, computed apart from the run: from the
//! same input, in f64, with rustfft's f64 transforms instead of the devices' f32 kernels.
//!
//! A checksum alone ("Σ|y| = 5.013725e4") tells a reader nothing: is that right? Beside
//! its expected value and the relative difference, a wrong device or a wrong copy shows at a
//! glance, and f32 rounding reads as the small difference it is.

use super::two_fft;
use super::zip3x;
use num_complex::Complex64;
use rimms::Complex32;
use rustfft::FftPlanner;

/// Σ|y| of the chain's output, computed in f64 from `input`: y = IFFT(FFT(x) · H) row by row
/// (H = 1 for 2fft), the inverse scaled by 1/points as the runtime's is.
pub fn fft_chain(input: &two_fft::Input) -> f64 {
    let points = input.params.points;
    let mut planner = FftPlanner::<f64>::new();
    let forward = planner.plan_fft_forward(points);
    let inverse = planner.plan_fft_inverse(points);
    let widen = |v: &[Complex32]| -> Vec<Complex64> {
        v.iter()
            .map(|c| Complex64::new(f64::from(c.re), f64::from(c.im)))
            .collect()
    };
    let mut data = widen(&input.x);
    let filter = input.filter.as_deref().map(widen);
    let scale = 1.0 / points as f64;
    let mut total = 0.0;
    for (row, chunk) in data.chunks_mut(points).enumerate() {
        forward.process(chunk);
        if let Some(h) = &filter {
            for (v, h) in chunk.iter_mut().zip(&h[row * points..]) {
                *v *= h;
            }
        }
        inverse.process(chunk);
        total += chunk.iter().map(|v| (v * scale).norm()).sum::<f64>();
    }
    total
}

/// Σ|a·b + c·d| of zip3x's output, in f64.
pub fn zip3x(input: &zip3x::Input) -> f64 {
    let [a, b, c, d] = &input.operands;
    let wide = |v: &Complex32| Complex64::new(f64::from(v.re), f64::from(v.im));
    (0..a.len())
        .map(|i| (wide(&a[i]) * wide(&b[i]) + wide(&c[i]) * wide(&d[i])).norm())
        .sum()
}

/// The result line of a chain (what it computed, and its checksum) and the line beside it
/// (the expected value and the relative difference).
pub fn describe(what: &str, got: f64, expected: f64) -> (String, String) {
    let difference = if expected == 0.0 {
        (got - expected).abs()
    } else {
        ((got - expected) / expected).abs()
    };
    (
        format!("{what}, checksum Σ|y| = {got:.6e}"),
        format!(
            "expected: Σ|y| = {expected:.6e}, computed from the input in f64 (relative \
             difference {difference:.1e})"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2fft is the identity: its expected checksum is Σ|x| itself.
    #[test]
    fn the_fft_pair_gives_back_its_input() {
        let params = two_fft::Params {
            points: 64,
            rows: 4,
        };
        let input = two_fft::Input::generate(params);
        let sum: f64 = input.x.iter().map(|v| f64::from(v.norm())).sum();
        assert!((fft_chain(&input) - sum).abs() < 1e-9 * sum);
    }
}
