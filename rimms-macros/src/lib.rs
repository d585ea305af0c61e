//! Procedural macros of RIMMS: `#[rimms::api]`, `#[rimms::kernel]` and
//! `rimms::parallel_for!`.
//!
//! The expansions are small on purpose: they parse the user's function or loop, check what the
//! runtime cannot check later (access modes, raw pointers, racy indices), and emit calls into
//! `rimms::__private`, where the real work lives as ordinary, tested Rust. Every error is a
//! `syn::Error` spanned on the offending token; all errors of an item are reported at once,
//! and the original item is still emitted so the user sees our message rather than a cascade.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
mod api;
mod kernel;
mod parallel_for;
mod paths;
mod signature;

use proc_macro::TokenStream;

/// Declares an API: a typed operation that devices implement.
///
/// ```ignore
/// #[rimms::api]
/// pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]);
/// ```
///
/// `&[T]` arguments are read, `&mut [T]` read and written, `#[out] &mut [T]` overwritten
/// (write-discard); other arguments pass by value; a first `ctx: &KernelCtx` gives an
/// implementation the runtime's caches. The declaration becomes a function
/// `saxpy(rt, device, a, &x, &mut y) -> rimms::Result<()>` taking buffers or views.
#[proc_macro_attribute]
pub fn api(attr: TokenStream, item: TokenStream) -> TokenStream {
    api::expand(attr.into(), item.into()).into()
}

/// Implements an API for a kind of device (`#[rimms::kernel(api = saxpy, device = cpu)]`,
/// `device = [cpu, sim]` for several), or, without `api`, turns one function into a kernel of
/// its own that runs on the named device (`#[rimms::kernel(device = sim)]`, `sim(1)`).
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).into()
}

/// `#pragma rimms parallel for` as a Rust macro:
/// `rimms::parallel_for!(for i in 0..n { y[i] = a * x[i] + y[i]; })`.
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
/// another index, binding the loop variable or a buffer's name again inside the body, and
/// taking raw pointers of buffers are compile errors.
#[proc_macro]
pub fn parallel_for(input: TokenStream) -> TokenStream {
    parallel_for::expand(input.into()).into()
}
