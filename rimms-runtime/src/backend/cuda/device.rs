//! A GPU as a runtime device, `gpu(n)`: [`GpuBackend`] opens the device, its space
//! ([`GpuSpace`]: the one device allocation the runtime's pool carves) becomes a
//! device-memory space of the runtime, and the built-in APIs get device implementations that
//! launch the space's cuFFT plans and NVRTC kernels on the `DevSlice`s the dispatcher hands
//! them.

use super::kernels::Arg;
use super::space::GpuSpace;
use super::stream::GpuStreams;
use super::{cuda_error, probe, probe_detailed, Probe, Unusable};
use crate::apis;
use crate::backend::host_kernels::shape;
use crate::backend::{shape_fits, Backend, SpaceBacking, SpaceSpec};
use crate::hal::BackendError;
use crate::hal::{ArgForm, Device, Forms};
use crate::hal::{DevSlice, DevSliceMut};
use crate::hal::{DeviceCtx, FftDirection, KernelCtx, Refusal, ZipOp};
use crate::hal::{During, Error, Result};
use crate::space::LinkModel;
use cudarc::driver::CudaContext;
use num_complex::Complex32 as C32;
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

/// Host ↔ GPU over PCIe Gen5 x16: about 10 µs a copy through staging, 40 GB/s. Only ranks
/// copy sources and feeds the scheduler's estimates; real copies take what they take.
const PCIE_GEN5: LinkModel = LinkModel {
    latency: Duration::from_micros(10),
    bytes_per_second: 40e9,
};

/// `gpu(n)`, the CUDA device of ordinal `n`, as a backend of the runtime.
pub(crate) struct GpuBackend {
    index: u8,
    space: Arc<GpuSpace>,
}

impl GpuBackend {
    /// Opens GPU `index` with a pool of about `pool_bytes` aligned to `granule`, or says why
    /// there is no usable GPU `index` (no driver, no such device, no NVRTC or cuFFT library,
    /// or `RIMMS_NO_GPU` set). An error is a GPU that is there but failed to start, or a
    /// mistake in the configuration. Never panics.
    fn open(
        index: usize,
        pool_bytes: usize,
        granule: usize,
    ) -> Result<std::result::Result<GpuBackend, Unusable>> {
        let info = match probe_detailed()? {
            Probe::NoGpu(why) => return Ok(Err(why.into())),
            Probe::Found(info) => info,
        };
        let Some(device) = info.devices.get(index).cloned() else {
            return Ok(Err(format!(
                "there is no GPU {index}: the driver sees {} device(s)",
                info.devices.len()
            )
            .into()));
        };
        if let Some(why) = probe::missing_toolkit_libraries() {
            return Ok(Err(why.into()));
        }
        let setup = |e| Error::from_backend(During::Setup, e);
        let n = u8::try_from(index).map_err(|_| {
            Error::Config(format!(
                "gpu{index}: a runtime names GPUs 0 to {} only",
                u8::MAX
            ))
        })?;
        // Every library is known to load, so cudarc has no reason to panic below; should one
        // of its calls panic anyway (a symbol missing from an old driver), report it as an
        // error rather than unwind into the caller.
        let space = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let device = Device::Gpu(n);
            let ctx = CudaContext::new(index)
                .map_err(|e| setup(cuda_error(format!("creating the context of {device}"), e)))?;
            let streams = Arc::new(GpuStreams::new(ctx, device).map_err(setup)?);
            GpuSpace::open(index, streams, pool_bytes, granule)
        }))
        .unwrap_or_else(|payload| {
            Err(setup(cuda_error(
                format!("opening gpu{index}"),
                format!(
                    "cudarc panicked: {}",
                    probe::panic_message(payload.as_ref())
                ),
            )))
        })?;
        tracing::info!(
            "gpu{index}: {} ({} MiB, compute {}.{}), pool {} MiB",
            device.name,
            device.total_memory >> 20,
            device.compute_capability.0,
            device.compute_capability.1,
            crate::hal::DeviceMemory::capacity(&space) >> 20
        );
        Ok(Ok(GpuBackend {
            index: n,
            space: Arc::new(space),
        }))
    }
}

impl Backend for GpuBackend {
    fn device(&self) -> Device {
        Device::Gpu(self.index)
    }

    /// Warps of 32 threads (every NVIDIA GPU so far) over 128-byte cache lines (L1 and L2
    /// lines of 4 32-byte sectors since Fermi); copies are the driver's, no burst of ours.
    fn grain(&self) -> crate::hal::DeviceGrain {
        crate::hal::DeviceGrain {
            l2_line: 128,
            dma_burst: 0,
            warp: 32,
        }
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        Some(SpaceSpec {
            name: self.space.device().to_string(),
            pool_bytes: crate::hal::DeviceMemory::capacity(&*self.space),
            link: PCIE_GEN5,
            simulate: false,
            virtual_clock: false,
            fail_copies: false,
            host_mapped: false,
            memory: SpaceBacking::Device(self.space.clone()),
        })
    }

    fn arg_forms(&self) -> Forms {
        Forms::Only(ArgForm::Device)
    }

    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&*self.space)
    }

    fn completion(&self) -> std::result::Result<(), BackendError> {
        self.space.status()
    }
}

/// The GPU a device implementation runs on.
fn space<'c>(ctx: &'c KernelCtx<'_>) -> Result<&'c GpuSpace> {
    ctx.device_handle::<GpuSpace>().ok_or_else(|| {
        ctx.error(
            "gpu built-in",
            BackendError::Invalid("the device is not a CUDA GPU".to_string()),
        )
    })
}

/// The GPU a device implementation runs on, and its arguments as ranges of the GPU's pool.
/// Each launch returns once enqueued; the runtime's completion check waits for it and reports
/// how it ended.
fn on_gpu<'c, const N: usize>(
    ctx: &'c KernelCtx<'_>,
    api: &'static str,
    args: [(usize, usize); N],
) -> Result<(&'c GpuSpace, [Arg; N])> {
    let gpu = space(ctx)?;
    let mut ranges = [Arg { ptr: 0, bytes: 0 }; N];
    for (range, (addr, len)) in ranges.iter_mut().zip(args) {
        *range = gpu
            .arg(addr, len)
            .map_err(|source| ctx.error(api, source))?;
    }
    Ok((gpu, ranges))
}

/// The `accepts` check of `fft` on a GPU: the sizes cuFFT transforms.
fn fft_fits(
    _dev: &DeviceCtx<'_>,
    _dir: FftDirection,
    points: usize,
    _input: usize,
    _output: usize,
) -> std::result::Result<(), Refusal> {
    if points == 0 || points > i32::MAX as usize {
        Err(Refusal::new(format!(
            "cuFFT transforms 1 to {} points, not {points}",
            i32::MAX
        )))
    } else {
        Ok(())
    }
}

/// The `accepts` check of `fft_in_place` on a GPU, as `fft`'s.
fn fft_in_place_fits(
    dev: &DeviceCtx<'_>,
    dir: FftDirection,
    points: usize,
    data: usize,
) -> std::result::Result<(), Refusal> {
    fft_fits(dev, dir, points, data, data)
}

#[rimms_macros::kernel(api = apis::fft, device = gpu, accepts = fft_fits)]
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
    let batch = input.len() / points;
    let (gpu, [x, y]) = on_gpu(ctx, "fft", [input.extent(), output.extent()])?;
    gpu.kernels().fft(x, y, points, batch, dir)
}

#[rimms_macros::kernel(api = apis::fft_in_place, device = gpu, accepts = fft_in_place_fits)]
fn fft_in_place(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    data: DevSliceMut<C32>,
) -> Result<()> {
    shape_fits(ctx, "fft_in_place", shape::whole_rows(points, data.len()))?;
    let batch = data.len() / points;
    let (gpu, [x]) = on_gpu(ctx, "fft", [data.extent()])?;
    gpu.kernels().fft(x, x, points, batch, dir)
}

#[rimms_macros::kernel(api = apis::zip, device = gpu)]
fn zip(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    b: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [a.len(), b.len(), output.len()];
    shape_fits(ctx, "zip", shape::same_len(&["a", "b", "out"], lens))?;
    let len = a.len();
    let (gpu, [a, b, y]) = on_gpu(ctx, "zip", [a.extent(), b.extent(), output.extent()])?;
    gpu.kernels().zip(op, a, b, y, len)
}

#[rimms_macros::kernel(api = apis::zip_rows, device = gpu)]
fn zip_rows(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    row: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [a.len(), output.len()];
    shape_fits(ctx, "zip_rows", shape::same_len(&["a", "out"], lens))?;
    shape_fits(ctx, "zip_rows", shape::whole_rows(row.len(), a.len()))?;
    let (len, row_len) = (a.len(), row.len());
    let extents = [a.extent(), row.extent(), output.extent()];
    let (gpu, [a, row, y]) = on_gpu(ctx, "zip_rows", extents)?;
    gpu.kernels().zip_rows(op, a, row, y, len, row_len)
}

#[rimms_macros::kernel(api = apis::window, device = gpu)]
fn window(
    ctx: &KernelCtx,
    input: DevSlice<C32>,
    window: DevSlice<f32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "window", shape::same_len(&["input", "out"], lens))?;
    shape_fits(ctx, "window", shape::whole_rows(window.len(), input.len()))?;
    let (len, row_len) = (input.len(), window.len());
    let extents = [input.extent(), window.extent(), output.extent()];
    let (gpu, [x, w, y]) = on_gpu(ctx, "window", extents)?;
    gpu.kernels().window(x, w, y, len, row_len)
}

#[rimms_macros::kernel(api = apis::power, device = gpu)]
fn power(ctx: &KernelCtx, input: DevSlice<C32>, #[out] output: DevSliceMut<f32>) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "power", shape::same_len(&["input", "out"], lens))?;
    let len = input.len();
    let (gpu, [x, y]) = on_gpu(ctx, "power", [input.extent(), output.extent()])?;
    gpu.kernels().power(x, y, len)
}

#[rimms_macros::kernel(api = apis::conj, device = gpu)]
fn conj(ctx: &KernelCtx, input: DevSlice<C32>, #[out] output: DevSliceMut<C32>) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "conj", shape::same_len(&["input", "out"], lens))?;
    let len = input.len();
    let (gpu, [x, y]) = on_gpu(ctx, "conj", [input.extent(), output.extent()])?;
    gpu.kernels().conj(x, y, len)
}

#[rimms_macros::kernel(api = apis::magnitude, device = gpu)]
fn magnitude(ctx: &KernelCtx, input: DevSlice<C32>, #[out] output: DevSliceMut<f32>) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "magnitude", shape::same_len(&["input", "out"], lens))?;
    let len = input.len();
    let (gpu, [x, y]) = on_gpu(ctx, "magnitude", [input.extent(), output.extent()])?;
    gpu.kernels().magnitude(x, y, len)
}

#[rimms_macros::kernel(api = apis::fftshift, device = gpu)]
fn fftshift(
    ctx: &KernelCtx,
    row_len: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "fftshift", shape::same_len(&["input", "out"], lens))?;
    shape_fits(ctx, "fftshift", shape::whole_rows(row_len, input.len()))?;
    let rows = input.len() / row_len;
    let (gpu, [x, y]) = on_gpu(ctx, "fftshift", [input.extent(), output.extent()])?;
    gpu.kernels().fftshift(x, y, rows, row_len)
}

#[rimms_macros::kernel(api = apis::transpose, device = gpu)]
fn transpose(
    ctx: &KernelCtx,
    rows: usize,
    cols: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let lens = [input.len(), output.len()];
    shape_fits(ctx, "transpose", shape::transpose(rows, cols, lens))?;
    let (gpu, [x, y]) = on_gpu(ctx, "transpose", [input.extent(), output.extent()])?;
    gpu.kernels().transpose(x, y, rows, cols)
}

#[rimms_macros::kernel(api = apis::scale, device = gpu)]
fn scale(ctx: &KernelCtx, factor: C32, data: DevSliceMut<C32>) -> Result<()> {
    let len = data.len();
    let (gpu, [x]) = on_gpu(ctx, "scale", [data.extent()])?;
    gpu.kernels().scale(x, x, len, factor)
}

#[rimms_macros::kernel(api = apis::gemm, device = gpu)]
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
    let (gpu, [a, b, c]) = on_gpu(ctx, "gemm", [a.extent(), b.extent(), c.extent()])?;
    gpu.kernels().gemm(a, b, c, m, k, n)
}

/// Opens the GPUs a runtime asked for, each with a pool of about `pool_bytes` aligned to
/// `granule`: `wanted` ordinals (each required), or every one the driver reports if `None`
/// (each optional: a GPU that cannot be used is logged and left out, so a machine without a
/// usable GPU gets none rather than an error).
///
/// GPU ordinal `n` is the device `gpu(n)` with the space `gpuN` whichever way it was asked
/// for, so `.gpu(1)` alone gives `Device::Gpu(1)`, and a device's name is the same in every
/// program on the machine.
pub(crate) fn open(
    wanted: Option<&[usize]>,
    pool_bytes: usize,
    granule: usize,
) -> Result<Vec<GpuBackend>> {
    match wanted {
        Some(indices) => {
            let mut seen = Vec::with_capacity(indices.len());
            for &i in indices {
                if seen.contains(&i) {
                    return Err(Error::Config(format!("gpu{i} is asked for twice")));
                }
                seen.push(i);
            }
            indices
                .iter()
                .map(|&i| {
                    GpuBackend::open(i, pool_bytes, granule)?
                        .map_err(|why| Error::NoGpu { why: why.0 })
                })
                .collect()
        }
        None => {
            let count = match probe_detailed()? {
                Probe::Found(info) => info.devices.len(),
                Probe::NoGpu(why) => {
                    tracing::info!("no GPU: {why}");
                    0
                }
            };
            let mut found = Vec::new();
            for i in 0..count {
                match GpuBackend::open(i, pool_bytes, granule) {
                    Ok(Ok(gpu)) => found.push(gpu),
                    Ok(Err(why)) => tracing::info!("gpu{i}: no GPU: {why}"),
                    // A mistake in the configuration is the caller's to hear about.
                    Err(e @ Error::Config(_)) => return Err(e),
                    Err(e) => tracing::warn!("gpu{i} is left out: {e}"),
                }
            }
            Ok(found)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::stream::{Lane, Streams};
    use crate::hal::DeviceMemory;
    use std::time::Instant;

    /// Rows, inner size and columns of the gemm that keeps the compute stream busy.
    const GEMM: usize = 2048;
    /// Bytes copied in and out while it runs.
    const COPY: usize = 16 << 20;
    /// How long the queued kernels should take at least, so a copy has time to finish first.
    const BUSY_MS: f64 = 100.0;

    /// A copy in and a copy out, each waited for, return while kernels queued before them on
    /// the compute stream still run: the two streams overlap on the hardware. Prints the
    /// figures as one `overlap:` line, which the GPU kit keeps. Needs a GPU: where there is
    /// none it prints `skipped: no GPU (<reason>)` and passes, unless `RIMMS_REQUIRE_GPU` is
    /// set.
    #[test]
    #[ignore = "needs a GPU"]
    fn copies_overlap_a_running_kernel_on_the_gpu() {
        let c32 = std::mem::size_of::<C32>();
        let matrix = GEMM * GEMM * c32;
        let gpu = match GpuBackend::open(0, 3 * matrix + COPY + (16 << 20), 256) {
            Ok(Ok(gpu)) => gpu,
            Ok(Err(why)) => {
                let required =
                    std::env::var("RIMMS_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0");
                assert!(
                    !required,
                    "RIMMS_REQUIRE_GPU is set but there is no GPU: {why}"
                );
                println!("skipped: no GPU ({why})");
                return;
            }
            Err(e) => panic!("a GPU is present but cannot be opened: {e}"),
        };
        let space = &gpu.space;
        let base = space.base();
        let [a, b, c, staged] = [0, 1, 2, 3].map(|i| base + i * matrix);
        for at in [a, b, c] {
            space.fill_zero(at, matrix).expect("zero fill");
        }
        let arg = |at, len| space.arg(at, len).expect("in the pool");
        let gemm = || {
            space
                .kernels()
                .gemm(
                    arg(a, matrix),
                    arg(b, matrix),
                    arg(c, matrix),
                    GEMM,
                    GEMM,
                    GEMM,
                )
                .expect("gemm launches")
        };
        let input: Vec<u8> = (0..COPY).map(|i| (i % 251) as u8).collect();
        let mut output = vec![0u8; COPY];

        // Alone: one gemm, and the copies on an idle device.
        let started = Instant::now();
        gemm();
        space.status().expect("gemm runs");
        let gemm_ms = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        space.copy_in(staged, &input).expect("copy in");
        space.copy_out(staged, &mut output).expect("copy out");
        let copies_alone_ms = started.elapsed().as_secs_f64() * 1e3;
        assert_eq!(output, input, "the bytes come back");

        // Together: enough gemms queued to keep the compute stream busy for BUSY_MS, then
        // the same copies.
        let launches = ((BUSY_MS / gemm_ms.max(0.01)).ceil() as usize).clamp(1, 1000);
        let started = Instant::now();
        for _ in 0..launches {
            gemm();
        }
        let kernels_done = space
            .streams()
            .record(Lane::Compute)
            .expect("an event after the kernels");
        output.fill(0);
        space.copy_in(staged, &input).expect("copy in");
        space.copy_out(staged, &mut output).expect("copy out");
        let copies_ms = started.elapsed().as_secs_f64() * 1e3;
        let still_running = !kernels_done.is_done().expect("query the kernels");
        space.status().expect("the kernels run");
        let kernels_ms = started.elapsed().as_secs_f64() * 1e3;
        assert_eq!(output, input, "the bytes come back");
        println!(
            "overlap: copies of 2 × {} MiB took {copies_ms:.2} ms under {launches} gemm \
             launches of {kernels_ms:.2} ms ({copies_alone_ms:.2} ms alone); kernels still \
             running when the copies returned: {still_running}",
            COPY >> 20
        );
        // With one stream the copies would queue behind every kernel and return after them.
        assert!(
            still_running || kernels_ms < 2.0 * copies_alone_ms,
            "the copies returned only after the kernels queued before them: no overlap"
        );
    }
}
