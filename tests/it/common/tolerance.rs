//! The per-element tolerance of an f32 FFT chain against its f64 reference. One file for the
//! facade's tests and the runtime's driver tests (`rimms-runtime/tests/it/reference.rs`
//! includes it by path), so there is one rule, not two copies of it.

use num_complex::Complex32;

/// Checks an f32 FFT chain's result element by element against its f64 reference.
///
/// Element `i` may be off by `ε · passes · (|want_i| + rms(want))`, with `ε` the f32 machine
/// epsilon and `passes` the radix-2 passes of the chain (log2 of each FFT's length, summed;
/// an element-wise step such as a ZIP counts as one): about one rounding per pass, on the
/// scale of the data. So strong elements are held to a relative bound and weak ones to an
/// absolute floor at the data's scale, never to a bound relative to the peak, which lets weak
/// elements be wrong by many times their size. Panics naming the worst element; returns its
/// error as a fraction of its tolerance.
pub fn assert_close(got: &[Complex32], want: &[(f64, f64)], passes: u32, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mag = |&(r, i): &(f64, f64)| r.hypot(i);
    let rms = (want.iter().map(|w| mag(w).powi(2)).sum::<f64>() / want.len() as f64).sqrt();
    let k = f64::from(f32::EPSILON) * f64::from(passes);
    let (worst, at) = got
        .iter()
        .zip(want)
        .map(|(g, w)| {
            let err = (f64::from(g.re) - w.0).hypot(f64::from(g.im) - w.1);
            err / (k * (mag(w) + rms))
        })
        .enumerate()
        .fold(
            (0.0, 0),
            |best, (i, r)| if r > best.0 { (r, i) } else { best },
        );
    assert!(
        worst <= 1.0,
        "{what}: element {at} is {:?}, the reference {:?}: {worst:.1} times the tolerance",
        got[at],
        want[at]
    );
    eprintln!("{what}: the worst element is at {worst:.3} of its tolerance");
    worst
}
