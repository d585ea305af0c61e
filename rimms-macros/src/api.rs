//! `#[rimms::api]`: a declaration becomes a registered API and a typed function to call it.

use crate::paths;
use crate::signature::{device_ctx, fn_pointer_type, read_params, Errors, Form, Mode, Param};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Attribute, ForeignItemFn, Ident, ReturnType, Visibility};

/// The hidden items that stand for an API named `name`, next to its function.
pub fn spec_ident(name: &Ident) -> Ident {
    format_ident!("__rimms_api_{}", name)
}

pub fn decl_ident(name: &Ident) -> Ident {
    format_ident!("__RIMMS_API_DECL_{}", name)
}

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    if !attr.is_empty() {
        errors.at(
            proc_macro2::Span::call_site(),
            "`#[rimms::api]` takes no arguments; the API is named after the function",
        );
    }
    // A declaration has no body: `fn name(args);`, which parses as a foreign function.
    let mut decl: ForeignItemFn = match syn::parse2(item.clone()) {
        Ok(decl) => decl,
        Err(_) => {
            let e = syn::Error::new_spanned(
                &item,
                "`#[rimms::api]` declares an API without a body: `pub fn name(x: &[T], #[out] y: &mut [T]);` — implement it with `#[rimms::kernel(api = name, device = …)]`",
            );
            return e.to_compile_error();
        }
    };
    let params = read_params(&mut decl.sig, &mut errors);
    for p in &params {
        if let Param::Managed {
            form: Form::Device,
            span,
            ..
        } = p
        {
            errors.at(*span, "an API declares its buffers as `&[T]` / `&mut [T]`; `DevSlice<T>` and `DevSliceMut<T>` are how device implementations take them");
        }
    }
    if let Some(errors) = errors.finish() {
        return errors;
    }
    let rimms = paths::rimms();
    api_items(
        &rimms,
        &decl.vis,
        &decl.sig.ident,
        &decl.attrs,
        &params,
        &decl.sig.output,
        Caller::AnyDevice,
    )
}

/// Which device a generated caller runs on.
pub enum Caller {
    /// The caller names it: `name(rt, device, …)`.
    AnyDevice,
    /// Fixed by `#[rimms::kernel(device = …)]`: `name(rt, …)`.
    Fixed(TokenStream),
}

/// The registered declaration, its type-level spec, and the typed caller.
pub fn api_items(
    rimms: &TokenStream,
    vis: &Visibility,
    name: &Ident,
    attrs: &[Attribute],
    params: &[Param],
    output: &ReturnType,
    caller: Caller,
) -> TokenStream {
    let spec = spec_ident(name);
    let decl = decl_ident(name);
    let name_str = name.to_string();
    let signature = fn_pointer_type(params, output, Form::Host, rimms);
    let device_signature = fn_pointer_type(params, output, Form::Device, rimms);
    // An implementation that can fail returns the runtime's `Result`; its error becomes the
    // call's.
    let propagate = match output {
        ReturnType::Default => quote!(),
        ReturnType::Type(..) => quote!(?),
    };
    let modes = params.iter().filter_map(|p| match p {
        Param::Managed { mode, .. } => Some(mode.tokens(rimms)),
        _ => None,
    });

    let mut inputs = Vec::new();
    let mut kernel_args = Vec::new();
    let mut bound = Vec::new();
    let mut call_args = Vec::new();
    let mut device_call_args = Vec::new();
    if device_ctx(params, Form::Device) {
        device_call_args.push(quote!(__rimms_ctx));
    }
    for p in params {
        match p {
            Param::Ctx { .. } => {
                call_args.push(quote!(__rimms_ctx));
                device_call_args.push(quote!(__rimms_ctx));
            }
            Param::Plain { name, ty } => {
                inputs.push(quote!(#name: #ty));
                call_args.push(quote!(#name));
                device_call_args.push(quote!(#name));
            }
            Param::Managed {
                name, elem, mode, ..
            } => {
                let label = name.to_string();
                let local = format_ident!("__rimms_arg_{}", name);
                bound.push(local.clone());
                match mode {
                    Mode::Read => {
                        inputs.push(quote!(#name: &impl #rimms::Input<#elem>));
                        kernel_args.push(quote!(#rimms::KernelArg::read(#label, #name)));
                        call_args.push(quote!(unsafe { #local.slice::<#elem>() }));
                        device_call_args.push(quote!(unsafe { #local.dev_slice::<#elem>() }));
                    }
                    Mode::ReadWrite | Mode::Write => {
                        let ctor = if *mode == Mode::Write {
                            quote!(write)
                        } else {
                            quote!(read_write)
                        };
                        inputs.push(quote!(#name: &mut impl #rimms::Output<#elem>));
                        kernel_args.push(quote!(#rimms::KernelArg::#ctor(#label, #name)));
                        call_args.push(quote!(unsafe { #local.slice_mut::<#elem>() }));
                        device_call_args.push(quote!(unsafe { #local.dev_slice_mut::<#elem>() }));
                    }
                }
            }
        }
    }
    let (device_param, device) = match caller {
        Caller::AnyDevice => (
            quote!(device: impl ::core::convert::Into<#rimms::Target>,),
            quote!(::core::convert::Into::<#rimms::Target>::into(device)),
        ),
        Caller::Fixed(device) => (
            quote!(),
            quote!(::core::convert::Into::<#rimms::Target>::into(#device)),
        ),
    };
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #spec;

        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        #vis static #decl: #rimms::__private::ApiDecl = #rimms::__private::ApiDecl::new(#name_str);

        #rimms::__private::inventory::submit! {
            #rimms::__private::ApiRegistration(&#decl)
        }

        impl #rimms::__private::ApiSpec for #spec {
            type Signature = #signature;
            type DeviceSignature = #device_signature;
            const MODES: &'static [#rimms::__private::Access] = &[#(#modes),*];
            fn decl() -> &'static #rimms::__private::ApiDecl {
                &#decl
            }
        }

        #(#attrs)*
        #[allow(unsafe_code, clippy::too_many_arguments)]
        #vis fn #name(rt: &#rimms::Runtime, #device_param #(#inputs),*) -> #rimms::Result<()> {
            #rimms::__private::call_registered(
                rt,
                #device,
                &#decl,
                [#(#kernel_args),*],
                // SAFETY (both arms): each argument was made from a buffer of the element type
                // named here; written ones come from `&mut` views, which the borrow checker
                // keeps apart from every other argument, and whole fragments keep them apart
                // from other calls.
                move |__rimms_ctx, __rimms_impl, __rimms_args| match __rimms_args {
                    #rimms::__private::PlacedArgs::Host([#(#bound),*]) => {
                        let __rimms_f = #rimms::__private::downcast::<#signature>(__rimms_impl, &#decl, __rimms_ctx)?;
                        __rimms_f(#(#call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                    #rimms::__private::PlacedArgs::Device([#(#bound),*]) => {
                        let __rimms_f = #rimms::__private::downcast::<#device_signature>(__rimms_impl, &#decl, __rimms_ctx)?;
                        __rimms_f(#(#device_call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                },
            )
        }
    }
}
