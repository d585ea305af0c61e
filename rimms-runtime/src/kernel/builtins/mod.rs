//! The built-in APIs, one home each: `fft.rs`, `zip.rs`, … hold everything the runtime knows
//! of one built-in beyond its declaration and its implementations — the one description of
//! its call (a struct of its scalars and views), its shape check, the `accepts` checks a scope
//! asks at submission, its merge rules and, where [`crate::Capabilities`] reports one, its
//! capability probe.
//!
//! What stays elsewhere, and why:
//!
//! - **The declaration** (`#[rimms::api] pub fn zip(…);`) stays in `apis.rs`: the backends
//!   register their implementations against it and may import only the vocabulary (`hal`),
//!   `apis`, `space`'s link model and `input_file`, never `kernel` (the layers test checks it).
//!   A declaration here would make `apis` import `kernel`, which imports `apis`: a cycle.
//! - **The public methods** (`Runtime::zip` in `runtime/builtins.rs`, `Scope::zip` in
//!   `scope/calls.rs`) are one-line forwards: each builds the call's description and hands it
//!   to the one generic path of its kind ([`call`] for the handle, `Scope::builtin` for a
//!   scope), so a built-in's checks and its arguments exist once, here. They cannot live here:
//!   `scope` imports `kernel`, and the handle's public methods are the top layer's.
//! - **The generic machinery**: merging (`merge.rs`: [`Group`](super::merge), [`MergeRule`]),
//!   the capability table's walk and its report (`capabilities.rs`), the cost tables (which
//!   take any API's name) and dispatch.
//!
//! # Adding a built-in
//!
//! A built-in `negate` (`out = -input`) that the handle and scopes offer, merged in a scope:
//!
//! 1. its declaration in `apis.rs`:
//!    `#[rimms_macros::api] pub fn negate(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [C32]) -> Result<()>;`
//! 2. its home, `kernel/builtins/negate.rs` (and its `mod negate;` line below): a struct
//!    `Negate<'a> { input: HeteSlice<'a, C32>, out: HeteSliceMut<'a, C32> }` that implements
//!    [`Builtin`] (its declaration, its shape check, the call of `apis::negate`) and
//!    [`ScopeCall`] (its merge rules, its parameters, its arguments as [`KernelArg`]s and its
//!    shape check asked of them; both checks call one function of the lengths). An
//!    element-wise built-in of one complex input, as `negate` is, needs one line:
//!    `element_wise_kind!(Negate = negate -> C32)` (its kind, declaration and output element;
//!    [`element_wise::ElementWise`]), as `conj`, `magnitude` and `power` are. Either way it
//!    gets a [`BuiltinId`] of its own (`Negate`: the kind's name, for an element-wise one);
//! 3. its public methods, one line each: `builtins::call(self, device.into(), Negate { input:
//!    input.input(), out: out.output() })` in `runtime/builtins.rs` (or
//!    `self.element_wise::<Negate>(…)`), and `self.builtin(device, Negate { … })` in
//!    `scope/calls.rs`;
//! 4. its implementations (`#[rimms::kernel(api = apis::negate, device = cpu)]` in
//!    `backend/host_kernels.rs`, and where other kinds have one), and its row in the facade's
//!    table of what each device runs (`src/lib.rs`).
//!
//! Nothing else changes: the registry collects the declaration and its implementations, the
//! capability report lists it for the devices that implement it, the scheduler and the cost
//! tables know it by its name, and merging, scope submission and dispatch are generic. The
//! unit test `tests.rs` of this folder adds such a built-in (`toy`) the same way and checks its
//! results, direct and merged in a scope, against a reference computed on the host.

use super::ahead;
use super::merge::{MergeRule, Params, Part};
use super::{ApiDecl, KernelArg};
use crate::hal::{Device, Error, Result, Target};
use crate::machine::{Runtime, Shared};

pub(crate) mod conj;
pub(crate) mod element_wise;
pub(crate) mod fft;
pub(crate) mod fft_in_place;
pub(crate) mod fftshift;
pub(crate) mod gemm;
pub(crate) mod magnitude;
pub(crate) mod power;
pub(crate) mod scale;
pub(crate) mod transpose;
pub(crate) mod window;
pub(crate) mod zip;
pub(crate) mod zip_rows;

#[cfg(test)]
mod tests;

/// One call of a built-in API, as its typed method got it: the scalars and the views.
pub(crate) trait Builtin: Sized {
    /// The API's declaration (`apis::name::DECL`), whose name the errors carry.
    const DECL: &'static ApiDecl;

    /// The API's name.
    #[inline]
    fn api() -> &'static str {
        Self::DECL.name()
    }

    /// Refuses a call whose shapes do not fit, naming the API and `target`; asked before
    /// anything else, by the handle's method and by the scope's alike.
    fn check(&self, target: Target) -> Result<()>;

    /// Runs the call through the API's declaration (`apis::name`), which finds the device's
    /// implementation, asks its `accepts` check and dispatches.
    fn run(self, rt: &Runtime, target: Target) -> Result<()>;
}

/// A built-in a scope offers too: how its call is held and merged.
/// The built-ins with scope methods, each a number of its own and none 0 (`ScopeCall::ID`):
/// distinct because an enum's discriminants are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BuiltinId {
    Fft = 1,
    Fftshift,
    Window,
    Zip,
    ZipRows,
    Conj,
    Magnitude,
    Power,
    /// `tests::ToyAffine`.
    #[cfg(test)]
    Toy,
}

pub(crate) trait ScopeCall<'a, const N: usize>: Builtin {
    /// Its merge rules, plain rule first (see [`MergeRule`]): the value of a `static`, read
    /// at run time. A held group tells its rules by their address, and a `const`'s slice has
    /// no one address: each crate or codegen unit that uses it may get its own copy, so the
    /// lean check of a row call inlined into a program's crate compared two copies of one
    /// rule set, never matched, and every row took the general path.
    fn rules() -> &'static [&'static MergeRule];

    /// The built-in, as a number of its own (one variant of [`BuiltinId`] per built-in, and
    /// per element-wise kind: `tests::scope_call_ids_tell_the_rules_apart`). A group opened by this built-in's
    /// method remembers it (`Group::checked_as`), and a row call of the built-in compares it
    /// instead of its rules (`Group::continued_alike_builtin`): a constant, where the rules
    /// are a `static` read through memory.
    const ID: BuiltinId;

    /// Its scalars, encoded: calls merge only when theirs are equal.
    fn params(&self) -> Params {
        [0, 0]
    }

    /// Its views as the managed arguments of the rules, in their order.
    fn args(self) -> [KernelArg<'a>; N];

    /// [`ScopeCall::args`] less the names, without building them: what a scope's group
    /// compares a row call with (`Group::continued_alike`). Must be `Part::of` each of
    /// `args` (debug builds assert that the arguments built continue the group alike
    /// wherever these did).
    fn parts(&self) -> [Part; N];

    /// Its shape check ([`Builtin::check`]) asked of its arguments as [`ScopeCall::args`]
    /// gives them and its [`ScopeCall::params`]: a function of the target, the parameters
    /// and the arguments' lengths only, so that a call that continues a group alike, whose
    /// first call passed it with the same inputs, need not ask it again.
    fn check_args(target: Target, params: Params, args: &[KernelArg<'_>; N]) -> Result<()>;

    /// What `device` must accept of every call, asked at submission (the handle's method asks
    /// the same inside the call): checks that depend only on the device, the rules, `params`
    /// and the arguments' lengths, so a call that joins a group with the lengths of its first
    /// call skips them.
    #[inline]
    fn check_call_on(
        _shared: &Shared,
        _device: Device,
        _params: Params,
        _args: &[KernelArg<'_>; N],
    ) -> Result<()> {
        Ok(())
    }

    /// What `device` must accept of a call that opens a group: checks that depend only on
    /// the device, the rules and `params` (and the first argument's length, which a member
    /// repeats), so a call that joins the group skips them.
    #[inline]
    fn check_group_on(
        _shared: &Shared,
        _device: Device,
        _params: Params,
        _args: &[KernelArg<'_>; N],
    ) -> Result<()> {
        Ok(())
    }
}

/// A typed method of the handle: the call's shape check, then the call.
#[inline]
pub(crate) fn call<B: Builtin>(rt: &Runtime, target: Target, call: B) -> Result<()> {
    call.check(target)?;
    call.run(rt, target)
}

/// A typed method of the handle for a row-wise built-in: as [`call`], but a call on a
/// simulated device goes through [`call_rows_on_sim`].
#[inline]
pub(crate) fn call_rows<'a, const N: usize, B: ScopeCall<'a, N>>(
    rt: &Runtime,
    target: Target,
    call: B,
) -> Result<()> {
    call.check(target)?;
    if let Target::On(device @ Device::Sim(_)) = target {
        return call_rows_on_sim(rt, device, call);
    }
    call.run(rt, target)
}

/// [`call_rows`] on a simulated device: a call behind a timed link, with bytes enough to hide
/// copies behind, runs through [`ahead::run_direct`], which cuts it into parts where its
/// copies can overlap its work. Out of line, so that the other devices' calls do not carry
/// its look at the link.
#[inline(never)]
fn call_rows_on_sim<'a, const N: usize, B: ScopeCall<'a, N>>(
    rt: &Runtime,
    device: Device,
    call: B,
) -> Result<()> {
    if let Some(plain) = B::rules().first() {
        if let Some(position) = ahead::cuts_calls_on(rt.shared(), device, &call.parts()) {
            return ahead::run_direct(rt, position, plain, call);
        }
    }
    call.run(rt, Target::On(device))
}

/// Refuses a call whose shapes do not fit, naming the API and the device.
#[inline]
pub(crate) fn shape(
    api: &'static str,
    device: Target,
    ok: bool,
    what: impl FnOnce() -> String,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Shape {
            api,
            device,
            what: what(),
        })
    }
}

/// Refuses two arguments (`names`) whose lengths (`lens`) differ.
#[inline]
pub(crate) fn same_len(
    api: &'static str,
    device: Target,
    names: [&str; 2],
    lens: [usize; 2],
) -> Result<()> {
    shape(api, device, lens[0] == lens[1], || {
        format!(
            "`{}` has {} elements but `{}` has {}",
            names[0], lens[0], names[1], lens[1]
        )
    })
}

/// Refuses a broadcast row (`name`, `row_len` elements) that does not tile `len` elements.
pub(crate) fn whole_rows(
    api: &'static str,
    device: Target,
    name: &str,
    row_len: usize,
    len: usize,
) -> Result<()> {
    shape(api, device, row_len > 0 && len % row_len == 0, || {
        format!("{len} elements are not a whole number of rows of `{name}`'s {row_len}")
    })
}

/// The element count of a managed argument of `T`s (its byte length over `T`'s size).
#[inline]
pub(crate) fn elements<T>(arg: &KernelArg<'_>) -> usize {
    arg.len / std::mem::size_of::<T>().max(1)
}
