//! What a kernel may ask of the runtime while it runs.

use crate::backend::cpu::kernels::FftPlans;
use crate::runtime::Device;

/// Handed to implementations that declare a `ctx: &KernelCtx` first parameter: the device the
/// call runs on and the runtime's shared caches (FFT plans).
pub struct KernelCtx<'a> {
    pub(crate) device: Device,
    pub(crate) fft: &'a FftPlans,
}

impl KernelCtx<'_> {
    /// The device the call runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The runtime's FFT plan cache.
    pub fn fft_plans(&self) -> &FftPlans {
        self.fft
    }
}
