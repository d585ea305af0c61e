//! The built-in API declarations. Call them through the [`Runtime`](crate::Runtime) methods,
//! which check shapes; implement them for a new device kind with
//! `#[rimms::kernel(api = rimms::apis::fft, device = …)]`. Every one takes the kernel context
//! (device drivers reach their hardware through it) and can fail (devices report faults).
//!
//! A module of its own, beside the vocabulary: backends register their implementations
//! against these declarations and import nothing else of `kernel`.
//!
//! Only the declarations are here; everything else the runtime knows of a built-in (the
//! description of its call, its shape check, its merge rules, its capability probe) is in its
//! home, `kernel/builtins/<name>.rs`. They cannot move there: a backend may not import `kernel`.

use crate::hal::{FftDirection, KernelCtx, Result, ZipOp};
use num_complex::Complex32 as C32;
/// Batched FFT over rows of `points`; inverse scaled by 1/N.
#[rimms_macros::api]
pub fn fft(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    input: &[C32],
    #[out] output: &mut [C32],
) -> Result<()>;

/// Batched FFT over rows of `points`, in place.
#[rimms_macros::api]
pub fn fft_in_place(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    data: &mut [C32],
) -> Result<()>;

/// Element-wise `out = a op b`.
#[rimms_macros::api]
pub fn zip(ctx: &KernelCtx, op: ZipOp, a: &[C32], b: &[C32], #[out] out: &mut [C32]) -> Result<()>;

/// `out = conj(input)`.
#[rimms_macros::api]
pub fn conj(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [C32]) -> Result<()>;

/// `out = |input|`.
#[rimms_macros::api]
pub fn magnitude(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [f32]) -> Result<()>;

/// `out = |input|²`.
#[rimms_macros::api]
pub fn power(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [f32]) -> Result<()>;

/// `out[r·L + j] = input[r·L + j] · window[j]`, `L = window.len()`.
#[rimms_macros::api]
pub fn window(ctx: &KernelCtx, input: &[C32], window: &[f32], #[out] out: &mut [C32])
    -> Result<()>;

/// `out[r·L + j] = a[r·L + j] op row[j]`, `L = row.len()`.
#[rimms_macros::api]
pub fn zip_rows(
    ctx: &KernelCtx,
    op: ZipOp,
    a: &[C32],
    row: &[C32],
    #[out] out: &mut [C32],
) -> Result<()>;

/// Swap of the halves of every row of `row_len`.
#[rimms_macros::api]
pub fn fftshift(
    ctx: &KernelCtx,
    row_len: usize,
    input: &[C32],
    #[out] out: &mut [C32],
) -> Result<()>;

/// `out` (cols × rows) = transpose of `input` (rows × cols).
#[rimms_macros::api]
pub fn transpose(
    ctx: &KernelCtx,
    rows: usize,
    cols: usize,
    input: &[C32],
    #[out] out: &mut [C32],
) -> Result<()>;

/// `data *= factor`.
#[rimms_macros::api]
pub fn scale(ctx: &KernelCtx, factor: C32, data: &mut [C32]) -> Result<()>;

/// `c` (m × n) = `a` (m × k) · `b` (k × n).
#[rimms_macros::api]
pub fn gemm(
    ctx: &KernelCtx,
    m: usize,
    k: usize,
    n: usize,
    a: &[C32],
    b: &[C32],
    #[out] c: &mut [C32],
) -> Result<()>;
