//! Simulated discrete devices: a memory of their own (a separate host allocation), the CPU's
//! kernels run on it, real copies to and from it, optionally slowed to a modelled link.
//!
//! Every coherence test runs against sim devices: they have the one property that matters —
//! bytes written in one space are not visible in another until copied — and can play a
//! ZCU102- or PCIe-like platform on any machine. With `device_memory` (its memory, `vram.rs`) one plays a discrete GPU:
//! memory the CPU cannot address, reached through the backend, and kernels that take device
//! slices.

mod fft;
mod staged;
mod vram;

use super::{host_kernels, Backend, BackendError, SpaceBacking, SpaceSpec};
use crate::hal::{ArgForm, Device, Forms};
use crate::space::LinkModel;
use std::any::Any;
use std::sync::Arc;
use vram::SimVram;

/// How a simulated device looks.
///
/// `SimConfig::default()` is a discrete accelerator on a PCIe-4-like link
/// ([`LinkModel::PCIE`]: 5 µs per copy, 12 GB/s, used to rank copy sources but not slept
/// through, `simulate_link: false`), with a 256 MiB pool (`pool_bytes: 256 << 20`), no FFT
/// limit, no injected faults, and memory that is neither host-mapped nor device-only: its
/// kernels are the CPU's, run on its own copies of the data.
///
/// ```
/// use rimms_runtime::{LinkModel, SimConfig};
/// let d = SimConfig::default();
/// assert_eq!((d.link, d.simulate_link, d.pool_bytes), (LinkModel::PCIE, false, 256 << 20));
/// assert_eq!(d.max_fft_points, None);
/// assert!(!(d.fail_kernels || d.fail_copies || d.host_mapped || d.device_memory));
/// // A device like an FPGA FFT core: 2,048 points at most, on a slow link.
/// let fpga_like = SimConfig { max_fft_points: Some(2048), link: LinkModel::ZYNQ_HP, ..d };
/// # let _ = fpga_like;
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Its link to the host: used to rank copy sources, and to time copies if `simulate_link`.
    /// Within [`LinkModel`]'s bounds (1 kB/s to 10 TB/s, at most 1 s of latency), or the
    /// build fails naming this sim.
    pub link: LinkModel,
    /// Make every copy to or from this device take the link's modelled time.
    pub simulate_link: bool,
    /// Size of its memory pool.
    pub pool_bytes: usize,
    /// Largest FFT it accepts, like an FPGA IP core limited to 2,048 points; `None` for no
    /// limit.
    pub max_fft_points: Option<usize>,
    /// Fault injection: every kernel on this device reports failure after it ran (its
    /// outputs are then untrusted).
    pub fail_kernels: bool,
    /// Fault injection: every copy to or from this device fails.
    pub fail_copies: bool,
    /// Its memory is also mapped into the host, as on an integrated GPU sharing DRAM: host code
    /// and CPU kernels then use data valid there in place instead of copying it.
    pub host_mapped: bool,
    /// Its memory is not host-addressable, as a discrete GPU's: the runtime reaches it only
    /// through copies the backend makes, and its kernels take `DevSlice`s (the built-ins read
    /// their inputs back, run the CPU's kernel and write the outputs). Excludes `host_mapped`.
    pub device_memory: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            link: LinkModel::PCIE,
            simulate_link: false,
            pool_bytes: 256 << 20,
            max_fft_points: None,
            fail_kernels: false,
            fail_copies: false,
            host_mapped: false,
            device_memory: false,
        }
    }
}

pub(crate) struct SimBackend {
    index: u8,
    state: SimState,
}

/// What a sim's kernels and checks reach through its handle: its configuration (the FFT
/// limit) and the plans of its FFTs, which run the CPU's.
pub(crate) struct SimState {
    pub(crate) config: SimConfig,
    pub(crate) plans: host_kernels::FftPlans,
}

impl SimBackend {
    pub(crate) fn new(index: u8, config: SimConfig) -> SimBackend {
        SimBackend {
            index,
            state: SimState {
                config,
                plans: host_kernels::FftPlans::new(),
            },
        }
    }
}

impl Backend for SimBackend {
    fn device(&self) -> Device {
        Device::Sim(self.index)
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        Some(SpaceSpec {
            name: format!("sim{}", self.index),
            pool_bytes: self.state.config.pool_bytes,
            link: self.state.config.link,
            simulate: self.state.config.simulate_link,
            virtual_clock: false,
            fail_copies: self.state.config.fail_copies,
            host_mapped: self.state.config.host_mapped,
            memory: if self.state.config.device_memory {
                SpaceBacking::Device(Arc::new(SimVram::new(
                    self.index,
                    self.state.config.pool_bytes,
                )))
            } else {
                SpaceBacking::Reserve
            },
        })
    }

    fn arg_forms(&self) -> Forms {
        if self.state.config.device_memory {
            Forms::Only(ArgForm::Device)
        } else {
            Forms::Only(ArgForm::Host)
        }
    }

    /// Its configuration, where its FFT implementations' checks read its limit, and its FFT
    /// plans.
    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&self.state)
    }

    fn completion(&self) -> Result<(), BackendError> {
        if self.state.config.fail_kernels {
            Err(BackendError::InjectedFault("kernel"))
        } else {
            Ok(())
        }
    }
}
