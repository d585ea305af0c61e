//! The CUDA backend: one NVIDIA GPU as a device with its own memory space.
//!
//! Built on cudarc with *dynamic loading*: nothing links against CUDA, so the crate builds
//! with no toolkit, and a machine with no GPU gets a clean "no GPU" answer instead of a
//! panic — every path into the driver first checks that the library can be opened
//! ([`probe()`]). The pieces, each in its own module:
//!
//! - [`probe`](mod@probe): is there a driver, which devices, why not;
//! - [`libs`]: where NVRTC, cuFFT and nvJitLink of CUDA 12 or 13 are, and which were loaded
//!   (`nvrtc`, internal: our own calls into the NVRTC found);
//! - [`memory`]: the device's memory space — one pool reserved up front and carved by the NF
//!   allocator, pinned staging for asynchronous copies, copies in, out, within and between
//!   GPUs;
//! - [`kernels`]: the built-in APIs — `fft` through cuFFT with cached plans, the rest as
//!   NVRTC-compiled kernels — on one compute stream;
//! - [`baseline`]: CEDR's copy-everything-every-call path, to measure against;
//! - `lanes` and `hazard` (internal): the four streams of a device, and the byte-range
//!   tracking that orders work across them so copies overlap kernels wherever the data
//!   allows.
//!
//! [`CudaBackend`] puts one device's pieces together; it is what the runtime wires in as a
//! `gpu(n)` device. Every operation is asynchronous on the GPU and returns a [`GpuEvent`]
//! (the `sync_async` style) except the plain host copies, which return when done.
//!
//! ```no_run
//! # fn main() -> rimms_runtime::Result<()> {
//! use rimms_runtime::backend::cuda::CudaBackend;
//! let Some(gpu) = CudaBackend::new(0, 256 << 20)? else {
//!     return Ok(()); // no GPU here; the reason went to the log
//! };
//! let x = gpu.memory().alloc(1024 * 8)?;
//! gpu.memory().copy_to_device(x.range(), &[0u8; 1024 * 8])?;
//! gpu.kernels()
//!     .fft(x.range(), x.range(), 1024, 1, rimms_runtime::FftDirection::Forward)?
//!     .wait()?;
//! gpu.memory().free(x)?;
//! # Ok(())
//! # }
//! ```

pub mod baseline;
pub(crate) mod device;
mod fft;
mod hazard;
pub mod kernels;
mod lanes;
pub mod libs;
pub mod memory;
mod nvrtc;
pub mod probe;
#[cfg(test)]
mod sim_streams;
mod staging;

pub use baseline::{run_baseline, BaselineAlloc};
pub use fft::FftPlan;
pub use kernels::{compile_kernels, kernel_ptx, GpuKernels, GpuOp, KERNEL_SOURCE};
pub use lanes::GpuEvent;
pub use libs::{report as library_report, Found, LibraryReport, Loaded, LIB_DIRS_ENV};
pub use memory::{DevRange, GpuAlloc, GpuMemory, MemoryConfig, MemoryUse, PendingRead};
pub use nvrtc::Compiled;
pub use probe::{
    cuda_version, driver_present, driver_version, libraries, no_gpu_reason, probe, probe_detailed,
    GpuDevice, GpuInfo, Libraries, Probe, MIN_DRIVER_VERSION, NO_GPU_ENV,
};

use crate::backend::BackendError;
use crate::error::{Error, Result};
use cudarc::driver::CudaContext;
use lanes::Lanes;
use std::sync::Arc;

/// An [`Error::Cuda`] for a failed call.
/// Why a CUDA library, device or compilation cannot be used, in words for the user: what
/// [`Error::NoGpu`] and [`Error::Cuda`] show. A type of its own so that the reasons the probe,
/// the library search and NVRTC give are not mistaken for any other text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unusable(pub(crate) String);

impl From<String> for Unusable {
    fn from(why: String) -> Unusable {
        Unusable(why)
    }
}

impl From<&str> for Unusable {
    fn from(why: &str) -> Unusable {
        Unusable(why.to_string())
    }
}

pub(crate) fn cuda_error(what: impl Into<String>, why: impl std::fmt::Display) -> Error {
    Error::Cuda {
        what: what.into(),
        why: why.to_string(),
    }
}

/// One GPU, ready to run: its memory space and its kernels.
///
/// Dropping it waits for all its work, then releases the plans, the kernels and the pool.
pub struct CudaBackend {
    info: GpuDevice,
    // Declared before `memory`, so plans and the module are released before the pool.
    kernels: GpuKernels,
    memory: GpuMemory,
    lanes: Arc<Lanes>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("info", &self.info)
            .field("memory", &self.memory)
            .field("kernels", &self.kernels)
            .finish()
    }
}

impl CudaBackend {
    /// Opens GPU `index` with a pool of `pool_bytes` and default unit and staging sizes.
    /// `Ok(None)` when there is no usable GPU `index` (no driver, no such device, no NVRTC or
    /// cuFFT library, or `RIMMS_NO_GPU` set); the reason is logged with `tracing` and
    /// available from [`CudaBackend::require`]'s error. Never panics.
    pub fn new(index: usize, pool_bytes: usize) -> Result<Option<CudaBackend>> {
        Self::with_config(index, MemoryConfig::new(pool_bytes))
    }

    /// [`CudaBackend::new`] with every size chosen.
    pub fn with_config(index: usize, config: MemoryConfig) -> Result<Option<CudaBackend>> {
        match Self::open(index, config)? {
            Ok(backend) => Ok(Some(backend)),
            Err(why) => {
                tracing::info!("gpu{index}: no GPU: {why}");
                Ok(None)
            }
        }
    }

    /// Opens GPU `index`, or fails with [`Error::NoGpu`] saying why there is none.
    pub fn require(index: usize, config: MemoryConfig) -> Result<CudaBackend> {
        Self::open(index, config)?.map_err(|why| Error::NoGpu { why: why.0 })
    }

    /// The backend, or why there is no usable GPU `index`.
    fn open(
        index: usize,
        config: MemoryConfig,
    ) -> Result<std::result::Result<CudaBackend, Unusable>> {
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
        // Every library is known to load, so cudarc has no reason to panic below; should one
        // of its calls panic anyway (a symbol missing from an old driver), report it as an
        // error rather than unwind into the caller.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Self::start(device, config)))
            .unwrap_or_else(|payload| {
                Err(cuda_error(
                    format!("opening gpu{index}"),
                    format!(
                        "cudarc panicked: {}",
                        probe::panic_message(payload.as_ref())
                    ),
                ))
            })
            .map(Ok)
    }

    fn start(info: GpuDevice, config: MemoryConfig) -> Result<CudaBackend> {
        let name = format!("gpu{}", info.index);
        let ctx = CudaContext::new(info.index)
            .map_err(|e| cuda_error(format!("creating the context of {name}"), e))?;
        let lanes = Arc::new(Lanes::new(ctx, &name)?);
        let memory = GpuMemory::new(info.index, lanes.clone(), config)?;
        let kernels = GpuKernels::new(memory.arena().clone())?;
        tracing::info!(
            "{name}: {} ({} MiB, compute {}.{}), pool {} MiB",
            info.name,
            info.total_memory >> 20,
            info.compute_capability.0,
            info.compute_capability.1,
            memory.capacity() >> 20
        );
        Ok(CudaBackend {
            info,
            kernels,
            memory,
            lanes,
        })
    }

    /// The device's ordinal, the `n` of `gpu(n)`.
    pub fn index(&self) -> usize {
        self.info.index
    }

    /// The device's name as a device and a space: `gpuN`.
    pub fn name(&self) -> &str {
        self.lanes.device()
    }

    /// What the driver says about the device.
    pub fn info(&self) -> &GpuDevice {
        &self.info
    }

    /// The device's memory space.
    pub fn memory(&self) -> &GpuMemory {
        &self.memory
    }

    /// The built-in APIs on the device.
    pub fn kernels(&self) -> &GpuKernels {
        &self.kernels
    }

    pub(crate) fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// cuFFT takes every size from 1 to `i32::MAX` points; say so before anything moves.
    pub fn check_fft(&self, points: usize) -> std::result::Result<(), BackendError> {
        if points == 0 || points > i32::MAX as usize {
            Err(BackendError::Unsupported(format!(
                "cuFFT transforms 1 to {} points, not {points}",
                i32::MAX
            )))
        } else {
            Ok(())
        }
    }

    /// Waits for the compute stream and reports how the kernels issued so far ended: `Ok`,
    /// or the asynchronous error one of them raised (an illegal address, a launch failure).
    pub fn completion(&self) -> Result<()> {
        self.lanes.compute_status()
    }

    /// Waits until every stream of the device is idle.
    pub fn synchronize(&self) -> Result<()> {
        self.lanes.synchronize_all()
    }

    /// Runs `op` the baseline way (see [`baseline`]).
    pub fn run_baseline(
        &self,
        op: &GpuOp,
        inputs: &[&[u8]],
        output: &mut [u8],
        alloc: BaselineAlloc,
    ) -> Result<()> {
        run_baseline(self, op, inputs, output, alloc)
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if let Err(e) = self.lanes.synchronize_all() {
            tracing::warn!("{}: work failed before shutdown: {e}", self.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime keeps backends behind `Arc`s and calls them from any thread.
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CudaBackend>();
        send_sync::<GpuMemory>();
        send_sync::<GpuKernels>();
        send_sync::<GpuEvent>();
        send_sync::<FftPlan>();
    }

    #[test]
    fn sub_ranges_stay_inside() {
        let r = DevRange::new(4096, 100);
        assert_eq!(r.sub(10, 90), Some(DevRange::new(4106, 90)));
        assert_eq!(r.sub(10, 91), None);
        assert_eq!(r.sub(usize::MAX, 1), None);
        assert_eq!(DevRange::new(usize::MAX, 1).sub(1, 0), None);
        assert!(r.overlaps(DevRange::new(4195, 1)));
        assert!(!r.overlaps(DevRange::new(4196, 1)));
    }
}
