//! The built-ins for sim devices with device memory (`SimConfig::device_memory`): each reads
//! its inputs back through the device's memory interface, runs the CPU's kernel on the copy
//! and writes its outputs back.
//!
//! No real device works this way, and these copies are the kernel's own business (they are
//! not link traffic the runtime counts). What they give is the GPU's whole path — device
//! addresses in the pool, copies and fills through the backend, implementations that take
//! `DevSlice`s — on any machine, checked against the same CPU reference.

use crate::apis;
use crate::backend::host_kernels::{self as kernels, shape};
use crate::backend::shape_fits;
use crate::hal::Result;
use crate::hal::{DevSlice, DevSliceMut};
use crate::hal::{FftDirection, KernelCtx, ZipOp};
use bytemuck::Pod;
use num_complex::Complex32 as C32;

fn read<T: Pod>(ctx: &KernelCtx<'_>, arg: &DevSlice<'_, T>) -> Result<Vec<T>> {
    ctx.read_device(arg)
}

/// Runs a one-input, one-output CPU kernel on staged copies.
fn map<I: Pod, O: Pod>(
    ctx: &KernelCtx<'_>,
    input: DevSlice<'_, I>,
    mut output: DevSliceMut<'_, O>,
    kernel: impl FnOnce(&[I], &mut [O]),
) -> Result<()> {
    let input = read(ctx, &input)?;
    let mut out = vec![O::zeroed(); output.len()];
    kernel(&input, &mut out);
    ctx.copy_to_device(&out, &mut output)
}

/// Runs an in-place CPU kernel on a staged copy.
fn update<T: Pod>(
    ctx: &KernelCtx<'_>,
    mut data: DevSliceMut<'_, T>,
    kernel: impl FnOnce(&mut [T]),
) -> Result<()> {
    let mut values = read(ctx, &data.as_dev_slice())?;
    kernel(&mut values);
    ctx.copy_to_device(&values, &mut data)
}

#[rimms_macros::kernel(api = apis::fft, device = sim, accepts = super::fft::fits)]
fn fft(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "fft", shape::same_len(&["input", "output"], lens))?;
    shape_fits(ctx, "fft", shape::whole_rows(points, input.len()))?;
    let plans = super::fft::plans(ctx, "fft")?;
    map(ctx, input, output, |i, o| {
        kernels::fft_rows(plans, dir, points, i, o)
    })
}

#[rimms_macros::kernel(api = apis::fft_in_place, device = sim, accepts = super::fft::fits_in_place)]
fn fft_in_place(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    data: DevSliceMut<C32>,
) -> Result<()> {
    shape_fits(ctx, "fft_in_place", shape::whole_rows(points, data.len()))?;
    let plans = super::fft::plans(ctx, "fft_in_place")?;
    update(ctx, data, |d| {
        kernels::fft_rows_in_place(plans, dir, points, d)
    })
}

#[rimms_macros::kernel(api = apis::zip, device = sim)]
fn zip(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    b: DevSlice<C32>,
    #[out] out: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [a.len(), b.len(), out.len()];
    shape_fits(ctx, "zip", shape::same_len(&["a", "b", "out"], lens))?;
    let b = read(ctx, &b)?;
    map(ctx, a, out, |a, o| kernels::zip(op, a, &b, o))
}

#[rimms_macros::kernel(api = apis::conj, device = sim)]
fn conj(ctx: &KernelCtx, input: DevSlice<C32>, #[out] out: DevSliceMut<C32>) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "conj", shape::same_len(&["input", "out"], lens))?;
    map(ctx, input, out, kernels::conj)
}

#[rimms_macros::kernel(api = apis::magnitude, device = sim)]
fn magnitude(ctx: &KernelCtx, input: DevSlice<C32>, #[out] out: DevSliceMut<f32>) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "magnitude", shape::same_len(&["input", "out"], lens))?;
    map(ctx, input, out, kernels::magnitude)
}

#[rimms_macros::kernel(api = apis::power, device = sim)]
fn power(ctx: &KernelCtx, input: DevSlice<C32>, #[out] out: DevSliceMut<f32>) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "power", shape::same_len(&["input", "out"], lens))?;
    map(ctx, input, out, kernels::power)
}

#[rimms_macros::kernel(api = apis::window, device = sim)]
fn window(
    ctx: &KernelCtx,
    input: DevSlice<C32>,
    window: DevSlice<f32>,
    #[out] out: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "window", shape::same_len(&["input", "out"], lens))?;
    let window = read(ctx, &window)?;
    map(ctx, input, out, |i, o| kernels::window_rows(i, &window, o))
}

#[rimms_macros::kernel(api = apis::zip_rows, device = sim)]
fn zip_rows(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    row: DevSlice<C32>,
    #[out] out: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [a.len(), out.len()];
    shape_fits(ctx, "zip_rows", shape::same_len(&["a", "out"], lens))?;
    let row = read(ctx, &row)?;
    map(ctx, a, out, |a, o| kernels::zip_rows(op, a, &row, o))
}

#[rimms_macros::kernel(api = apis::fftshift, device = sim)]
fn fftshift(
    ctx: &KernelCtx,
    row_len: usize,
    input: DevSlice<C32>,
    #[out] out: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "fftshift", shape::same_len(&["input", "out"], lens))?;
    shape_fits(ctx, "fftshift", shape::whole_rows(row_len, input.len()))?;
    map(ctx, input, out, |i, o| {
        kernels::fftshift_rows(row_len, i, o)
    })
}

#[rimms_macros::kernel(api = apis::transpose, device = sim)]
fn transpose(
    ctx: &KernelCtx,
    rows: usize,
    cols: usize,
    input: DevSlice<C32>,
    #[out] out: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), out.len()];
    shape_fits(ctx, "transpose", shape::transpose(rows, cols, lens))?;
    map(ctx, input, out, |i, o| kernels::transpose(rows, cols, i, o))
}

#[rimms_macros::kernel(api = apis::scale, device = sim)]
fn scale(ctx: &KernelCtx, factor: C32, data: DevSliceMut<C32>) -> Result<()> {
    update(ctx, data, |d| kernels::scale(factor, d))
}

#[rimms_macros::kernel(api = apis::gemm, device = sim)]
fn gemm(
    ctx: &KernelCtx,
    m: usize,
    k: usize,
    n: usize,
    a: DevSlice<C32>,
    b: DevSlice<C32>,
    #[out] c: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [a.len(), b.len(), c.len()];
    shape_fits(ctx, "gemm", shape::gemm(m, k, n, lens))?;
    let b = read(ctx, &b)?;
    map(ctx, a, c, |a, c| kernels::gemm(m, k, n, a, &b, c))
}
