//! The CPU: host memory, kernels with rustfft and rayon.

pub mod kernels;

use super::{Backend, Executor, SpaceSpec};
use crate::runtime::Device;

pub(crate) struct CpuBackend;

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        None
    }

    fn check_fft(&self, _points: usize) -> Result<(), String> {
        Ok(())
    }

    fn executor(&self) -> Executor {
        Executor::Host
    }

    fn completion(&self) -> Result<(), String> {
        // Host kernels validate their shapes before they run and cannot fail after.
        Ok(())
    }
}
