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
/// Evaluates to `rimms::Result<()>`.
#[proc_macro]
pub fn parallel_for(input: TokenStream) -> TokenStream {
    parallel_for::expand(input.into()).into()
}
