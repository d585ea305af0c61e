//! The apps on generated inputs recover what was put in: the correlator's delay, pulse
//! Doppler's range and Doppler bins, SAR's scatterer ranges.

use crate::common::scatterer_columns;
use rimms_cli::apps::{correlator, pulse_doppler, sar, AppError, Mapping, Mode, Options};

fn opts() -> Options {
    Options::new(Mode::Rimms, Mapping::Sim)
}

/// The delay by the definition, independently of the app: the time-domain cross-correlation
/// Σ_k received[k + m] · conj(reference[k]) in f64 at every lag m a delay can have, and the
/// lag of its largest magnitude.
fn naive_delay(input: &correlator::Input) -> usize {
    let n = input.reference.len();
    let magnitude = |m: usize| {
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (k, r) in input.reference.iter().enumerate() {
            let Some(x) = input.received.get(k + m) else {
                break;
            };
            let (xr, xi, rr, ri) = (x.re as f64, x.im as f64, r.re as f64, r.im as f64);
            re += xr * rr + xi * ri;
            im += xi * rr - xr * ri;
        }
        re.hypot(im)
    };
    (0..n)
        .map(|m| (m, magnitude(m)))
        .fold((0, f64::NEG_INFINITY), |best, (m, v)| {
            if v > best.1 {
                (m, v)
            } else {
                best
            }
        })
        .0
}

#[test]
fn the_correlator_finds_every_accepted_delay_as_the_definition_does() {
    // Every delay the app accepts (it refuses 256 and beyond, below), on the CPU and, for a
    // few seeds, on the simulated card: the app agrees with the naive correlation and both
    // with the truth. Delays near the end of the range once gave lag −3 (509).
    let cpu = Options::new(Mode::Rimms, Mapping::Cpu);
    for delay in 0..correlator::N {
        let seeds: &[u64] = if delay % 32 == 31 { &[1, 2, 3] } else { &[1] };
        for &seed in seeds {
            let (input, truth) =
                correlator::generate(&correlator::Params { delay, seed }).expect("input");
            assert_eq!(truth.delay_samples, delay);
            assert_eq!(naive_delay(&input), delay, "reference, seed {seed}");
            let got = correlator::run(&input, &cpu).expect("run").result;
            assert_eq!(got.delay_samples, delay, "cpu, seed {seed}");
            if seed != 1 {
                let got = correlator::run(&input, &opts()).expect("run").result;
                assert_eq!(got.delay_samples, delay, "sim, seed {seed}");
            }
        }
    }
}

#[test]
fn the_correlator_refuses_a_delay_past_its_signal() {
    let err = correlator::generate(&correlator::Params {
        delay: 256,
        seed: 1,
    })
    .unwrap_err();
    assert!(matches!(err, AppError::Param(_)), "{err}");
    assert!(err.to_string().contains("below 256"), "{err}");
}

#[test]
fn pulse_doppler_recovers_the_simulated_range_and_doppler_bins() {
    for (delay, doppler_bin, seed) in [
        (0, 0, 1),
        (19, 5, 2),
        (48, -64, 3),
        (30, 63, 4),
        (7, -13, 5),
    ] {
        let params = pulse_doppler::Params {
            delay,
            doppler_bin,
            seed,
        };
        let (input, truth) = pulse_doppler::generate(&params).expect("input");
        // The bins follow from the matched filter's layout, independently of the app: range
        // bin n − 1 + delay, Doppler bin m/2 + offset after the shift.
        assert_eq!(truth.expected.range_bin, 63 + delay);
        assert_eq!(truth.expected.doppler_bin as i32, 64 + doppler_bin);
        let got = pulse_doppler::run(&input, &opts()).expect("run").result;
        assert_eq!(got, truth.expected, "{params:?}");
    }
    let bad = pulse_doppler::Params {
        delay: 49,
        doppler_bin: 0,
        seed: 1,
    };
    assert!(matches!(
        pulse_doppler::generate(&bad),
        Err(AppError::Param(_))
    ));
}

/// The local maxima of the image's column profile (the brightest value of each column),
/// brightest first.
fn brightest_columns(image: &[f32], count: usize) -> Vec<usize> {
    let profile: Vec<f32> = (0..512)
        .map(|j| {
            image
                .iter()
                .skip(j)
                .step_by(512)
                .fold(0.0f32, |a, &b| a.max(b))
        })
        .collect();
    let mut peaks: Vec<usize> = (1..511)
        .filter(|&j| profile[j] > profile[j - 1] && profile[j] >= profile[j + 1])
        .collect();
    peaks.sort_by(|&a, &b| profile[b].total_cmp(&profile[a]));
    peaks.truncate(count);
    peaks.sort();
    peaks
}

#[test]
fn sar_puts_the_brightest_pixels_at_the_scatterers_ranges() {
    let scene = sar::Scene::default();
    let input = sar::Input::simulate(&scene);
    let out = sar::run(&input, &opts()).expect("run").result;
    let want = scatterer_columns(&scene);
    let got = brightest_columns(&out.image, want.len());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            g.abs_diff(*w) <= 1,
            "brightest columns {got:?}, scatterers at {want:?}"
        );
    }
    assert!(
        want.iter().any(|w| w.abs_diff(out.peak_col) <= 1),
        "the brightest pixel (column {}) is at none of {want:?}",
        out.peak_col
    );
}

/// The brightest row of `column` in a 256 × 512 image.
fn brightest_row(image: &[f32], column: usize) -> usize {
    (0..256)
        .max_by(|&a, &b| image[a * 512 + column].total_cmp(&image[b * 512 + column]))
        .expect("rows")
}

#[test]
fn the_focused_sar_puts_each_scatterer_at_its_row_and_column() {
    // Scatterers at known places, apart in range so that each has its own column: along-track
    // positions near the start, middle and end of the 50 m path.
    let at = |x: f64, y: f64| sar::Scatterer {
        x,
        y,
        amplitude: 1.0,
    };
    let scene = sar::Scene {
        scatterers: vec![at(8.0, 9_700.0), at(25.0, 10_000.0), at(41.0, 10_300.0)],
    };
    let input = sar::Input::simulate(&scene).with_azimuth(sar::Azimuth::Focused);
    let out = sar::run(&input, &opts()).expect("run").result;
    // The row of closest approach from the geometry alone: x over the path's 50 m, on rows
    // 0 … 255; the column as the range test above derives it.
    for s in &scene.scatterers {
        let want_row = (s.x / 50.0 * 255.0).round() as usize;
        let column = s.expected_column().round() as usize;
        let got = brightest_row(&out.image, column);
        // The 50 m aperture resolves λR/(2L) ≈ 6.3 m along the track, 32 rows of 0.2 m. The
        // filter's Ka is the scene centre's, 2.5 % off at the scene's edges, which moves an
        // off-centre peak by a few rows: within 5 rows (1 m) is a sixth of a resolution cell.
        assert!(
            got.abs_diff(want_row) <= 5,
            "scatterer at x = {} m: brightest row {got} of column {column}, want {want_row}",
            s.x
        );
        // Focused means narrow: rows within 3 dB of the peak span at most two cells.
        let peak = out.image[got * 512 + column];
        let wide = (0..256)
            .filter(|r| out.image[r * 512 + column] >= peak / 2f32.sqrt())
            .count();
        assert!(wide <= 64, "x = {} m: {wide} rows within 3 dB", s.x);
    }
    // And the brightest pixel of the image is one of them.
    assert!(scene.scatterers.iter().any(|s| {
        (s.expected_column().round() as usize).abs_diff(out.peak_col) <= 1
            && ((s.x / 50.0 * 255.0).round() as usize).abs_diff(out.peak_row) <= 5
    }));
    // CEDR's filter, on the same data, does not: its rows are set by the aperture's edges.
    let cedr = sar::run(&input.clone().with_azimuth(sar::Azimuth::Cedr), &opts())
        .expect("run")
        .result;
    let misplaced = scene
        .scatterers
        .iter()
        .filter(|s| {
            let row = brightest_row(&cedr.image, s.expected_column().round() as usize);
            row.abs_diff((s.x / 50.0 * 255.0).round() as usize) > 5
        })
        .count();
    assert!(
        misplaced >= 2,
        "CEDR's azimuth stage was expected not to focus"
    );
}
