//! Host implementations of the built-in APIs (`fft`, `zip`, `conj`, `magnitude`, `fftshift`,
//! `transpose`, `scale`, `gemm`) as plain functions over slices.
//!
//! They are shared by two backends: the **cpu** device runs them on host memory, and **sim**
//! devices run them on their own (separately allocated) memory. So they know nothing of
//! buffers, spaces or coherence: by the time one of them is called, dispatch has acquired every
//! argument in the right space, and the backend has checked the lengths against [`shape`]
//! (the runtime's methods check them before dispatch too; a raw declaration does not).
//!
//! The preconditions are still checked with `debug_assert!`, and every function walks its
//! slices with iterators (`zip`, `chunks_exact`) or over a prefix it has first cut to a length
//! consistent with the shape, so that a wrong length in a release build can neither index out
//! of bounds nor touch memory it should not: the function then works on the longest consistent
//! prefix (or on nothing) instead.
//!
//! Parallelism is rayon above a cut-off and a plain loop on the caller's thread below it, so
//! the many tiny calls of a radar pipeline (2,305 per SAR frame) do not pay a thread hand-off
//! that costs more than the work. Each cut-off is a named grain, the least work one rayon task
//! gets: `ELEMENTWISE_GRAIN`, `FFT_GRAIN_POINTS`, `GEMM_GRAIN_MACS`. A call whose work
//! fits in one grain runs sequentially; a larger one is split into tasks of about one grain.
//! FFT plans are cached per (size, direction) in [`FftPlans`]; each thread keeps one FFT
//! scratch buffer across calls, and out-of-place transforms read their input where it is
//! (rustfft's immutable transform) instead of copying it to the output first.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use num_complex::Complex32 as C32;
use rayon::prelude::*;
use rustfft::{Fft, FftPlanner};

use crate::hal::{FftDirection, ZipOp};

/// Elements per rayon task for element-wise kernels, `fftshift` and `transpose`; calls with no
/// more elements than this run on the caller's thread. 32 Ki complex elements are 256 KiB, which
/// streams through in roughly 10–20 µs on one core: an order of magnitude more than rayon's
/// hand-off (a few µs), so splitting below it costs more than it gains.
const ELEMENTWISE_GRAIN: usize = 1 << 15;

/// Points (rows × row length) per rayon task for batched FFTs, so a task holds a few rows of
/// the sizes the applications use (4 rows of 1,024 points, 16 rows of 256). A 4 Ki-point batch
/// takes tens of µs with rustfft's SIMD kernels, comfortably more than the hand-off.
const FFT_GRAIN_POINTS: usize = 1 << 12;

/// Complex multiply-adds per rayon task for `gemm` (whole output rows per task). 32 Ki complex
/// MACs are ~128 Ki flops, tens of µs sequentially: small products stay on the caller's thread.
const GEMM_GRAIN_MACS: usize = 1 << 15;

/// Tile edge of the cache-blocked transpose: a 32 × 32 tile of complex f32 is 8 KiB on each
/// side, so the source and destination tiles both sit in L1 while it is copied.
const TRANSPOSE_TILE: usize = 32;

/// Cached rustfft plans, one per (size, direction), shared by all threads of a device: the
/// CPU's and each sim's backend owns one and hands it to its kernels as (part of) its handle.
pub struct FftPlans {
    cache: Mutex<PlanCache>,
}

/// Plans by size and direction (inverse as `true`). A `BTreeMap`, not a `HashMap`: a program
/// uses a handful of sizes, and every FFT call looks its plan up, where SipHash cost about 200
/// instructions a lookup (callgrind, `rimms run correlator`) and a few key compares do.
struct PlanCache {
    planner: FftPlanner<f32>,
    plans: BTreeMap<(usize, bool), Arc<dyn Fft<f32>>>,
}

impl FftPlans {
    /// An empty cache.
    pub fn new() -> Self {
        FftPlans {
            cache: Mutex::new(PlanCache {
                planner: FftPlanner::new(),
                plans: BTreeMap::new(),
            }),
        }
    }

    /// The cached plan for `n` points in direction `dir`, created on first use.
    pub fn plan(&self, n: usize, dir: FftDirection) -> Arc<dyn Fft<f32>> {
        // Recovering from poisoning is safe: a panic while the lock is held can only come from
        // inside the planner, before our insert; the map is only ever inserted into whole, and
        // the planner's own state is a cache of finished plans, so both stay consistent.
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let PlanCache { planner, plans } = &mut *cache;
        let inverse = dir == FftDirection::Inverse;
        Arc::clone(plans.entry((n, inverse)).or_insert_with(|| {
            let rdir = match dir {
                FftDirection::Forward => rustfft::FftDirection::Forward,
                FftDirection::Inverse => rustfft::FftDirection::Inverse,
            };
            planner.plan_fft(n, rdir)
        }))
    }
}

impl Default for FftPlans {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FftPlans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<_> = (cache.plans.keys())
            .map(|&(n, inverse)| {
                let dir = if inverse {
                    FftDirection::Inverse
                } else {
                    FftDirection::Forward
                };
                (n, dir)
            })
            .collect();
        f.debug_struct("FftPlans").field("plans", &keys).finish()
    }
}

/// `s[start..]`, or an empty slice when `start` is past the end.
fn tail<T>(s: &[T], start: usize) -> &[T] {
    s.get(start..).unwrap_or_default()
}

/// The shapes the kernels here assume, for a backend to check before it calls one. The
/// runtime's methods check shapes before dispatch, but a raw declaration (`apis::zip(&rt, …)`)
/// reaches an implementation without them, and lengths that do not fit would trip a kernel's
/// debug assertion (or, in a release build, leave it working on a prefix): a backend refuses
/// them with [`crate::Error::Shape`] instead (`backend::shape_fits`).
pub mod shape {
    /// Every length of `lens` equal, `names` naming them. The compares inline; the message is
    /// built out of line, only for lengths that differ (a zip of one element is a few hundred
    /// instructions in all: `benches/per_call_instructions.rs`).
    ///
    /// `names` by reference: a constant array then costs its address, where an array by value
    /// was stored on the stack on every call, before the compares.
    #[inline]
    pub fn same_len<const N: usize>(names: &[&str; N], lens: [usize; N]) -> Result<(), String> {
        if lens.iter().all(|&len| len == lens[0]) {
            Ok(())
        } else {
            Err(lengths_differ(names, &lens))
        }
    }

    #[cold]
    fn lengths_differ(names: &[&str], lens: &[usize]) -> String {
        let each: Vec<String> = names
            .iter()
            .zip(lens)
            .map(|(name, len)| format!("{name} {len}"))
            .collect();
        format!("lengths differ: {}", each.join(", "))
    }

    /// `len` a whole number of rows of `row_len` elements (so `row_len` at least 1).
    #[inline]
    pub fn whole_rows(row_len: usize, len: usize) -> Result<(), String> {
        if len.checked_rem(row_len) == Some(0) {
            Ok(())
        } else {
            Err(format!(
                "{len} elements are not a whole number of {row_len}-element rows"
            ))
        }
    }

    /// `len` the elements of a `rows × cols` matrix.
    #[inline]
    fn matrix(what: &str, rows: usize, cols: usize, len: usize) -> Result<(), String> {
        if rows.checked_mul(cols) == Some(len) {
            Ok(())
        } else {
            Err(format!("{what} has {len} elements, not {rows} × {cols}"))
        }
    }

    /// `transpose`'s shape: `input` `rows × cols` and `out` `cols × rows`.
    #[inline]
    pub fn transpose(rows: usize, cols: usize, [input, out]: [usize; 2]) -> Result<(), String> {
        matrix("input", rows, cols, input)?;
        matrix("out", cols, rows, out)
    }

    /// `gemm`'s shape: `a` `m × k`, `b` `k × n` and `c` `m × n`.
    #[inline]
    pub fn gemm(m: usize, k: usize, n: usize, [a, b, c]: [usize; 3]) -> Result<(), String> {
        matrix("a", m, k, a)?;
        matrix("b", k, n, b)?;
        matrix("c", m, n, c)
    }
}

/// `len` rounded down to whole rows of `row_len` (0 when `row_len` is 0).
fn whole_rows(len: usize, row_len: usize) -> usize {
    len.checked_rem(row_len).map_or(0, |rem| len - rem)
}

/// Runs `body(first_row, chunk)` over `out` cut into chunks of `rows_per_task` rows of
/// `row_len` elements: one call on the caller's thread when a single chunk covers `out`,
/// rayon tasks otherwise. `first_row` is the index of the chunk's first row in `out`. Only the
/// last chunk may be shorter; bodies walk it with `chunks_exact`, so a partial row is ignored.
fn for_row_chunks<U, F>(out: &mut [U], row_len: usize, rows_per_task: usize, body: F)
where
    U: Send,
    F: Fn(usize, &mut [U]) + Sync,
{
    let rows_per_task = rows_per_task.max(1);
    let chunk_len = row_len.saturating_mul(rows_per_task);
    if chunk_len == 0 {
        return;
    }
    if out.len() <= chunk_len {
        body(0, out);
    } else {
        par_row_chunks(out, chunk_len, rows_per_task, body);
    }
}

/// [`for_row_chunks`]' rayon tasks, out of line: inlined, their set-up (the closure's
/// captures stored for the tasks) ran before the length test, on every short call too.
#[inline(never)]
fn par_row_chunks<U, F>(out: &mut [U], chunk_len: usize, rows_per_task: usize, body: F)
where
    U: Send,
    F: Fn(usize, &mut [U]) + Sync,
{
    out.par_chunks_mut(chunk_len)
        .enumerate()
        .for_each(|(i, chunk)| body(i * rows_per_task, chunk));
}

/// Rows per task so that a task gets at least `grain` units of work at `work_per_row` each.
fn rows_per_task(grain: usize, work_per_row: usize) -> usize {
    (grain / work_per_row.max(1)).max(1)
}

/// The one element-wise driver: `body(start, chunk)` on `out` in chunks of
/// [`ELEMENTWISE_GRAIN`] elements, `start` being the chunk's offset in `out`.
fn elementwise<U, F>(out: &mut [U], body: F)
where
    U: Send,
    F: Fn(usize, &mut [U]) + Sync,
{
    for_row_chunks(out, 1, ELEMENTWISE_GRAIN, body);
}

thread_local! {
    /// This thread's FFT scratch, kept between calls: allocating and zeroing a fresh one per
    /// call (a row's worth of points) cost a tenth of a 1,024-point transform, which the many
    /// per-row calls of a radar frame paid every time.
    static FFT_SCRATCH: Cell<Vec<C32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with at least `len` elements of this thread's scratch. Taken out of its cell for
/// the call, so a nested use (none today) would get a fresh buffer rather than alias it.
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [C32]) -> R) -> R {
    let mut scratch = FFT_SCRATCH.take();
    if scratch.len() < len {
        scratch.resize(len, C32::default());
    }
    let result = f(&mut scratch[..len]);
    FFT_SCRATCH.set(scratch);
    result
}

/// Batched FFT of the whole rows of `out`: of the same rows of `input` when given (left
/// untouched, rustfft's immutable transform reads it directly, so no copy pass), in place
/// otherwise. The inverse is scaled by 1/n.
fn fft_batch(
    plans: &FftPlans,
    dir: FftDirection,
    n: usize,
    input: Option<&[C32]>,
    out: &mut [C32],
) {
    if n == 0 || out.is_empty() {
        return;
    }
    let plan = plans.plan(n, dir);
    let scale = match dir {
        FftDirection::Forward => None,
        FftDirection::Inverse => Some(1.0 / n as f32),
    };
    let rows = rows_per_task(FFT_GRAIN_POINTS, n);
    for_row_chunks(out, n, rows, |first_row, chunk| {
        match input {
            Some(input) => {
                let start = first_row * n;
                // `input` was cut to `out`'s whole rows, so the range exists.
                let Some(src) = input.get(start..start + chunk.len()) else {
                    return;
                };
                with_scratch(plan.get_immutable_scratch_len(), |scratch| {
                    plan.process_immutable_with_scratch(src, chunk, scratch)
                });
            }
            None => with_scratch(plan.get_inplace_scratch_len(), |scratch| {
                plan.process_with_scratch(chunk, scratch)
            }),
        }
        if let Some(s) = scale {
            chunk.iter_mut().for_each(|x| *x *= s);
        }
    });
}

/// Batched transform of every row of `n` points: `input.len() == output.len()`, a multiple of
/// `n`. The inverse is scaled by 1/n.
pub fn fft_rows(plans: &FftPlans, dir: FftDirection, n: usize, input: &[C32], output: &mut [C32]) {
    debug_assert_eq!(
        input.len(),
        output.len(),
        "fft_rows: input and output lengths differ"
    );
    debug_assert!(
        input.len().checked_rem(n) == Some(0),
        "fft_rows: length {} is not a multiple of n = {n}",
        input.len()
    );
    let len = whole_rows(input.len().min(output.len()), n);
    let output = output.get_mut(..len).unwrap_or_default();
    fft_batch(
        plans,
        dir,
        n,
        Some(input.get(..len).unwrap_or_default()),
        output,
    );
}

/// Batched in-place transform of every row of `n` points: `data.len()` is a multiple of `n`.
/// The inverse is scaled by 1/n.
pub fn fft_rows_in_place(plans: &FftPlans, dir: FftDirection, n: usize, data: &mut [C32]) {
    debug_assert!(
        data.len().checked_rem(n) == Some(0),
        "fft_rows_in_place: length {} is not a multiple of n = {n}",
        data.len()
    );
    let len = whole_rows(data.len(), n);
    let data = data.get_mut(..len).unwrap_or_default();
    fft_batch(plans, dir, n, None, data);
}

/// `out[i] = a[i] op b[i]`. Inlined into its implementations: a short call's cost is mostly
/// its frames, and this one's was 12 of a 1-element `zip`'s 507 instructions
/// (`benches/per_call_instructions.rs`).
#[inline]
pub fn zip(op: ZipOp, a: &[C32], b: &[C32], out: &mut [C32]) {
    debug_assert!(
        a.len() == out.len() && b.len() == out.len(),
        "zip: lengths differ"
    );
    match op {
        ZipOp::Add => zip_with(a, b, out, |x, y| x + y),
        ZipOp::Sub => zip_with(a, b, out, |x, y| x - y),
        ZipOp::Mul => zip_with(a, b, out, |x, y| x * y),
        ZipOp::Div => zip_with(a, b, out, |x, y| x / y),
        ZipOp::MulConj => zip_with(a, b, out, |x, y| x * y.conj()),
    }
}

/// `out[i] = f(a[i], b[i])`, monomorphised per operation so the loop inlines `f`.
fn zip_with(a: &[C32], b: &[C32], out: &mut [C32], f: impl Fn(C32, C32) -> C32 + Sync) {
    elementwise(out, |start, out| {
        for ((o, &x), &y) in out.iter_mut().zip(tail(a, start)).zip(tail(b, start)) {
            *o = f(x, y);
        }
    });
}

/// `out[i] = conj(input[i])`.
pub fn conj(input: &[C32], out: &mut [C32]) {
    debug_assert_eq!(input.len(), out.len(), "conj: lengths differ");
    elementwise(out, |start, out| {
        for (o, x) in out.iter_mut().zip(tail(input, start)) {
            *o = x.conj();
        }
    });
}

/// The least `|x|` that `magnitude` takes from an f32 square sum (whose least is then
/// 10⁻³⁰). Below it a square may have lost bits to subnormal rounding (at most 2⁻¹⁴⁹ each),
/// which must stay negligible against the sum: here it is under 10⁻¹⁴ of it.
const MAGNITUDE_F32_MIN: f32 = 1.0e-15;

/// Whether `r = sqrt(x.re² + x.im²)`, computed in f32, is `|x|` to an ulp or two: the square
/// sum neither overflowed (`r` infinite) nor came near underflow, and no component was NaN.
/// Tested on the result alone; a zero `x` fails it and is redone, exactly, in the second pass.
///
/// As an integer compare: `r` is non-negative or NaN, and non-negative floats order as their
/// bits do, so `r` lies in `[MAGNITUDE_F32_MIN, ∞)` iff its bits less the bound's fall below
/// the width of that range (a NaN's bits, with or without the sign bit, or a smaller `r`'s
/// wrapped around, do not). Used per element only in the second pass; the first tests a whole
/// block at once (`magnitude_block`).
#[inline(always)]
fn f32_magnitude_is_exact(r: f32) -> bool {
    const LOW: u32 = MAGNITUDE_F32_MIN.to_bits();
    const WIDTH: u32 = f32::INFINITY.to_bits() - LOW;
    r.to_bits().wrapping_sub(LOW) < WIDTH
}

/// `|x|` with the square sum in f64, where no f32 component can overflow or underflow.
fn f64_magnitude(x: C32) -> f32 {
    let (re, im) = (f64::from(x.re), f64::from(x.im));
    (re * re + im * im).sqrt() as f32
}

/// Results `magnitude` computes side by side, each lane with its own range accumulators:
/// four SSE vectors (two AVX ones).
const MAGNITUDE_LANES: usize = 16;

/// Elements one loop step of `magnitude` computes: two results a lane, which spreads the
/// loop's counter and branch over 32 results (0.09 instructions a result; over 16, 0.19).
const MAGNITUDE_STEP: usize = 2 * MAGNITUDE_LANES;

/// Elements whose range `magnitude` tests at once. Large enough that the test (a fold and a
/// compare of the lanes' accumulators, about twenty instructions) is a few hundredths of an
/// instruction per element; small enough that the redo of a lane that fails it, as one exact
/// zero makes it (`magnitude_redo`), walks only `MAGNITUDE_BLOCK / MAGNITUDE_LANES` results.
const MAGNITUDE_BLOCK: usize = 512;

/// One step of the first pass over `MAGNITUDE_STEP` elements: `r` in f32, and per lane the
/// least `r` seen (`lo`) and the sum of all (`sum`). Element `i` of the step is in lane
/// `i % MAGNITUDE_LANES`, which the redo relies on to find a lane's results.
///
/// The range test is those two per lane, one `minps` and one `addps` a vector: the least
/// catches an `r` below `MAGNITUDE_F32_MIN` (underflow, or zero); the sum catches an infinite
/// `r` (an f32 overflow) and a NaN, since a sum of finite `r` cannot overflow (each is at most
/// `sqrt(f32::MAX)` ≈ 1.8e19, and a lane sums at most a block's worth of them).
/// `lo` is written `lo < r ? lo : r`, the operand order of `minps`, so it stays in its
/// register; a NaN `r` may then replace or be dropped from `lo`, which does not matter because
/// the sum has it. Lane arrays rather than folded scalars: LLVM vectorises these (a float
/// min or sum folded over a slice it does not, since that would reorder the fold). The two
/// halves of the step as two loops over the lanes: written as one loop over the step's
/// elements with lane `k % MAGNITUDE_LANES`, it was not vectorised at all (20 instructions a
/// result).
#[inline(always)]
fn magnitude_lanes(
    x: &[C32; MAGNITUDE_STEP],
    out: &mut [f32; MAGNITUDE_STEP],
    lo: &mut [f32; MAGNITUDE_LANES],
    sum: &mut [f32; MAGNITUDE_LANES],
) {
    for (x, out) in x
        .chunks_exact(MAGNITUDE_LANES)
        .zip(out.chunks_exact_mut(MAGNITUDE_LANES))
    {
        for k in 0..MAGNITUDE_LANES {
            out[k] = magnitude_accumulated(x[k], &mut lo[k], &mut sum[k]);
        }
    }
}

/// `|x|` in f32, folded into its lane's least and sum for the block's range test.
#[inline(always)]
fn magnitude_accumulated(x: C32, lo: &mut f32, sum: &mut f32) -> f32 {
    let r = (x.re * x.re + x.im * x.im).sqrt();
    *lo = if *lo < r { *lo } else { r };
    *sum += r;
    r
}

/// `input` and `out` in whole steps of `MAGNITUDE_STEP` elements, as arrays (which the
/// compiler keeps in line and vectorises), and the rest of each, taken one by one. (`as_chunks`
/// would say this in a line, but is newer than the workspace's minimum Rust.)
#[inline(always)]
#[allow(clippy::type_complexity)] // The steps and the two rests, as `split_at` gives them.
fn magnitude_steps<'i, 'o>(
    input: &'i [C32],
    out: &'o mut [f32],
) -> (
    impl Iterator<Item = (&'i [C32; MAGNITUDE_STEP], &'o mut [f32; MAGNITUDE_STEP])>,
    &'i [C32],
    &'o mut [f32],
) {
    let whole = input.len().min(out.len()) / MAGNITUDE_STEP * MAGNITUDE_STEP;
    let (input_steps, x_rest) = input.split_at(whole);
    let (out_steps, o_rest) = out.split_at_mut(whole);
    // Exact chunks have `MAGNITUDE_STEP` elements, so both conversions succeed (and the
    // check compiles away).
    let steps = (input_steps.chunks_exact(MAGNITUDE_STEP))
        .zip(out_steps.chunks_exact_mut(MAGNITUDE_STEP))
        .filter_map(|(x, o)| Some((x.try_into().ok()?, o.try_into().ok()?)));
    (steps, x_rest, o_rest)
}

/// `magnitude` over one block of at most `MAGNITUDE_BLOCK` elements: the f32 pass with its
/// block-wide range test, then, only if the test failed, the f64 redo of the elements out of
/// range. The rest of a block that is not whole steps (only a call's last block) goes into
/// lane 0.
///
/// What the redo gets of the lanes is one array built here, the lane's least where its sum
/// is finite and 0 where not, so that a lane failed iff its entry is below the bound. Not the
/// accumulators themselves: their address, passed to the call, kept them in memory all
/// through the hot loop (stored and reloaded every block, about 0.03 instructions a result),
/// and a bitmask of the failed lanes, built here, came out of the compiler as about 130
/// scalar instructions a failed block, where this is a dozen vector ones.
#[inline(always)]
fn magnitude_block(input: &[C32], out: &mut [f32]) {
    let mut lo = [f32::INFINITY; MAGNITUDE_LANES];
    let mut sum = [0.0f32; MAGNITUDE_LANES];
    let (steps, x_rest, o_rest) = magnitude_steps(input, out);
    for (x, o) in steps {
        magnitude_lanes(x, o, &mut lo, &mut sum);
    }
    for (o, &x) in o_rest.iter_mut().zip(x_rest) {
        *o = magnitude_accumulated(x, &mut lo[0], &mut sum[0]);
    }
    if !magnitude_lanes_in_range(&lo, &sum) {
        let mut least = [0.0f32; MAGNITUDE_LANES];
        for ((least, &lo), &sum) in least.iter_mut().zip(&lo).zip(&sum) {
            *least = if sum <= f32::MAX { lo } else { 0.0 };
        }
        magnitude_redo(input, out, &least);
    }
}

/// Whether a block's lane accumulators say every result is in range: each lane's least at
/// least `MAGNITUDE_F32_MIN` and its sum finite (not infinite, not NaN).
///
/// The lanes fold to one vector's worth first (the least of four lanes, the sum of four), so
/// the test is three `minps`, three `addps` and one vector's compares rather than four
/// vectors'. Folding keeps the answer: a least below the bound stays the least unless a NaN
/// takes its place, and the NaN is in that lane's sum, which the fold carries (a sum of finite
/// `r` stays finite: at most `MAGNITUDE_BLOCK` of them, each under `sqrt(f32::MAX)`).
///
/// Float compares, one each a vector: `lo < MAGNITUDE_F32_MIN`, and `!(sum <= f32::MAX)`,
/// which an infinite sum and every NaN pass. They were integer compares of the bits as
/// signed, which read a NaN with the sign bit set (as x86 makes them itself, for `0.0 / 0.0`
/// or `∞ - ∞`) as negative: a block whose NaN had taken a tiny result's place as its lane's
/// least then passed, and the tiny result kept its f32 zero. (`sum < ∞` the compiler turns
/// into three instructions.) An OR of the failures over the lanes, with no early exit, so
/// that the compiler may keep it to vector compares.
#[inline(always)]
// `!(sum <= f32::MAX)` is meant to be true for a NaN, which `partial_cmp` would spell longer.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn magnitude_lanes_in_range(lo: &[f32; MAGNITUDE_LANES], sum: &[f32; MAGNITUDE_LANES]) -> bool {
    const FOLD: usize = 4;
    const _: () = assert!(
        MAGNITUDE_LANES == 4 * FOLD,
        "the fold takes four lanes to one"
    );
    let least = |a: f32, b: f32| if a < b { a } else { b };
    let mut out_of_range = 0i32;
    for k in 0..FOLD {
        let lo = least(
            least(lo[k], lo[k + FOLD]),
            least(lo[k + 2 * FOLD], lo[k + 3 * FOLD]),
        );
        let sum = (sum[k] + sum[k + FOLD]) + (sum[k + 2 * FOLD] + sum[k + 3 * FOLD]);
        out_of_range |= i32::from(lo < MAGNITUDE_F32_MIN) | i32::from(!(sum <= f32::MAX));
    }
    out_of_range == 0
}

/// The second pass of a block that failed its range test: only the lanes that failed are
/// walked, one result a step for each half of the step, and only a result out of range
/// (`f32_magnitude_is_exact`) is redone in f64; `least` is the lanes' least where their sum
/// is finite, 0 where not (`magnitude_block`). A block fails for one exact zero, common in
/// padded data (an f32 zero may be an underflow), and the zero fails one lane of sixteen:
/// walking that lane alone, with the call, costs a failed block about 300 instructions where
/// a re-test of the whole block cost about 1,000. The zero itself is redone, which is exact
/// (0 in f64 too) and cheaper than telling it from an underflow. The rest of a block that is
/// not whole steps, folded into lane 0, is walked whatever failed (a call's last block only).
#[cold]
fn magnitude_redo(input: &[C32], out: &mut [f32], least: &[f32; MAGNITUDE_LANES]) {
    let mut failed = 0u32;
    for (k, &least) in least.iter().enumerate() {
        failed |= if least < MAGNITUDE_F32_MIN { 1 << k } else { 0 };
    }
    while failed != 0 {
        let k = failed.trailing_zeros() as usize % MAGNITUDE_LANES;
        failed &= failed - 1;
        let (steps, _, _) = magnitude_steps(input, out);
        for (x, o) in steps {
            for at in (k..MAGNITUDE_STEP).step_by(MAGNITUDE_LANES) {
                if !f32_magnitude_is_exact(o[at]) {
                    o[at] = f64_magnitude(x[at]);
                }
            }
        }
    }
    let (_, x_rest, o_rest) = magnitude_steps(input, out);
    magnitude_redo_elements(x_rest, o_rest);
}

/// Redoes in f64 each result of `out` that is out of the f32 range.
fn magnitude_redo_elements(input: &[C32], out: &mut [f32]) {
    for (o, &x) in out.iter_mut().zip(input) {
        if !f32_magnitude_is_exact(*o) {
            *o = f64_magnitude(x);
        }
    }
}

/// `out[i] = |input[i]|`, without overflow or loss for any finite input, as `hypot` gives it.
///
/// libm's `hypotf` is a call per element (about 3.5 ns); the square root of an f32 square sum
/// vectorises (under 0.5 ns) and is within an ulp or two wherever `f32_magnitude_is_exact`.
/// So each block of `MAGNITUDE_BLOCK` elements is computed that way, with a range test of the
/// whole block that costs two vector instructions per four elements (`magnitude_lanes`); only
/// a block that fails it (an overflow, a near-underflow or zero, a NaN or infinity) takes a
/// second pass that redoes its elements out of range in f64, walking only the lanes that
/// failed. In instructions the whole is 0.97x the plain f32 loop, which has no range test and
/// no redo, on data without exact zeros, and 1.01x with a zero every few thousand samples
/// (callgrind, docs/design.md): the step of 32 results saves on the loop's counter about what
/// the test costs.
pub fn magnitude(input: &[C32], out: &mut [f32]) {
    debug_assert_eq!(input.len(), out.len(), "magnitude: lengths differ");
    elementwise(out, |start, out| {
        let input = tail(input, start);
        let whole = input.len().min(out.len()) / MAGNITUDE_BLOCK * MAGNITUDE_BLOCK;
        let (input, x_rest) = input.split_at(whole);
        let (out, o_rest) = out.split_at_mut(whole);
        // Whole blocks as arrays: a block's length is then a constant, its steps a loop of
        // known count with the accumulators in registers and no rest to fold in.
        let blocks = (input.chunks_exact(MAGNITUDE_BLOCK))
            .zip(out.chunks_exact_mut(MAGNITUDE_BLOCK))
            .filter_map(|(x, o)| {
                let x: &[C32; MAGNITUDE_BLOCK] = x.try_into().ok()?;
                let o: &mut [f32; MAGNITUDE_BLOCK] = o.try_into().ok()?;
                Some((x, o))
            });
        for (x, o) in blocks {
            magnitude_block(x, o);
        }
        magnitude_block(x_rest, o_rest);
    });
}

/// `out[i] = |input[i]|²`: the power of each sample, without the square root of
/// [`magnitude`].
pub fn power(input: &[C32], out: &mut [f32]) {
    debug_assert_eq!(input.len(), out.len(), "power: lengths differ");
    elementwise(out, |start, out| {
        for (o, x) in out.iter_mut().zip(tail(input, start)) {
            *o = x.norm_sqr();
        }
    });
}

/// `out[r·L + j] = input[r·L + j] · window[j]` for every row `r` of `L = window.len()`
/// elements: a real window (or any per-element real scale) applied to every row.
pub fn window_rows(input: &[C32], window: &[f32], out: &mut [C32]) {
    debug_assert_eq!(input.len(), out.len(), "window_rows: lengths differ");
    let row_len = window.len();
    let rows = rows_per_task(ELEMENTWISE_GRAIN, row_len);
    for_row_chunks(out, row_len, rows, |first_row, out| {
        let input = tail(input, first_row * row_len);
        for (out_row, in_row) in out
            .chunks_exact_mut(row_len)
            .zip(input.chunks_exact(row_len))
        {
            for ((o, &x), &w) in out_row.iter_mut().zip(in_row).zip(window) {
                *o = x * w;
            }
        }
    });
}

/// `out[r·L + j] = a[r·L + j] op row[j]` for every row `r` of `L = row.len()` elements: a
/// ZIP of a matrix with one row broadcast over all of its rows.
pub fn zip_rows(op: ZipOp, a: &[C32], row: &[C32], out: &mut [C32]) {
    match op {
        ZipOp::Add => zip_rows_with(a, row, out, |x, y| x + y),
        ZipOp::Sub => zip_rows_with(a, row, out, |x, y| x - y),
        ZipOp::Mul => zip_rows_with(a, row, out, |x, y| x * y),
        ZipOp::Div => zip_rows_with(a, row, out, |x, y| x / y),
        ZipOp::MulConj => zip_rows_with(a, row, out, |x, y| x * y.conj()),
    }
}

fn zip_rows_with(a: &[C32], row: &[C32], out: &mut [C32], f: impl Fn(C32, C32) -> C32 + Sync) {
    debug_assert_eq!(a.len(), out.len(), "zip_rows: lengths differ");
    let row_len = row.len();
    let rows = rows_per_task(ELEMENTWISE_GRAIN, row_len);
    for_row_chunks(out, row_len, rows, |first_row, out| {
        let a = tail(a, first_row * row_len);
        for (out_row, a_row) in out.chunks_exact_mut(row_len).zip(a.chunks_exact(row_len)) {
            for ((o, &x), &y) in out_row.iter_mut().zip(a_row).zip(row) {
                *o = f(x, y);
            }
        }
    });
}

/// Swaps the halves of every row of `row_len`: `numpy.fft.fftshift` per row. For odd
/// `row_len` it follows numpy's definition, `out[(i + row_len/2) % row_len] = input[i]`.
pub fn fftshift_rows(row_len: usize, input: &[C32], out: &mut [C32]) {
    debug_assert_eq!(input.len(), out.len(), "fftshift_rows: lengths differ");
    debug_assert!(
        input.len().checked_rem(row_len) == Some(0),
        "fftshift_rows: length {} is not a multiple of row_len = {row_len}",
        input.len()
    );
    if row_len == 0 {
        return;
    }
    let half = row_len / 2;
    let rows = rows_per_task(ELEMENTWISE_GRAIN, row_len);
    for_row_chunks(out, row_len, rows, |first_row, out| {
        let input = tail(input, first_row * row_len);
        for (o, x) in out
            .chunks_exact_mut(row_len)
            .zip(input.chunks_exact(row_len))
        {
            // Rotate right by `half`: input[i] lands at (i + half) % row_len.
            let (x_front, x_back) = x.split_at(row_len - half);
            let (o_front, o_back) = o.split_at_mut(half);
            o_front.copy_from_slice(x_back);
            o_back.copy_from_slice(x_front);
        }
    });
}

/// `input` is `rows × cols` row-major; `out` becomes its transpose, `cols × rows` row-major.
/// Cache-blocked in tiles of `TRANSPOSE_TILE`²; parallel over bands of output rows.
pub fn transpose(rows: usize, cols: usize, input: &[C32], out: &mut [C32]) {
    let len = rows.checked_mul(cols);
    debug_assert!(
        len == Some(input.len()) && len == Some(out.len()),
        "transpose: {rows} × {cols} does not match lengths {} and {}",
        input.len(),
        out.len()
    );
    // From here on `input` and `out` hold exactly rows × cols elements, so every index below
    // is in bounds by construction.
    let (Some(input), Some(out)) = (
        len.and_then(|len| input.get(..len)),
        len.and_then(|len| out.get_mut(..len)),
    ) else {
        return;
    };
    if rows == 0 || cols == 0 {
        return;
    }
    let band_len = TRANSPOSE_TILE * rows; // a band: TRANSPOSE_TILE output rows
    let bands = rows_per_task(ELEMENTWISE_GRAIN, band_len);
    for_row_chunks(out, band_len, bands, |first_band, out| {
        let c0 = first_band * TRANSPOSE_TILE;
        for r0 in (0..rows).step_by(TRANSPOSE_TILE) {
            let r1 = (r0 + TRANSPOSE_TILE).min(rows);
            for (c, out_row) in (c0..).zip(out.chunks_exact_mut(rows)) {
                for (o, in_row) in out_row[r0..r1]
                    .iter_mut()
                    .zip(input[r0 * cols..].chunks_exact(cols))
                {
                    *o = in_row[c];
                }
            }
        }
    });
}

/// `data[i] *= factor`.
pub fn scale(factor: C32, data: &mut [C32]) {
    elementwise(data, |_, data| data.iter_mut().for_each(|x| *x *= factor));
}

/// `out (m × n) = a (m × k) · b (k × n)`, complex, row-major. Parallel over output rows.
pub fn gemm(m: usize, k: usize, n: usize, a: &[C32], b: &[C32], out: &mut [C32]) {
    debug_assert!(
        m.checked_mul(k) == Some(a.len())
            && k.checked_mul(n) == Some(b.len())
            && m.checked_mul(n) == Some(out.len()),
        "gemm: {m} × {k} · {k} × {n} does not match lengths {}, {}, {}",
        a.len(),
        b.len(),
        out.len()
    );
    if n == 0 {
        return;
    }
    if k == 0 {
        out.fill(C32::default());
        return;
    }
    let rows = rows_per_task(GEMM_GRAIN_MACS, k.saturating_mul(n));
    for_row_chunks(out, n, rows, |first_row, out| {
        let a = tail(a, first_row * k);
        // i-p-j order: each output row accumulates rows of b scaled by a[i][p], so the
        // innermost loop streams contiguous memory of b and out.
        for (out_row, a_row) in out.chunks_exact_mut(n).zip(a.chunks_exact(k)) {
            out_row.fill(C32::default());
            for (&a_ip, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
                for (o, &b_pj) in out_row.iter_mut().zip(b_row) {
                    *o += a_ip * b_pj;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tiny deterministic xorshift64 generator.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            Rng(seed.max(1))
        }

        /// Uniform in [-1, 1).
        fn f32(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }

        fn c32(&mut self) -> C32 {
            C32::new(self.f32(), self.f32())
        }

        fn vec(&mut self, len: usize) -> Vec<C32> {
            (0..len).map(|_| self.c32()).collect()
        }
    }

    /// An f64 complex value as (re, im), for references computed independently of num-complex.
    type D = (f64, f64);

    fn d(z: C32) -> D {
        (z.re as f64, z.im as f64)
    }

    fn abs_d((re, im): D) -> f64 {
        re.hypot(im)
    }

    /// max |got − want| / max |want| over all elements.
    fn rel_err(got: &[C32], want: &[D]) -> f64 {
        assert_eq!(got.len(), want.len());
        let diff = got
            .iter()
            .zip(want)
            .map(|(&g, &(wr, wi))| abs_d((g.re as f64 - wr, g.im as f64 - wi)))
            .fold(0.0, f64::max);
        let scale = want.iter().copied().map(abs_d).fold(0.0, f64::max);
        assert!(scale > 0.0, "reference is all zeros");
        diff / scale
    }

    /// Naive O(n²) DFT of every row, in f64, with the 1/n scaling on the inverse.
    fn dft_rows(dir: FftDirection, n: usize, x: &[C32]) -> Vec<D> {
        let sign = match dir {
            FftDirection::Forward => -1.0,
            FftDirection::Inverse => 1.0,
        };
        let twiddle: Vec<D> = (0..n)
            .map(|m| {
                let t = sign * 2.0 * std::f64::consts::PI * m as f64 / n as f64;
                (t.cos(), t.sin())
            })
            .collect();
        let norm = match dir {
            FftDirection::Forward => 1.0,
            FftDirection::Inverse => 1.0 / n as f64,
        };
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks_exact(n) {
            for k in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for (j, &v) in row.iter().enumerate() {
                    let (vr, vi) = d(v);
                    let (wr, wi) = twiddle[(j * k) % n];
                    re += vr * wr - vi * wi;
                    im += vr * wi + vi * wr;
                }
                out.push((re * norm, im * norm));
            }
        }
        out
    }

    /// Row counts for `n`-point batches: the brief's 3 rows, and enough rows for 3 rayon tasks.
    fn fft_batches(n: usize) -> [usize; 2] {
        [3, 3 * rows_per_task(FFT_GRAIN_POINTS, n)]
    }

    const FFT_SIZES: [usize; 3] = [8, 64, 1024];

    #[test]
    fn fft_batch_sizes_cover_both_paths() {
        // 3 rows of every size fit in one grain (sequential); the larger batch is split.
        for n in FFT_SIZES {
            let [small, large] = fft_batches(n);
            assert!(
                small * n <= FFT_GRAIN_POINTS,
                "n = {n}: small batch parallel"
            );
            assert!(
                large * n > FFT_GRAIN_POINTS,
                "n = {n}: large batch not parallel"
            );
        }
    }

    #[test]
    fn fft_matches_naive_dft() {
        let plans = FftPlans::new();
        let mut rng = Rng::new(0x5eed_f00d);
        for n in FFT_SIZES {
            for rows in fft_batches(n) {
                let x = rng.vec(rows * n);
                for dir in [FftDirection::Forward, FftDirection::Inverse] {
                    let mut y = vec![C32::default(); x.len()];
                    fft_rows(&plans, dir, n, &x, &mut y);
                    let err = rel_err(&y, &dft_rows(dir, n, &x));
                    assert!(err <= 1e-4, "{dir:?} n = {n} rows = {rows}: rel err {err}");
                }
            }
        }
    }

    #[test]
    fn fft_inverse_of_forward_is_identity() {
        let plans = FftPlans::new();
        let mut rng = Rng::new(7);
        for n in FFT_SIZES {
            for rows in fft_batches(n) {
                let x = rng.vec(rows * n);
                let mut y = vec![C32::default(); x.len()];
                let mut z = vec![C32::default(); x.len()];
                fft_rows(&plans, FftDirection::Forward, n, &x, &mut y);
                fft_rows(&plans, FftDirection::Inverse, n, &y, &mut z);
                let want: Vec<D> = x.iter().copied().map(d).collect();
                let err = rel_err(&z, &want);
                assert!(err <= 1e-5, "n = {n} rows = {rows}: rel err {err}");
            }
        }
    }

    #[test]
    fn fft_in_place_matches_out_of_place() {
        let plans = FftPlans::new();
        let mut rng = Rng::new(99);
        for n in FFT_SIZES {
            for rows in fft_batches(n) {
                let x = rng.vec(rows * n);
                for dir in [FftDirection::Forward, FftDirection::Inverse] {
                    let mut out = vec![C32::default(); x.len()];
                    fft_rows(&plans, dir, n, &x, &mut out);
                    let mut inplace = x.clone();
                    fft_rows_in_place(&plans, dir, n, &mut inplace);
                    let want: Vec<D> = out.iter().copied().map(d).collect();
                    let err = rel_err(&inplace, &want);
                    assert!(err <= 1e-6, "{dir:?} n = {n} rows = {rows}: rel err {err}");
                }
            }
        }
    }

    #[test]
    fn fft_inverse_is_scaled_by_one_over_n() {
        let plans = FftPlans::new();
        for n in FFT_SIZES {
            for rows in fft_batches(n) {
                // The inverse of a unit impulse at bin 0 is 1/n everywhere (unscaled: 1).
                let mut data = vec![C32::default(); rows * n];
                data.iter_mut()
                    .step_by(n)
                    .for_each(|x| *x = C32::new(1.0, 0.0));
                fft_rows_in_place(&plans, FftDirection::Inverse, n, &mut data);
                let inv_n = 1.0 / n as f32;
                for (i, x) in data.iter().enumerate() {
                    assert!(
                        (x.re - inv_n).abs() <= 1e-7 && x.im.abs() <= 1e-7,
                        "n = {n}: element {i} is {x}, want {inv_n}"
                    );
                }
                // The forward transform is not scaled: all ones → n at bin 0.
                let ones = vec![C32::new(1.0, 0.0); rows * n];
                let mut spec = vec![C32::default(); rows * n];
                fft_rows(&plans, FftDirection::Forward, n, &ones, &mut spec);
                for row in spec.chunks_exact(n) {
                    assert!((row[0].re - n as f32).abs() <= 1e-3, "n = {n}: {}", row[0]);
                }
            }
        }
    }

    #[test]
    fn fft_plans_are_cached_per_size_and_direction() {
        let plans = FftPlans::default();
        let f = plans.plan(64, FftDirection::Forward);
        assert!(Arc::ptr_eq(&f, &plans.plan(64, FftDirection::Forward)));
        let i = plans.plan(64, FftDirection::Inverse);
        assert!(!Arc::ptr_eq(&f, &i));
        assert_eq!(i.fft_direction(), rustfft::FftDirection::Inverse);
        assert_eq!(plans.plan(128, FftDirection::Forward).len(), 128);
        assert_eq!(
            format!("{plans:?}"),
            "FftPlans { plans: [(64, Forward), (64, Inverse), (128, Forward)] }"
        );
    }

    /// Lengths below and above the element-wise cut-off (the larger one with a ragged last task).
    const ELEMENTWISE_LENS: [usize; 2] = [1000, 2 * ELEMENTWISE_GRAIN + 12_345];

    #[test]
    fn elementwise_lens_cover_both_paths() {
        assert!(ELEMENTWISE_LENS[0] <= ELEMENTWISE_GRAIN);
        assert!(ELEMENTWISE_LENS[1] > ELEMENTWISE_GRAIN);
    }

    /// The zip formula in f64 with explicit re/im arithmetic.
    fn zip_ref(op: ZipOp, (ar, ai): D, (br, bi): D) -> D {
        match op {
            ZipOp::Add => (ar + br, ai + bi),
            ZipOp::Sub => (ar - br, ai - bi),
            ZipOp::Mul => (ar * br - ai * bi, ar * bi + ai * br),
            ZipOp::Div => {
                let den = br * br + bi * bi;
                ((ar * br + ai * bi) / den, (ai * br - ar * bi) / den)
            }
            ZipOp::MulConj => (ar * br + ai * bi, ai * br - ar * bi),
        }
    }

    #[test]
    fn zip_matches_formula_for_every_op() {
        let mut rng = Rng::new(1234);
        for len in ELEMENTWISE_LENS {
            let a = rng.vec(len);
            // Keep |b| ≥ 0.25 so that division stays well conditioned.
            let b: Vec<C32> = (0..len)
                .map(|_| {
                    let (re, im) = (rng.f32(), rng.f32());
                    C32::new(re.signum() * (0.25 + re.abs()), im)
                })
                .collect();
            for op in ZipOp::ALL {
                let mut out = vec![C32::default(); len];
                zip(op, &a, &b, &mut out);
                for (i, ((&o, &x), &y)) in out.iter().zip(&a).zip(&b).enumerate() {
                    let (wr, wi) = zip_ref(op, d(x), d(y));
                    let err = abs_d((o.re as f64 - wr, o.im as f64 - wi));
                    assert!(
                        err <= 1e-5 * (1.0 + abs_d((wr, wi))),
                        "{op:?} len {len} [{i}]: {x} op {y} = {o}, want ({wr}, {wi})"
                    );
                }
            }
        }
    }

    #[test]
    fn conj_negates_imaginary_part() {
        let mut rng = Rng::new(5);
        for len in ELEMENTWISE_LENS {
            let x = rng.vec(len);
            let mut out = vec![C32::default(); len];
            conj(&x, &mut out);
            for (o, x) in out.iter().zip(&x) {
                assert_eq!((o.re, o.im), (x.re, -x.im));
            }
        }
    }

    #[test]
    fn magnitude_matches_f64_hypot() {
        let mut rng = Rng::new(6);
        for len in ELEMENTWISE_LENS {
            let mut x = rng.vec(len);
            x[0] = C32::new(3e30, -4e30); // would overflow as re² + im² in f32
            x[1] = C32::new(3e-20, 4e-20); // would underflow to a subnormal square sum
            x[2] = C32::new(1e-40, -2e-41); // subnormal components
            x[3] = C32::new(0.0, -0.0);
            x[len - 1] = C32::new(-f32::MAX / 2.0, f32::MAX / 4.0); // |x| < f32::MAX
            let mut out = vec![0.0f32; len];
            magnitude(&x, &mut out);
            for (i, (&o, &x)) in out.iter().zip(&x).enumerate() {
                let want = (x.re as f64).hypot(x.im as f64);
                // A subnormal result has an absolute rounding error of up to its ulp, 2⁻¹⁴⁹.
                let tolerance = (1e-6 * want).max(f64::from(f32::from_bits(1)));
                assert!(
                    (o as f64 - want).abs() <= tolerance,
                    "[{i}] |{x}| = {o}, want {want}"
                );
            }
        }
    }

    /// Components log-uniform over the huge (1e20..3e38) and tiny (1e-45..1e-30) ranges, and
    /// ordinary ones, scattered at random over several blocks: tiny ones only in block 0, huge
    /// ones only in block 2 and in the last block's rest (not a whole vectorised step), none in
    /// block 1 (which must come out of the f32 pass alone, still exact). Checked element by
    /// element against `hypot` in f64, computed here without the kernel's code. Each block has
    /// one kind of outlier so that each half of the range test is needed on its own: without
    /// the block's least `r` the tiny ones come out 0, without its sum the huge ones infinite.
    #[test]
    fn magnitude_keeps_range_for_huge_and_tiny_components() {
        let mut rng = Rng::new(29);
        // Uniform in [0, 1).
        let mut unit = || (rng.f32() + 1.0) / 2.0;
        let log_uniform = |lo: f32, hi: f32, u: f32| {
            let (a, b) = (f64::from(lo).ln(), f64::from(hi).ln());
            (a + (b - a) * f64::from(u)).exp() as f32
        };
        // Three blocks and a rest that is not a whole step.
        let len = 3 * MAGNITUDE_BLOCK + MAGNITUDE_LANES + 5;
        let mut x = Rng::new(30).vec(len);
        let mut picks = Vec::new();
        for k in 0..400 {
            let u = [unit(), unit(), unit(), unit()];
            let i = match k % 4 {
                1 | 3 => (u[0] * MAGNITUDE_BLOCK as f32) as usize,
                0 => 2 * MAGNITUDE_BLOCK + (u[0] * MAGNITUDE_BLOCK as f32) as usize,
                _ => len - 1 - (u[0] * 5.0) as usize,
            };
            let sign = |v: f32, s: f32| if s < 0.5 { -v } else { v };
            let huge = |v| log_uniform(1e20, 3e38, v);
            let tiny = |v| log_uniform(1e-45, 1e-30, v);
            let (re, im) = match k % 4 {
                0 => (huge(u[1]), huge(u[2])),
                1 => (tiny(u[1]), tiny(u[2])),
                2 => (huge(u[1]), tiny(u[2])),
                _ => (tiny(u[1]), u[2]),
            };
            x[i] = C32::new(sign(re, u[3]), sign(im, 1.0 - u[3]));
            picks.push(i);
        }
        let mut out = vec![f32::NAN; len];
        magnitude(&x, &mut out);
        for (i, (&o, &x)) in out.iter().zip(&x).enumerate() {
            let want = f64::from(x.re).hypot(f64::from(x.im));
            // Where it exceeds f32::MAX (two components near 3e38) the answer is infinite.
            if want > f64::from(f32::MAX) {
                assert_eq!(o, f32::INFINITY, "[{i}] |{x}|");
                continue;
            }
            let tolerance = (1e-6 * want).max(f64::from(f32::from_bits(1)));
            assert!(
                (f64::from(o) - want).abs() <= tolerance,
                "[{i}] |{x}| = {o}, want {want}"
            );
        }
        // The draws did land where meant.
        assert!(picks.iter().any(|&i| i < MAGNITUDE_BLOCK));
        assert!(picks.iter().any(|&i| i >= len - 5));
    }

    /// One out-of-range result alone in a block, at every position of a step (so in each of
    /// the sixteen lanes, in both halves of the step) and of a later step: each lane's least
    /// and sum must reach the block's range test through the fold, or that lane's huge result
    /// comes out infinite and its tiny one 0 (red where the fold skips lanes 8 to 11 of the
    /// least or of the sum). The expected values are 5·10ᵏ (3-4-5), to the inputs' rounding.
    #[test]
    fn magnitude_redoes_a_lone_outlier_in_every_lane() {
        let ordinary = Rng::new(31).vec(MAGNITUDE_BLOCK);
        let positions = (0..MAGNITUDE_STEP).chain(5 * MAGNITUDE_STEP..6 * MAGNITUDE_STEP);
        for at in positions {
            for (outlier, want) in [
                (C32::new(3e30, -4e30), 5e30f64),
                (C32::new(-3e-25, 4e-25), 5e-25),
            ] {
                let mut x = ordinary.clone();
                x[at] = outlier;
                let mut out = vec![f32::NAN; x.len()];
                magnitude(&x, &mut out);
                let got = f64::from(out[at]);
                assert!(
                    (got - want).abs() <= 1e-6 * want,
                    "|{outlier}| at {at} = {got}, want {want}"
                );
            }
        }
    }

    /// A NaN component gives a NaN, an infinite one infinity, wherever in a block it is.
    #[test]
    fn magnitude_of_nan_and_infinity() {
        for at in [
            0,
            7,
            MAGNITUDE_LANES,
            MAGNITUDE_BLOCK - 1,
            MAGNITUDE_BLOCK + 3,
        ] {
            let mut x = vec![C32::new(3.0, 4.0); MAGNITUDE_BLOCK + 9];
            x[at] = C32::new(f32::NAN, 1.0);
            x[at + 1] = C32::new(-f32::INFINITY, 1.0);
            let mut out = vec![0.0f32; x.len()];
            magnitude(&x, &mut out);
            assert!(out[at].is_nan(), "at {at}");
            assert_eq!(out[at + 1], f32::INFINITY, "at {at}");
            assert!(
                out.iter()
                    .enumerate()
                    .all(|(i, &o)| i == at || i == at + 1 || o == 5.0),
                "at {at}"
            );
        }
    }

    /// The block test folds its lanes four to one, and a NaN in one lane can take the place
    /// of a tiny result's least in another lane of its fold (a lane's least ends NaN where the
    /// NaN is its last result, the block's last step): the NaN's sum must still send the block
    /// to the redo, where the tiny result comes out exact (not the f32 pass's rounding).
    #[test]
    fn magnitude_nan_does_not_hide_a_tiny_result_folded_with_it() {
        for (tiny_lane, nan_lane) in [(1, 5), (5, 1), (2, 14), (15, 3)] {
            let mut x = vec![C32::new(3.0, 4.0); MAGNITUDE_BLOCK];
            x[tiny_lane] = C32::new(3e-23, 4e-23);
            let nan = MAGNITUDE_BLOCK - MAGNITUDE_LANES + nan_lane;
            x[nan] = C32::new(f32::NAN, 1.0);
            let mut out = vec![0.0f32; x.len()];
            magnitude(&x, &mut out);
            let at = (tiny_lane, nan);
            assert!(
                (f64::from(out[tiny_lane]) - 5e-23).abs() <= 1e-29,
                "{at:?}: {out:?}"
            );
            assert!(out[nan].is_nan(), "{at:?}");
        }
    }

    /// A block fails its test for an exact zero as for an underflow, and its redo walks only
    /// the lanes that failed: an out-of-range result (tiny, underflowing, subnormal or
    /// overflowing) must come out as `hypot` gives it in every lane and in either half of a
    /// step, whether exact zeros share its lane, sit in other lanes or in the short last
    /// block's rest; the zeros stay 0 and every other result is untouched.
    #[test]
    fn magnitude_redoes_each_failed_lane_beside_exact_zeros() {
        // A whole block, then a short one of one step and a rest.
        let len = MAGNITUDE_BLOCK + MAGNITUDE_STEP + 7;
        // The same lane as zero 3, in the other half of its step; another lane; the rest.
        let zeros = [3, 3 + MAGNITUDE_LANES, 200, MAGNITUDE_BLOCK + 3, len - 2];
        let outliers = [
            C32::new(1e-30, 0.0),    // square sum 0 in f32, as for a zero
            C32::new(3e-23, -4e-23), // a subnormal square sum
            C32::new(0.0, -1e-40),   // a subnormal component
            C32::new(3e30, 4e30),    // a square sum that overflows
        ];
        for at in (0..len).filter(|i| !zeros.contains(i)) {
            let mut x = vec![C32::new(3.0, 4.0); len];
            for &z in &zeros {
                x[z] = C32::new(0.0, -0.0);
            }
            x[at] = outliers[at % outliers.len()];
            let mut out = vec![f32::NAN; len];
            magnitude(&x, &mut out);
            let want = f64::from(x[at].re).hypot(f64::from(x[at].im));
            let tolerance = (1e-6 * want).max(f64::from(f32::from_bits(1)));
            assert!(
                (f64::from(out[at]) - want).abs() <= tolerance,
                "[{at}] |{}| = {}, want {want}",
                x[at],
                out[at]
            );
            for (i, &o) in out.iter().enumerate().filter(|&(i, _)| i != at) {
                let want = if zeros.contains(&i) { 0.0 } else { 5.0 };
                assert_eq!(
                    o.to_bits(),
                    f32::to_bits(want),
                    "[{i}] with {at} out of range"
                );
            }
        }
    }

    /// The NaNs that x86 makes itself (`0.0 / 0.0`, `inf - inf`) have the sign bit set. Such a
    /// NaN after a tiny result in the same lane takes its place as the lane's least, so only
    /// the lane's sum, NaN too, can send the block to the redo; compared as signed integers
    /// (as it once was) that sum read as negative, and the tiny result kept its f32 zero.
    #[test]
    fn magnitude_negative_nan_does_not_hide_a_tiny_result_in_its_lane() {
        let negative_nan = f32::from_bits(0xffc0_0000);
        assert!(negative_nan.is_nan() && negative_nan.is_sign_negative());
        for (tiny, nan) in [
            (1, 1 + MAGNITUDE_LANES),
            (5, 5 + 4 * MAGNITUDE_STEP),
            (0, 64),
        ] {
            let mut x = vec![C32::new(3.0, 4.0); MAGNITUDE_BLOCK];
            x[tiny] = C32::new(1e-30, 0.0);
            x[nan] = C32::new(negative_nan, 1.0);
            let mut out = vec![0.0f32; x.len()];
            magnitude(&x, &mut out);
            let at = (tiny, nan);
            assert!(
                (f64::from(out[tiny]) - 1e-30).abs() <= 1e-36,
                "{at:?}: {}",
                out[tiny]
            );
            assert!(out[nan].is_nan(), "{at:?}");
        }
    }

    #[test]
    fn power_matches_f64_square_sum() {
        let x = Rng::new(21).vec(ELEMENTWISE_GRAIN + 77);
        let mut out = vec![0.0f32; x.len()];
        power(&x, &mut out);
        for (o, z) in out.iter().zip(&x) {
            let (re, im) = d(*z);
            let want = re * re + im * im;
            assert!(
                (*o as f64 - want).abs() <= 1e-6 * want.max(1.0),
                "{o} vs {want}"
            );
        }
    }

    #[test]
    fn window_rows_scales_each_row_by_the_window() {
        for (rows, len) in [(3, 5), (ELEMENTWISE_GRAIN / 4 + 3, 8)] {
            let x = Rng::new(22).vec(rows * len);
            let w: Vec<f32> = (0..len).map(|j| 0.5 + j as f32).collect();
            let mut out = vec![C32::default(); x.len()];
            window_rows(&x, &w, &mut out);
            for r in 0..rows {
                for j in 0..len {
                    let want = C32::new(x[r * len + j].re * w[j], x[r * len + j].im * w[j]);
                    assert_eq!(out[r * len + j], want, "row {r}, column {j}");
                }
            }
        }
    }

    #[test]
    fn zip_rows_matches_formula_for_every_op_and_row() {
        for (rows, len) in [(4, 7), (ELEMENTWISE_GRAIN / 8 + 5, 16)] {
            let mut rng = Rng::new(23);
            let a = rng.vec(rows * len);
            let row = rng.vec(len);
            for op in ZipOp::ALL {
                let mut out = vec![C32::default(); a.len()];
                zip_rows(op, &a, &row, &mut out);
                for r in 0..rows {
                    for j in 0..len {
                        let (want, got) =
                            (zip_ref(op, d(a[r * len + j]), d(row[j])), out[r * len + j]);
                        let err = abs_d((got.re as f64 - want.0, got.im as f64 - want.1));
                        assert!(err <= 1e-5 * abs_d(want).max(1.0), "{op:?} row {r} col {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn scale_multiplies_every_element() {
        let mut rng = Rng::new(8);
        let factor = C32::new(0.75, -2.5);
        for len in ELEMENTWISE_LENS {
            let x = rng.vec(len);
            let mut data = x.clone();
            scale(factor, &mut data);
            for (i, (&o, &x)) in data.iter().zip(&x).enumerate() {
                let (wr, wi) = zip_ref(ZipOp::Mul, d(x), d(factor));
                let err = abs_d((o.re as f64 - wr, o.im as f64 - wi));
                assert!(err <= 1e-6 * (1.0 + abs_d((wr, wi))), "[{i}]: {o}");
            }
        }
    }

    #[test]
    fn fftshift_matches_numpy_on_small_rows() {
        let row = |v: &[f32]| -> Vec<C32> { v.iter().map(|&r| C32::new(r, -r)).collect() };
        // numpy.fft.fftshift([0, 1, 2, 3, 4]) == [3, 4, 0, 1, 2]; [0..6) → [3, 4, 5, 0, 1, 2].
        let cases: [(&[f32], &[f32]); 2] = [
            (&[0., 1., 2., 3., 4.], &[3., 4., 0., 1., 2.]),
            (&[0., 1., 2., 3., 4., 5.], &[3., 4., 5., 0., 1., 2.]),
        ];
        for (input, want) in cases {
            let mut out = vec![C32::default(); input.len()];
            fftshift_rows(input.len(), &row(input), &mut out);
            assert_eq!(out, row(want));
        }
    }

    #[test]
    fn fftshift_rows_matches_index_formula() {
        let mut rng = Rng::new(11);
        for row_len in [8, 7, 1] {
            // Below the cut-off, and above it with a ragged last task.
            let small = 5;
            let large = 3 * rows_per_task(ELEMENTWISE_GRAIN, row_len) + 2;
            assert!(small * row_len <= ELEMENTWISE_GRAIN && large * row_len > ELEMENTWISE_GRAIN);
            for rows in [small, large] {
                let x = rng.vec(rows * row_len);
                let mut out = vec![C32::default(); x.len()];
                fftshift_rows(row_len, &x, &mut out);
                let mut want = vec![C32::default(); x.len()];
                for r in 0..rows {
                    for i in 0..row_len {
                        want[r * row_len + (i + row_len / 2) % row_len] = x[r * row_len + i];
                    }
                }
                assert!(out == want, "row_len {row_len}, rows {rows}");
            }
        }
    }

    #[test]
    fn transpose_matches_direct_indexing() {
        let mut rng = Rng::new(12);
        // Non-square shapes below the cut-off, then one above it (several bands, ragged edges).
        let shapes = [(3, 5), (64, 33), (1, 7), (7, 1), (300, 129)];
        const { assert!(300 * 129 > ELEMENTWISE_GRAIN && 64 * 33 <= ELEMENTWISE_GRAIN) };
        for (rows, cols) in shapes {
            let x = rng.vec(rows * cols);
            let mut out = vec![C32::default(); x.len()];
            transpose(rows, cols, &x, &mut out);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(
                        out[c * rows + r],
                        x[r * cols + c],
                        "{rows}×{cols} at ({r}, {c})"
                    );
                }
            }
        }
    }

    /// The product by a triple loop in f64 with explicit re/im arithmetic.
    fn gemm_ref(m: usize, k: usize, n: usize, a: &[C32], b: &[C32]) -> Vec<D> {
        let mut out = vec![(0.0, 0.0); m * n];
        for i in 0..m {
            for j in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for p in 0..k {
                    let (ar, ai) = d(a[i * k + p]);
                    let (br, bi) = d(b[p * n + j]);
                    re += ar * br - ai * bi;
                    im += ar * bi + ai * br;
                }
                out[i * n + j] = (re, im);
            }
        }
        out
    }

    #[test]
    fn gemm_matches_triple_loop() {
        let mut rng = Rng::new(13);
        // The last shape has m·k·n = 84,000 MACs: several tasks of whole rows.
        let shapes = [(7, 5, 3), (33, 17, 9), (1, 1, 1), (70, 40, 30)];
        const { assert!(33 * 17 * 9 <= GEMM_GRAIN_MACS && 70 * 40 * 30 > 2 * GEMM_GRAIN_MACS) };
        for (m, k, n) in shapes {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut out = vec![C32::new(9.0, 9.0); m * n]; // must be overwritten, not added to
            gemm(m, k, n, &a, &b, &mut out);
            let err = rel_err(&out, &gemm_ref(m, k, n, &a, &b));
            assert!(err <= 1e-5, "{m}×{k}·{k}×{n}: rel err {err}");
        }
    }

    #[test]
    fn gemm_with_empty_inner_dimension_is_zero() {
        let mut out = vec![C32::new(1.0, 1.0); 6];
        gemm(2, 0, 3, &[], &[], &mut out);
        assert!(out.iter().all(|&x| x == C32::default()));
    }

    /// Release builds only (the debug assertions fire first otherwise): wrong lengths must
    /// neither panic nor write outside the given slices.
    #[cfg(not(debug_assertions))]
    #[test]
    fn wrong_lengths_stay_in_bounds_in_release() {
        let plans = FftPlans::new();
        let x = Rng::new(3).vec(100);
        let mut out = vec![C32::default(); 37];
        let mut mag = vec![0.0f32; 37];
        fft_rows(&plans, FftDirection::Forward, 8, &x, &mut out);
        fft_rows(&plans, FftDirection::Forward, 0, &x, &mut out);
        fft_rows_in_place(&plans, FftDirection::Inverse, 8, &mut out);
        zip(ZipOp::Div, &x, &x[..10], &mut out);
        conj(&x[..5], &mut out);
        magnitude(&x, &mut mag);
        fftshift_rows(8, &x, &mut out);
        fftshift_rows(0, &x, &mut out);
        transpose(10, 10, &x, &mut out);
        transpose(usize::MAX, 2, &x, &mut out);
        gemm(5, 4, 3, &x, &x[..7], &mut out);
        gemm(5, 0, 3, &x, &x, &mut out);
        scale(C32::new(2.0, 0.0), &mut out);
    }
}
