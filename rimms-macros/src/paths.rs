//! Where the generated code finds the runtime, whatever the user named the dependency.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;
use syn::Ident;

/// The path to the crate that holds `__private`: `::rimms` (or its renamed import) in user
/// code, `crate` inside the runtime itself, `::rimms_runtime` in the runtime's own tests.
pub fn rimms() -> TokenStream {
    let named = |name: &str| {
        let ident = Ident::new(name, Span::call_site());
        quote!(::#ident)
    };
    match crate_name("rimms") {
        Ok(FoundCrate::Name(name)) => return named(&name),
        Ok(FoundCrate::Itself) => return quote!(::rimms),
        Err(_) => {}
    }
    match crate_name("rimms-runtime") {
        Ok(FoundCrate::Itself)
            if std::env::var("CARGO_CRATE_NAME").as_deref() == Ok("rimms_runtime") =>
        {
            quote!(crate)
        }
        Ok(FoundCrate::Itself) => quote!(::rimms_runtime),
        Ok(FoundCrate::Name(name)) => named(&name),
        Err(_) => quote!(::rimms),
    }
}
