//! The apps on CEDR's own inputs, against references computed here another way: direct DFTs
//! in f64 over data parsed by the test itself. Ignored, with the reason in the test summary,
//! where the build found no data; failed where `RIMMS_CEDR_DATA` names a wrong folder.

use crate::common::{
    across_ranks, assert_close, cedr_dir, cedr_dir_from, dft, fftshift, read_cedr, rms, CEDR_FILES,
};
use num_complex::Complex64;
use rimms_cli::apps::{distributed, pulse_doppler, sar, AppError, Mapping, Mode, Options};
use std::f64::consts::PI;

/// Pulse Doppler in f64: (Doppler bin, range bin) of the maximum of |fftshift(FFT across
/// pulses of the matched filter)|, scanning range-major as the app lays it out.
fn pulse_doppler_reference(pulses: &[Vec<Complex64>], pulse: &[Complex64]) -> (usize, usize) {
    let (m, n) = (pulses.len(), pulse.len());
    let l = 2 * n;
    let zero = Complex64::new(0.0, 0.0);
    let mut d = pulse.to_vec();
    d.resize(l, zero);
    let d_spec = dft(&d, false);
    let filtered: Vec<Vec<Complex64>> = pulses
        .iter()
        .map(|p| {
            let mut c = vec![zero; n - 1];
            c.extend_from_slice(p);
            c.push(zero);
            let product: Vec<Complex64> = dft(&c, false)
                .iter()
                .zip(&d_spec)
                .map(|(a, b)| a * b.conj())
                .collect();
            dft(&product, true)
        })
        .collect();
    let mut best = (0, 0, f64::NEG_INFINITY);
    for x in 0..l {
        let across: Vec<Complex64> = filtered.iter().map(|row| row[x]).collect();
        let spectrum = fftshift(&dft(&across, false));
        for (z, v) in spectrum.iter().enumerate() {
            if v.norm() > best.2 {
                best = (z, x, v.norm());
            }
        }
    }
    assert_eq!(m, 128);
    (best.0, best.1)
}

#[test]
#[cfg_attr(
    not(cedr_data),
    ignore = "no CEDR data: set RIMMS_CEDR_DATA to the folder of CEDR's input files"
)]
fn pulse_doppler_on_cedr_data_finds_the_reference_bins() {
    let dir = cedr_dir();
    let pulses = read_cedr(&dir.join("pulse_doppler_pulses.txt"));
    let pulse = read_cedr(&dir.join("pulse_doppler_pulse.txt")).remove(0);
    let (z, x) = pulse_doppler_reference(&pulses, &pulse);
    // CEDR's formulas, written out again: a = z+1, b = x+1, m = 128, n = 64, PRI = 1.27e-4.
    let pri = 1.27e-4;
    let doppler = ((z + 1) as f64 - (129 / 2) as f64) / 127.0 / pri;
    let delay = ((x + 1) as f64 - 64.0) / 63.0 * pri;
    let input = pulse_doppler::Input::load(&dir).expect("CEDR files");
    for mapping in [Mapping::Cpu, Mapping::Sim] {
        let out = pulse_doppler::run(&input, &Options::new(Mode::Rimms, mapping))
            .expect("run")
            .result;
        assert_eq!((out.doppler_bin, out.range_bin), (z, x), "{mapping:?}");
        assert_eq!(out.doppler_shift_hz, doppler);
        assert_eq!(out.time_delay_s, delay);
    }
}

/// The same bins and CEDR figures across 1 to 4 ranks as the reference finds on one.
#[test]
#[cfg_attr(
    not(cedr_data),
    ignore = "no CEDR data: set RIMMS_CEDR_DATA to the folder of CEDR's input files"
)]
fn pulse_doppler_across_ranks_on_cedr_data_finds_the_reference_bins() {
    let dir = cedr_dir();
    let pulses = read_cedr(&dir.join("pulse_doppler_pulses.txt"));
    let pulse = read_cedr(&dir.join("pulse_doppler_pulse.txt")).remove(0);
    let (z, x) = pulse_doppler_reference(&pulses, &pulse);
    let input = pulse_doppler::Input::load(&dir).expect("CEDR files");
    let single = pulse_doppler::run(&input, &Options::new(Mode::Rimms, Mapping::Cpu))
        .expect("run")
        .result;
    for ranks in 1..=4 {
        let found = across_ranks(ranks, |cl| {
            distributed::pulse_doppler(
                cl,
                rimms::Device::Cpu,
                &input.pulses,
                &input.pulse,
                pulse_doppler::M,
                rimms_dist::Distribution::BlockRows,
                false,
            )
        });
        for (rank, detection) in found.into_iter().enumerate() {
            let detection = detection.unwrap_or_else(|e| panic!("np {ranks} rank {rank}: {e}"));
            assert_eq!(
                (detection.doppler_bin, detection.range_bin),
                (z, x),
                "np {ranks} rank {rank}"
            );
            assert_eq!(detection.cedr_output(), single, "np {ranks} rank {rank}");
        }
    }
}

/// SAR in f64 with DESIGN.md's parameters, recomputed here, and direct DFTs: the image, and
/// the rms of the range-compressed data that the azimuth stage transforms.
fn sar_reference(raw: &[Vec<Complex64>]) -> (Vec<Vec<f64>>, f64) {
    let (nslow, nfast) = (256usize, 512usize);
    let (c, v, xmin, xmax, yc, y0, tr, kr, h, lambda) = (
        3e8, 150.0, 0.0, 50.0, 10_000.0, 500.0, 2.5e-6, 2e13, 5000.0, 0.0566,
    );
    let r0 = f64::sqrt(yc * yc + h * h);
    let ka = 2.0 * v * v / lambda / r0;
    let rmin = f64::sqrt((yc - y0) * (yc - y0) + h * h);
    let rmax = f64::sqrt((yc + y0) * (yc + y0) + h * h);
    let span = 2.0 * rmax / c + tr - 2.0 * rmin / c;
    let zero = Complex64::new(0.0, 0.0);
    let g: Vec<Complex64> = (0..nfast)
        .map(|j| {
            let t = j as f64 * span / (nfast - 1) as f64;
            if t.abs() < tr / 2.0 {
                Complex64::from_polar(1.0, -PI * kr * t * t)
            } else {
                zero
            }
        })
        .collect();
    let az: Vec<Complex64> = (0..nslow)
        .map(|i| {
            let t = i as f64 * (xmax - xmin) / v / (nslow - 1) as f64;
            if t.abs() < (tr / 2.0) * (xmax - xmin) / v / span {
                Complex64::from_polar(1.0, PI * ka * t * t)
            } else {
                zero
            }
        })
        .collect();
    let g_spec = dft(&g, false);
    let range: Vec<Vec<Complex64>> = raw
        .iter()
        .map(|row| {
            let shifted = fftshift(&dft(row, false));
            let product: Vec<Complex64> = shifted.iter().zip(&g_spec).map(|(a, b)| a * b).collect();
            dft(&product, true)
        })
        .collect();
    // Azimuth: each column of the range-compressed data, then the image as rows again.
    let columns: Vec<Vec<Complex64>> = (0..nfast)
        .map(|j| {
            let col: Vec<Complex64> = range.iter().map(|row| row[j]).collect();
            let shifted = fftshift(&dft(&col, false));
            let product: Vec<Complex64> = shifted.iter().zip(&az).map(|(a, b)| a * b).collect();
            fftshift(&dft(&product, true))
        })
        .collect();
    let image = (0..nslow)
        .map(|i| (0..nfast).map(|j| columns[j][i].norm()).collect())
        .collect();
    (image, rms(range.iter().flatten()))
}

/// What CEDR's SAR data must give, from the f64 reference: the image, its peak and where.
struct SarExpected {
    image: Vec<f64>,
    peak: f64,
    at: usize,
    range_rms: f64,
}

/// Range: FFT and inverse of 512 points (9 passes each); azimuth: of 256 (8 each).
const SAR_PASSES: u32 = 2 * 9 + 2 * 8;

fn sar_expected(dir: &std::path::Path) -> SarExpected {
    let (want, range_rms) = sar_reference(&read_cedr(&dir.join("SAR_rawdata_rda.txt")));
    let image: Vec<f64> = want.iter().flatten().copied().collect();
    let peak = image.iter().fold(0.0f64, |a, &b| a.max(b));
    let at = image.iter().position(|&v| v == peak).expect("a peak");
    SarExpected {
        image,
        peak,
        at,
        range_rms,
    }
}

impl SarExpected {
    /// A computed image (where there is one), its peak and where it is, against the reference.
    fn check(&self, image: Option<&[f32]>, peak: f32, row_col: (usize, usize), what: &str) {
        if let Some(image) = image {
            assert_close(image, &self.image, SAR_PASSES, self.range_rms, what);
        }
        assert_eq!(row_col, (self.at / 512, self.at % 512), "{what}");
        assert_close(&[peak], &[self.peak], SAR_PASSES, self.range_rms, what);
    }
}

/// Per pixel, against the f64 reference on every mapping whose kernels differ or whose data
/// takes another path. SAR's image is far weaker than the range-compressed data its azimuth
/// FFTs transform (CEDR's filter keeps 38 of 256 bins), so weak pixels carry rounding noise at
/// that data's scale: the absolute floor is set there.
#[test]
#[cfg_attr(
    not(cedr_data),
    ignore = "no CEDR data: set RIMMS_CEDR_DATA to the folder of CEDR's input files"
)]
fn sar_on_cedr_data_matches_an_f64_reference_pixel_by_pixel() {
    let dir = cedr_dir();
    let expected = sar_expected(&dir);
    let input = sar::Input::load(&dir).expect("CEDR file");
    for mapping in [Mapping::Cpu, Mapping::Sim] {
        let out = sar::run(&input, &Options::new(Mode::Rimms, mapping))
            .expect("run")
            .result;
        let what = format!("SAR on {mapping:?}");
        expected.check(
            Some(&out.image),
            out.peak,
            (out.peak_row, out.peak_col),
            &what,
        );
    }
}

/// The same image across 1 to 4 ranks as the f64 reference on one, pixel by pixel, with the
/// rows in block rows, and at 3 ranks block-cyclic.
#[test]
#[cfg_attr(
    not(cedr_data),
    ignore = "no CEDR data: set RIMMS_CEDR_DATA to the folder of CEDR's input files"
)]
fn sar_across_ranks_on_cedr_data_matches_an_f64_reference_pixel_by_pixel() {
    let dir = cedr_dir();
    let expected = sar_expected(&dir);
    let input = sar::Input::load(&dir).expect("CEDR file");
    let h = sar::azimuth_filter();
    let block_rows = rimms_dist::Distribution::BlockRows;
    let runs = (1..=4).map(|ranks| (ranks, block_rows));
    let cyclic = rimms_dist::Distribution::BlockCyclic { block: 7 };
    for (ranks, dist) in runs.chain([(3, cyclic)]) {
        let images = across_ranks(ranks, |cl| {
            distributed::sar(
                cl,
                rimms::Device::Cpu,
                &input.raw,
                sar::Size::CEDR,
                &h,
                dist,
                true,
            )
        });
        for (rank, image) in images.into_iter().enumerate() {
            let image = image.unwrap_or_else(|e| panic!("np {ranks} rank {rank}: {e}"));
            let what = format!("SAR at np {ranks} ({dist}), rank {rank}");
            let row_col = (image.peak_row, image.peak_col);
            expected.check(image.image.as_deref(), image.peak, row_col, &what);
        }
    }
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rimms-cedr-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn malformed_or_missing_cedr_files_are_named_with_the_line_and_column() {
    let dir = scratch_dir("bad");
    let row = |k: usize| -> String {
        (0..128)
            .map(|i| format!("{}.5", (i + k) % 7))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut pulses: Vec<String> = (0..128).map(row).collect();
    std::fs::write(dir.join("pulse_doppler_pulse.txt"), row(0)).expect("write");
    // Missing file: named.
    let err = pulse_doppler::Input::load(&dir).unwrap_err();
    assert!(matches!(err, AppError::Read { .. }), "{err}");
    assert!(
        err.to_string().contains("pulse_doppler_pulses.txt"),
        "{err}"
    );
    // A bad token on line 3, column 9.
    pulses[2] = format!("0.5 1.5 {}", &row(2)[8..]).replacen("2.5", "2,5", 1);
    std::fs::write(dir.join("pulse_doppler_pulses.txt"), pulses.join("\n")).expect("write");
    let err = pulse_doppler::Input::load(&dir).unwrap_err().to_string();
    assert!(err.contains("pulse_doppler_pulses.txt:3:"), "{err}");
    assert!(err.ends_with("`2,5` is not a number"), "{err}");
    // A short line.
    pulses[2] = row(2);
    pulses[40] = row(40)[..row(40).len() - 4].to_string();
    std::fs::write(dir.join("pulse_doppler_pulses.txt"), pulses.join("\n")).expect("write");
    let err = pulse_doppler::Input::load(&dir).unwrap_err().to_string();
    assert!(
        err.ends_with("pulse_doppler_pulses.txt:41: expected 128 numbers (64 complex values as re im pairs), found 127"),
        "{err}"
    );
    // Too few lines.
    pulses[40] = row(40);
    pulses.truncate(100);
    std::fs::write(dir.join("pulse_doppler_pulses.txt"), pulses.join("\n")).expect("write");
    let err = pulse_doppler::Input::load(&dir).unwrap_err().to_string();
    assert!(
        err.ends_with("pulse_doppler_pulses.txt: expected 128 lines of data, found 100"),
        "{err}"
    );
    // SAR's file missing.
    let err = sar::Input::load(&dir).unwrap_err().to_string();
    assert!(err.contains("SAR_rawdata_rda.txt"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[should_panic(expected = "RIMMS_CEDR_DATA names /nonexistent/rimms-cedr, which is not a folder")]
fn a_wrong_cedr_data_folder_fails_instead_of_skipping() {
    cedr_dir_from(Some("/nonexistent/rimms-cedr".into()));
}

#[test]
fn a_cedr_data_folder_without_the_files_fails_naming_the_file() {
    let dir = scratch_dir("incomplete");
    for file in &CEDR_FILES[..2] {
        std::fs::write(dir.join(file), "").expect("write");
    }
    let err = std::panic::catch_unwind(|| cedr_dir_from(Some(dir.clone().into())))
        .expect_err("a folder without SAR_rawdata_rda.txt");
    let msg = err.downcast_ref::<String>().expect("a formatted message");
    assert!(msg.ends_with("which has no SAR_rawdata_rda.txt"), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}
