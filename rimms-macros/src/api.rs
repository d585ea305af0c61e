//! `#[rimms::api]`: a declaration becomes a registered API and a typed function to call it.

use crate::api_items::{self, Caller};
use crate::diagnostics::Errors;
use crate::signature::{ArgForm, Signature};
use crate::{crate_path, signature, signature_check};
use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{ForeignItemFn, Ident, Path, Token};

/// The attribute: nothing, or `crate = path`.
struct Attr {
    krate: Option<Path>,
}

/// The declaration `#[rimms::api]` is given, read.
struct Decl {
    /// The item without our `#[out]`s.
    item: ForeignItemFn,
    sig: Signature,
}

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = syn::parse2::<Attr>(attr);
    let checked = parse_decl(item).and_then(|decl| {
        let mut errors = Errors::default();
        // A bad attribute is reported together with what the signature's checks find.
        if let Err(e) = &attr {
            errors.push(e.clone());
        }
        check(&decl, &mut errors);
        errors.finish()?;
        Ok(decl)
    });
    match (checked, attr) {
        (Ok(decl), Ok(attr)) => generate(&attr, &decl),
        // A declaration is no Rust item on its own, so an error comes without it.
        (Err(errors), _) | (Ok(_), Err(errors)) => errors.to_compile_error(),
    }
}

fn parse_decl(item: TokenStream) -> syn::Result<Decl> {
    // A declaration has no body: `fn name(args);`, which parses as a foreign function.
    let mut item: ForeignItemFn = syn::parse2(item.clone()).map_err(|_| {
        syn::Error::new_spanned(
            &item,
            "`#[rimms::api]` declares an API without a body: `pub fn name(x: &[T], #[out] y: &mut [T]);` — implement it with `#[rimms::kernel(api = name, device = …)]`",
        )
    })?;
    let sig = Signature::read(&item.sig);
    signature::strip_out(&mut item.sig);
    Ok(Decl { item, sig })
}

impl Parse for Attr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Ok(Attr { krate: None });
        }
        let key = input.call(Ident::parse_any)?;
        if key != "crate" {
            return Err(syn::Error::new(
                key.span(),
                "`#[rimms::api]` takes no arguments but `crate = path`; the API is named after the function",
            ));
        }
        input.parse::<Token![=]>()?;
        let krate = crate_path::parse_value(input)?;
        let _ = input.parse::<Option<Token![,]>>()?;
        Ok(Attr { krate: Some(krate) })
    }
}

fn check(decl: &Decl, errors: &mut Errors) {
    signature_check::check(&decl.sig, errors);
    for buffer in decl.sig.buffers().filter(|b| b.form == ArgForm::Device) {
        errors.at(buffer.span, "an API declares its buffers as `&[T]` / `&mut [T]`; `DevSlice<T>` and `DevSliceMut<T>` are how device implementations take them");
    }
}

fn generate(attr: &Attr, decl: &Decl) -> TokenStream {
    let rimms = crate_path::resolve(attr.krate.as_ref());
    let item = &decl.item;
    api_items::generate(&rimms, &item.vis, &item.attrs, &decl.sig, Caller::AnyDevice)
}
