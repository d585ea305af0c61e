//! The built-in APIs on a GPU: `fft` through cuFFT, and `zip`, `conj`, `magnitude`,
//! `fftshift`, `transpose`, `scale` and `gemm` as CUDA C kernels.
//!
//! The kernels (`kernels.cu`, next to this file) are compiled once per process with NVRTC,
//! the first time a device is opened, and loaded as one module per device: no CUDA toolkit
//! is needed at build time and no `nvcc` step exists. Everything runs on the device's one
//! compute stream, in call order, after the copies it depends on (the byte-range ordering of
//! the `lanes` module); each call returns the [`GpuEvent`] of its completion.
//!
//! Arguments are byte ranges of the device's pool ([`DevRange`]) plus sizes. Every call
//! checks the sizes against the ranges and the ranges against the pool before anything is
//! enqueued (a range may be longer than the call needs; only the needed bytes are touched
//! and tracked). `fft`, `zip`, `conj` and `scale` may work in place (output range starting
//! where an input starts); `magnitude` (whose output elements are smaller), `fftshift`,
//! `transpose` and `gemm` need an output that overlaps no input.
//!
//! Complex numbers are [`Complex32`] (`float2` on the device, the same layout).

use super::fft::{FftPlan, FftPlans};
use super::hazard::Span;
use super::lanes::{GpuEvent, Lane};
use super::memory::{Arena, DevRange};
use super::{cuda_error, Unusable};
use crate::error::{Error, Result};
use crate::kernel::{FftDirection, ZipOp};
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use num_complex::Complex32;
use std::sync::{Arc, OnceLock};

/// The CUDA C source of the built-in kernels.
pub const KERNEL_SOURCE: &str = include_str!("kernels.cu");

const C32: usize = std::mem::size_of::<Complex32>();
const F32: usize = std::mem::size_of::<f32>();

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;
/// Most blocks an element-wise launch uses; the grid-stride loop covers the rest.
const MAX_BLOCKS: u64 = 65_535;
/// Most blocks in the y dimension of a grid.
const MAX_GRID_Y: usize = 65_535;

/// One built-in API call with its sizes. Every API has one output; `fft`, `conj`,
/// `magnitude`, `fftshift`, `transpose` and `scale` take one input, `zip` and `gemm` two.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GpuOp {
    /// `batch` transforms of `points` points, complex to complex; the inverse is scaled by
    /// 1/points.
    Fft {
        /// Points per transform.
        points: usize,
        /// Transforms.
        batch: usize,
        /// Direction.
        direction: FftDirection,
    },
    /// Element-wise `out = a op b` over `len` complex values.
    Zip {
        /// The operation.
        op: ZipOp,
        /// Elements.
        len: usize,
    },
    /// `out = conj(x)` over `len` complex values.
    Conj {
        /// Elements.
        len: usize,
    },
    /// `out = |x|` (f32) over `len` complex values.
    Magnitude {
        /// Elements.
        len: usize,
    },
    /// `numpy.fft.fftshift` of each of `rows` rows of `cols` complex values.
    FftShift {
        /// Rows.
        rows: usize,
        /// Values per row.
        cols: usize,
    },
    /// `out` (cols × rows) = transpose of `x` (rows × cols), row-major.
    Transpose {
        /// Rows of the input.
        rows: usize,
        /// Columns of the input.
        cols: usize,
    },
    /// `out = x · factor` over `len` complex values.
    Scale {
        /// Elements.
        len: usize,
        /// The complex factor.
        factor: Complex32,
    },
    /// `out` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    Gemm {
        /// Rows of `a` and `out`.
        m: usize,
        /// Columns of `a`, rows of `b`.
        k: usize,
        /// Columns of `b` and `out`.
        n: usize,
    },
}

impl GpuOp {
    /// The API's name.
    pub fn name(&self) -> &'static str {
        match self {
            GpuOp::Fft { .. } => "fft",
            GpuOp::Zip { .. } => "zip",
            GpuOp::Conj { .. } => "conj",
            GpuOp::Magnitude { .. } => "magnitude",
            GpuOp::FftShift { .. } => "fftshift",
            GpuOp::Transpose { .. } => "transpose",
            GpuOp::Scale { .. } => "scale",
            GpuOp::Gemm { .. } => "gemm",
        }
    }

    /// Bytes of each input and of the output; `None` if a size overflows.
    pub fn bytes(&self) -> Option<(Vec<usize>, usize)> {
        let c = |n: usize| n.checked_mul(C32);
        let prod = |a: usize, b: usize| a.checked_mul(b);
        Some(match *self {
            GpuOp::Fft { points, batch, .. } => {
                let b = c(prod(points, batch)?)?;
                (vec![b], b)
            }
            GpuOp::Zip { len, .. } => {
                let b = c(len)?;
                (vec![b, b], b)
            }
            GpuOp::Conj { len } | GpuOp::Scale { len, .. } => (vec![c(len)?], c(len)?),
            GpuOp::Magnitude { len } => (vec![c(len)?], len.checked_mul(F32)?),
            GpuOp::FftShift { rows, cols } | GpuOp::Transpose { rows, cols } => {
                let b = c(prod(rows, cols)?)?;
                (vec![b], b)
            }
            GpuOp::Gemm { m, k, n } => (vec![c(prod(m, k)?)?, c(prod(k, n)?)?], c(prod(m, n)?)?),
        })
    }

    /// Whether the output may be one of the inputs (same range).
    fn in_place_ok(&self) -> bool {
        matches!(
            self,
            GpuOp::Fft { .. } | GpuOp::Zip { .. } | GpuOp::Conj { .. } | GpuOp::Scale { .. }
        )
    }
}

/// A kernel argument: a device address, and its byte range in the pool when it is in the
/// pool (then its use is ordered against other work on those bytes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    pub ptr: u64,
    pub span: Option<Span>,
}

/// Compiles [`KERNEL_SOURCE`] with NVRTC (once per process) and returns the PTX text. Needs
/// only `libnvrtc`, no GPU: a way to check the kernels on any machine that has the library.
pub fn kernel_ptx() -> Result<String> {
    Ok(ptx()?.to_src())
}

/// Compiles [`KERNEL_SOURCE`] for `arch` (`compute_XX` gives PTX, `sm_XX` machine code) with
/// the NVRTC the backend found, and says which NVRTC that was: the check that every kernel
/// compiles, without a GPU. The log of a successful compile holds its warnings.
pub fn compile_kernels(arch: &str) -> Result<(super::Loaded, super::Compiled)> {
    let what = || format!("NVRTC compilation of the built-in kernels for {arch}");
    let nvrtc = super::nvrtc::Nvrtc::get().map_err(|why| cuda_error(what(), why))?;
    let option = format!("--gpu-architecture={arch}");
    let compiled = nvrtc
        .compile(KERNEL_SOURCE, KERNEL_FILE, &[&option])
        .map_err(|why| cuda_error(what(), why))?;
    Ok((nvrtc.loaded.clone(), compiled))
}

/// The name the kernels' source goes by in NVRTC's messages.
const KERNEL_FILE: &str = "rimms_kernels.cu";

/// PTX of [`KERNEL_SOURCE`] for NVRTC's default architecture (which every GPU the driver
/// supports can load), compiled on first use; a compile error is kept as its message.
fn ptx() -> Result<Ptx> {
    static PTX: OnceLock<std::result::Result<String, Unusable>> = OnceLock::new();
    PTX.get_or_init(|| {
        let nvrtc = super::nvrtc::Nvrtc::get()?;
        nvrtc
            .compile(KERNEL_SOURCE, KERNEL_FILE, &[])
            .map(|c| c.ptx)
    })
    .clone()
    .map(Ptx::from_src)
    .map_err(|why| cuda_error("NVRTC compilation of the built-in kernels", why))
}

struct Functions {
    zip: CudaFunction,
    conj: CudaFunction,
    magnitude: CudaFunction,
    scale: CudaFunction,
    fftshift: CudaFunction,
    transpose: CudaFunction,
    gemm: CudaFunction,
}

/// The built-in APIs of one GPU.
pub struct GpuKernels {
    arena: Arc<Arena>,
    fns: Functions,
    plans: FftPlans,
}

impl std::fmt::Debug for GpuKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuKernels")
            .field("device", &self.device())
            .field("fft_plans", &self.plans.len())
            .finish()
    }
}

impl GpuKernels {
    /// Compiles (once per process) and loads the kernels for the device of `arena`.
    pub(crate) fn new(arena: Arc<Arena>) -> Result<Self> {
        let lanes = arena.lanes().clone();
        let module = lanes.ctx().load_module(ptx()?).map_err(|e| {
            cuda_error(
                format!("loading the built-in kernels on {}", lanes.device()),
                e,
            )
        })?;
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(|e| cuda_error(format!("finding kernel {name} on {}", lanes.device()), e))
        };
        let fns = Functions {
            zip: load("rimms_zip")?,
            conj: load("rimms_conj")?,
            magnitude: load("rimms_magnitude")?,
            scale: load("rimms_scale")?,
            fftshift: load("rimms_fftshift_rows")?,
            transpose: load("rimms_transpose")?,
            gemm: load("rimms_gemm")?,
        };
        Ok(GpuKernels {
            plans: FftPlans::new(lanes),
            arena,
            fns,
        })
    }

    fn device(&self) -> &str {
        self.arena.lanes().device()
    }

    /// The cached cuFFT plan for `(points, batch)`, made on first use: the same plan (same
    /// handle) every time, whatever the direction.
    pub fn fft_plan(&self, points: usize, batch: usize) -> Result<Arc<FftPlan>> {
        self.plans.get(points, batch)
    }

    /// Plans in the cache.
    pub fn fft_plans_cached(&self) -> usize {
        self.plans.len()
    }

    /// `batch` FFTs of `points` points from `input` to `output` (may be the same range).
    pub fn fft(
        &self,
        input: DevRange,
        output: DevRange,
        points: usize,
        batch: usize,
        direction: FftDirection,
    ) -> Result<GpuEvent> {
        let op = GpuOp::Fft {
            points,
            batch,
            direction,
        };
        self.run(&op, &[input], output)
    }

    /// Element-wise `output = a op b` over `len` complex values.
    pub fn zip(
        &self,
        op: ZipOp,
        a: DevRange,
        b: DevRange,
        output: DevRange,
        len: usize,
    ) -> Result<GpuEvent> {
        self.run(&GpuOp::Zip { op, len }, &[a, b], output)
    }

    /// `output = conj(input)` over `len` complex values.
    pub fn conj(&self, input: DevRange, output: DevRange, len: usize) -> Result<GpuEvent> {
        self.run(&GpuOp::Conj { len }, &[input], output)
    }

    /// `output = |input|` over `len` complex values; the output holds `len` f32.
    pub fn magnitude(&self, input: DevRange, output: DevRange, len: usize) -> Result<GpuEvent> {
        self.run(&GpuOp::Magnitude { len }, &[input], output)
    }

    /// `numpy.fft.fftshift` of each row of a `rows` × `cols` complex matrix.
    pub fn fftshift(
        &self,
        input: DevRange,
        output: DevRange,
        rows: usize,
        cols: usize,
    ) -> Result<GpuEvent> {
        self.run(&GpuOp::FftShift { rows, cols }, &[input], output)
    }

    /// `output` (cols × rows) = transpose of `input` (rows × cols).
    pub fn transpose(
        &self,
        input: DevRange,
        output: DevRange,
        rows: usize,
        cols: usize,
    ) -> Result<GpuEvent> {
        self.run(&GpuOp::Transpose { rows, cols }, &[input], output)
    }

    /// `output = input · factor` over `len` complex values.
    pub fn scale(
        &self,
        input: DevRange,
        output: DevRange,
        len: usize,
        factor: Complex32,
    ) -> Result<GpuEvent> {
        self.run(&GpuOp::Scale { len, factor }, &[input], output)
    }

    /// `output` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    pub fn gemm(
        &self,
        a: DevRange,
        b: DevRange,
        output: DevRange,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<GpuEvent> {
        self.run(&GpuOp::Gemm { m, k, n }, &[a, b], output)
    }

    fn shape(&self, op: &GpuOp, what: String) -> Error {
        Error::Shape {
            api: op.name(),
            device: self.device().to_string(),
            what,
        }
    }

    /// Checks the argument count and sizes of `op` against ranges of lengths `inputs` and
    /// `output`; returns the bytes each input and the output use.
    pub(crate) fn check(
        &self,
        op: &GpuOp,
        inputs: &[usize],
        output: usize,
    ) -> Result<(Vec<usize>, usize)> {
        let (need_in, need_out) = op
            .bytes()
            .ok_or_else(|| self.shape(op, format!("the sizes of {op:?} overflow")))?;
        if inputs.len() != need_in.len() {
            return Err(self.shape(
                op,
                format!("takes {} inputs, got {}", need_in.len(), inputs.len()),
            ));
        }
        for (i, (&have, &need)) in inputs.iter().zip(&need_in).enumerate() {
            if have < need {
                return Err(self.shape(
                    op,
                    format!("input {i} holds {have} bytes, {op:?} reads {need}"),
                ));
            }
        }
        if output < need_out {
            return Err(self.shape(
                op,
                format!("the output holds {output} bytes, {op:?} writes {need_out}"),
            ));
        }
        self.check_limits(op)?;
        Ok((need_in, need_out))
    }

    /// Limits of the launch geometry and of cuFFT.
    fn check_limits(&self, op: &GpuOp) -> Result<()> {
        let unsupported = |why: String| Error::Unsupported {
            api: op.name(),
            device: self.device().to_string(),
            why,
        };
        match *op {
            GpuOp::Fft { points, batch, .. } => {
                if points == 0 || batch == 0 {
                    return Err(self.shape(op, "points and batch must be at least 1".into()));
                }
                if points
                    .checked_mul(batch)
                    .is_none_or(|t| t > i32::MAX as usize)
                {
                    return Err(unsupported(format!(
                        "{points} × {batch} points exceed cuFFT's 1-D plans ({} points)",
                        i32::MAX
                    )));
                }
            }
            GpuOp::Transpose { rows, cols }
                if u32::try_from(rows).is_err()
                    || u32::try_from(cols).is_err()
                    || rows.div_ceil(32) > MAX_GRID_Y =>
            {
                return Err(unsupported(format!(
                    "{rows} × {cols}: at most {} rows and {} columns",
                    MAX_GRID_Y * 32,
                    u32::MAX
                )));
            }
            GpuOp::Gemm { m, k, n }
                if u32::try_from(m).is_err()
                    || u32::try_from(k).is_err()
                    || u32::try_from(n).is_err()
                    || m.div_ceil(16) > MAX_GRID_Y =>
            {
                return Err(unsupported(format!(
                    "{m} × {k} · {k} × {n}: at most {} rows and {} columns",
                    MAX_GRID_Y * 16,
                    u32::MAX
                )));
            }
            _ => {}
        }
        Ok(())
    }

    /// Runs `op` on ranges of the pool: the generic entry point behind the typed methods,
    /// for a dispatcher that holds an op and its arguments.
    pub fn run(&self, op: &GpuOp, inputs: &[DevRange], output: DevRange) -> Result<GpuEvent> {
        let lens: Vec<usize> = inputs.iter().map(|r| r.len).collect();
        let (need_in, need_out) = self.check(op, &lens, output.len)?;
        let used: Vec<DevRange> = inputs
            .iter()
            .zip(&need_in)
            .map(|(r, &n)| DevRange::new(r.offset, n))
            .collect();
        let out = DevRange::new(output.offset, need_out);
        // A misaligned complex (or f32) access is a sticky CUDA error that ends the context,
        // so it is refused here. The pool itself is 256-byte aligned.
        let out_align = match op {
            GpuOp::Magnitude { .. } => F32,
            _ => C32,
        };
        for (what, offset, align) in used
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("input {i}"), r.offset, C32))
            .chain(std::iter::once((
                "the output".to_string(),
                out.offset,
                out_align,
            )))
        {
            if offset % align != 0 {
                return Err(self.shape(
                    op,
                    format!("{what} starts at byte {offset}, not a multiple of {align}"),
                ));
            }
        }
        for (i, r) in used.iter().enumerate() {
            let same = r.offset == out.offset;
            if r.overlaps(out) && !(same && op.in_place_ok()) {
                return Err(self.shape(
                    op,
                    format!(
                        "input {i} {r:?} overlaps the output {out:?}{}",
                        if op.in_place_ok() {
                            " other than exactly (in place)"
                        } else {
                            ", which this API cannot do in place"
                        }
                    ),
                ));
            }
        }
        let mut operands = Vec::with_capacity(used.len());
        for r in &used {
            operands.push(Operand {
                ptr: self.arena.ptr(*r, op.name())?,
                span: Some(r.span()),
            });
        }
        let output = Operand {
            ptr: self.arena.ptr(out, op.name())?,
            span: Some(out.span()),
        };
        self.run_operands(op, &operands, output)
    }

    /// Runs `op` on device addresses whose sizes the caller has checked with
    /// [`check`](Self::check). Operands with a pool span are ordered against other work on
    /// those bytes; operands without one (private allocations of the baseline) are not.
    pub(crate) fn run_operands(
        &self,
        op: &GpuOp,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<GpuEvent> {
        let plan = match *op {
            GpuOp::Fft { points, batch, .. } => Some(self.plans.get(points, batch)?),
            _ => None,
        };
        let reads: Vec<Span> = inputs.iter().filter_map(|o| o.span).collect();
        let writes: Vec<Span> = output.span.into_iter().collect();
        let lanes = self.arena.lanes();
        let ((), event) = lanes.submit(Lane::Compute, &reads, &writes, |stream| {
            self.enqueue(stream, op, inputs, output, plan.as_deref())
        })?;
        Ok(event)
    }

    fn enqueue(
        &self,
        stream: &CudaStream,
        op: &GpuOp,
        inputs: &[Operand],
        out: Operand,
        plan: Option<&FftPlan>,
    ) -> Result<()> {
        let input = |i: usize| {
            inputs
                .get(i)
                .map(|o| o.ptr)
                .ok_or_else(|| self.shape(op, format!("missing input {i}")))
        };
        let o = out.ptr;
        let launch_err = |e| cuda_error(format!("launching {} on {}", op.name(), self.device()), e);
        match *op {
            GpuOp::Fft {
                points,
                batch,
                direction,
            } => {
                let plan = plan.ok_or_else(|| self.shape(op, "no FFT plan".into()))?;
                let dir = match direction {
                    FftDirection::Forward => cudarc::cufft::FftDirection::Forward,
                    FftDirection::Inverse => cudarc::cufft::FftDirection::Inverse,
                } as i32;
                let x = input(0)?;
                // SAFETY: the plan is live and bound to this stream; both ranges hold
                // points × batch complex values (checked by the caller) and are the same or
                // disjoint.
                unsafe {
                    cudarc::cufft::result::exec_c2c(
                        plan.raw(),
                        x as *mut cudarc::cufft::sys::cufftComplex,
                        o as *mut cudarc::cufft::sys::cufftComplex,
                        dir,
                    )
                }
                .map_err(|e| {
                    cuda_error(
                        format!("cufftExecC2C of {points} × {batch} on {}", self.device()),
                        format!("{e:?}"),
                    )
                })?;
                if direction == FftDirection::Inverse {
                    // cuFFT leaves the inverse unscaled; the runtime's fft returns the input
                    // after a forward + inverse pair, so scale by 1/N here, in place.
                    let n = (points * batch) as u64;
                    let (re, im) = (1.0f32 / points as f32, 0.0f32);
                    let mut b = stream.launch_builder(&self.fns.scale);
                    b.arg(&o).arg(&o).arg(&n).arg(&re).arg(&im);
                    // SAFETY: rimms_scale(const float2*, float2*, u64, float, float) with
                    // the output range of n complex values.
                    unsafe { b.launch(elementwise(n)) }.map_err(launch_err)?;
                }
            }
            GpuOp::Zip { op: zop, len } => {
                let (a, bp, n) = (input(0)?, input(1)?, len as u64);
                let code: i32 = match zop {
                    ZipOp::Add => 0,
                    ZipOp::Sub => 1,
                    ZipOp::Mul => 2,
                    ZipOp::Div => 3,
                    ZipOp::MulConj => 4,
                };
                if n > 0 {
                    let mut b = stream.launch_builder(&self.fns.zip);
                    b.arg(&a).arg(&bp).arg(&o).arg(&n).arg(&code);
                    // SAFETY: rimms_zip(const float2*, const float2*, float2*, u64, int);
                    // every range holds n complex values (checked by the caller).
                    unsafe { b.launch(elementwise(n)) }.map_err(launch_err)?;
                }
            }
            GpuOp::Conj { len } | GpuOp::Magnitude { len } => {
                let (x, n) = (input(0)?, len as u64);
                let f = if matches!(op, GpuOp::Conj { .. }) {
                    &self.fns.conj
                } else {
                    &self.fns.magnitude
                };
                if n > 0 {
                    let mut b = stream.launch_builder(f);
                    b.arg(&x).arg(&o).arg(&n);
                    // SAFETY: rimms_conj(const float2*, float2*, u64) and
                    // rimms_magnitude(const float2*, float*, u64); sizes checked by the caller.
                    unsafe { b.launch(elementwise(n)) }.map_err(launch_err)?;
                }
            }
            GpuOp::Scale { len, factor } => {
                let (x, n) = (input(0)?, len as u64);
                if n > 0 {
                    let mut b = stream.launch_builder(&self.fns.scale);
                    b.arg(&x).arg(&o).arg(&n).arg(&factor.re).arg(&factor.im);
                    // SAFETY: rimms_scale(const float2*, float2*, u64, float, float).
                    unsafe { b.launch(elementwise(n)) }.map_err(launch_err)?;
                }
            }
            GpuOp::FftShift { rows, cols } => {
                let (x, r, c) = (input(0)?, rows as u64, cols as u64);
                if r > 0 && c > 0 {
                    let mut b = stream.launch_builder(&self.fns.fftshift);
                    b.arg(&x).arg(&o).arg(&r).arg(&c);
                    // SAFETY: rimms_fftshift_rows(const float2*, float2*, u64, u64); both
                    // ranges hold rows × cols values and do not overlap.
                    unsafe { b.launch(elementwise(r * c)) }.map_err(launch_err)?;
                }
            }
            GpuOp::Transpose { rows, cols } => {
                let x = input(0)?;
                // Both fit in u32: checked by `check_limits`.
                let (r, c) = (rows as u32, cols as u32);
                if r > 0 && c > 0 {
                    let cfg = LaunchConfig {
                        grid_dim: (c.div_ceil(32), r.div_ceil(32), 1),
                        block_dim: (32, 8, 1),
                        shared_mem_bytes: 0,
                    };
                    let mut b = stream.launch_builder(&self.fns.transpose);
                    b.arg(&x).arg(&o).arg(&r).arg(&c);
                    // SAFETY: rimms_transpose(const float2*, float2*, u32, u32) with its
                    // documented geometry; ranges checked and disjoint.
                    unsafe { b.launch(cfg) }.map_err(launch_err)?;
                }
            }
            GpuOp::Gemm { m, k, n } => {
                let (a, bp) = (input(0)?, input(1)?);
                // All three fit in u32: checked by `check_limits`.
                let (m, k, n) = (m as u32, k as u32, n as u32);
                if m > 0 && n > 0 {
                    let cfg = LaunchConfig {
                        grid_dim: (n.div_ceil(16), m.div_ceil(16), 1),
                        block_dim: (16, 16, 1),
                        shared_mem_bytes: 0,
                    };
                    let mut b = stream.launch_builder(&self.fns.gemm);
                    b.arg(&a).arg(&bp).arg(&o).arg(&m).arg(&k).arg(&n);
                    // SAFETY: rimms_gemm(const float2*, const float2*, float2*, u32, u32,
                    // u32) with its documented geometry; ranges checked and disjoint.
                    unsafe { b.launch(cfg) }.map_err(launch_err)?;
                }
            }
        }
        Ok(())
    }
}

/// Geometry of an element-wise launch over `n` elements (at least one block).
fn elementwise(n: u64) -> LaunchConfig {
    let blocks = n.div_ceil(BLOCK as u64).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_sizes_and_overflow() {
        let (i, o) = GpuOp::Gemm { m: 2, k: 3, n: 4 }.bytes().unwrap();
        assert_eq!((i, o), (vec![2 * 3 * 8, 3 * 4 * 8], 2 * 4 * 8));
        let (i, o) = GpuOp::Magnitude { len: 10 }.bytes().unwrap();
        assert_eq!((i, o), (vec![80], 40));
        assert!(GpuOp::Zip {
            op: ZipOp::Add,
            len: usize::MAX / 2
        }
        .bytes()
        .is_none());
    }

    #[test]
    fn elementwise_geometry_is_bounded() {
        assert_eq!(elementwise(0).grid_dim.0, 1);
        assert_eq!(elementwise(257).grid_dim.0, 2);
        assert_eq!(elementwise(u64::MAX).grid_dim.0, MAX_BLOCKS as u32);
    }

    #[test]
    fn kernel_source_defines_every_entry_point() {
        // NVRTC takes the source as a C string (cudarc would panic on an inner NUL).
        assert!(!KERNEL_SOURCE.contains('\0'));
        for name in [
            "rimms_zip",
            "rimms_conj",
            "rimms_magnitude",
            "rimms_scale",
            "rimms_fftshift_rows",
            "rimms_transpose",
            "rimms_gemm",
        ] {
            assert!(
                KERNEL_SOURCE.contains(&format!("extern \"C\" __global__ void {name}(")),
                "{name} missing from kernels.cu"
            );
        }
    }
}
