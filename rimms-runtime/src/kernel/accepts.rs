//! Device limits as part of an implementation:
//! `#[rimms::kernel(api = …, device = fpga, accepts = fits)]` registers `fits` beside the
//! implementation, so any API — a user's as well as a built-in — can say which calls a kind of
//! device takes (an FFT core's sizes, a ZIP core's operations), consulting the device itself.
//!
//! A call asks the check of the implementation its device would run before anything moves:
//! the scheduler passes over devices that refuse, and a call on a named device that refuses
//! fails with [`Error::Unsupported`] naming the API, the device and why. `Runtime::capabilities`
//! reports the built-ins' limits by asking the same checks, so the report cannot drift from
//! what calls do.

use super::dispatch::KernelArg;
use super::registry::{registry, Registered};
use crate::hal::Device;
use crate::hal::Error;
use crate::hal::{DeviceCtx, Refusal};
use crate::machine::DeviceEntry;
use bytemuck::Pod;
use std::any::Any;

/// A registered `accepts` check: a `fn` of its API's
/// [`ApiSpec::Accepts`](super::ApiSpec::Accepts) type behind `dyn Any`.
pub type Check = &'static (dyn Any + Send + Sync);

/// The check as the `fn` type `F` the caller was compiled against. The macros check the
/// check's signature at compile time, so a mismatch means an API's checks were registered by
/// hand under the wrong declaration; such a check refuses every call.
pub fn check_as<F: Any + Copy>(check: Check) -> Result<F, Refusal> {
    check
        .downcast_ref::<F>()
        .copied()
        .ok_or_else(|| Refusal::new("its `accepts` check does not have the API's signature"))
}

/// The length in elements of `T` of a call's argument: what a check gets for each buffer.
pub fn arg_elements<T: Pod>(arg: &KernelArg<'_>) -> usize {
    // A zero-sized element type has no bytes to count; such a buffer holds nothing to move.
    arg.len.checked_div(std::mem::size_of::<T>()).unwrap_or(0)
}

impl DeviceCtx<'_> {
    /// What a check on `entry`'s device gets.
    pub(crate) fn of(entry: &DeviceEntry) -> DeviceCtx<'_> {
        DeviceCtx {
            device: entry.device(),
            handle: entry.backend().handle(),
        }
    }
}

/// Asks the check of the implementation of API number `index` that `entry`'s device runs:
/// `ask` calls it with the call's values. A device whose implementation has no check (or that
/// has no implementation, which the caller reports) takes the call.
pub(crate) fn ask(
    entry: &DeviceEntry,
    index: usize,
    ask: impl FnOnce(&DeviceCtx<'_>, Check) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    match registry().registered(index, entry.device().kind(), entry.forms()) {
        Some(&Registered {
            accepts: Some(check),
            ..
        }) => ask(&DeviceCtx::of(entry), check),
        _ => Ok(()),
    }
}

/// The error of a call `device` refused.
#[cold]
pub(crate) fn refused(api: &'static str, device: Device, refusal: Refusal) -> Error {
    Error::Unsupported {
        api,
        device,
        why: refusal.to_string(),
    }
}
