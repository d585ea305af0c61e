//! `#[rimms::kernel]`: an implementation of a declared API for some device kinds, or a
//! stand-alone kernel (an API of its own with one implementation and a caller).
//!
//! Read the attribute and the function ([`attr`], [`crate::signature`]), check both
//! ([`check`]), then generate ([`expand`]).

mod attr;
mod check;
mod expand;

use crate::diagnostics::or_item;
use crate::signature::{self, Signature};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ItemFn;

/// The kinds of device an implementation can name, as `DeviceKind` variants in lower case.
const KINDS: [&str; 4] = ["cpu", "sim", "fpga", "gpu"];

/// `device = auto`: a stand-alone kernel the runtime's scheduler places. Its body is host code,
/// so it is registered for the kinds that run host code on their own memory.
const AUTO: &str = "auto";
const AUTO_KINDS: [&str; 2] = ["cpu", "sim"];

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func: ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let sig = Signature::read(&func.sig);
    signature::strip_out(&mut func.sig);
    let expanded = syn::parse2::<attr::Attr>(attr).and_then(|attr| {
        check::check(&attr, &sig)?;
        Ok(expand::generate(&attr, &func, &sig))
    });
    or_item(expanded, || func.to_token_stream())
}
