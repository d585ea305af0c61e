//! The built-in APIs on a GPU: `fft` through cuFFT, and `zip`, `conj`, `magnitude`,
//! `fftshift`, `transpose`, `scale` and `gemm` as CUDA C kernels.
//!
//! The kernels (`kernels.cu`, next to this file) are compiled once per process with NVRTC,
//! the first time a device is opened, and loaded as one module per device: no CUDA toolkit
//! is needed at build time and no `nvcc` step exists. Everything runs on the device's compute
//! stream, in call order; the copies the runtime made before the call, on the copy stream,
//! were waited for before it (see `ordering`).
//!
//! Arguments are ranges of the device's pool (an `Arg`: device address and bytes, which the
//! GPU's space has checked against the pool) plus sizes. Every call checks the sizes against
//! the ranges, the alignment and the overlaps before anything is enqueued (a range may be
//! longer than the call needs; only the needed bytes are touched). `fft`, `zip`, `conj` and
//! `scale` may work in place (output range starting where an input starts); `magnitude`
//! (whose output elements are smaller), `fftshift`, `transpose` and `gemm` need an output
//! that overlaps no input.
//!
//! Complex numbers are [`Complex32`] (`float2` on the device, the same layout).

use super::fft::{FftPlan, FftPlans};
use super::ordering;
use super::stream::{GpuStreams, Streams, Work};
use super::{cuda_error, Unusable};
use crate::hal::BackendError;
use crate::hal::Device;
use crate::hal::{During, Error, Result};
use crate::hal::{FftDirection, ZipOp};
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

/// Compiles [`KERNEL_SOURCE`] with NVRTC (once per process) and returns the PTX text. Needs
/// only `libnvrtc`, no GPU: a way to check the kernels on any machine that has the library.
pub fn kernel_ptx() -> super::Result<String> {
    Ok(ptx()?.to_src())
}

/// Compiles [`KERNEL_SOURCE`] for `arch` (`compute_XX` gives PTX, `sm_XX` machine code) with
/// the NVRTC the backend found, and says which NVRTC that was: the check that every kernel
/// compiles, without a GPU. The log of a successful compile holds its warnings.
pub fn compile_kernels(arch: &str) -> super::Result<(super::Loaded, super::Compiled)> {
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
fn ptx() -> super::Result<Ptx> {
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
    zip_rows: CudaFunction,
    window: CudaFunction,
    power: CudaFunction,
    conj: CudaFunction,
    magnitude: CudaFunction,
    scale: CudaFunction,
    fftshift: CudaFunction,
    transpose: CudaFunction,
    gemm: CudaFunction,
}

/// A kernel argument: `bytes` at device address `ptr`, a range of the device's pool (the
/// caller has checked that it lies there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arg {
    /// Device address of the first byte.
    pub ptr: u64,
    /// Bytes the range holds.
    pub bytes: usize,
}

impl Arg {
    /// The first `bytes` of this range.
    fn first(self, bytes: usize) -> Arg {
        Arg { bytes, ..self }
    }

    /// Whether the two ranges share a byte (empty ranges share none).
    fn overlaps(self, other: Arg) -> bool {
        let end = |a: Arg| a.ptr.saturating_add(a.bytes as u64);
        self.bytes > 0 && other.bytes > 0 && self.ptr < end(other) && other.ptr < end(self)
    }
}

/// What one launch touches: each input with the bytes it reads, and the output with the bytes
/// it writes and the size of its elements. `None` where a size overflows.
struct Footprint<'a> {
    inputs: &'a [(Arg, Option<usize>)],
    output: Arg,
    writes: Option<usize>,
    out_element: usize,
    /// Each input's element size, for its alignment; `None`: all complex.
    in_elements: Option<&'a [usize]>,
    /// The output may be exactly an input (`fft`, `zip`, `conj`, `scale`).
    in_place_ok: bool,
}

impl<'a> Footprint<'a> {
    /// `inputs` and an output of complex values, not in place.
    fn new(inputs: &'a [(Arg, Option<usize>)], output: Arg, writes: Option<usize>) -> Self {
        Footprint {
            inputs,
            output,
            writes,
            out_element: C32,
            in_elements: None,
            in_place_ok: false,
        }
    }

    /// The inputs' elements are these many bytes long, in order.
    fn in_elements(self, bytes: &'a [usize]) -> Self {
        Footprint {
            in_elements: Some(bytes),
            ..self
        }
    }

    /// The output may be exactly an input.
    fn in_place_ok(self) -> Self {
        Footprint {
            in_place_ok: true,
            ..self
        }
    }

    /// The output's elements are `bytes` long.
    fn out_element(self, bytes: usize) -> Self {
        Footprint {
            out_element: bytes,
            ..self
        }
    }

    /// Checks sizes, alignment and overlap before anything is enqueued; returns the ranges
    /// actually read and written, or what is wrong. A misaligned complex (or f32) access is a
    /// sticky CUDA error that ends the context, so it is refused here (the pool itself is
    /// aligned to its granule, at least 256 bytes).
    fn check(&self) -> std::result::Result<(Vec<Arg>, Arg), String> {
        let mut used = Vec::with_capacity(self.inputs.len());
        for (i, &(arg, reads)) in self.inputs.iter().enumerate() {
            let need = reads.ok_or("the sizes overflow")?;
            if arg.bytes < need {
                return Err(format!("input {i} holds {} bytes, reads {need}", arg.bytes));
            }
            used.push(arg.first(need));
        }
        let need = self.writes.ok_or("the sizes overflow")?;
        if self.output.bytes < need {
            return Err(format!(
                "the output holds {} bytes, writes {need}",
                self.output.bytes
            ));
        }
        let out = self.output.first(need);
        let starts = used
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let align = self.in_elements.and_then(|e| e.get(i).copied());
                (format!("input {i}"), r.ptr, align.unwrap_or(C32))
            })
            .chain(std::iter::once((
                "the output".to_string(),
                out.ptr,
                self.out_element,
            )));
        for (what, ptr, align) in starts {
            if ptr % align as u64 != 0 {
                return Err(format!(
                    "{what} starts at address {ptr:#x}, not a multiple of {align}"
                ));
            }
        }
        for (i, r) in used.iter().enumerate() {
            if r.overlaps(out) && !(r.ptr == out.ptr && self.in_place_ok) {
                return Err(format!(
                    "input {i} ({} bytes at {:#x}) overlaps the output ({} bytes at {:#x}){}",
                    r.bytes,
                    r.ptr,
                    out.bytes,
                    out.ptr,
                    if self.in_place_ok {
                        " other than exactly (in place)"
                    } else {
                        ", which this API cannot do in place"
                    }
                ));
            }
        }
        Ok((used, out))
    }
}

/// The operation code `rimms_zip` and `rimms_zip_rows` take.
fn zip_code(op: ZipOp) -> i32 {
    match op {
        ZipOp::Add => 0,
        ZipOp::Sub => 1,
        ZipOp::Mul => 2,
        ZipOp::Div => 3,
        ZipOp::MulConj => 4,
    }
}

/// `n` complex values, in bytes.
fn c32s(n: usize) -> Option<usize> {
    n.checked_mul(C32)
}

/// `a × b` complex values, in bytes.
fn c32s2(a: usize, b: usize) -> Option<usize> {
    c32s(a.checked_mul(b)?)
}

/// The built-in APIs of one GPU: its loaded kernels and cuFFT plans, launched on its compute
/// stream. Every launch returns once enqueued; the runtime waits for that stream right after
/// it (`Backend::completion`).
pub(crate) struct GpuKernels {
    streams: Arc<GpuStreams>,
    fns: Functions,
    plans: FftPlans,
}

impl std::fmt::Debug for GpuKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuKernels")
            .field("device", &self.device())
            .finish()
    }
}

impl GpuKernels {
    /// Compiles (once per process) and loads the kernels on `streams`' device.
    pub(crate) fn new(streams: Arc<GpuStreams>) -> super::Result<Self> {
        let module = streams.ctx().load_module(ptx()?).map_err(|e| {
            cuda_error(
                format!("loading the built-in kernels on {}", streams.device()),
                e,
            )
        })?;
        let load = |name: &str| {
            module.load_function(name).map_err(|e| {
                cuda_error(format!("finding kernel {name} on {}", streams.device()), e)
            })
        };
        let fns = Functions {
            zip: load("rimms_zip")?,
            zip_rows: load("rimms_zip_rows")?,
            window: load("rimms_window_rows")?,
            power: load("rimms_power")?,
            conj: load("rimms_conj")?,
            magnitude: load("rimms_magnitude")?,
            scale: load("rimms_scale")?,
            fftshift: load("rimms_fftshift_rows")?,
            transpose: load("rimms_transpose")?,
            gemm: load("rimms_gemm")?,
        };
        Ok(GpuKernels {
            plans: FftPlans::new(streams.clone()),
            streams,
            fns,
        })
    }

    fn device(&self) -> Device {
        self.streams.device()
    }

    fn shape(&self, api: &'static str, what: String) -> Error {
        Error::Shape {
            api,
            device: self.device().into(),
            what,
        }
    }

    fn unsupported(&self, api: &'static str, why: String) -> Error {
        self.failed(api, BackendError::unsupported(api, why))
    }

    /// The crate's error for what the driver reported during a call of `api` here.
    fn failed(&self, api: &'static str, source: BackendError) -> Error {
        Error::from_backend(
            During::Kernel {
                api,
                device: self.device(),
            },
            source,
        )
    }

    /// [`Footprint::check`], its complaint as a shape error of `api`.
    fn check(&self, api: &'static str, footprint: Footprint<'_>) -> Result<(Vec<Arg>, Arg)> {
        footprint.check().map_err(|what| self.shape(api, what))
    }

    /// Checks the footprint of an API with one input; the ranges it reads and writes.
    fn unary(&self, api: &'static str, footprint: Footprint<'_>) -> Result<(Arg, Arg)> {
        let (used, out) = self.check(api, footprint)?;
        match used.as_slice() {
            [x] => Ok((*x, out)),
            _ => Err(self.shape(api, format!("takes 1 input, got {}", used.len()))),
        }
    }

    /// Enqueues `work` (a kernel, or a transform with its scale) on its stream, the compute
    /// stream, with the context current; `enqueue` must only enqueue.
    fn launch(
        &self,
        api: &'static str,
        work: Work,
        enqueue: impl FnOnce(&CudaStream) -> Result<()>,
    ) -> Result<()> {
        self.streams.bind().map_err(|e| self.failed(api, e))?;
        ordering::launch(&*self.streams, work, enqueue)
    }

    fn launch_error(
        &self,
        api: &'static str,
    ) -> impl Fn(cudarc::driver::DriverError) -> Error + '_ {
        let what = format!("launching {api} on {}", self.device());
        move |e| self.failed(api, cuda_error(what.clone(), e))
    }

    /// `batch` FFTs of `points` points from `input` to `output` (the same range or disjoint);
    /// the inverse is scaled by 1/points.
    pub(crate) fn fft(
        &self,
        input: Arg,
        output: Arg,
        points: usize,
        batch: usize,
        direction: FftDirection,
    ) -> Result<()> {
        const API: &str = "fft";
        let bytes = c32s2(points, batch);
        let (x, o) = self.unary(
            API,
            Footprint::new(&[(input, bytes)], output, bytes).in_place_ok(),
        )?;
        if points == 0 || batch == 0 {
            return Err(self.shape(API, "points and batch must be at least 1".into()));
        }
        if points
            .checked_mul(batch)
            .is_none_or(|t| t > i32::MAX as usize)
        {
            return Err(self.unsupported(
                API,
                format!(
                    "{points} × {batch} points exceed cuFFT's 1-D plans ({} points)",
                    i32::MAX
                ),
            ));
        }
        let plan: Arc<FftPlan> = self
            .plans
            .get(points, batch)
            .map_err(|e| self.failed(API, e))?;
        self.launch(API, Work::Fft, |stream| {
            let dir = match direction {
                FftDirection::Forward => cudarc::cufft::FftDirection::Forward,
                FftDirection::Inverse => cudarc::cufft::FftDirection::Inverse,
            } as i32;
            // SAFETY: the plan is live and bound to this stream; both ranges hold points ×
            // batch complex values (checked above) and are the same or disjoint.
            unsafe {
                cudarc::cufft::result::exec_c2c(
                    plan.raw(),
                    x.ptr as *mut cudarc::cufft::sys::cufftComplex,
                    o.ptr as *mut cudarc::cufft::sys::cufftComplex,
                    dir,
                )
            }
            .map_err(|e| {
                self.failed(
                    API,
                    cuda_error(
                        format!("cufftExecC2C of {points} × {batch} on {}", self.device()),
                        format!("{e:?}"),
                    ),
                )
            })?;
            if direction == FftDirection::Inverse {
                // cuFFT leaves the inverse unscaled; the runtime's fft returns the input after
                // a forward + inverse pair, so scale by 1/N here, in place, on the plan's
                // stream: after the transform, whose output it reads (FIFO).
                let n = (points * batch) as u64;
                let (re, im) = (1.0f32 / points as f32, 0.0f32);
                let mut b = stream.launch_builder(&self.fns.scale);
                b.arg(&o.ptr).arg(&o.ptr).arg(&n).arg(&re).arg(&im);
                // SAFETY: rimms_scale(const float2*, float2*, u64, float, float) with the
                // output range of n complex values.
                unsafe { b.launch(elementwise(n)) }.map_err(self.launch_error(API))?;
            }
            Ok(())
        })
    }

    /// Element-wise `output = a op b` over `len` complex values.
    pub(crate) fn zip(&self, op: ZipOp, a: Arg, b: Arg, output: Arg, len: usize) -> Result<()> {
        const API: &str = "zip";
        let bytes = c32s(len);
        let (used, o) = self.check(
            API,
            Footprint::new(&[(a, bytes), (b, bytes)], output, bytes).in_place_ok(),
        )?;
        let (a, bp, n, code) = (used[0].ptr, used[1].ptr, len as u64, zip_code(op));
        if n == 0 {
            return Ok(());
        }
        self.launch(API, Work::Kernel, |stream| {
            let mut l = stream.launch_builder(&self.fns.zip);
            l.arg(&a).arg(&bp).arg(&o.ptr).arg(&n).arg(&code);
            // SAFETY: rimms_zip(const float2*, const float2*, float2*, u64, int); every range
            // holds n complex values (checked above).
            unsafe { l.launch(elementwise(n)) }.map_err(self.launch_error(API))?;
            Ok(())
        })
    }

    /// `output[i] = a[i] op row[i % row_len]` over `len` complex values, `len` a whole number
    /// of rows: one launch for a merged run of per-row ZIPs with a shared operand.
    pub(crate) fn zip_rows(
        &self,
        op: ZipOp,
        a: Arg,
        row: Arg,
        output: Arg,
        len: usize,
        row_len: usize,
    ) -> Result<()> {
        let (f, code) = (&self.fns.zip_rows, Some(zip_code(op)));
        self.broadcast_rows("zip_rows", f, a, (row, C32), output, len, row_len, code)
    }

    /// `output[i] = input[i] · window[i % row_len]` over `len` complex values and a real
    /// window of `row_len`, `len` a whole number of rows.
    pub(crate) fn window(
        &self,
        input: Arg,
        window: Arg,
        output: Arg,
        len: usize,
        row_len: usize,
    ) -> Result<()> {
        let f = &self.fns.window;
        self.broadcast_rows(
            "window",
            f,
            input,
            (window, F32),
            output,
            len,
            row_len,
            None,
        )
    }

    /// Launches `f(input, row, output, n, row_len[, op])`: every element of `len` complex
    /// values combined with the element of one row of `row_len` (of `row.1`-byte elements) at
    /// its column, `len` a whole number of rows.
    #[allow(clippy::too_many_arguments)] // The kernel's own arguments, checked here.
    fn broadcast_rows(
        &self,
        api: &'static str,
        f: &CudaFunction,
        input: Arg,
        (row, row_element): (Arg, usize),
        output: Arg,
        len: usize,
        row_len: usize,
        op: Option<i32>,
    ) -> Result<()> {
        let bytes = c32s(len);
        // Not in place: a thread writing `output[i]` would race the threads reading the
        // broadcast row, were it a part of the output.
        let inputs = [(input, bytes), (row, row_len.checked_mul(row_element))];
        let (used, o) = self.check(
            api,
            Footprint::new(&inputs, output, bytes).in_elements(&[C32, row_element]),
        )?;
        if row_len == 0 || len % row_len != 0 {
            return Err(self.shape(
                api,
                format!("{len} elements are not a whole number of {row_len}-element rows"),
            ));
        }
        let (x, r, n, l) = (used[0].ptr, used[1].ptr, len as u64, row_len as u64);
        if n == 0 {
            return Ok(());
        }
        self.launch(api, Work::Kernel, |stream| {
            let mut b = stream.launch_builder(f);
            b.arg(&x).arg(&r).arg(&o.ptr).arg(&n).arg(&l);
            if let Some(op) = &op {
                b.arg(op);
            }
            // SAFETY: rimms_zip_rows(const float2*, const float2*, float2*, u64, u64, int) and
            // rimms_window_rows(const float2*, const float*, float2*, u64, u64), each given its
            // own arguments (`op` for the ZIP alone); the input and the output hold n complex
            // values, the row row_len ≥ 1 elements of its kind (checked above), and the
            // kernels read the row only at i % row_len.
            unsafe { b.launch(elementwise(n)) }.map_err(self.launch_error(api))?;
            Ok(())
        })
    }

    /// `output = conj(input)` over `len` complex values.
    pub(crate) fn conj(&self, input: Arg, output: Arg, len: usize) -> Result<()> {
        const API: &str = "conj";
        let bytes = c32s(len);
        let (x, o) = self.unary(
            API,
            Footprint::new(&[(input, bytes)], output, bytes).in_place_ok(),
        )?;
        self.map(API, &self.fns.conj, x, o, len, None)
    }

    /// `output = |input|` over `len` complex values; the output holds `len` f32.
    pub(crate) fn magnitude(&self, input: Arg, output: Arg, len: usize) -> Result<()> {
        self.to_real("magnitude", &self.fns.magnitude, input, output, len)
    }

    /// `output = |input|²` over `len` complex values; the output holds `len` f32.
    pub(crate) fn power(&self, input: Arg, output: Arg, len: usize) -> Result<()> {
        self.to_real("power", &self.fns.power, input, output, len)
    }

    /// `f(input, output, len)` from `len` complex values to `len` f32.
    fn to_real(
        &self,
        api: &'static str,
        f: &CudaFunction,
        input: Arg,
        output: Arg,
        len: usize,
    ) -> Result<()> {
        let writes = len.checked_mul(F32);
        let (x, o) = self.unary(
            api,
            Footprint::new(&[(input, c32s(len))], output, writes).out_element(F32),
        )?;
        self.map(api, f, x, o, len, None)
    }

    /// `output = input · factor` over `len` complex values.
    pub(crate) fn scale(
        &self,
        input: Arg,
        output: Arg,
        len: usize,
        factor: Complex32,
    ) -> Result<()> {
        const API: &str = "scale";
        let bytes = c32s(len);
        let (x, o) = self.unary(
            API,
            Footprint::new(&[(input, bytes)], output, bytes).in_place_ok(),
        )?;
        self.map(API, &self.fns.scale, x, o, len, Some(factor))
    }

    /// An element-wise kernel over `len` values: `conj` and `magnitude` (`f(const float2*,
    /// T*, u64)`), or `scale` with its factor (`f(const float2*, float2*, u64, float,
    /// float)`).
    fn map(
        &self,
        api: &'static str,
        f: &CudaFunction,
        x: Arg,
        o: Arg,
        len: usize,
        factor: Option<Complex32>,
    ) -> Result<()> {
        let n = len as u64;
        if n == 0 {
            return Ok(());
        }
        self.launch(api, Work::Kernel, |stream| {
            let mut b = stream.launch_builder(f);
            b.arg(&x.ptr).arg(&o.ptr).arg(&n);
            if let Some(factor) = &factor {
                b.arg(&factor.re).arg(&factor.im);
            }
            // SAFETY: rimms_conj(const float2*, float2*, u64), rimms_magnitude and
            // rimms_power(const float2*, float*, u64) and rimms_scale(const float2*, float2*,
            // u64, float, float), each given its own arguments; both ranges hold n values
            // (checked by the caller).
            unsafe { b.launch(elementwise(n)) }.map_err(self.launch_error(api))?;
            Ok(())
        })
    }

    /// `numpy.fft.fftshift` of each row of a `rows` × `cols` complex matrix.
    pub(crate) fn fftshift(&self, input: Arg, output: Arg, rows: usize, cols: usize) -> Result<()> {
        const API: &str = "fftshift";
        let bytes = c32s2(rows, cols);
        let (x, o) = self.unary(API, Footprint::new(&[(input, bytes)], output, bytes))?;
        let (r, c) = (rows as u64, cols as u64);
        if r == 0 || c == 0 {
            return Ok(());
        }
        self.launch(API, Work::Kernel, |stream| {
            let mut b = stream.launch_builder(&self.fns.fftshift);
            b.arg(&x.ptr).arg(&o.ptr).arg(&r).arg(&c);
            // SAFETY: rimms_fftshift_rows(const float2*, float2*, u64, u64); both ranges hold
            // rows × cols values and do not overlap (checked above).
            unsafe { b.launch(elementwise(r * c)) }.map_err(self.launch_error(API))?;
            Ok(())
        })
    }

    /// `output` (cols × rows) = transpose of `input` (rows × cols).
    pub(crate) fn transpose(
        &self,
        input: Arg,
        output: Arg,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        const API: &str = "transpose";
        let bytes = c32s2(rows, cols);
        let (x, o) = self.unary(API, Footprint::new(&[(input, bytes)], output, bytes))?;
        let (Ok(r), Ok(c)) = (u32::try_from(rows), u32::try_from(cols)) else {
            return Err(self.transpose_too_big(rows, cols));
        };
        if rows.div_ceil(32) > MAX_GRID_Y {
            return Err(self.transpose_too_big(rows, cols));
        }
        if r == 0 || c == 0 {
            return Ok(());
        }
        self.launch(API, Work::Kernel, |stream| {
            let cfg = LaunchConfig {
                grid_dim: (c.div_ceil(32), r.div_ceil(32), 1),
                block_dim: (32, 8, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&self.fns.transpose);
            b.arg(&x.ptr).arg(&o.ptr).arg(&r).arg(&c);
            // SAFETY: rimms_transpose(const float2*, float2*, u32, u32) with its documented
            // geometry; ranges checked and disjoint.
            unsafe { b.launch(cfg) }.map_err(self.launch_error(API))?;
            Ok(())
        })
    }

    fn transpose_too_big(&self, rows: usize, cols: usize) -> Error {
        self.unsupported(
            "transpose",
            format!(
                "{rows} × {cols}: at most {} rows and {} columns",
                MAX_GRID_Y * 32,
                u32::MAX
            ),
        )
    }

    /// `output` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    pub(crate) fn gemm(
        &self,
        a: Arg,
        b: Arg,
        output: Arg,
        m: usize,
        k: usize,
        n: usize,
    ) -> Result<()> {
        const API: &str = "gemm";
        let (used, o) = self.check(
            API,
            Footprint::new(&[(a, c32s2(m, k)), (b, c32s2(k, n))], output, c32s2(m, n)),
        )?;
        let (Ok(m32), Ok(k32), Ok(n32)) = (u32::try_from(m), u32::try_from(k), u32::try_from(n))
        else {
            return Err(self.gemm_too_big(m, k, n));
        };
        if m.div_ceil(16) > MAX_GRID_Y {
            return Err(self.gemm_too_big(m, k, n));
        }
        if m32 == 0 || n32 == 0 {
            return Ok(());
        }
        let (ap, bp) = (used[0].ptr, used[1].ptr);
        self.launch(API, Work::Kernel, |stream| {
            let cfg = LaunchConfig {
                grid_dim: (n32.div_ceil(16), m32.div_ceil(16), 1),
                block_dim: (16, 16, 1),
                shared_mem_bytes: 0,
            };
            let mut l = stream.launch_builder(&self.fns.gemm);
            l.arg(&ap)
                .arg(&bp)
                .arg(&o.ptr)
                .arg(&m32)
                .arg(&k32)
                .arg(&n32);
            // SAFETY: rimms_gemm(const float2*, const float2*, float2*, u32, u32, u32) with
            // its documented geometry; ranges checked and disjoint.
            unsafe { l.launch(cfg) }.map_err(self.launch_error(API))?;
            Ok(())
        })
    }

    fn gemm_too_big(&self, m: usize, k: usize, n: usize) -> Error {
        self.unsupported(
            "gemm",
            format!(
                "{m} × {k} · {k} × {n}: at most {} rows and {} columns",
                MAX_GRID_Y * 16,
                u32::MAX
            ),
        )
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

    fn at(ptr: u64, bytes: usize) -> Arg {
        Arg { ptr, bytes }
    }

    /// The check of a one-input footprint, the output of complex values unless `out_element`
    /// says otherwise.
    fn check(
        input: Arg,
        reads: Option<usize>,
        output: Arg,
        writes: Option<usize>,
        out_element: usize,
        in_place_ok: bool,
    ) -> std::result::Result<(Vec<Arg>, Arg), String> {
        let inputs = [(input, reads)];
        let footprint = Footprint::new(&inputs, output, writes).out_element(out_element);
        if in_place_ok {
            footprint.in_place_ok().check()
        } else {
            footprint.check()
        }
    }

    #[test]
    fn a_footprint_needs_the_bytes_it_reads_and_writes() {
        let x = at(4096, 80);
        let ten = c32s(10);
        // Ten complex values in, ten f32 out: the output needs only 40 bytes.
        let f32_out = check(x, ten, at(8192, 40), Some(40), F32, false);
        assert_eq!(f32_out, Ok((vec![x], at(8192, 40))));
        // A longer range is cut to what is used.
        let longer = check(at(4096, 800), ten, at(8192, 400), ten, C32, false);
        assert_eq!(longer, Ok((vec![x], at(8192, 80))));
        assert_eq!(
            check(at(4096, 72), ten, at(8192, 80), ten, C32, false),
            Err("input 0 holds 72 bytes, reads 80".to_string())
        );
        assert_eq!(
            check(x, ten, at(8192, 79), ten, C32, false),
            Err("the output holds 79 bytes, writes 80".to_string())
        );
        assert_eq!(
            check(x, c32s2(usize::MAX, 2), at(8192, 80), Some(80), C32, false),
            Err("the sizes overflow".to_string())
        );
        // Two inputs: each is checked, in order.
        let inputs = [(x, ten), (at(12288, 8), ten)];
        let two = Footprint::new(&inputs, at(8192, 80), ten).check();
        assert_eq!(two, Err("input 1 holds 8 bytes, reads 80".to_string()));
    }

    #[test]
    fn each_input_is_aligned_to_its_own_elements() {
        // A window of f32 may start on any multiple of 4; the complex input only on 8.
        let (ten, window) = (c32s(10), Some(8));
        let both = |x: u64, w: u64| {
            let inputs = [(at(x, 80), ten), (at(w, 8), window)];
            Footprint::new(&inputs, at(8192, 80), ten)
                .in_elements(&[C32, F32])
                .check()
        };
        assert!(both(4096, 12292).is_ok());
        assert!(both(4096, 12290).unwrap_err().contains("input 1"));
        assert!(both(4100, 12292).unwrap_err().contains("input 0"));
        // Without the sizes every input is complex.
        let inputs = [(at(4096, 80), ten), (at(12292, 8), window)];
        let complex = Footprint::new(&inputs, at(8192, 80), ten).check();
        assert!(complex.unwrap_err().contains("input 1"));
    }

    #[test]
    fn a_footprint_refuses_misaligned_and_overlapping_ranges() {
        let ten = c32s(10);
        let misaligned = check(at(4100, 80), ten, at(8192, 80), ten, C32, false);
        assert!(misaligned.unwrap_err().contains("not a multiple of 8"));
        // An f32 output may start on any multiple of 4, a complex one only on multiples of 8.
        assert!(check(at(4096, 80), ten, at(8196, 40), Some(40), C32, false).is_err());
        assert!(check(at(4096, 80), ten, at(8196, 40), Some(40), F32, false).is_ok());
        // Exactly in place: only where the API allows it.
        let same = |in_place_ok| check(at(4096, 80), ten, at(4096, 80), ten, C32, in_place_ok);
        assert!(same(false).unwrap_err().contains("cannot do in place"));
        assert!(same(true).is_ok());
        // Overlapping other than exactly: never.
        let shifted = check(at(4096, 80), ten, at(4104, 80), ten, C32, true);
        assert!(shifted.unwrap_err().contains("other than exactly"));
        // Touching is not overlapping.
        assert!(check(at(4096, 80), ten, at(4176, 80), ten, C32, false).is_ok());
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
            "rimms_zip_rows",
            "rimms_window_rows",
            "rimms_power",
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
