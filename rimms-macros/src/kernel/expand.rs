//! The code `#[rimms::kernel]` generates for a checked attribute and function.

use super::attr::{Attr, DeviceSpec};
use super::{AUTO, AUTO_KINDS};
use crate::api_items::{self, Caller};
use crate::crate_path;
use crate::signature::{ArgForm, Mode, Signature};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, Ident, ItemFn, Path};

pub fn generate(attr: &Attr, func: &ItemFn, sig: &Signature) -> TokenStream {
    let rimms = crate_path::resolve(attr.krate.as_ref());
    let accepts = attr.accepts.first();
    match &attr.api {
        Some(api) => implementation(&rimms, func, api, &attr.devices, accepts, sig),
        None => standalone(&rimms, func, &attr.devices[0], accepts, sig),
    }
}

/// The implementation's `accepts` check as a constant of the API's `Accepts` type (so a
/// signature that does not match is one error, at the path), and what its registrations hold:
/// `Some(&CONSTANT)` or `None`.
fn accepts_check(
    rimms: &TokenStream,
    api: &Path,
    kernel: &Ident,
    accepts: Option<&Expr>,
) -> (TokenStream, TokenStream) {
    let Some(check) = accepts else {
        return (quote!(), quote!(::core::option::Option::None));
    };
    let constant = format_ident!("__RIMMS_ACCEPTS_{}", kernel);
    let item = quote_spanned! {check.span()=>
        #[allow(non_upper_case_globals)]
        const #constant: <#api as #rimms::__private::ApiSpec>::Accepts = #check;
    };
    (item, quote!(::core::option::Option::Some(&#constant)))
}

/// `#[rimms::kernel(api = NAME, device = …)]`: the function, a check of its signature and its
/// access modes against the API's, and its registration for each device kind (with its
/// `accepts` check, if it has one).
fn implementation(
    rimms: &TokenStream,
    func: &ItemFn,
    api: &Path,
    devices: &[DeviceSpec],
    accepts: Option<&Expr>,
    sig: &Signature,
) -> TokenStream {
    let name = &sig.name;
    let api_name = api
        .segments
        .last()
        .map_or_else(String::new, |s| s.ident.to_string());
    let mut checks = Vec::new();
    for (i, b) in sig.buffers().enumerate() {
        for declared in Mode::ALL.into_iter().filter(|m| *m != b.mode) {
            let (arg, mode) = ((b.name, i, b.span), b.mode);
            checks.push(mode_check(
                rimms,
                api,
                (name, &api_name),
                arg,
                mode,
                declared,
            ));
        }
    }
    let form = sig.form();
    // The function must coerce to the API's signature (or its device form); registering this
    // constant (not the function) keeps a mismatch to one error.
    let checked = format_ident!("__RIMMS_IMPL_{}", name);
    let signature = signature_of(rimms, api, form);
    let (check_item, check) = accepts_check(rimms, api, name, accepts);
    let registrations = devices.iter().map(|d| {
        let kind = kind_tokens(rimms, &d.kind);
        registration(rimms, api, &kind, form, &checked, &check)
    });
    quote! {
        #func
        #[allow(non_upper_case_globals)]
        const #checked: #signature = #name;
        #check_item
        #(#checks)*
        #(#registrations)*
    }
}

/// `#[rimms::kernel(device = …)]` without `api`: the function becomes an API of its own,
/// called on the one device named, with itself as the implementation.
fn standalone(
    rimms: &TokenStream,
    func: &ItemFn,
    device: &DeviceSpec,
    accepts: Option<&Expr>,
    sig: &Signature,
) -> TokenStream {
    let name = &sig.name;
    let index = match &device.index {
        Some(i) => quote!(#i),
        None => quote!(0),
    };
    let target = match device.kind.to_string().as_str() {
        AUTO => quote!(#rimms::Target::Auto),
        "cpu" => quote!(#rimms::Device::Cpu),
        other => {
            let variant = format_ident!("{}", capitalize(other));
            quote!(#rimms::Device::#variant(#index))
        }
    };
    let kinds: Vec<TokenStream> = if device.kind == AUTO {
        AUTO_KINDS
            .iter()
            .map(|k| kind_tokens(rimms, &Ident::new(k, device.kind.span())))
            .collect()
    } else {
        vec![kind_tokens(rimms, &device.kind)]
    };
    let form = sig.form();
    let api: Path = name.clone().into();
    let items = api_items::generate(rimms, &func.vis, &func.attrs, sig, Caller::Fixed(target));
    // The body is an item of an anonymous block: nothing but the registrations can name it.
    let mut body = func.clone();
    body.sig.ident = format_ident!("__rimms_body_{}", name);
    body.vis = syn::Visibility::Inherited;
    body.attrs.retain(|a| !a.path().is_ident("doc"));
    let body_name = &body.sig.ident;
    let (check_item, check) = accepts_check(rimms, &api, name, accepts);
    let registrations = kinds
        .iter()
        .map(|kind| registration(rimms, &api, kind, form, body_name, &check));
    quote! {
        #items

        const _: () = {
            #[allow(clippy::too_many_arguments)]
            #body

            #check_item
            #(#registrations)*
        };
    }
}

/// The registration of `func` as `api`'s implementation for one device kind, as a `fn`
/// pointer of the API's signature, with its check (`Some(&…)` or `None`).
fn registration(
    rimms: &TokenStream,
    api: &Path,
    kind: &TokenStream,
    form: ArgForm,
    func: &Ident,
    accepts: &TokenStream,
) -> TokenStream {
    let signature = signature_of(rimms, api, form);
    let form = form.tokens(rimms);
    quote! {
        #rimms::__private::inventory::submit! {
            #rimms::__private::KernelImpl {
                api: #api::DECL,
                device: #kind,
                form: #form,
                func: &(#func as #signature),
                accepts: #accepts,
            }
        }
    }
}

/// A compile-time check that the API does not declare managed argument `index` as `declared`
/// when the kernel takes it as `mode`.
///
/// The API's modes are known only to the type checker (its declaration is another macro's
/// expansion), so the check is a trait bound that holds unless the API's mode is `declared`:
/// one local trait per possible mismatch, whose `#[diagnostic::on_unimplemented]` message
/// names both sides and the fix, spanned on the argument. A const panic would say the same in
/// an "evaluation panicked" error that reads like a compiler fault.
fn mode_check(
    rimms: &TokenStream,
    api: &Path,
    (kernel, api_name): (&Ident, &str),
    (arg, index, span): (&Ident, usize, Span),
    mode: Mode,
    declared: Mode,
) -> TokenStream {
    let message = format!(
        "kernel `{kernel}` does not match API `{api_name}`: its argument `{arg}` is {}, but the API declares it {}",
        mode.describe(),
        declared.describe()
    );
    let label = format!("the API declares `{arg}` {}", declared.describe());
    let note = format!(
        "{}; the API's declaration decides how the runtime moves `{arg}`",
        fix(arg, declared)
    );
    let declared_tokens = declared.tokens(rimms);
    // Located at the argument, so the error points there; resolved at the macro's own site,
    // so no user name can meet them. rustc's help lines name the trait and the struct.
    let hidden = |name: &str| Ident::new(name, span.resolved_at(Span::mixed_site()));
    let (matches, check, require, run) = (
        hidden("KernelModeMatchesApi"),
        hidden("ApiDeclaresIt"),
        hidden("require_same_mode"),
        hidden("check_mode"),
    );
    quote_spanned! {span=>
        const _: () = {
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            trait #matches {}
            struct #check<const DECLARED: bool>;
            impl #matches for #check<false> {}
            fn #require<T: #matches>() {}
            #[allow(dead_code)]
            fn #run() {
                #require::<#check<{
                    #rimms::__private::mode_is(<#api as #rimms::__private::ApiSpec>::MODES, #index, #declared_tokens)
                }>>();
            }
        };
    }
}

/// How to write argument `arg` to match an API that declares it `declared`.
fn fix(arg: &Ident, declared: Mode) -> String {
    match declared {
        Mode::Read => format!("take it as `{arg}: &[T]`: the API only reads it"),
        Mode::ReadWrite => format!("take it as `{arg}: &mut [T]`, without `#[out]`: the API reads it before writing, so its old contents must arrive"),
        Mode::Write => format!("mark it `#[out] {arg}: &mut [T]`: the API overwrites it without reading it (`#[out]` must be repeated on every implementation)"),
    }
}

/// The `fn` pointer type an implementation of `form` coerces to.
fn signature_of(rimms: &TokenStream, api: &Path, form: ArgForm) -> TokenStream {
    match form {
        ArgForm::Host => quote!(<#api as #rimms::__private::ApiSpec>::Signature),
        ArgForm::Device => quote!(<#api as #rimms::__private::ApiSpec>::DeviceSignature),
    }
}

fn kind_tokens(rimms: &TokenStream, kind: &Ident) -> TokenStream {
    let variant = format_ident!("{}", capitalize(&kind.to_string()));
    quote!(#rimms::__private::DeviceKind::#variant)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}
