//! Kernel calls by hand: [`KernelArg`] constructors, and the two entries
//! generated code uses — `Runtime::launch_host` for a one-off body and [`call_registered`] for
//! an API whose implementation is looked up per device kind.
//!
//! `launch_host` is a kernel call with a hand-written body (`Runtime::launch_host`).

use super::accepts::{self, Check};
use super::choose::choose_device;
use super::device_args::{DevArg, FormArgs};
use super::dispatch::{launch, KernelArg};
use super::host_args::{host_args, HostArg};
use super::registry::{ApiDecl, Typed};
use super::{Api, ApiSpec, DeviceCtx, KernelCtx, Refusal};
use crate::coherence::Access;
use crate::data::{HeteSlice, HeteSliceMut, Input, Output};
use crate::hal::BackendError;
use crate::hal::SpaceId;
use crate::hal::Target;
use crate::hal::{Device, During};
use crate::hal::{Error, Result};
use crate::machine::Runtime;
use bytemuck::Pod;

impl<'a> KernelArg<'a> {
    /// An argument the kernel only reads.
    pub fn read<T: Pod>(name: &'static str, view: &'a impl Input<T>) -> KernelArg<'a> {
        Self::reads(name, view.input())
    }

    /// [`KernelArg::read`] of a view held by value (a built-in's call description).
    pub(crate) fn reads<T: Pod>(name: &'static str, view: HeteSlice<'a, T>) -> KernelArg<'a> {
        let (start, len) = view.byte_range();
        KernelArg {
            name,
            raw: view.raw(),
            start,
            len,
            access: Access::Read,
            at: None,
        }
    }

    /// Where the kernel should access this argument when its device reaches several spaces
    /// (StarPU's `specific_nodes`): the CPU reads a u-dma-buf in place or in host memory, and
    /// this says which. The data is brought into `space` if it is not valid there. A space the
    /// device cannot reach fails the call, naming the argument, before anything moves.
    pub fn at(mut self, space: SpaceId) -> KernelArg<'a> {
        self.at = Some(space);
        self
    }

    /// An argument the kernel reads and changes.
    pub fn read_write<T: Pod>(name: &'static str, view: &'a mut impl Output<T>) -> KernelArg<'a> {
        Self::written(name, view, Access::ReadWrite)
    }

    /// An argument the kernel overwrites entirely without reading (write-discard).
    pub fn write<T: Pod>(name: &'static str, view: &'a mut impl Output<T>) -> KernelArg<'a> {
        Self::written(name, view, Access::Write)
    }

    fn written<T: Pod>(
        name: &'static str,
        view: &'a mut impl Output<T>,
        access: Access,
    ) -> KernelArg<'a> {
        Self::written_view(name, view.output(), access)
    }

    /// [`KernelArg::write`] of a view held by value (a built-in's call description).
    pub(crate) fn writes<T: Pod>(name: &'static str, view: HeteSliceMut<'a, T>) -> KernelArg<'a> {
        Self::written_view(name, view, Access::Write)
    }

    fn written_view<T: Pod>(
        name: &'static str,
        view: HeteSliceMut<'a, T>,
        access: Access,
    ) -> KernelArg<'a> {
        let (start, len) = view.as_slice().byte_range();
        KernelArg {
            name,
            raw: view.into_raw(),
            start,
            len,
            access,
            at: None,
        }
    }
}

/// A kernel call with a hand-written host body: `Runtime::launch_host`.
pub(crate) fn launch_host<const N: usize>(
    rt: &Runtime,
    device: Device,
    api: &'static ApiDecl,
    args: [KernelArg<'_>; N],
    body: impl FnOnce([HostArg<'_>; N]) -> Result<()>,
) -> Result<()> {
    let entry = rt.shared().device(device)?;
    if !entry.forms().runs_host_code() {
        return Err(host_body_on_device(api, device));
    }
    launch(rt.shared(), entry, Api::of(api), &args, |_, ptrs| {
        // SAFETY: `launch` acquired every argument for this call in a space of a
        // host-executor device (checked just above), and the buffers stay borrowed through
        // `args` for the call; see `host_args` for why written ones are exclusive.
        body(unsafe { host_args(*ptrs) })
    })
}

#[cold]
fn host_body_on_device(api: &ApiDecl, device: Device) -> Error {
    Error::Unsupported {
        api: api.name(),
        device,
        why: "its memory is not host-addressable, and `launch_host` runs host code; declare an API and implement it for the device with `DevSlice` arguments".to_string(),
    }
}

/// Calls the implementation of API `A` registered for the kind of the device `target` names,
/// or the scheduler picks: what `#[rimms::api]` functions expand to. `accepts` asks an
/// implementation's `accepts` check (a `fn` of the API's `Accepts` type behind `dyn Any`) about
/// this call, given the device and the arguments: the scheduler passes over devices that
/// refuse, and a named device that refuses fails the call before anything moves. `run` gets the
/// kernel context, and the implementation (a `fn` pointer of the API's signature: taking
/// slices, or its device form taking device slices) with the arguments in its form.
pub fn call_registered<const N: usize, A: ApiSpec>(
    rt: &Runtime,
    target: Target,
    args: [KernelArg<'_>; N],
    accepts: impl Fn(&DeviceCtx<'_>, Check, &[KernelArg<'_>; N]) -> std::result::Result<(), Refusal>,
    run: impl FnOnce(&KernelCtx<'_>, FormArgs<'_, N, A::Signature, A::DeviceSignature>) -> Result<()>,
) -> Result<()> {
    let implementations = A::implementations();
    let api = implementations.decl();
    // The API's index is asked where it is needed, not kept from here: a call on a named
    // device needs it only for its count, at the end, which loads it again anyway.
    let (entry, chosen) = choose_device(
        rt.shared(),
        target,
        Api::of(api),
        || &args,
        |entry| accepts::ask(entry, api.index(), |dev, check| accepts(dev, check, &args)).is_ok(),
    )?;
    let device = entry.device();
    let Some(registered) = implementations.registered(device.kind(), entry.forms()) else {
        return Err(Error::NoImplementation {
            api: api.name(),
            device: device.into(),
            available: rt.shared().registry().describe(api.index()),
        });
    };
    // A device the scheduler picked has passed the check; one the caller named is asked now.
    if let (None, Some(check)) = (&chosen, registered.accepts) {
        accepts(&DeviceCtx::of(entry), check, &args)
            .map_err(|why| accepts::refused(api.name(), device, why))?;
    }
    // The implementation as the signature the caller was compiled against, checked before
    // anything moves. The macros check signatures at compile time, so a mismatch means two APIs
    // were registered under one declaration by hand.
    let Some(implementation) = registered.func else {
        return Err(not_the_signature(api, device));
    };
    launch(rt.shared(), entry, Api::of(api), &args, |dev, ptrs| {
        let ctx = KernelCtx { device, parts: dev };
        let placed = match implementation {
            // SAFETY: a host-form implementation is found only for a device that runs host
            // code (`TypedImpls::registered`, which picks as `Registry::registered` does),
            // whose spaces are host-addressable; `launch` acquired every argument there for
            // this call, and the buffers stay borrowed through `args`; see `host_args` for why
            // written ones are exclusive.
            Typed::Host(f) => FormArgs::Host(f, unsafe { host_args(*ptrs) }),
            Typed::Device(f) => FormArgs::Device(f, DevArg::all(*ptrs)),
        };
        run(&ctx, placed)
    })
}

#[cold]
fn not_the_signature(api: &ApiDecl, device: Device) -> Error {
    Error::from_backend(
        During::Kernel {
            api: api.name(),
            device,
        },
        BackendError::Invalid(
            "the registered implementation does not have the API's signature".to_string(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::registry::{ApiRegistration, KernelImpl, TypedImpls};
    use crate::hal::{ArgForm, DeviceKind};
    use crate::HeteData;
    use std::cell::Cell;

    /// An API whose CPU implementation was registered by hand with another signature than the
    /// one its callers are compiled against.
    static MISMATCHED: ApiDecl = ApiDecl::new("mismatched");

    type Registered = fn(&KernelCtx<'_>, u32) -> Result<()>;
    type Expected = fn(&KernelCtx<'_>, &[u32]) -> Result<()>;

    fn registered(_: &KernelCtx<'_>, _: u32) -> Result<()> {
        Ok(())
    }

    static REGISTERED: Registered = registered;

    /// The API as its callers are compiled against it.
    enum Mismatched {}

    static IMPLEMENTATIONS: TypedImpls<Expected, Registered> = TypedImpls::new(&MISMATCHED);

    impl ApiSpec for Mismatched {
        type Signature = Expected;
        type DeviceSignature = Registered;
        type Accepts = fn(&DeviceCtx<'_>, usize) -> std::result::Result<(), Refusal>;
        const MODES: &'static [Access] = &[Access::Read];
        fn decl() -> &'static ApiDecl {
            &MISMATCHED
        }
        fn implementations() -> &'static TypedImpls<Expected, Registered> {
            &IMPLEMENTATIONS
        }
    }

    inventory::submit! { ApiRegistration(&MISMATCHED) }
    inventory::submit! {
        KernelImpl {
            api: &MISMATCHED,
            device: DeviceKind::Cpu,
            form: ArgForm::Host,
            func: &REGISTERED,
            accepts: None,
        }
    }

    /// The implementation is checked against the caller's signature for its form (here the
    /// host form, whose signature differs; the device form's is the registered one) before
    /// the kernel is reached: the call fails, naming the mismatch, and runs nothing.
    #[test]
    fn an_implementation_of_another_signature_fails_the_call_before_it_runs() {
        let rt = crate::runtime::small_test_runtime();
        let x = HeteData::from_slice(&rt, &[1u32; 4]).expect("x");
        let ran = Cell::new(false);
        let err = call_registered::<1, Mismatched>(
            &rt,
            Device::Cpu.into(),
            [KernelArg::read("x", &x)],
            |_, _, _| Ok(()),
            |_, _| {
                ran.set(true);
                Ok(())
            },
        )
        .expect_err("the registered implementation has another signature");
        assert!(
            err.to_string()
                .contains("does not have the API's signature"),
            "{err}"
        );
        assert!(!ran.get());
    }
}
