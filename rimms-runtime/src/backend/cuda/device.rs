//! A GPU as a runtime device, `gpu(n)`: its pool becomes a device-memory space of the
//! runtime, and the built-in APIs get device implementations that launch the backend's
//! cuFFT plans and NVRTC kernels on the `DevSlice`s the dispatcher hands them.
//!
//! The runtime carves the pool with its own allocator (so fragments, the fast path and the
//! stats work as in every other space); to keep [`GpuMemory`]'s allocator from handing out the
//! same bytes, the whole pool is taken from it once, when the device is wired in.

use super::{CudaBackend, DevRange, GpuAlloc, GpuOp};
use crate::backend::{Backend, BackendError, SpaceMemory, SpaceSpec};
use crate::device::{ArgForm, Device};
use crate::error::{Error, Result};
use crate::kernel::{apis, DeviceCtx, FftDirection, KernelCtx, Refusal, ZipOp};
use crate::space::{DeviceMemory, LinkModel};
use crate::{DevSlice, DevSliceMut};
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

/// `gpu(n)` as the runtime sees it.
pub(crate) struct RuntimeGpu {
    index: u8,
    space: Arc<GpuSpace>,
}

/// The pool of one GPU, reached through the backend's copies.
pub(crate) struct GpuSpace {
    gpu: Arc<CudaBackend>,
    /// The whole pool, taken from [`super::GpuMemory`]'s allocator and never given back while
    /// the runtime holds the device.
    whole: GpuAlloc,
    /// First usable device address: the pool's base rounded up to `align`.
    base: usize,
    capacity: usize,
}

impl RuntimeGpu {
    /// Wires `gpu` in as `gpu(index)`, its pool aligned to `align` bytes (the runtime's pool
    /// granule).
    pub(crate) fn new(index: u8, gpu: CudaBackend, align: usize) -> Result<RuntimeGpu> {
        let gpu = Arc::new(gpu);
        let whole = gpu.memory().alloc(gpu.memory().capacity())?;
        let start = gpu.memory().arena().base() as usize + whole.offset();
        let base = start.next_multiple_of(align);
        let capacity = whole.len().saturating_sub(base - start) / align * align;
        if capacity == 0 {
            return Err(Error::Config(format!(
                "gpu{index}: a pool of {} bytes holds no {align}-byte granule",
                whole.len()
            )));
        }
        Ok(RuntimeGpu {
            index,
            space: Arc::new(GpuSpace {
                gpu,
                whole,
                base,
                capacity,
            }),
        })
    }
}

impl GpuSpace {
    /// The pool range of `len` bytes at device address `addr`.
    fn range(&self, addr: usize, len: usize) -> std::result::Result<DevRange, BackendError> {
        let arena = self.gpu.memory().arena().base() as usize;
        addr.checked_sub(arena)
            .map(|offset| DevRange::new(offset, len))
            .filter(|r| {
                r.end()
                    .is_some_and(|end| end <= self.whole.offset() + self.whole.len())
            })
            .ok_or_else(|| BackendError::OutOfRange {
                addr,
                len,
                memory: format!("{}'s pool", self.gpu.name()),
            })
    }
}

impl DeviceMemory for GpuSpace {
    fn base(&self) -> usize {
        self.base
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn copy_in(&self, addr: usize, src: &[u8]) -> std::result::Result<(), BackendError> {
        let range = self.range(addr, src.len())?;
        self.gpu
            .memory()
            .copy_to_device_async(range, src)
            .and_then(|event| event.wait())
            .map_err(BackendError::driver)
    }

    fn copy_out(&self, addr: usize, dst: &mut [u8]) -> std::result::Result<(), BackendError> {
        let range = self.range(addr, dst.len())?;
        self.gpu
            .memory()
            .copy_to_host(range, dst)
            .map_err(BackendError::driver)
    }

    fn fill_zero(&self, addr: usize, len: usize) -> std::result::Result<(), BackendError> {
        let range = self.range(addr, len)?;
        self.gpu
            .memory()
            .fill_zero(range)
            .and_then(|event| event.wait())
            .map_err(BackendError::driver)
    }

    /// GPU to GPU: a peer copy (through the host by the driver where the pair has no peer
    /// access).
    fn copy_to_peer(
        &self,
        src: usize,
        peer: &dyn DeviceMemory,
        dst: usize,
        len: usize,
    ) -> Option<std::result::Result<(), BackendError>> {
        let peer = peer.as_any().downcast_ref::<GpuSpace>()?;
        Some((|| {
            let from = self.range(src, len)?;
            let to = peer.range(dst, len)?;
            self.gpu
                .memory()
                .copy_to_peer(from, peer.gpu.memory(), to)
                .and_then(|event| event.wait())
                .map_err(BackendError::driver)
        })())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Backend for RuntimeGpu {
    fn device(&self) -> Device {
        Device::Gpu(self.index)
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        Some(SpaceSpec {
            name: self.space.gpu.name().to_string(),
            pool_bytes: self.space.capacity,
            link: PCIE_GEN5,
            simulate: false,
            fail_copies: false,
            host_mapped: false,
            memory: SpaceMemory::Device(self.space.clone()),
        })
    }

    fn arg_form(&self) -> ArgForm {
        ArgForm::Device
    }

    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&*self.space)
    }

    fn completion(&self) -> std::result::Result<(), BackendError> {
        self.space.gpu.completion().map_err(BackendError::driver)
    }
}

/// The GPU a device implementation runs on.
fn space<'c>(ctx: &'c KernelCtx<'_>) -> Result<&'c GpuSpace> {
    ctx.device_handle::<GpuSpace>()
        .ok_or_else(|| Error::Kernel {
            api: "gpu built-in",
            device: ctx.device(),
            source: BackendError::Invalid("the device is not a CUDA GPU".to_string()),
        })
}

/// Launches `op` on the GPU with the given argument addresses; the runtime's completion check
/// waits for it and reports how it ended.
fn launch(
    ctx: &KernelCtx<'_>,
    op: GpuOp,
    inputs: &[(usize, usize)],
    output: (usize, usize),
) -> Result<()> {
    let gpu = space(ctx)?;
    let range = |(addr, len): (usize, usize)| {
        gpu.range(addr, len).map_err(|source| Error::Kernel {
            api: op.name(),
            device: ctx.device(),
            source,
        })
    };
    let inputs = inputs
        .iter()
        .map(|&a| range(a))
        .collect::<Result<Vec<_>>>()?;
    gpu.gpu.kernels().run(&op, &inputs, range(output)?)?;
    Ok(())
}

fn arg<T>(s: &DevSlice<'_, T>) -> (usize, usize) {
    (s.addr(), s.bytes())
}

fn out<T>(s: &DevSliceMut<'_, T>) -> (usize, usize) {
    (s.addr(), s.bytes())
}

/// The `accepts` check of `fft` on a GPU: the sizes cuFFT transforms.
fn fft_fits(
    dev: &DeviceCtx<'_>,
    _dir: FftDirection,
    points: usize,
    _input: usize,
    _output: usize,
) -> std::result::Result<(), Refusal> {
    let gpu = dev
        .device_handle::<GpuSpace>()
        .ok_or_else(|| Refusal::new(format!("{} is not a CUDA GPU", dev.device())))?;
    Ok(gpu.gpu.check_fft(points)?)
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
    let batch = input.len() / points;
    let op = GpuOp::Fft {
        points,
        batch,
        direction: dir,
    };
    launch(ctx, op, &[arg(&input)], out(&output))
}

#[rimms_macros::kernel(api = apis::fft_in_place, device = gpu, accepts = fft_in_place_fits)]
fn fft_in_place(
    ctx: &KernelCtx,
    dir: FftDirection,
    points: usize,
    data: DevSliceMut<C32>,
) -> Result<()> {
    let op = GpuOp::Fft {
        points,
        batch: data.len() / points,
        direction: dir,
    };
    launch(ctx, op, &[out(&data)], out(&data))
}

#[rimms_macros::kernel(api = apis::zip, device = gpu)]
fn zip(
    ctx: &KernelCtx,
    op: ZipOp,
    a: DevSlice<C32>,
    b: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let len = a.len();
    launch(
        ctx,
        GpuOp::Zip { op, len },
        &[arg(&a), arg(&b)],
        out(&output),
    )
}

#[rimms_macros::kernel(api = apis::conj, device = gpu)]
fn conj(ctx: &KernelCtx, input: DevSlice<C32>, #[out] output: DevSliceMut<C32>) -> Result<()> {
    let len = input.len();
    launch(ctx, GpuOp::Conj { len }, &[arg(&input)], out(&output))
}

#[rimms_macros::kernel(api = apis::magnitude, device = gpu)]
fn magnitude(ctx: &KernelCtx, input: DevSlice<C32>, #[out] output: DevSliceMut<f32>) -> Result<()> {
    let len = input.len();
    launch(ctx, GpuOp::Magnitude { len }, &[arg(&input)], out(&output))
}

#[rimms_macros::kernel(api = apis::fftshift, device = gpu)]
fn fftshift(
    ctx: &KernelCtx,
    row_len: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    let op = GpuOp::FftShift {
        rows: input.len() / row_len,
        cols: row_len,
    };
    launch(ctx, op, &[arg(&input)], out(&output))
}

#[rimms_macros::kernel(api = apis::transpose, device = gpu)]
fn transpose(
    ctx: &KernelCtx,
    rows: usize,
    cols: usize,
    input: DevSlice<C32>,
    #[out] output: DevSliceMut<C32>,
) -> Result<()> {
    launch(
        ctx,
        GpuOp::Transpose { rows, cols },
        &[arg(&input)],
        out(&output),
    )
}

#[rimms_macros::kernel(api = apis::scale, device = gpu)]
fn scale(ctx: &KernelCtx, factor: C32, data: DevSliceMut<C32>) -> Result<()> {
    let len = data.len();
    launch(ctx, GpuOp::Scale { len, factor }, &[out(&data)], out(&data))
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
    launch(ctx, GpuOp::Gemm { m, k, n }, &[arg(&a), arg(&b)], out(&c))
}

/// Opens the GPUs a runtime asked for: `wanted` ordinals (each required), or every one the
/// driver reports if `None` (each optional: a GPU that cannot be used is logged and left out,
/// so a machine without a usable GPU gets none rather than an error).
///
/// GPU ordinal `n` is the device `gpu(n)` with the space `gpuN` whichever way it was asked
/// for, so `.gpu(1)` alone gives `Device::Gpu(1)`, and a device's name is the same in every
/// program on the machine.
pub(crate) fn open(
    wanted: Option<&[usize]>,
    config: super::MemoryConfig,
    granule: usize,
) -> Result<Vec<RuntimeGpu>> {
    let opened: Vec<CudaBackend> = match wanted {
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
                .map(|&i| CudaBackend::require(i, config))
                .collect::<Result<_>>()?
        }
        None => {
            let count = match super::probe_detailed()? {
                super::Probe::Found(info) => info.devices.len(),
                super::Probe::NoGpu(why) => {
                    tracing::info!("no GPU: {why}");
                    0
                }
            };
            let mut found = Vec::new();
            for i in 0..count {
                match CudaBackend::with_config(i, config) {
                    Ok(gpu) => found.extend(gpu),
                    // A mistake in the configuration is the caller's to hear about.
                    Err(e @ Error::Config(_)) => return Err(e),
                    Err(e) => tracing::warn!("gpu{i} is left out: {e}"),
                }
            }
            found
        }
    };
    opened
        .into_iter()
        .map(|gpu| {
            let n = u8::try_from(gpu.index()).map_err(|_| {
                Error::Config(format!(
                    "gpu{}: a runtime names GPUs 0 to {} only",
                    gpu.index(),
                    u8::MAX
                ))
            })?;
            RuntimeGpu::new(n, gpu, granule)
        })
        .collect()
}
