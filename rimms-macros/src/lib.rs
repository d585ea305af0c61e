//! Procedural macros of RIMMS: `#[rimms::api]`, `#[rimms::kernel]` and
//! `rimms::parallel_for!`.
//!
//! Each macro runs in three passes, as serde_derive's and thiserror's do:
//!
//! 1. **parse** the input into a typed model of what was written ([`signature`],
//!    `kernel::attr`, `parallel_for::input`), refusing only what is not Rust syntax;
//! 2. **check** the model ([`signature_check`], `kernel::check`, `parallel_for::analysis`),
//!    collecting every error, each a `syn::Error` spanned on the offending token, so that all
//!    mistakes of an item are reported at once ([`diagnostics`]);
//! 3. **expand** a model that passed, which only generates: small expansions that call into
//!    `rimms::__private`, where the real work lives as ordinary, tested Rust.
//!
//! After an error an attribute still emits its item (without our attributes), so the user sees
//! our message rather than a cascade. No expansion contains `unsafe`, and every local an
//! expansion makes has mixed-site hygiene. Where the runtime is found is [`crate_path`]'s job.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
mod api;
mod api_items;
mod crate_path;
mod diagnostics;
mod kernel;
mod parallel_for;
mod signature;
mod signature_check;

use proc_macro::TokenStream;

/// Declares an API: a typed operation that devices implement.
///
/// The declaration has no body. `&[T]` arguments are read, `&mut [T]` read and written,
/// `#[out] &mut [T]` overwritten without being read (write-discard: the runtime does not copy
/// their old contents in); other arguments pass by value (they must be
/// [`KernelValue`](../rimms/trait.KernelValue.html)s: plain data, no pointers). A first
/// `ctx: &KernelCtx` gives implementations the runtime's caches and device drivers, and a
/// `-> rimms::Result<()>` lets them fail.
///
/// The declaration becomes a function `name(rt, device, values…, &buffers…) ->
/// rimms::Result<()>` that takes [`HeteData`](../rimms/struct.HeteData.html) buffers or
/// their views (`&` for read, `&mut` for written arguments) and a `Device` or `Target::Auto`;
/// implement it per kind of device with [`#[rimms::kernel(api = …)]`](macro@kernel).
///
/// It also declares a type of the same name (`enum saxpy {}`, beside the function): the API's
/// public path. `#[rimms::kernel(api = saxpy, …)]` names it, and `saxpy::DECL` is its
/// declaration for hand-written calls (`Runtime::launch_host`) and `Api::of`.
///
/// The generated code finds the runtime through the calling crate's manifest (a renamed
/// dependency included). A crate that reaches rimms through a re-export says where it is with
/// `#[rimms::api(crate = path::to::rimms)]`, and likewise `#[rimms::kernel(crate = …, …)]`.
///
/// ```
/// #[rimms::api]
/// pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]);
///
/// #[rimms::kernel(api = saxpy, device = [cpu, sim])]
/// fn saxpy_host(a: f32, x: &[f32], y: &mut [f32]) {
///     for (y, x) in y.iter_mut().zip(x) {
///         *y += a * x;
///     }
/// }
///
/// # fn main() -> rimms::Result<()> {
/// use rimms::{Device, HeteData, Runtime, SimConfig};
/// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
/// let x = HeteData::from_slice(&rt, &[1.0f32, 2.0, 3.0])?;
/// let mut y = HeteData::from_slice(&rt, &[10.0f32; 3])?;
/// saxpy(&rt, Device::Sim(0), 2.0, &x, &mut y)?;
/// assert_eq!(y.host()?, &[12.0, 14.0, 16.0]);
/// # Ok(())
/// # }
/// ```
#[proc_macro_attribute]
pub fn api(attr: TokenStream, item: TokenStream) -> TokenStream {
    api::expand(attr.into(), item.into()).into()
}

/// Implements an API for kinds of device, or makes one function a kernel of its own.
///
/// **Implementing an API**: `#[rimms::kernel(api = NAME, device = cpu)]` (or a list,
/// `device = [cpu, sim]`) registers the function as `NAME`'s implementation for those kinds
/// of device. Its signature must be the API's, argument by argument, **including `#[out]`**:
/// the attribute is part of the signature (it tells the runtime not to copy the old contents
/// in), so an implementation repeats it wherever the API has it. A kernel whose access mode
/// differs from the API's is a compile error on the argument, naming both sides and the fix.
/// Host kinds (`cpu`, `sim`, `fpga`) take `&[T]` / `&mut [T]`; a `gpu` implementation takes
/// `ctx: &KernelCtx` then `DevSlice<T>` / `DevSliceMut<T>`.
///
/// ```
/// use rimms::{Device, HeteData, Runtime, SimConfig};
///
/// #[rimms::api]
/// pub fn power(x: &[f32], #[out] out: &mut [f32]);
///
/// // `#[out]` is repeated: without it this would be a read-write argument, and the
/// // compiler would say so at `out`.
/// #[rimms::kernel(api = power, device = [cpu, sim])]
/// fn power_host(x: &[f32], #[out] out: &mut [f32]) {
///     for (o, x) in out.iter_mut().zip(x) {
///         *o = x * x;
///     }
/// }
///
/// # fn main() -> rimms::Result<()> {
/// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
/// let x = HeteData::from_slice(&rt, &[1.0f32, -2.0, 3.0])?;
/// let mut out = HeteData::<f32>::alloc(&rt, 3)?;
/// power(&rt, Device::Sim(0), &x, &mut out)?;
/// assert_eq!(out.host()?, &[1.0, 4.0, 9.0]);
/// # Ok(())
/// # }
/// ```
///
/// **Device limits**: `accepts = fits` gives the implementation a check of the calls its
/// device takes, asked before anything moves. `fits` takes the device's
/// [`DeviceCtx`](../rimms/struct.DeviceCtx.html), then the API's parameters in order without
/// the kernel context — values as they are, each buffer as its length in elements — and
/// returns `Result<(), Refusal>`. A call on a device that refuses fails with
/// `Error::Unsupported` naming the API, the device and the refusal; `Target::Auto` places the
/// call on a device that accepts it.
///
/// ```
/// use rimms::{Device, DeviceCtx, HeteData, Refusal, Runtime, SimConfig};
///
/// #[rimms::api]
/// pub fn negate(x: &mut [f32]);
///
/// fn short(_dev: &DeviceCtx, x: usize) -> Result<(), Refusal> {
///     if x <= 4 { Ok(()) } else { Err(Refusal::new(format!("{x} elements, at most 4"))) }
/// }
///
/// #[rimms::kernel(api = negate, device = sim, accepts = short)]
/// fn negate_sim(x: &mut [f32]) {
///     x.iter_mut().for_each(|v| *v = -*v);
/// }
///
/// # fn main() -> rimms::Result<()> {
/// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
/// let mut x = HeteData::from_slice(&rt, &[1.0f32; 8])?;
/// let err = negate(&rt, Device::Sim(0), &mut x).unwrap_err();
/// assert_eq!(err.to_string(), "negate on sim0 is not supported: 8 elements, at most 4");
/// # Ok(())
/// # }
/// ```
///
/// **A stand-alone kernel**: without `api`, `#[rimms::kernel(device = sim)]` (or `sim(1)` for
/// an instance, `auto` to let the scheduler place it among `cpu` and `sim` devices) declares
/// an API of the function's name with this one implementation. The function is replaced by
/// its caller, `name(rt, values…, &buffers…) -> rimms::Result<()>`: the same arguments
/// with `rt: &Runtime` first and managed buffers (`HeteData` or views) in place of slices,
/// and no device argument (it is fixed by the attribute).
///
/// ```
/// use rimms::{HeteData, Runtime, SimConfig};
///
/// #[rimms::kernel(device = sim)]
/// fn fill(value: f32, #[out] y: &mut [f32]) {
///     y.fill(value);
/// }
///
/// # fn main() -> rimms::Result<()> {
/// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
/// let mut y = HeteData::<f32>::alloc(&rt, 4)?;
/// fill(&rt, 7.0, &mut y)?; // runs on sim0
/// assert_eq!(y.host()?, &[7.0; 4]);
/// # Ok(())
/// # }
/// ```
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).into()
}

/// `#pragma rimms parallel for` as a Rust macro:
/// `rimms::parallel_for!(for i in 0..n { y[i] = a * x[i] + y[i]; })`.
///
/// ```
/// # fn main() -> rimms::Result<()> {
/// use rimms::{HeteData, Runtime};
/// let rt = Runtime::builder().build()?;
/// let x = HeteData::from_slice(&rt, &[1.0f32, 2.0, 3.0])?;
/// let mut y = HeteData::from_slice(&rt, &[1.0f32; 3])?;
/// let (a, n) = (2.0, x.len());
/// rimms::parallel_for!(for i in 0..n {
///     y[i] = a * x[i] + y[i];
/// })?;
/// assert_eq!(y.host()?, &[3.0, 5.0, 7.0]);
/// # Ok(())
/// # }
/// ```
///
/// **Reductions.** Iterations cannot update shared state (`total += x[i]`, `dets.push(i)`):
/// they run in parallel. Instead, name a reduction before `for` and make each iteration's
/// value the body's result; the loop evaluates to `rimms::Result` of the combined value.
/// As in rayon, each task folds its own iterations and the partial results are combined
/// after, in index order:
///
/// - `sum`: the sum (`T::default()` for no values);
/// - `min`, `max`: `Option` of the least or greatest value (of equal values the first wins,
///   so `(value, i)` gives the index; a NaN is skipped);
/// - `collect`: a `Vec` of the values in index order;
/// - `reduce(|| identity, |a, b| op)`: a fold with an associative `op` and its neutral value.
///
/// An iteration that `continue`s gives no value.
///
/// ```
/// # fn main() -> rimms::Result<()> {
/// use rimms::{HeteData, Runtime};
/// let rt = Runtime::builder().build()?;
/// let pw = HeteData::from_slice(&rt, &[1.0f32, 9.0, 1.0, 4.0, 8.0, 1.0])?;
/// let n = pw.len();
/// let total: f32 = rimms::parallel_for!(sum for i in 0..n { pw[i] })?;
/// let strongest = rimms::parallel_for!(max for i in 0..n { (pw[i], i) })?;
/// let above: Vec<usize> = rimms::parallel_for!(collect for i in 0..n {
///     if pw[i] < 4.0 {
///         continue;
///     }
///     i
/// })?;
/// let product = rimms::parallel_for!(reduce(|| 1.0f32, |a, b| a * b) for i in 0..n { pw[i] })?;
/// assert_eq!((total, strongest, above, product), (24.0, Some((9.0, 1)), vec![1, 3, 4], 288.0));
/// # Ok(())
/// # }
/// ```
///
/// **Buffers used whole.** A buffer the body only reads may also be used whole, as the
/// `&[T]` of its synced contents: `f(&pw, i)`, `pw.len()`, `pw.iter()`. (The macro knows a
/// name is a buffer because the body indexes it somewhere.) A buffer the loop writes can
/// only be indexed at the loop variable: each task holds just its own elements.
///
/// Every buffer indexed in the body is synced to the host once, in the mode its use needs;
/// iterations run on rayon in fragment-sized chunks; written buffers are host-owned after.
/// Evaluates to `rimms::Result<()>`: a range that runs past a buffer (even an empty one) is
/// an `Error::OutOfBounds` before anything runs.
///
/// A buffer the body assigns whole (`y[i] = …`) in a statement of its own, never reads, and
/// never skips (no `continue`, no macro that could hide one) is overwritten without being
/// copied in; any other write (under an `if`, a `match`, a loop or a closure) syncs it first,
/// so the elements it skips keep their newest bytes.
///
/// Each task writes only its own parts of the buffers, through checked indexing: an index
/// that is not what it seems panics in that task, never writes elsewhere. A write is recorded
/// when the loop finishes; a loop that fails or panics part-way leaves the other valid copies
/// as they were. Writing at another index than the loop variable, reading a written buffer at
/// another index, binding the loop variable or a buffer's name again inside the body,
/// taking raw pointers of buffers, `break` and `return` (use `continue`), and updating a
/// variable or collection from outside the body (use a reduction) are compile errors that
/// say so.
#[proc_macro]
pub fn parallel_for(input: TokenStream) -> TokenStream {
    parallel_for::expand(input.into()).into()
}
