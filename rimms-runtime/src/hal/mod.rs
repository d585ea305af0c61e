//! The vocabulary every layer shares, and all a backend needs to know (wgpu-hal's shape):
//! devices and where a call runs ([`Device`], [`Target`], [`ArgForm`]), what a backend
//! reports when it fails ([`BackendError`], the FPGA faults) and the crate's [`Error`] that
//! wraps it in one place (`Error::from_backend`), how spaces are named ([`SpaceId`], [`SpaceName`], [`SpaceSet`]), the memory a
//! backend hands the runtime ([`DeviceMemory`], [`MappedMemory`]), what a kernel sees while it
//! runs (its context, its values and operations, [`DevSlice`]s), and the registry that API
//! declarations and kernel implementations enter (with each argument's [`Access`] mode).
//!
//! A leaf: nothing here imports the rest of the crate, so every layer — backends, spaces,
//! coherence, the runtime — can speak it without importing another layer, and no import cycle
//! can run through it. The items keep their public paths where they had them
//! (`rimms_runtime::space::SpaceId`, `rimms_runtime::kernel::KernelCtx`, …).

mod access;
pub mod backend_error;
mod ctx;
mod dev_slice;
mod device;
mod device_memory;
mod env_switch;
pub(crate) mod error;
mod fragment_rule;
mod ops;
pub(crate) mod registry;
mod space_id;
mod space_set;
mod value;

pub use access::Access;
pub use backend_error::BackendError;
#[cfg(feature = "fpga")]
pub use backend_error::FpgaFault;
pub(crate) use ctx::DeviceParts;
pub use ctx::{DeviceCtx, KernelCtx, Refusal};
pub use dev_slice::{DevSlice, DevSliceMut};
pub(crate) use device::Forms;
pub use device::{ArgForm, Device, DeviceKind, Target};
pub(crate) use device_memory::DeviceMemoryRef;
pub use device_memory::{DeviceMemory, MappedMemory};
pub(crate) use env_switch::{env_switch, NotASwitch};
pub(crate) use error::During;
pub use error::{Error, Result};
pub use fragment_rule::{DeviceGrain, FragmentRule};
pub use ops::{FftDirection, ZipOp};
pub use registry::{ApiDecl, ApiRegistration, ApiSpec, KernelImpl, TypedImpls};
pub use space_id::{SpaceId, SpaceName};
pub use space_set::{SpaceSet, MAX_SPACES};
pub use value::{assert_kernel_value, KernelValue};
