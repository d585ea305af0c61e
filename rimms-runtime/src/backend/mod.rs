//! Backends: the devices a runtime can run kernels on.
//!
//! Each backend says which device it is, which memory its kernels use (the host's, or a space
//! of its own with a link to the host), and how its kernels run. What a device cannot do is
//! its kernel implementations' business: each may have an `accepts` check
//! (`kernel::accepts`), which reaches the device through its handle. Backends
//! know nothing of coherence or of each other; the runtime puts them together.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "fpga")]
pub mod fpga;
pub mod host_kernels;
pub mod sim;

/// What backends report when they fail; its home is the vocabulary, `hal`.
pub use crate::hal::backend_error as error;
pub use crate::hal::BackendError;
use crate::hal::{Device, DeviceMemoryRef, Forms, MappedMemory};
use crate::space::LinkModel;
use std::any::Any;

/// A memory space a backend brings with it.
#[derive(Clone, Debug)]
pub(crate) struct SpaceSpec {
    pub name: String,
    pub pool_bytes: usize,
    /// The link to and from the host.
    pub link: LinkModel,
    /// Make copies over that link take the modelled time.
    pub simulate: bool,
    /// Copies over that link charge the modelled time to the virtual clock ([`crate::vclock`])
    /// instead of waiting it out, and their wall time is excluded (an emulated FPGA under a
    /// timing model).
    pub virtual_clock: bool,
    /// Fault injection: every copy to or from this space fails.
    pub fail_copies: bool,
    /// Where the space's bytes are. Devices whose specs name the same space share it.
    pub memory: SpaceBacking,
    /// The CPU can read and write this memory in place (a u-dma-buf region, the shared DRAM of
    /// an integrated GPU), so host access to data valid here needs no copy.
    pub host_mapped: bool,
}

/// Where a backend's space gets its bytes.
#[derive(Clone)]
pub(crate) enum SpaceBacking {
    /// An anonymous host region of the spec's `pool_bytes`, reserved by the runtime.
    Reserve,
    /// Memory the backend mapped into the host (a u-dma-buf region).
    // Only the FPGA stack maps memory today.
    #[cfg_attr(not(feature = "fpga"), allow(dead_code))]
    Mapped(MappedMemory),
    /// Memory only the backend reaches (a GPU's pool): copies and fills go through it, and the
    /// device's kernels get device addresses.
    Device(DeviceMemoryRef),
}

impl std::fmt::Debug for SpaceBacking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpaceBacking::Reserve => f.write_str("Reserve"),
            SpaceBacking::Mapped(m) => f.debug_tuple("Mapped").field(m).finish(),
            SpaceBacking::Device(d) => f
                .debug_struct("Device")
                .field("base", &format_args!("{:#x}", d.base()))
                .field("capacity", &d.capacity())
                .finish(),
        }
    }
}

/// One device of a runtime.
pub(crate) trait Backend: Send + Sync {
    /// Which device this is.
    fn device(&self) -> Device;
    /// The space its kernels use if it is not the host's.
    fn own_space(&self) -> Option<SpaceSpec>;
    /// How its kernels take their arguments: host slices, device slices where the CPU
    /// cannot address its memory, or device slices first where its engines write memory the
    /// CPU maps ([`Forms`]).
    fn arg_forms(&self) -> Forms;
    /// What its kernels reach through [`crate::KernelCtx::device_handle`], and its
    /// implementations' `accepts` checks through [`crate::DeviceCtx`] (an FPGA's accelerator
    /// driver, a sim's configuration); `None` for devices that need nothing more than memory.
    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        None
    }
    /// What its memory system moves at once, for the fragment-size rule
    /// ([`crate::hal::FragmentRule`]).
    fn grain(&self) -> crate::hal::DeviceGrain {
        crate::hal::DeviceGrain::CACHE_LINE_64
    }
    /// Reports how the kernel that just ran ended: where a real device reads its status
    /// registers or stream error, and where a sim device injects a fault.
    fn completion(&self) -> Result<(), BackendError>;
    /// Whether [`Backend::completion`] can report anything but success. A backend whose
    /// kernels are done when their call returns and cannot fault after it (the CPU) says no,
    /// and dispatch does not ask (read once, when the runtime is built).
    fn reports_completion(&self) -> bool {
        true
    }
}

/// A kernel's refusal of lengths its host kernel cannot take ([`host_kernels::shape`]), as the
/// call's shape error naming the API and the device.
#[inline]
pub(crate) fn shape_fits(
    ctx: &crate::hal::KernelCtx<'_>,
    api: &'static str,
    fits: std::result::Result<(), String>,
) -> crate::hal::Result<()> {
    match fits {
        Ok(()) => Ok(()),
        Err(what) => Err(shape_error(ctx, api, what)),
    }
}

/// Out of line, so that a check that passes costs a compare and a branch.
#[cold]
#[inline(never)]
fn shape_error(
    ctx: &crate::hal::KernelCtx<'_>,
    api: &'static str,
    what: String,
) -> crate::hal::Error {
    crate::hal::Error::Shape {
        api,
        device: ctx.device.into(),
        what,
    }
}
