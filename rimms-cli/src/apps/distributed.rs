//! Pulse Doppler and SAR across ranks: the apps of `pulse_doppler.rs` and `sar.rs` at any
//! size, their rows spread over the ranks of a job (`rimms_dist::Cluster`) by a distribution
//! whose rows have one owner each: block rows (the default), block-cyclic or all on one rank.
//! Each rank's scratch is its largest run of rows, not the whole matrix.
//!
//! Pulse Doppler:
//! Every rank reads the same input (SPMD) and computes the transmitted pulse's spectrum itself
//! (replicated by construction: no bytes on the network). Each rank matched-filters the pulses
//! it owns on its own runtime; one corner turn makes range bins the rows, again in block rows;
//! each rank takes the Doppler FFT, shift and magnitude of its range bins and its local peak;
//! the peaks (three numbers per rank) go to every rank, which all name the same detection. On
//! the network: the corner turn's (n−1)/n of the matrix, and 24 bytes per pair of ranks.
//!
//! SAR: range compression on each rank's pulses, a corner turn, azimuth compression on each
//! rank's range bins, a corner turn back, the magnitude and the same peak exchange: two
//! corner turns' bytes and the peaks.

use super::pulse_doppler::Output;
use super::sar::Size;
use super::{pad_into, AppError};
use rimms::{Complex32, Device, FftDirection, HeteData, ZipOp};
use rimms_dist::{Cluster, DistData, Distribution, Rank};

/// What the distributed app finds, the same on every rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Detection {
    /// Doppler bin of the maximum, after the shift.
    pub doppler_bin: usize,
    /// Range bin of the maximum.
    pub range_bin: usize,
    /// Whether the map has a peak at all (its maximum above its minimum).
    pub target: bool,
    /// The whole |range-Doppler| map, range bins as rows of `pulses` Doppler bins, on rank 0
    /// when asked for (gathering it costs the network the other ranks' rows).
    pub map: Option<Vec<f32>>,
}

impl Detection {
    /// CEDR's output for a detection at CEDR's sizes (128 pulses of 64 samples).
    pub fn cedr_output(&self) -> Output {
        Output {
            target: self.target,
            ..Output::from_bins(self.doppler_bin, self.range_bin)
        }
    }
}

/// Pulse Doppler of `pulses` (`m` pulses of `n` samples, pulse-major) against the transmitted
/// `pulse`, as this rank of `cl`'s job, its kernels on `device`.
pub fn pulse_doppler(
    cl: &Cluster<'_>,
    device: Device,
    pulses: &[Complex32],
    pulse: &[Complex32],
    m: usize,
    dist: Distribution,
    keep_map: bool,
) -> Result<Detection, AppError> {
    let n = pulse.len();
    let l = 2 * n;
    if m == 0 || pulses.len() != m * n {
        return Err(AppError::Param(format!(
            "pulse Doppler takes {m} pulses of {n} samples, got {} samples",
            pulses.len()
        )));
    }
    let rt = cl.runtime();
    let mut d = HeteData::alloc(rt, l)?;
    pad_into(d.host_write()?, pulse);
    let mut d_spectrum = HeteData::alloc(rt, l)?;
    rt.fft(device, FftDirection::Forward, l, &d, &mut d_spectrum)?;

    let mut filtered = cl.alloc::<Complex32>(m, l, dist)?;
    let mut spectra = HeteData::<Complex32>::alloc(rt, most_rows(cl, dist, m) * l)?;
    cl.compute(
        &mut filtered,
        0..m,
        true,
        "matched filter",
        |rt, rows, mut mine| {
            {
                let host = mine.host_write()?;
                for (row, k) in host.chunks_exact_mut(l).zip(rows.clone()) {
                    // c = [n−1 zeros, pulse k, one zero]
                    row.fill(Complex32::new(0.0, 0.0));
                    row[n - 1..2 * n - 1].copy_from_slice(&pulses[k * n..(k + 1) * n]);
                }
            }
            let mut spectrum = spectra.slice_mut(0..rows.len() * l)?;
            rt.fft(device, FftDirection::Forward, l, &mine, &mut spectrum)?;
            rt.zip_rows(device, ZipOp::MulConj, &spectrum, &d_spectrum, &mut mine)?;
            rt.fft_in_place(device, FftDirection::Inverse, l, &mut mine)
        },
    )?;

    let mut by_range = cl.alloc::<Complex32>(l, m, dist)?;
    cl.corner_turn(&mut filtered, &mut by_range)?;
    let mut magnitude = cl.alloc::<f32>(l, m, dist)?;
    let mut doppler = HeteData::<Complex32>::alloc(rt, most_rows(cl, dist, l) * m)?;
    let mut shifted = HeteData::<Complex32>::alloc(rt, most_rows(cl, dist, l) * m)?;
    cl.compute_from(
        &by_range,
        &mut magnitude,
        0..l,
        "doppler",
        |rt, rows, mine, mut out| {
            let len = rows.len() * m;
            let mut spectrum = doppler.slice_mut(0..len)?;
            rt.fft(device, FftDirection::Forward, m, &mine, &mut spectrum)?;
            let mut centred = shifted.slice_mut(0..len)?;
            rt.fftshift(device, m, &spectrum, &mut centred)?;
            rt.magnitude(device, &centred, &mut out)
        },
    )?;

    let peak = peak(cl, &mut magnitude, keep_map)?;
    Ok(Detection {
        doppler_bin: peak.index % m,
        range_bin: peak.index / m,
        target: peak.value > peak.floor,
        map: peak.map,
    })
}

/// A SAR image formed across ranks, the same on every rank but for the image itself.
#[derive(Clone, Debug, PartialEq)]
pub struct SarImage {
    /// Row of the brightest pixel (slow time).
    pub peak_row: usize,
    /// Column of the brightest pixel (fast time).
    pub peak_col: usize,
    /// Its magnitude.
    pub peak: f32,
    /// The whole `slow × fast` magnitude image, row-major, on rank 0 when asked for.
    pub image: Option<Vec<f32>>,
}

/// SAR image formation (`sar.rs`'s range-Doppler algorithm) of `raw`, `size.slow` pulses of
/// `size.fast` samples, with the azimuth filter `h`, as this rank of `cl`'s job: pulses in
/// block rows for range compression, one corner turn to range bins in block rows for azimuth
/// compression, one corner turn back, the magnitude and the peak.
pub fn sar(
    cl: &Cluster<'_>,
    device: Device,
    raw: &[Complex32],
    size: Size,
    h: &[Complex32],
    dist: Distribution,
    keep_image: bool,
) -> Result<SarImage, AppError> {
    let Size { slow, fast } = size;
    if raw.len() != slow * fast || h.len() != slow {
        return Err(AppError::Param(format!(
            "SAR takes {slow} × {fast} raw samples and a {slow}-sample azimuth filter, got {} and {}",
            raw.len(),
            h.len()
        )));
    }
    let rt = cl.runtime();
    let g = HeteData::from_slice(rt, &size.range_chirp())?;
    let mut g_spectrum = HeteData::alloc(rt, fast)?;
    rt.fft(device, FftDirection::Forward, fast, &g, &mut g_spectrum)?;
    let h = HeteData::from_slice(rt, h)?;
    let most = (most_rows(cl, dist, slow) * fast).max(most_rows(cl, dist, fast) * slow);
    let mut scratch = HeteData::<Complex32>::alloc(rt, most)?;

    let mut pulses = cl.alloc::<Complex32>(slow, fast, dist)?;
    cl.compute(
        &mut pulses,
        0..slow,
        true,
        "range compression",
        |rt, rows, mut mine| {
            mine.host_write()?
                .copy_from_slice(&raw[rows.start * fast..rows.end * fast]);
            let mut t = scratch.slice_mut(0..rows.len() * fast)?;
            rt.fft(device, FftDirection::Forward, fast, &mine, &mut t)?;
            rt.fftshift(device, fast, &t, &mut mine)?;
            rt.zip_rows(device, ZipOp::Mul, &mine, &g_spectrum, &mut t)?;
            rt.fft(device, FftDirection::Inverse, fast, &t, &mut mine)
        },
    )?;
    let mut bins = cl.alloc::<Complex32>(fast, slow, dist)?;
    cl.corner_turn(&mut pulses, &mut bins)?;
    cl.compute(
        &mut bins,
        0..fast,
        true,
        "azimuth compression",
        |rt, rows, mut mine| {
            let mut t = scratch.slice_mut(0..rows.len() * slow)?;
            rt.fft_in_place(device, FftDirection::Forward, slow, &mut mine)?;
            rt.fftshift(device, slow, &mine, &mut t)?;
            rt.zip_rows(device, ZipOp::Mul, &t, &h, &mut mine)?;
            rt.fft_in_place(device, FftDirection::Inverse, slow, &mut mine)
        },
    )?;
    let mut shifted = cl.alloc::<Complex32>(fast, slow, dist)?;
    cl.compute_from(
        &bins,
        &mut shifted,
        0..fast,
        "fftshift",
        |rt, _, mine, mut out| rt.fftshift(device, slow, &mine, &mut out),
    )?;
    cl.corner_turn(&mut shifted, &mut pulses)?;
    let mut image = cl.alloc::<f32>(slow, fast, dist)?;
    cl.compute_from(
        &pulses,
        &mut image,
        0..slow,
        "magnitude",
        |rt, _, mine, mut out| rt.magnitude(device, &mine, &mut out),
    )?;
    let peak = peak(cl, &mut image, keep_image)?;
    Ok(SarImage {
        peak_row: peak.index / fast,
        peak_col: peak.index % fast,
        peak: peak.value as f32,
        image: peak.map,
    })
}

/// The first maximum of a distributed map in row-major order, its minimum, and the map itself
/// on rank 0 if asked for.
struct Peak {
    index: usize,
    value: f64,
    floor: f64,
    map: Option<Vec<f32>>,
}

/// Each rank scans its rows; the three numbers of each rank (24 bytes) go to every other, and
/// every rank picks the same peak: the highest value, and of equal values the lowest index, as
/// a single-rank scan's first maximum would, however the rows are spread.
fn peak(cl: &Cluster<'_>, map: &mut DistData<f32>, keep: bool) -> Result<Peak, AppError> {
    let (ranks, me, rows, row_len) = (cl.ranks(), cl.rank(), map.rows(), map.row_len());
    let (mut value, mut index, mut floor) = (f32::NEG_INFINITY, 0usize, f32::INFINITY);
    for run in map.distribution().rows_of(me, rows, ranks) {
        let values = cl.here(map, run.clone())?.host()?;
        for (i, &v) in values.iter().enumerate() {
            if v > value {
                (value, index) = (v, run.start * row_len + i);
            }
            floor = floor.min(v);
        }
    }
    let mut peaks = cl.alloc::<f64>(ranks, 3, Distribution::BlockRows)?;
    cl.compute(
        &mut peaks,
        0..ranks,
        true,
        "local peak",
        |_, _, mut mine| {
            mine.host_write()?
                .copy_from_slice(&[f64::from(value), index as f64, f64::from(floor)]);
            Ok(())
        },
    )?;
    cl.fetch(&mut peaks, |_| 0..ranks)?;
    let all = cl.read(&peaks, 0..ranks)?;
    let mut best = Peak {
        index: 0,
        value: f64::NEG_INFINITY,
        floor: f64::INFINITY,
        map: None,
    };
    for rank in all.chunks_exact(3) {
        let index = rank[1] as usize;
        if rank[0] > best.value || (rank[0] == best.value && index < best.index) {
            (best.value, best.index) = (rank[0], index);
        }
        best.floor = best.floor.min(rank[2]);
    }
    if keep {
        cl.gather(map, Rank(0))?;
        if me == Rank(0) {
            best.map = Some(cl.read(map, 0..rows)?);
        }
    }
    Ok(best)
}

/// The most rows of a buffer of `rows` rows this rank computes in one call under `dist` (its
/// longest run), at least one: what its scratch must hold.
fn most_rows(cl: &Cluster<'_>, dist: Distribution, rows: usize) -> usize {
    dist.rows_of(cl.rank(), rows, cl.ranks())
        .iter()
        .map(|run| run.len())
        .max()
        .unwrap_or(0)
        .max(1)
}
