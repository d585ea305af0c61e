//! What a kernel may ask of the runtime while it runs.

use crate::backend::cpu::kernels::FftPlans;
use crate::runtime::Device;
use crate::space::DeviceMemory;
use std::any::Any;

/// Handed to implementations that declare a `ctx: &KernelCtx` first parameter: the device the
/// call runs on and the runtime's shared caches (FFT plans).
pub struct KernelCtx<'a> {
    pub(crate) device: Device,
    pub(crate) fft: &'a FftPlans,
    pub(crate) handle: Option<&'a (dyn Any + Send + Sync)>,
    /// The device's memory, where the CPU cannot address it.
    pub(crate) memory: Option<&'a dyn DeviceMemory>,
}

impl KernelCtx<'_> {
    /// The device the call runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device's driver handle, if its backend offers one of type `T` (an FPGA
    /// accelerator for `fpga(n)` devices).
    pub fn device_handle<T: Any>(&self) -> Option<&T> {
        self.handle.and_then(|h| h.downcast_ref::<T>())
    }

    /// The device's memory where the CPU cannot address it (`None` elsewhere): how a device
    /// implementation without a driver of its own reads and writes its `DevSlice`s.
    pub fn device_memory(&self) -> Option<&dyn DeviceMemory> {
        self.memory
    }

    /// The runtime's FFT plan cache.
    pub fn fft_plans(&self) -> &FftPlans {
        self.fft
    }
}
