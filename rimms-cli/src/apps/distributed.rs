//! Pulse Doppler across ranks: the app of `pulse_doppler.rs` at any size, its pulses in block
//! rows over the ranks of a job (`rimms_dist::Cluster`).
//!
//! Every rank reads the same input (SPMD) and computes the transmitted pulse's spectrum itself
//! (replicated by construction: no bytes on the network). Each rank matched-filters the pulses
//! it owns on its own runtime; one corner turn makes range bins the rows, again in block rows;
//! each rank takes the Doppler FFT, shift and magnitude of its range bins and its local peak;
//! the peaks (three numbers per rank) go to every rank, which all name the same detection. On
//! the network: the corner turn's (n−1)/n of the matrix, and 24 bytes per pair of ranks.

use super::pulse_doppler::Output;
use super::{pad_into, AppError};
use rimms::{Complex32, Device, FftDirection, HeteData, ZipOp};
use rimms_dist::{Cluster, Distribution, Rank};

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

    let mut filtered = cl.alloc::<Complex32>(m, l, Distribution::BlockRows)?;
    let mut spectra = HeteData::<Complex32>::alloc(rt, m * l)?;
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

    let mut by_range = cl.alloc::<Complex32>(l, m, Distribution::BlockRows)?;
    cl.corner_turn(&mut filtered, &mut by_range)?;
    let mut magnitude = cl.alloc::<f32>(l, m, Distribution::BlockRows)?;
    let mut doppler = HeteData::<Complex32>::alloc(rt, l * m)?;
    let mut shifted = HeteData::<Complex32>::alloc(rt, l * m)?;
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

    // This rank's peak and floor, then everyone's.
    let (ranks, me) = (cl.ranks(), cl.rank());
    let (mut peak, mut at, mut floor) = (f32::NEG_INFINITY, 0usize, f32::INFINITY);
    for run in Distribution::BlockRows.rows_of(me, l, ranks) {
        let values = cl.here(&magnitude, run.clone())?.host()?;
        for (i, &v) in values.iter().enumerate() {
            if v > peak {
                (peak, at) = (v, run.start * m + i);
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
                .copy_from_slice(&[f64::from(peak), at as f64, f64::from(floor)]);
            Ok(())
        },
    )?;
    cl.fetch(&mut peaks, |_| 0..ranks)?;
    let all = cl.here(&peaks, 0..ranks)?.host()?.to_vec();
    // The first maximum in range-major order, as the single-rank app scans: ranks hold
    // ascending runs of range bins, so the lowest rank wins a tie.
    let (mut best, mut index, mut lowest) = (f64::NEG_INFINITY, 0usize, f64::INFINITY);
    for rank in all.chunks_exact(3) {
        if rank[0] > best {
            (best, index) = (rank[0], rank[1] as usize);
        }
        lowest = lowest.min(rank[2]);
    }
    let map = if keep_map {
        cl.gather(&mut magnitude, Rank(0))?;
        if me == Rank(0) {
            Some(cl.here(&magnitude, 0..l)?.host()?.to_vec())
        } else {
            None
        }
    } else {
        None
    };
    Ok(Detection {
        doppler_bin: index % m,
        range_bin: index / m,
        target: best > lowest,
        map,
    })
}
