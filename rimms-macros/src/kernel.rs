//! `#[rimms::kernel]`: an implementation of a declared API for some device kinds, or a
//! stand-alone kernel (an API of its own with one implementation and a caller).

use crate::api::{api_items, decl_ident, spec_ident, Caller};
use crate::paths;
use crate::signature::{form_of, read_params, Errors, Form, Mode, Param};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{bracketed, parenthesized, Ident, ItemFn, LitInt, Path, Token};

/// One `device = …` entry: a kind and, for a stand-alone kernel, an instance.
struct DeviceSpec {
    kind: Ident,
    index: Option<LitInt>,
}

struct Args {
    api: Option<Path>,
    devices: Vec<DeviceSpec>,
    device_span: Option<Span>,
}

const KINDS: [&str; 4] = ["cpu", "sim", "fpga", "gpu"];

/// `device = auto`: a stand-alone kernel the runtime's scheduler places. Its body is host code,
/// so it is registered for the kinds that run host code on their own memory.
const AUTO: &str = "auto";
const AUTO_KINDS: [&str; 2] = ["cpu", "sim"];

impl Parse for DeviceSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let kind: Ident = input.parse()?;
        if !KINDS.iter().any(|k| kind == k) && kind != AUTO {
            return Err(syn::Error::new(
                kind.span(),
                format!("unknown device `{kind}`: expected one of cpu, sim, fpga, gpu, auto"),
            ));
        }
        let index = if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        Ok(DeviceSpec { kind, index })
    }
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            api: None,
            devices: Vec::new(),
            device_span: None,
        };
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            if key == "api" {
                args.api = Some(input.parse()?);
            } else if key == "device" {
                args.device_span = Some(key.span());
                if input.peek(syn::token::Bracket) {
                    let content;
                    bracketed!(content in input);
                    let list = Punctuated::<DeviceSpec, Token![,]>::parse_terminated(&content)?;
                    args.devices.extend(list);
                } else {
                    args.devices.push(input.parse()?);
                }
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`: expected `api = NAME` and `device = cpu | sim | fpga | gpu`"),
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
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

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let args: Args = match syn::parse2(attr) {
        Ok(a) => a,
        Err(e) => return with_item(e.to_compile_error(), &item),
    };
    let mut errors = Errors::default();
    if args.devices.is_empty() {
        errors.at(
            Span::call_site(),
            "`#[rimms::kernel]` needs `device = cpu | sim | fpga | gpu` (or a list `[cpu, sim]`)",
        );
    }
    let params = read_params(&mut func.sig, &mut errors);
    let rimms = paths::rimms();
    let expanded = match &args.api {
        Some(api) => implementation(&rimms, &func, api, &args, &params, &mut errors),
        None => standalone(&rimms, &mut func, &args, &params, &mut errors),
    };
    match errors.finish() {
        Some(errors) => with_item(errors, &func.to_token_stream()),
        None => expanded,
    }
}

/// On error, the item is still emitted (without our attribute) so the user sees one message.
fn with_item(errors: TokenStream, item: &TokenStream) -> TokenStream {
    quote!(#errors #item)
}

/// `#[rimms::kernel(api = NAME, device = …)]`: check the signature against the API and
/// register the function for each device kind.
fn implementation(
    rimms: &TokenStream,
    func: &ItemFn,
    api: &Path,
    args: &Args,
    params: &[Param],
    errors: &mut Errors,
) -> TokenStream {
    for d in &args.devices {
        if let Some(index) = &d.index {
            errors.at(index.span(), "an implementation is registered for a kind of device, not one instance: write `device = sim`");
        }
        if d.kind == AUTO {
            errors.at(d.kind.span(), "an implementation names the kinds of device it is written for; `auto` is for stand-alone kernels, and calls pass `Target::Auto`");
        }
    }
    let (Some(last), true) = (api.segments.last(), !api.segments.is_empty()) else {
        errors.at(
            api.span(),
            "expected the name of an API declared with `#[rimms::api]`",
        );
        return quote!();
    };
    let with_last = |ident: Ident| {
        let mut path = api.clone();
        if let Some(seg) = path.segments.last_mut() {
            seg.ident = ident;
        }
        path
    };
    let spec = with_last(spec_ident(&last.ident));
    let decl = with_last(decl_ident(&last.ident));
    let name = &func.sig.ident;
    let api_name = last.ident.to_string();
    let mut checks = Vec::new();
    let managed = params.iter().filter_map(|p| match p {
        Param::Managed {
            name, mode, span, ..
        } => Some((name, mode, span)),
        _ => None,
    });
    for (i, (arg, mode, span)) in managed.enumerate() {
        for declared in Mode::ALL.into_iter().filter(|m| m != mode) {
            checks.push(mode_check(
                rimms,
                &spec,
                (name, &api_name),
                (arg, i, *span),
                *mode,
                declared,
            ));
        }
    }
    let form = form_of(params, errors);
    host_form_on_gpu(&args.devices, form, errors);
    // The function must coerce to the API's signature (or its device form); registering this
    // constant (not the function) keeps a mismatch to one error.
    let checked = format_ident!("__RIMMS_IMPL_{}", name);
    let signature = signature_of(rimms, &quote!(#spec), form);
    let signature_check = quote! {
        #[allow(non_upper_case_globals)]
        const #checked: #signature = #name;
    };
    let form_tokens = form.tokens(rimms);
    let registrations = args.devices.iter().map(|d| {
        let kind = kind_tokens(rimms, &d.kind);
        quote! {
            #rimms::__private::inventory::submit! {
                #rimms::__private::KernelImpl {
                    api: &#decl,
                    device: #kind,
                    form: #form_tokens,
                    func: &#checked,
                }
            }
        }
    });
    quote! {
        #func
        #signature_check
        #(#checks)*
        #(#registrations)*
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
    spec: &Path,
    (kernel, api): (&Ident, &str),
    (arg, index, span): (&Ident, usize, Span),
    mode: Mode,
    declared: Mode,
) -> TokenStream {
    let message = format!(
        "kernel `{kernel}` does not match API `{api}`: its argument `{arg}` is {}, but the API declares it {}",
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
                    #rimms::__private::mode_is(<#spec as #rimms::__private::ApiSpec>::MODES, #index, #declared_tokens)
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
fn signature_of(rimms: &TokenStream, spec: &TokenStream, form: Form) -> TokenStream {
    match form {
        Form::Host => quote!(<#spec as #rimms::__private::ApiSpec>::Signature),
        Form::Device => quote!(<#spec as #rimms::__private::ApiSpec>::DeviceSignature),
    }
}

/// A GPU's memory is not the CPU's: an implementation for it takes device slices.
fn host_form_on_gpu(devices: &[DeviceSpec], form: Form, errors: &mut Errors) {
    if form == Form::Host {
        if let Some(gpu) = devices.iter().find(|d| d.kind == "gpu") {
            errors.at(gpu.kind.span(), "a GPU kernel cannot take `&[T]` / `&mut [T]`: its buffers are in device memory; take `rimms::DevSlice<T>` / `rimms::DevSliceMut<T>` and hand their addresses to the driver");
        }
    }
}

/// `#[rimms::kernel(device = …)]` without `api`: the function becomes a kernel of its own.
fn standalone(
    rimms: &TokenStream,
    func: &mut ItemFn,
    args: &Args,
    params: &[Param],
    errors: &mut Errors,
) -> TokenStream {
    let [device] = args.devices.as_slice() else {
        errors.at(
            args.device_span.unwrap_or_else(Span::call_site),
            "a stand-alone kernel runs on one device: write `device = sim` or `device = sim(1)`, or declare an API and implement it per kind",
        );
        return quote!();
    };
    let index: TokenStream = match &device.index {
        Some(i) => quote!(#i),
        None => quote!(0),
    };
    if let (true, Some(index)) = (device.kind == AUTO, &device.index) {
        errors.at(
            index.span(),
            "`auto` lets the scheduler pick the device: it takes no instance",
        );
        return quote!();
    }
    let device_expr = match device.kind.to_string().as_str() {
        AUTO => quote!(#rimms::Target::Auto),
        "cpu" => quote!(#rimms::Device::Cpu),
        other => {
            let variant = format_ident!("{}", capitalize(other));
            quote!(#rimms::Device::#variant(#index))
        }
    };
    let name = func.sig.ident.clone();
    let body_name = format_ident!("__rimms_body_{}", name);
    let kinds: Vec<TokenStream> = if device.kind == AUTO {
        AUTO_KINDS
            .iter()
            .map(|k| kind_tokens(rimms, &Ident::new(k, device.kind.span())))
            .collect()
    } else {
        vec![kind_tokens(rimms, &device.kind)]
    };
    let form = form_of(params, errors);
    host_form_on_gpu(std::slice::from_ref(device), form, errors);
    if form == Form::Device && device.kind == AUTO {
        errors.at(device.kind.span(), "`auto` places a kernel on devices that run host code; a kernel that takes device slices names its device kind");
    }
    let spec = spec_ident(&name);
    let decl = decl_ident(&name);
    let signature = signature_of(rimms, &quote!(#spec), form);
    let form_tokens = form.tokens(rimms);
    let items = api_items(
        rimms,
        &func.vis,
        &name,
        &func.attrs,
        params,
        &func.sig.output,
        Caller::Fixed(device_expr),
    );
    let mut body = func.clone();
    body.sig.ident = body_name.clone();
    body.vis = syn::Visibility::Inherited;
    body.attrs.retain(|a| !a.path().is_ident("doc"));
    quote! {
        #items

        #[doc(hidden)]
        #[allow(clippy::too_many_arguments)]
        #body

        #(
            #rimms::__private::inventory::submit! {
                #rimms::__private::KernelImpl {
                    api: &#decl,
                    device: #kinds,
                    form: #form_tokens,
                    func: &(#body_name as #signature),
                }
            }
        )*
    }
}
