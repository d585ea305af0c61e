//! The CUDA backend: one NVIDIA GPU as a device of the runtime, `gpu(n)`, with its own
//! memory space.
//!
//! Built on cudarc with *dynamic loading*: nothing links against CUDA, so the crate builds
//! with no toolkit, and a machine with no GPU gets a clean "no GPU" answer instead of a
//! panic — every path into the driver first checks that the library can be opened
//! ([`probe()`]). The pieces, each in its own module:
//!
//! - [`probe`](mod@probe): is there a driver, which devices, why not;
//! - [`libs`]: where NVRTC, cuFFT and nvJitLink of CUDA 12 or 13 are, and which were loaded
//!   (`nvrtc`, internal: our own calls into the NVRTC found);
//! - `device` (internal): `GpuBackend`, the `Backend` the runtime wires in as `gpu(n)`, and
//!   the device implementations of the built-in APIs;
//! - `space` (internal): the device's memory as a runtime space — one device allocation that
//!   the runtime's pool carves, and the copies and fills into it (`staging`: the pinned
//!   buffers copies in go through);
//! - [`kernels`]: the built-in APIs — `fft` through cuFFT with cached plans (`fft`), the
//!   rest as NVRTC-compiled kernels — and the NVRTC check that every kernel compiles;
//! - `stream` (internal): the device's two streams, compute (kernels, cuFFT) and copy
//!   (copies, fills), so copies overlap kernels;
//! - `ordering` (internal): which stream each operation goes on and what it records and
//!   waits for, over a trait that the real streams and a stream-ordering model (its tests)
//!   implement.
//!
//! The runtime is the way to use a GPU: `Runtime::builder().gpu(0)` (or `gpu_if_available`).

pub(crate) mod device;
mod fft;
pub mod kernels;
pub mod libs;
mod nvrtc;
mod ordering;
pub mod probe;
mod space;
mod staging;
mod stream;

pub use kernels::{compile_kernels, kernel_ptx, KERNEL_SOURCE};
pub use libs::{report as library_report, Found, LibraryReport, Loaded, LIB_DIRS_ENV};
pub use nvrtc::Compiled;
pub use probe::{
    cuda_version, driver_present, driver_version, libraries, no_gpu_reason, probe, probe_detailed,
    GpuDevice, GpuInfo, Libraries, Probe, MIN_DRIVER_VERSION, NO_GPU_ENV,
};

use crate::hal::BackendError;

/// Result of the CUDA driver's own calls: a [`BackendError`] when they fail.
pub(crate) type Result<T, E = BackendError> = std::result::Result<T, E>;

/// Why a CUDA library, device or compilation cannot be used, in words for the user: what
/// [`crate::Error::NoGpu`] and [`BackendError::Cuda`] show. A type of its own so that the reasons the probe,
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

/// A [`BackendError::Cuda`] for a failed call.
pub(crate) fn cuda_error(what: impl Into<String>, why: impl std::fmt::Display) -> BackendError {
    BackendError::Cuda {
        what: what.into().into_boxed_str(),
        why: why.to_string().into_boxed_str(),
    }
}

#[cfg(test)]
mod tests {
    /// The runtime keeps backends behind `Arc`s and calls them from any thread.
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::device::GpuBackend>();
        send_sync::<super::space::GpuSpace>();
    }
}
