//! A sim's FFTs on host memory, and the check of its FFT limit (`SimConfig::max_fft_points`)
//! that both forms of its FFT implementations carry: the CPU's transforms, refused beyond the
//! size the sim plays (an FPGA core's 2,048 points, say).

use super::SimState;
use crate::apis;
use crate::backend::host_kernels as kernels;
use crate::hal::{BackendError, Result};
use crate::hal::{DeviceCtx, FftDirection, KernelCtx, Refusal};
use num_complex::Complex32 as C32;

/// The sim's FFT plans, which it hands its kernels in its handle.
pub(super) fn plans<'c>(ctx: &'c KernelCtx, api: &'static str) -> Result<&'c kernels::FftPlans> {
    ctx.device_handle::<SimState>()
        .map(|s| &s.plans)
        .ok_or_else(|| {
            ctx.error(
                api,
                BackendError::Invalid("the device has no FFT plans".to_string()),
            )
        })
}

/// Refuses FFTs over the sim's limit, read from its configuration (its handle).
fn points_fit(dev: &DeviceCtx<'_>, points: usize) -> std::result::Result<(), Refusal> {
    match dev
        .device_handle::<SimState>()
        .and_then(|s| s.config.max_fft_points)
    {
        Some(max) if points > max => Err(Refusal::new(format!(
            "{points}-point FFT exceeds this device's limit of {max} points"
        ))),
        _ => Ok(()),
    }
}

/// The `accepts` check of the sim's `fft`.
pub(super) fn fits(
    dev: &DeviceCtx<'_>,
    _dir: FftDirection,
    points: usize,
    _input: usize,
    _output: usize,
) -> std::result::Result<(), Refusal> {
    points_fit(dev, points)
}

/// The `accepts` check of the sim's `fft_in_place`.
pub(super) fn fits_in_place(
    dev: &DeviceCtx<'_>,
    _dir: FftDirection,
    points: usize,
    _data: usize,
) -> std::result::Result<(), Refusal> {
    points_fit(dev, points)
}

#[rimms_macros::kernel(api = apis::fft, device = sim, accepts = fits)]
fn fft(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    input: &[C32],
    #[out] output: &mut [C32],
) -> Result<()> {
    kernels::fft_rows(plans(ctx, "fft")?, dir, points, input, output);
    Ok(())
}

#[rimms_macros::kernel(api = apis::fft_in_place, device = sim, accepts = fits_in_place)]
fn fft_in_place(ctx: &KernelCtx, dir: FftDirection, points: usize, data: &mut [C32]) -> Result<()> {
    kernels::fft_rows_in_place(plans(ctx, "fft_in_place")?, dir, points, data);
    Ok(())
}
