//! Finding GPUs without tripping over a missing CUDA installation.
//!
//! cudarc is built with dynamic loading, so nothing links against `libcuda`: the library is
//! opened on the first driver call, and if it is not there that call *panics* (it has no way
//! to return an error). So every way into the driver goes through [`driver_present`] first,
//! which only tries to open the library, and the kernels check NVRTC and cuFFT the same way
//! ([`libraries`]) before their first call. The answers are cached: a library is there or not
//! for the life of the process.
//!
//! Outcomes of [`probe`]:
//! - no driver library, no device, or `RIMMS_NO_GPU` set: `Ok(None)`, with the reason from
//!   [`probe_detailed`] or [`no_gpu_reason`];
//! - a driver that is there but refuses to start for another reason (a driver older than the
//!   library, a broken installation): an error, because a user who has a GPU wants to hear
//!   why it cannot be used rather than silently run on the CPU.
//!
//! As a last guard, the enumeration runs under `catch_unwind`, so a cudarc panic we did not
//! foresee (say, a symbol missing from a very old driver) becomes an error instead of
//! unwinding into the caller.

use super::cuda_error;
use crate::error::Result;
use cudarc::driver::{result, sys, DriverError};
use std::sync::OnceLock;

/// Setting this environment variable (to anything but `0` or empty) makes the probe report no
/// GPU, as if none were installed: for tests and runs that must stay on the CPU.
pub const NO_GPU_ENV: &str = "RIMMS_NO_GPU";

/// One CUDA device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDevice {
    /// Driver ordinal, the `n` of `gpu(n)`.
    pub index: usize,
    /// Marketing name, as the driver reports it.
    pub name: String,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// Driver API version, as `cuDriverGetVersion` reports it (12060 is CUDA 12.6).
    pub driver_version: i32,
    /// Every device the driver sees, in ordinal order.
    pub devices: Vec<GpuDevice>,
}

/// The probe's answer with the reason when there is no GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// At least one device.
    Found(GpuInfo),
    /// None, and why.
    NoGpu(String),
}

/// Which CUDA libraries can be opened. The driver is needed for anything; NVRTC (kernels) and
/// cuFFT (`fft`) for a [`CudaBackend`](super::CudaBackend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Libraries {
    /// `libcuda` (the driver, installed with the NVIDIA kernel driver).
    pub driver: bool,
    /// `libnvrtc` (CUDA toolkit runtime libraries).
    pub nvrtc: bool,
    /// `libcufft` (CUDA toolkit runtime libraries).
    pub cufft: bool,
}

/// Whether the CUDA driver library can be opened. Cached after the first call.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: this only opens the shared library (running its initialisers) and closes it
    // again, which is what using CUDA at all does; no symbol of it is called.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Which of the libraries the backend uses can be opened. Cached after the first call.
pub fn libraries() -> Libraries {
    static NVRTC: OnceLock<bool> = OnceLock::new();
    static CUFFT: OnceLock<bool> = OnceLock::new();
    Libraries {
        driver: driver_present(),
        // SAFETY: as in `driver_present`: open and close the library, call nothing in it.
        nvrtc: *NVRTC.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() }),
        // SAFETY: as above.
        cufft: *CUFFT.get_or_init(|| unsafe { cudarc::cufft::sys::is_culib_present() }),
    }
}

/// Why the backend's libraries beyond the driver cannot be used, if they cannot.
pub(crate) fn missing_toolkit_libraries() -> Option<String> {
    let libs = libraries();
    let mut missing = Vec::new();
    if !libs.nvrtc {
        missing.push("libnvrtc (NVRTC, to compile the kernels)");
    }
    if !libs.cufft {
        missing.push("libcufft (cuFFT, for fft)");
    }
    if missing.is_empty() {
        None
    } else {
        Some(format!(
            "a GPU is present but {} could not be loaded: install the CUDA 12 runtime \
             libraries or add their folder to LD_LIBRARY_PATH",
            missing.join(" and ")
        ))
    }
}

/// The reason `RIMMS_NO_GPU` gives, if it is set.
fn forced_off() -> Option<String> {
    match std::env::var(NO_GPU_ENV) {
        Ok(v) if !v.is_empty() && v != "0" => Some(format!("{NO_GPU_ENV}={v} is set")),
        _ => None,
    }
}

/// Finds the GPUs: `Ok(None)` when there are none (see [`probe_detailed`] for why), an error
/// only for an installation that is there but broken. Never panics.
pub fn probe() -> Result<Option<GpuInfo>> {
    Ok(match probe_detailed()? {
        Probe::Found(info) => Some(info),
        Probe::NoGpu(_) => None,
    })
}

/// Why there is no usable GPU, or `None` when there is one. A broken installation gives its
/// error message as the reason.
pub fn no_gpu_reason() -> Option<String> {
    match probe_detailed() {
        Ok(Probe::Found(_)) => None,
        Ok(Probe::NoGpu(why)) => Some(why),
        Err(e) => Some(e.to_string()),
    }
}

/// Finds the GPUs, and says why when there are none. Never panics.
pub fn probe_detailed() -> Result<Probe> {
    if let Some(why) = forced_off() {
        return Ok(Probe::NoGpu(why));
    }
    if !driver_present() {
        return Ok(Probe::NoGpu(
            "the CUDA driver library (libcuda) could not be loaded: no NVIDIA driver is \
             installed, or it is not on the library path"
                .to_string(),
        ));
    }
    match std::panic::catch_unwind(enumerate) {
        Ok(outcome) => outcome,
        Err(payload) => Err(cuda_error(
            "device enumeration",
            format!("cudarc panicked: {}", panic_message(payload.as_ref())),
        )),
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Initialises the driver and lists the devices. Only called once the library is known to be
/// loadable.
fn enumerate() -> Result<Probe> {
    match result::init() {
        Ok(()) => {}
        Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => {
            return Ok(Probe::NoGpu(
                "the CUDA driver is installed but reports no device (cuInit: \
                 CUDA_ERROR_NO_DEVICE)"
                    .to_string(),
            ))
        }
        Err(e) => return Err(cuda_error("cuInit (driver start)", e)),
    }
    let count = result::device::get_count().map_err(|e| cuda_error("cuDeviceGetCount", e))?;
    if count <= 0 {
        return Ok(Probe::NoGpu(
            "the CUDA driver is installed but sees no device (cuDeviceGetCount = 0)".to_string(),
        ));
    }
    let mut driver_version = 0;
    // SAFETY: the driver is initialised and the out-pointer is a live local.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(|e| cuda_error("cuDriverGetVersion", e))?;
    let mut devices = Vec::with_capacity(count as usize);
    for ordinal in 0..count {
        let what = |call: &str| format!("{call} for device {ordinal}");
        let dev = result::device::get(ordinal).map_err(|e| cuda_error(what("cuDeviceGet"), e))?;
        let name =
            result::device::get_name(dev).map_err(|e| cuda_error(what("cuDeviceGetName"), e))?;
        // SAFETY: `dev` is a device handle the driver just returned.
        let total_memory = unsafe { result::device::total_mem(dev) }
            .map_err(|e| cuda_error(what("cuDeviceTotalMem"), e))?;
        let attr = |a: sys::CUdevice_attribute| {
            // SAFETY: as above.
            unsafe { result::device::get_attribute(dev, a) }
                .map_err(|e| cuda_error(what("cuDeviceGetAttribute"), e))
        };
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        devices.push(GpuDevice {
            index: ordinal as usize,
            name,
            total_memory,
            compute_capability: (major, minor),
        });
    }
    Ok(Probe::Found(GpuInfo {
        driver_version,
        devices,
    }))
}
