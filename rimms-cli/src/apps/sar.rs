//! SAR image formation with the range-Doppler algorithm, in CEDR's formulation.
//!
//! 256 slow-time rows (pulses) of 512 fast-time samples. With docs/design.md's geometry
//! (v = 150 m/s over 0 … 50 m, scene centre Yc = 10 km ± Y0 = 500 m, altitude h = 5 km,
//! chirp Tr = 2.5 µs at Kr = 2e13 Hz/s, λ = 0.0566 m) the range chirp is
//! g_j = exp(−iπKr tr_j²) where |tr_j| < Tr/2 and the azimuth filter
//! H_i = exp(+iπKa ta_i²) where |ta_i| < (Tr/2)(Xmax−Xmin)/v/span. Per frame:
//! G = FFT(g); every row: FFT, fftshift, ×G, IFFT; transpose; every row (now 512 of 256):
//! FFT, fftshift, ×H, IFFT, fftshift; transpose back; |·|. FFT and ZIP are called once per
//! row, as CEDR calls them: 1 + 3·256 + 3·512 = 2,305 FFT and ZIP calls a frame, plus six
//! whole-matrix `fftshift`, `transpose` and `magnitude` calls (host loops in CEDR).
//!
//! Two properties of this formulation decide what an image shows. The fftshift before ×G
//! shifts the spectrum by half the sampling rate, which delays the compressed range pulse by
//! fs/(2Kr) seconds (≈ 91 samples), so a scatterer whose echo is centred at fast-time sample s
//! focuses at column s + 1/(2·Kr·dt²). And H multiplies the *shifted* azimuth spectrum on
//! its first 38 bins, far from where a broadside scatterer's Doppler energy lies, so the
//! azimuth stage does not focus: the brightest row is set by the aperture edges, not by where
//! the scatterer is. The app computes exactly what docs/design.md specifies, since that is the
//! workload being measured; [`Scatterer::expected_column`] is the range position a test can
//! hold it to.
//!
//! Beside it, [`Azimuth::Focused`] (`rimms run sar --azimuth focused`) swaps H for a matched
//! filter of the azimuth chirp, so that a point target also focuses along the track, at the
//! row of its closest approach; every other step is the same. See [`focused_azimuth_filter`].
//!
//! Generated inputs simulate point scatterers the way CEDR's raw data was made (checked against
//! its file): per pulse, the chirp exp(iπKr(t−τ)²) for |t−τ| < Tr/2 centred at
//! τ = 2(R−Rmin)/c + Tr/2 in the range window, times the two-way phase exp(−i4πR/λ), with the
//! exact slant range R of that pulse.

use super::input::{cis, read_complex_rows};
use super::native::Native;
use super::report::Run;
use super::{
    alloc_rows, argmax, each_row, execute, frames, App, AppError, Frame, Mapping, Options,
    Pipeline, RowCall, Step, Submit,
};
use crate::human::{count, significant};
use rimms::drivers::cpu::kernels;
use rimms::{Complex32, FftDirection, HeteData, Runtime, ZipOp};
use serde::Serialize;
use std::f64::consts::PI;
use std::io::Write;
use std::path::Path;

/// Slow-time rows (pulses).
pub const NSLOW: usize = 256;
/// Fast-time samples per row.
pub const NFAST: usize = 512;
/// Speed of light, m/s.
pub const C: f64 = 3e8;
/// Platform speed, m/s.
pub const V: f64 = 150.0;
/// Start of the flight path, m.
pub const XMIN: f64 = 0.0;
/// End of the flight path, m.
pub const XMAX: f64 = 50.0;
/// Ground range of the scene centre, m.
pub const YC: f64 = 10_000.0;
/// Half the ground-range extent of the scene, m.
pub const Y0: f64 = 500.0;
/// Chirp duration, s.
pub const TR: f64 = 2.5e-6;
/// Chirp rate, Hz/s.
pub const KR: f64 = 2e13;
/// Platform altitude, m.
pub const H: f64 = 5000.0;
/// Wavelength, m.
pub const LAMBDA: f64 = 0.0566;

/// CEDR's raw-data file: 256 lines of 512 complex values.
pub const RAW_FILE: &str = "SAR_rawdata_rda.txt";

/// Slant range to the scene centre.
fn r0() -> f64 {
    YC.hypot(H)
}

/// Nearest and farthest slant range of the scene.
fn range_limits() -> (f64, f64) {
    ((YC - Y0).hypot(H), (YC + Y0).hypot(H))
}

/// Duration of the fast-time window: 2Rmax/c + Tr − 2Rmin/c.
fn span() -> f64 {
    let (rmin, rmax) = range_limits();
    2.0 * rmax / C + TR - 2.0 * rmin / C
}

/// Fast time of sample j, from the start of the window.
pub fn fast_time(j: usize) -> f64 {
    Size::CEDR.fast_time(j)
}

/// Slow time of row i.
pub fn slow_time(i: usize) -> f64 {
    Size::CEDR.slow_time(i)
}

/// The raw matrix's shape. A scene larger than CEDR's keeps CEDR's range sampling and grows
/// the window past the far edge (a wider swath: sampling CEDR's window more densely would
/// break the formulation, whose fftshift before ×G moves the spectrum by half the sampling
/// rate, which matches the chirp's band only near CEDR's rate), and flies CEDR's 50 m path
/// with more pulses (a higher PRF: a longer path would add range migration that nothing in
/// this formulation corrects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Slow-time rows (pulses).
    pub slow: usize,
    /// Fast-time samples per row.
    pub fast: usize,
}

impl Size {
    /// CEDR's 256 × 512.
    pub const CEDR: Size = Size {
        slow: NSLOW,
        fast: NFAST,
    };

    /// Fast time of sample j, from the start of the window, at CEDR's spacing.
    pub fn fast_time(self, j: usize) -> f64 {
        j as f64 * span() / (NFAST - 1) as f64
    }

    /// Slow time of row i: `slow` pulses over CEDR's path.
    pub fn slow_time(self, i: usize) -> f64 {
        i as f64 * (XMAX - XMIN) / V / (self.slow - 1) as f64
    }

    /// The range chirp g (`fast` samples).
    pub fn range_chirp(self) -> Vec<Complex32> {
        (0..self.fast)
            .map(|j| {
                let t = self.fast_time(j);
                if t.abs() < TR / 2.0 {
                    cis(-PI * KR * t * t)
                } else {
                    Complex32::new(0.0, 0.0)
                }
            })
            .collect()
    }

    /// CEDR's azimuth filter H (`slow` samples).
    pub fn azimuth_filter(self) -> Vec<Complex32> {
        let ka = 2.0 * V * V / LAMBDA / r0();
        let limit = (TR / 2.0) * (XMAX - XMIN) / V / span();
        (0..self.slow)
            .map(|i| {
                let t = self.slow_time(i);
                if t.abs() < limit {
                    cis(PI * ka * t * t)
                } else {
                    Complex32::new(0.0, 0.0)
                }
            })
            .collect()
    }

    /// The echoes of `scene`'s scatterers, computed in f64, `slow` rows of `fast` samples.
    pub fn echoes(self, scene: &Scene) -> Vec<Complex32> {
        let (rmin, _) = range_limits();
        let mut raw = vec![Complex32::new(0.0, 0.0); self.slow * self.fast];
        for s in &scene.scatterers {
            for (i, row) in raw.chunks_exact_mut(self.fast).enumerate() {
                let r = (V * self.slow_time(i) - s.x).hypot(s.y.hypot(H));
                let tau = 2.0 * (r - rmin) / C + TR / 2.0;
                let phase = -4.0 * PI * r / LAMBDA;
                for (j, v) in row.iter_mut().enumerate() {
                    let t = self.fast_time(j) - tau;
                    if t.abs() < TR / 2.0 {
                        *v += cis(PI * KR * t * t + phase) * s.amplitude as f32;
                    }
                }
            }
        }
        raw
    }

    /// The column a scatterer's range focuses at: the echo centre in samples plus the
    /// fftshift's half-band delay, 1/(2·Kr·dt²) samples.
    pub fn expected_column(self, scatterer: &Scatterer) -> f64 {
        let (rmin, _) = range_limits();
        let dt = self.fast_time(1);
        let tau = 2.0 * (scatterer.y.hypot(H) - rmin) / C + TR / 2.0;
        tau / dt + 1.0 / (2.0 * KR * dt * dt)
    }
}

/// The range chirp g (NFAST samples).
pub fn range_chirp() -> Vec<Complex32> {
    Size::CEDR.range_chirp()
}

/// The azimuth filter H (NSLOW samples).
pub fn azimuth_filter() -> Vec<Complex32> {
    Size::CEDR.azimuth_filter()
}

/// Which filter the azimuth stage multiplies by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Azimuth {
    /// CEDR's H, as specified: the workload measured, which does not focus along the track.
    #[default]
    Cedr,
    /// A matched filter of the azimuth chirp: point targets focus at their row.
    Focused,
}

impl Azimuth {
    /// The filter, NSLOW samples, to multiply the shifted azimuth spectrum by.
    pub fn filter(self) -> Vec<Complex32> {
        match self {
            Azimuth::Cedr => azimuth_filter(),
            Azimuth::Focused => focused_azimuth_filter(),
        }
    }
}

/// A matched filter for the azimuth stage: what makes a point target focus at its row.
///
/// A scatterer at along-track position x, closest slant range R, is seen by pulse i with
/// the two-way phase −4πR(ta)/λ, R(ta) ≈ R + (v·ta − x)²/(2R): the chirp
/// exp(−iπKa(ta − x/v)²), Ka = 2v²/(λR). Correlating each range bin's row with the reference
/// h[n] = exp(−iπKa(nΔ)²), n taken as −N/2 … N/2 − 1 around row 0 (Ka at the scene centre's
/// range, a few per cent off at the scene's edges), peaks at row x/v/Δ. In the pipeline's
/// terms: the spectrum of the correlation is FFT(row)·conj(FFT(h)); multiplying by (−1)^k
/// delays it by N/2 rows, which the final fftshift takes back; and the filter meets the
/// *shifted* spectrum, so it is fftshifted too. Scaled by 1/N, so that a unit scatterer's
/// peak is about the number of pulses that see it, as in a sum.
pub fn focused_azimuth_filter() -> Vec<Complex32> {
    let n = NSLOW;
    let ka = 2.0 * V * V / LAMBDA / r0();
    let dt = slow_time(1);
    let reference: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let centred = i as f64 - if i < n / 2 { 0.0 } else { n as f64 };
            let t = centred * dt;
            let phase = -PI * ka * t * t;
            (phase.cos(), phase.sin())
        })
        .collect();
    // The reference's spectrum by a direct DFT in f64: once per run, 65,536 terms.
    let spectrum = (0..n).map(|k| {
        reference
            .iter()
            .enumerate()
            .fold((0.0, 0.0), |(re, im), (j, &(hr, hi))| {
                let w = -2.0 * PI * (k * j % n) as f64 / n as f64;
                let (c, s) = (w.cos(), w.sin());
                (re + hr * c - hi * s, im + hr * s + hi * c)
            })
    });
    let unshifted: Vec<Complex32> = spectrum
        .enumerate()
        .map(|(k, (re, im))| {
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            // conj(H)·(−1)^k / N
            Complex32::new(
                (sign * re / n as f64) as f32,
                (-sign * im / n as f64) as f32,
            )
        })
        .collect();
    // fftshift: element k of the shifted spectrum is element k + N/2 of the plain one.
    (0..n).map(|k| unshifted[(k + n / 2) % n]).collect()
}

/// Raw data: NSLOW rows of NFAST samples, and the azimuth filter to form the image with.
#[derive(Clone, Debug)]
pub struct Input {
    /// Row-major, slow time by fast time.
    pub raw: Vec<Complex32>,
    /// CEDR's azimuth filter (the default) or the focusing one.
    pub azimuth: Azimuth,
}

impl Input {
    /// Reads CEDR's raw-data file from `dir`.
    pub fn load(dir: &Path) -> Result<Input, AppError> {
        Ok(Input {
            raw: read_complex_rows(&dir.join(RAW_FILE), NSLOW, NFAST)?,
            azimuth: Azimuth::Cedr,
        })
    }

    /// The same data, imaged with `azimuth`.
    pub fn with_azimuth(self, azimuth: Azimuth) -> Input {
        Input { azimuth, ..self }
    }

    /// The echoes of `scene`'s scatterers, computed in f64.
    pub fn simulate(scene: &Scene) -> Input {
        Input {
            raw: Size::CEDR.echoes(scene),
            azimuth: Azimuth::Cedr,
        }
    }
}

/// A point scatterer on the ground.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scatterer {
    /// Along-track position, m (XMIN … XMAX).
    pub x: f64,
    /// Ground range, m (YC ± Y0).
    pub y: f64,
    /// Reflectivity.
    pub amplitude: f64,
}

impl Scatterer {
    /// The image column its range focuses at: the echo centre in samples plus the fftshift's
    /// half-band delay, 1/(2·Kr·dt²) samples.
    pub fn expected_column(&self) -> f64 {
        Size::CEDR.expected_column(self)
    }

    /// The row of its closest approach (where a focusing azimuth stage would put it).
    pub fn nominal_row(&self) -> f64 {
        (self.x - XMIN) / (XMAX - XMIN) * (NSLOW - 1) as f64
    }
}

/// The scatterers of a generated input.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    /// Point scatterers.
    pub scatterers: Vec<Scatterer>,
}

impl Default for Scene {
    /// Three unit scatterers at different ranges.
    fn default() -> Self {
        let at = |x, y| Scatterer {
            x,
            y,
            amplitude: 1.0,
        };
        Scene {
            scatterers: vec![at(10.0, 9_700.0), at(15.0, 10_000.0), at(35.0, 10_300.0)],
        }
    }
}

impl Scene {
    /// A line for the command's output.
    pub fn describe(&self) -> String {
        let cols: Vec<String> = self
            .scatterers
            .iter()
            .map(|s| format!("{:.0}", s.expected_column()))
            .collect();
        let rows: Vec<String> = self
            .scatterers
            .iter()
            .map(|s| format!("{:.0}", s.nominal_row()))
            .collect();
        format!(
            "truth: {} at columns {}, closest approach at rows {}",
            count(self.scatterers.len() as u64, "scatterer", "scatterers"),
            cols.join(", "),
            rows.join(", ")
        )
    }
}

/// What to make of the image: ranges focus, rows do not, by CEDR's design.
pub const NOTE: &str = "note: this is CEDR's range-Doppler formulation exactly as specified \
(the tests hold it to an independent f64 implementation on CEDR's raw data). Ranges focus: \
a scatterer lands at its column. Its azimuth filter H covers only the first 38 of 256 bins of \
the shifted azimuth spectrum, away from a broadside target's Doppler energy, so the azimuth \
stage does not compress: the brightest row is set by the aperture's edges, not by where a \
scatterer is. Read columns as range; do not read rows as along-track position \
(`--azimuth focused` forms an image whose rows do focus).";

/// What to make of the focused image.
pub const FOCUSED_NOTE: &str = "note: azimuth compressed with a matched filter of the azimuth \
chirp (`--azimuth focused`, not CEDR's H): a point target focuses at its column (range) and at \
the row of its closest approach, about 32 rows wide (the 50 m path resolves ~6 m along the \
track) and within a few rows at the scene's range edges.";

/// The image and its brightest pixel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Output {
    /// Row of the brightest pixel (slow time).
    pub peak_row: usize,
    /// Column of the brightest pixel (fast time).
    pub peak_col: usize,
    /// Its magnitude.
    pub peak: f32,
    /// The NSLOW × NFAST magnitude image, row-major.
    #[serde(skip)]
    pub image: Vec<f32>,
}

impl Output {
    fn of(image: &[f32]) -> Output {
        let (i, peak) = argmax(image);
        Output {
            peak_row: i / NFAST,
            peak_col: i % NFAST,
            peak,
            image: image.to_vec(),
        }
    }

    /// Writes the image as text, one row a line, numbers separated by spaces.
    pub fn write_image(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for row in self.image.chunks(NFAST) {
            let line: Vec<String> = row.iter().map(|v| v.to_string()).collect();
            writeln!(out, "{}", line.join(" "))?;
        }
        Ok(())
    }
}

/// Runs SAR.
pub fn run(input: &Input, opts: &Options) -> Result<Run<Output>, AppError> {
    if input.raw.len() != NSLOW * NFAST {
        return Err(AppError::Param(format!(
            "SAR takes {NSLOW} × {NFAST} raw samples, got {}",
            input.raw.len()
        )));
    }
    execute(input, opts)
}

/// "peak 9.1 at row 127, column 238".
pub fn describe(output: &Output) -> String {
    format!(
        "peak {} at row {}, column {}",
        significant(f64::from(output.peak), 4),
        output.peak_row,
        output.peak_col
    )
}

impl Pipeline for Input {
    type Output = Output;

    fn app(&self) -> App {
        App::Sar
    }

    fn managed<'a>(
        &'a self,
        rt: &'a Runtime,
        map: Mapping,
        submit: Submit,
    ) -> Result<Frame<'a, Output>, AppError> {
        let (fft, zip, aux) = (
            map.device(Step::Fft),
            map.device(Step::Zip),
            map.device(Step::Aux),
        );
        let g = HeteData::from_slice(rt, &range_chirp())?;
        let h = HeteData::from_slice(rt, &self.azimuth.filter())?;
        let mut g_spectrum = HeteData::alloc(rt, NFAST)?;
        // Two work matrices, used in turn; their fragments fit the 256-sample rows of the
        // azimuth stage so that each row can be written by its own call.
        let mut a = alloc_rows(rt, NFAST, NSLOW)?;
        let mut b = alloc_rows(rt, NFAST, NSLOW)?;
        // A frame's ends: the raw echoes the host writes and the image it reads.
        type Ends = (HeteData<Complex32>, HeteData<f32>);
        frames::run(
            rt,
            submit,
            || {
                Ok((
                    HeteData::alloc(rt, NSLOW * NFAST)?,
                    HeteData::alloc(rt, NSLOW * NFAST)?,
                ))
            },
            move |(raw, _): &mut Ends, ahead| {
                raw.host_fill(|x| x.copy_from_slice(&self.raw))?;
                ahead.send(raw, fft)
            },
            move |(raw, image): &mut Ends| {
                rt.fft(fft, FftDirection::Forward, NFAST, &g, &mut g_spectrum)?;
                // Range compression, row by row.
                let range = RowCall::Fft(fft, FftDirection::Forward, NFAST);
                each_row(rt, submit, raw, &mut a, NFAST, range)?;
                rt.fftshift(aux, NFAST, &a, &mut b)?;
                let chirp = RowCall::Zip(zip, ZipOp::Mul, &g_spectrum);
                each_row(rt, submit, &b, &mut a, NFAST, chirp)?;
                let back = RowCall::Fft(fft, FftDirection::Inverse, NFAST);
                each_row(rt, submit, &a, &mut b, NFAST, back)?;
                // Azimuth compression on the transposed matrix, one range bin a row.
                rt.transpose(aux, NSLOW, NFAST, &b, &mut a)?;
                let azimuth = RowCall::Fft(fft, FftDirection::Forward, NSLOW);
                each_row(rt, submit, &a, &mut b, NSLOW, azimuth)?;
                rt.fftshift(aux, NSLOW, &b, &mut a)?;
                let matched = RowCall::Zip(zip, ZipOp::Mul, &h);
                each_row(rt, submit, &a, &mut b, NSLOW, matched)?;
                let focus = RowCall::Fft(fft, FftDirection::Inverse, NSLOW);
                each_row(rt, submit, &b, &mut a, NSLOW, focus)?;
                rt.fftshift(aux, NSLOW, &a, &mut b)?;
                rt.transpose(aux, NFAST, NSLOW, &b, &mut a)?;
                rt.magnitude(aux, &a, image)?;
                Ok(())
            },
            |(_, image): &mut Ends| Ok(Output::of(image.host()?)),
        )
    }

    fn native<'a>(&'a self, dev: &'a Native) -> Result<Frame<'a, Output>, AppError> {
        let mut g = dev.mirror(NFAST)?;
        g.host_mut().copy_from_slice(&range_chirp());
        dev.upload(&mut g);
        let mut h = dev.mirror(NSLOW)?;
        h.host_mut().copy_from_slice(&self.azimuth.filter());
        dev.upload(&mut h);
        let mut g_spectrum = dev.buffer(NFAST)?;
        let mut raw = dev.mirror(NSLOW * NFAST)?;
        let mut a = dev.buffer(NSLOW * NFAST)?;
        let mut b = dev.buffer(NSLOW * NFAST)?;
        let mut image = dev.mirror(NSLOW * NFAST)?;
        let multiply_rows = |input: &[Complex32], filter: &[Complex32], out: &mut [Complex32]| {
            let n = filter.len();
            for (row, o) in input.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
                dev.zip(ZipOp::Mul, row, filter, o)?;
            }
            Ok::<(), AppError>(())
        };
        Ok(Box::new(move || {
            raw.host_mut().copy_from_slice(&self.raw);
            dev.upload(&mut raw);
            dev.fft(FftDirection::Forward, NFAST, g.dev(), &mut g_spectrum)?;
            dev.fft(FftDirection::Forward, NFAST, raw.dev(), &mut a)?;
            kernels::fftshift_rows(NFAST, &a, &mut b);
            multiply_rows(&b, &g_spectrum, &mut a)?;
            dev.fft(FftDirection::Inverse, NFAST, &a, &mut b)?;
            kernels::transpose(NSLOW, NFAST, &b, &mut a);
            dev.fft(FftDirection::Forward, NSLOW, &a, &mut b)?;
            kernels::fftshift_rows(NSLOW, &b, &mut a);
            multiply_rows(&a, h.dev(), &mut b)?;
            dev.fft(FftDirection::Inverse, NSLOW, &b, &mut a)?;
            kernels::fftshift_rows(NSLOW, &a, &mut b);
            kernels::transpose(NFAST, NSLOW, &b, &mut a);
            kernels::magnitude(&a, image.dev_mut());
            dev.download(&mut image);
            Ok(Output::of(image.host()))
        }))
    }
}
