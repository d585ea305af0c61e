//! What a kernel may ask of the runtime while it runs ([`KernelCtx`]), and what an
//! implementation's `accepts` check gets to decide whether its device takes a call
//! ([`DeviceCtx`], [`Refusal`]).
//!
//! A kernel reaches only its own arguments: host implementations get their slices, device
//! implementations get [`DevSlice`] / [`DevSliceMut`] handles, which only the runtime makes,
//! one per argument of the call. Reading or writing device memory goes through the context with
//! one of those handles, so a device kernel can neither touch another buffer's block nor write
//! an argument the call only reads.

use super::dev_slice::{DevSlice, DevSliceMut};
use crate::hal::BackendError;
use crate::hal::Device;
use crate::hal::DeviceMemory;
use crate::hal::{During, Error, Result};
use bytemuck::Pod;
use std::any::Any;

/// Where a kernel's context finds its device's parts (the device table's entry): asked only
/// when a kernel asks for them ([`KernelCtx::device_handle`], a device slice's access), since
/// most kernels never do and finding them was work on every call's path.
pub(crate) trait DeviceParts: Sync {
    /// The backend's handle, if it offers one.
    fn handle(&self) -> Option<&(dyn Any + Send + Sync)>;
    /// The device's memory, where the CPU cannot address it.
    fn memory(&self) -> Option<&dyn DeviceMemory>;
}

/// Handed to implementations that declare a `ctx: &KernelCtx` first parameter: the device the
/// call runs on, its backend's handle (a driver, or the host backends' FFT plans), and the way
/// into device memory for the call's own arguments. It names no backend's type: what a
/// backend keeps for its kernels it hands them through the handle.
pub struct KernelCtx<'a> {
    pub(crate) device: Device,
    /// Its backend's handle and its memory, where the CPU cannot address it.
    pub(crate) parts: &'a dyn DeviceParts,
}

impl KernelCtx<'_> {
    /// The device the call runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device's driver handle, if its backend offers one of type `T`. Only the built-in
    /// implementations use it: a driver reaches all of its device's memory, which a user's
    /// kernel must not. The host backends hand their FFT plans this way.
    pub(crate) fn device_handle<T: Any>(&self) -> Option<&T> {
        self.parts.handle().and_then(|h| h.downcast_ref::<T>())
    }

    fn memory(&self) -> Result<&dyn DeviceMemory> {
        self.parts.memory().ok_or_else(|| {
            self.failed(BackendError::Invalid(
                "the device has no device memory".to_string(),
            ))
        })
    }

    /// The crate's error for what this device's backend reported during a call of `api`
    /// (through [`Error::from_backend`]: a request it cannot take is [`Error::Unsupported`]).
    pub(crate) fn error(&self, api: &'static str, source: BackendError) -> Error {
        Error::from_backend(
            During::Kernel {
                api,
                device: self.device,
            },
            source,
        )
    }

    fn failed(&self, source: BackendError) -> Error {
        self.error("device memory access", source)
    }

    fn check_len(&self, device: usize, host: usize) -> Result<()> {
        if device != host {
            return Err(self.failed(BackendError::Invalid(format!(
                "the argument holds {device} elements but the host slice {host}"
            ))));
        }
        Ok(())
    }

    /// Reads a device argument of this call into `dst`, which must have its length.
    pub fn copy_from_device<T: Pod>(&self, src: &DevSlice<'_, T>, dst: &mut [T]) -> Result<()> {
        self.check_len(src.len(), dst.len())?;
        self.memory()?
            .copy_out(src.addr(), bytemuck::cast_slice_mut(dst))
            .map_err(|source| self.failed(source))
    }

    /// A device argument of this call, read back into a vector.
    pub fn read_device<T: Pod>(&self, src: &DevSlice<'_, T>) -> Result<Vec<T>> {
        let mut values = vec![T::zeroed(); src.len()];
        self.copy_from_device(src, &mut values)?;
        Ok(values)
    }

    /// Writes `src`, which must have the argument's length, into a written device argument of
    /// this call.
    pub fn copy_to_device<T: Pod>(&self, src: &[T], dst: &mut DevSliceMut<'_, T>) -> Result<()> {
        self.check_len(dst.len(), src.len())?;
        self.memory()?
            .copy_in(dst.addr(), bytemuck::cast_slice(src))
            .map_err(|source| self.failed(source))
    }
}

/// Handed to an implementation's `accepts` check
/// (`#[rimms::kernel(api = …, device = …, accepts = fits)]`): the device a call would run on,
/// asked before anything moves. The built-in implementations also reach their device's driver
/// through it (an FPGA core's limits come from the board's configuration).
pub struct DeviceCtx<'a> {
    pub(crate) device: Device,
    // Only the built-ins with limits (FPGA, CUDA, sim) read a handle.
    #[allow(dead_code)]
    pub(crate) handle: Option<&'a (dyn Any + Send + Sync)>,
}

impl DeviceCtx<'_> {
    /// The device asked.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device's driver handle or configuration, if its backend offers one of type `T`;
    /// for the built-in implementations only, as [`KernelCtx::device_handle`] is.
    #[allow(dead_code)]
    pub(crate) fn device_handle<T: Any>(&self) -> Option<&T> {
        self.handle.and_then(|h| h.downcast_ref::<T>())
    }
}

/// Why a device does not take a call: what an `accepts` check returns to refuse it. The call
/// then fails with [`Error::Unsupported`] naming the API, the device and this reason (or, placed
/// by the scheduler, goes to a device that accepts it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct Refusal {
    why: String,
}

impl Refusal {
    /// A refusal saying `why` ("4096-point FFT exceeds this device's limit of 2048 points").
    pub fn new(why: impl Into<String>) -> Refusal {
        Refusal { why: why.into() }
    }

    /// Why the device refused.
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl From<BackendError> for Refusal {
    /// A backend's report as a check's refusal: a request the device cannot take says why (the
    /// call's error names the API and the device), anything else says all it reported.
    fn from(error: BackendError) -> Refusal {
        match error {
            BackendError::Unsupported { why, .. } => Refusal::new(why),
            other => Refusal::new(other.to_string()),
        }
    }
}
