//! Kernels: the API registry, the dispatch core and the built-in APIs (one home each, in
//! `builtins/`).
//!
//! An API is a typed operation with one implementation per device kind. A call names its
//! device; dispatch then acquires every argument in that device's space with the access mode
//! the API's signature gives it (this is where data moves), runs the kernel, marks what it
//! wrote, and counts the call. In baseline mode the same calls copy every argument in and out
//! instead, as CEDR does.

pub(crate) mod accepts;
mod ahead;
mod api;
mod arg_names;
pub(crate) mod builtins;
mod capabilities;
mod choose;
mod custom;
mod device_args;
mod dispatch;
mod host_args;
pub mod merge;

pub(crate) use crate::hal::registry;

pub use crate::apis;
pub use crate::hal::{
    assert_kernel_value, ArgForm, DevSlice, DevSliceMut, DeviceCtx, FftDirection, KernelCtx,
    KernelValue, Refusal, ZipOp,
};
pub use crate::hal::{ApiDecl, ApiRegistration, ApiSpec, KernelImpl, TypedImpls};
pub use accepts::{arg_elements, check_as, Check};
pub(crate) use ahead::least_bytes_to_cut;
pub use api::Api;
pub(crate) use capabilities::of_devices as capabilities_of;
pub use capabilities::{Capabilities, ZipSupport, FFT_PROBE_MAX_LOG2, ZIP_PROBE_MAX};
pub use custom::call_registered;
pub(crate) use custom::launch_host;
pub use device_args::{DevArg, FormArgs};
pub use dispatch::KernelArg;
pub use host_args::HostArg;
pub use merge::{rules as merge_rules, Joins, MergeRule, MergedArgs, Params, UNMERGED_GROUP};
