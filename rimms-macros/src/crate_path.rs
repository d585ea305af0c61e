//! Where the generated code finds the runtime.
//!
//! By default the path comes from the calling crate's manifest (`proc-macro-crate`), so a
//! renamed dependency (`my_rimms = { package = "rimms" }`) works. When the macros are used
//! inside the runtime crate itself, the manifest says "itself" and the path is
//! `::rimms_runtime`, which resolves because the runtime declares `extern crate self as
//! rimms_runtime;`. That one absolute path is right in the runtime's library, its tests and its
//! benches alike, so nothing depends on which target is being compiled.
//!
//! A crate that re-exports rimms (so its users' manifests name neither `rimms` nor
//! `rimms-runtime`) passes the path instead: `#[rimms::kernel(crate = ::their::rimms, …)]`,
//! as serde's `#[serde(crate = "…")]` and tokio's `#[tokio::main(crate = "…")]` do.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{quote, ToTokens};
use syn::parse::ParseStream;
use syn::{Ident, LitStr, Path};

/// The path that holds `__private`, as tokens to put in front of `::__private::…`.
pub fn resolve(given: Option<&Path>) -> TokenStream {
    match given {
        Some(path) => path.to_token_stream(),
        None => from_manifest(),
    }
}

fn from_manifest() -> TokenStream {
    let absolute = |name: &str| {
        let ident = Ident::new(name, Span::call_site());
        quote!(::#ident)
    };
    let facade = crate_name("rimms");
    let runtime = || crate_name("rimms-runtime");
    match (facade, runtime()) {
        (Ok(FoundCrate::Name(name)), _) => absolute(&name),
        (Ok(FoundCrate::Itself), _) => absolute("rimms"),
        (Err(_), Ok(FoundCrate::Name(name))) => absolute(&name),
        (Err(_), Ok(FoundCrate::Itself)) => absolute("rimms_runtime"),
        (Err(_), Err(_)) => absolute("rimms"),
    }
}

/// The value of a `crate = …` argument: a path, or a string holding one as serde and tokio
/// write it.
pub fn parse_value(input: ParseStream) -> syn::Result<Path> {
    if input.peek(LitStr) {
        input.parse::<LitStr>()?.parse()
    } else {
        Path::parse_mod_style(input)
    }
}
