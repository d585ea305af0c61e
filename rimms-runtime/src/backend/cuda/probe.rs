//! Finding GPUs without tripping over a missing CUDA installation.
//!
//! cudarc is built with dynamic loading, so nothing links against `libcuda`: the library is
//! opened on the first driver call, and if it is not there that call *panics* (it has no way
//! to return an error). So every way into the driver goes through [`driver_present`] first,
//! which only tries to open the library, and the kernels check NVRTC and cuFFT the same way
//! ([`libraries`]) before their first call. The answers are cached: a library is there or not
//! for the life of the process.
//!
//! Outcomes of [`probe`]: a list of devices, or `Ok(None)` with the reason from
//! [`probe_detailed`] or [`no_gpu_reason`]. Every way a machine can fail to offer a usable
//! GPU is such a reason, not an error: no driver library, `RIMMS_NO_GPU` set, no device, the
//! toolkit's stub `libcuda` found instead of the driver's, a driver older than the library,
//! a missing or mismatched kernel module, a library missing a symbol. A program that asks for
//! whatever GPUs there are (`gpu_if_available`) then runs on the CPU and logs why; one that
//! requires a GPU gets [`Error::NoGpu`](crate::Error::NoGpu) carrying the same reason.
//!
//! As a last guard, the enumeration runs under `catch_unwind`, so a cudarc panic we did not
//! foresee (say, a symbol missing from a very old driver) becomes a reason instead of
//! unwinding into the caller.

use super::Unusable;
use crate::hal::Result;
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

/// Which CUDA libraries can be used. The driver is needed for anything; NVRTC (kernels) and
/// cuFFT (`fft`) for a GPU device (`gpu(n)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Libraries {
    /// `libcuda` (the driver, installed with the NVIDIA kernel driver).
    pub driver: bool,
    /// `libnvrtc` (CUDA 12 or 13), found and opened.
    pub nvrtc: bool,
    /// `libcufft` (CUDA 12 or 13), found and opened.
    pub cufft: bool,
}

/// Whether the CUDA driver library can be opened. Cached after the first call.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: this only opens the shared library (running its initialisers) and closes it
    // again, which is what using CUDA at all does; no symbol of it is called.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// Which of the libraries the backend uses can be used: see [`super::libs::report`] for
/// which files, or where they were looked for. Found on the first call.
pub fn libraries() -> Libraries {
    let report = super::libs::report();
    Libraries {
        driver: driver_present(),
        nvrtc: super::nvrtc::Nvrtc::get().is_ok(),
        cufft: report.cufft.loaded().is_some(),
    }
}

/// Why the backend's libraries beyond the driver cannot be used, if they cannot.
pub(crate) fn missing_toolkit_libraries() -> Option<String> {
    let mut missing = Vec::new();
    if let Err(why) = super::nvrtc::Nvrtc::get() {
        missing.push(format!("NVRTC (to compile the kernels): {why}"));
    }
    if let super::libs::Found::Missing { why, looked_in } = &super::libs::report().cufft {
        missing.push(format!(
            "cuFFT (for fft): libcufft: {why}; looked in: {}",
            looked_in.join(", ")
        ));
    }
    if missing.is_empty() {
        None
    } else {
        Some(format!(
            "a GPU is present but the CUDA 12 or 13 libraries cannot be used: {}. Install \
             them (the toolkit, or pip's nvidia-cuda-nvrtc and nvidia-cufft) or name their \
             folder in {}",
            missing.join("; "),
            super::libs::LIB_DIRS_ENV
        ))
    }
}

/// The driver's CUDA version (13000 for 13.0), if there is a usable driver.
pub fn driver_version() -> Option<i32> {
    match probe_detailed() {
        Ok(Probe::Found(info)) => Some(info.driver_version),
        _ => None,
    }
}

/// The reason `RIMMS_NO_GPU` gives, if it is set.
fn forced_off() -> Option<String> {
    match std::env::var(NO_GPU_ENV) {
        Ok(v) if !v.is_empty() && v != "0" => Some(format!("{NO_GPU_ENV}={v} is set")),
        _ => None,
    }
}

/// Finds the GPUs: `Ok(None)` when there are none (see [`probe_detailed`] for why). Never
/// panics.
pub fn probe() -> Result<Option<GpuInfo>> {
    Ok(match probe_detailed()? {
        Probe::Found(info) => Some(info),
        Probe::NoGpu(_) => None,
    })
}

/// Why there is no usable GPU, or `None` when there is one.
pub fn no_gpu_reason() -> Option<String> {
    match probe_detailed() {
        Ok(Probe::Found(_)) => None,
        Ok(Probe::NoGpu(why)) => Some(why),
        Err(e) => Some(e.to_string()),
    }
}

/// Finds the GPUs, and says why when there are none. Never panics; the `Result` is kept for
/// callers written against earlier versions and is always `Ok`.
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
    Ok(match std::panic::catch_unwind(enumerate) {
        Ok(Ok(info)) => Probe::Found(info),
        Ok(Err(why)) => Probe::NoGpu(why.0),
        Err(payload) => Probe::NoGpu(format!(
            "the CUDA driver library (libcuda) cannot be used: {}",
            panic_message(payload.as_ref())
        )),
    })
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

/// The oldest driver the backend runs on: CUDA 12.0, the first that the driver calls of the
/// pinned CUDA 12 binding (and the kernels' PTX) are all known to work with.
pub const MIN_DRIVER_VERSION: i32 = 12000;

/// `12060` as `12.6`: how CUDA writes its versions.
pub fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Why `cuInit` failing with `e` means there is no usable GPU, in words a user can act on.
pub(crate) fn init_failure(e: DriverError) -> String {
    use sys::CUresult as R;
    let why = match e.0 {
        R::CUDA_ERROR_NO_DEVICE => "the CUDA driver is installed but reports no device",
        R::CUDA_ERROR_STUB_LIBRARY => {
            "the libcuda found is the CUDA toolkit's stub, not the driver's: no NVIDIA driver \
             is installed, or a stubs folder comes first on the library path"
        }
        R::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | R::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "the NVIDIA kernel module and the libcuda found are of different driver versions"
        }
        R::CUDA_ERROR_NOT_PERMITTED | R::CUDA_ERROR_OPERATING_SYSTEM => {
            "the operating system refused access to the GPU (device files or permissions)"
        }
        R::CUDA_ERROR_DEVICE_UNAVAILABLE | R::CUDA_ERROR_SYSTEM_NOT_READY => {
            "the GPU is unavailable (exclusive to another process, or the system is not ready)"
        }
        R::CUDA_ERROR_UNKNOWN => {
            "the CUDA driver could not start: the NVIDIA kernel module is probably not \
             loaded (check /dev/nvidia* and `nvidia-smi`)"
        }
        _ => "the CUDA driver could not start",
    };
    // The code's name only: the driver's own message would be one more call into a library
    // that has just failed to start (and that a stand-in may not even have).
    format!("{why} (cuInit: {:?})", e.0)
}

/// Initialises the driver and lists the devices, or says why there is no usable one. Only
/// called once the library is known to be loadable.
fn enumerate() -> std::result::Result<GpuInfo, Unusable> {
    result::init().map_err(init_failure)?;
    let call = |name: &str, e: DriverError| format!("the CUDA driver failed {name}: {:?}", e.0);
    let mut driver_version = 0;
    // SAFETY: the driver is initialised and the out-pointer is a live local.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(|e| call("cuDriverGetVersion", e))?;
    if driver_version < MIN_DRIVER_VERSION {
        return Err(format!(
            "the NVIDIA driver is too old: it supports CUDA {}, the backend needs {} or newer",
            cuda_version(driver_version),
            cuda_version(MIN_DRIVER_VERSION)
        )
        .into());
    }
    let count = result::device::get_count().map_err(|e| call("cuDeviceGetCount", e))?;
    if count <= 0 {
        return Err(
            "the CUDA driver is installed but sees no device (cuDeviceGetCount = 0)".into(),
        );
    }
    let mut devices = Vec::with_capacity(count as usize);
    for ordinal in 0..count {
        let what = |name: &str, e| call(&format!("{name} for device {ordinal}"), e);
        let dev = result::device::get(ordinal).map_err(|e| what("cuDeviceGet", e))?;
        let name = result::device::get_name(dev).map_err(|e| what("cuDeviceGetName", e))?;
        // SAFETY: `dev` is a device handle the driver just returned.
        let total_memory =
            unsafe { result::device::total_mem(dev) }.map_err(|e| what("cuDeviceTotalMem", e))?;
        let attr = |a: sys::CUdevice_attribute| {
            // SAFETY: as above.
            unsafe { result::device::get_attribute(dev, a) }
                .map_err(|e| what("cuDeviceGetAttribute", e))
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
    Ok(GpuInfo {
        driver_version,
        devices,
    })
}
