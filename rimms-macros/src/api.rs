//! `#[rimms::api]`: a declaration becomes a registered API and a typed function to call it.

use crate::paths;
use crate::signature::{device_ctx, fn_pointer_type, read_params, Errors, Form, Mode, Param};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
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

    // Everything the expansion names itself has mixed-site hygiene: no user token can refer
    // to it or shadow it.
    let hidden = |name: &str| syn::Ident::new(name, Span::mixed_site());
    let (ctx, implementation, placed, f) = (
        hidden("__rimms_ctx"),
        hidden("__rimms_impl"),
        hidden("__rimms_args"),
        hidden("__rimms_f"),
    );
    let (rt, device_name) = (hidden("rt"), hidden("device"));
    let mut inputs = Vec::new();
    let mut value_checks = Vec::new();
    let mut kernel_args = Vec::new();
    let mut bound = Vec::new();
    let mut call_args = Vec::new();
    let mut device_call_args = Vec::new();
    if device_ctx(params, Form::Device) {
        device_call_args.push(quote!(#ctx));
    }
    for p in params {
        match p {
            Param::Ctx { .. } => {
                call_args.push(quote!(#ctx));
                device_call_args.push(quote!(#ctx));
            }
            Param::Plain { name, ty } => {
                inputs.push(quote!(#name: #ty));
                // The type system, not the tokens, decides what may pass by value: an alias
                // or a wrapper of a raw pointer is refused here too, spanned on the type.
                value_checks.push(quote_spanned! {ty.span()=>
                    #rimms::__private::assert_kernel_value::<#ty>();
                });
                call_args.push(quote!(#name));
                device_call_args.push(quote!(#name));
            }
            Param::Managed {
                name, elem, mode, ..
            } => {
                let label = name.to_string();
                let local = format_ident!("__rimms_arg_{}", name, span = Span::mixed_site());
                bound.push(local.clone());
                match mode {
                    Mode::Read => {
                        inputs.push(quote!(#name: &impl #rimms::Input<#elem>));
                        kernel_args.push(quote!(#rimms::KernelArg::read(#label, #name)));
                        call_args.push(quote!(#local.into_slice::<#elem>()?));
                        device_call_args.push(quote!(#local.into_dev_slice::<#elem>()?));
                    }
                    Mode::ReadWrite | Mode::Write => {
                        let ctor = if *mode == Mode::Write {
                            quote!(write)
                        } else {
                            quote!(read_write)
                        };
                        inputs.push(quote!(#name: &mut impl #rimms::Output<#elem>));
                        kernel_args.push(quote!(#rimms::KernelArg::#ctor(#label, #name)));
                        call_args.push(quote!(#local.into_slice_mut::<#elem>()?));
                        device_call_args.push(quote!(#local.into_dev_slice_mut::<#elem>()?));
                    }
                }
            }
        }
    }
    let (device_param, device) = match caller {
        Caller::AnyDevice => (
            quote!(#device_name: impl ::core::convert::Into<#rimms::Target>,),
            quote!(::core::convert::Into::<#rimms::Target>::into(#device_name)),
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
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#rt: &#rimms::Runtime, #device_param #(#inputs),*) -> #rimms::Result<()> {
            #(#value_checks)*
            #rimms::__private::call_registered(
                #rt,
                #device,
                &#decl,
                [#(#kernel_args),*],
                // Each argument is cast to the element type named here, checked; written ones
                // come from `&mut` views, which the borrow checker keeps apart from every
                // other argument.
                move |#ctx, #implementation, #placed| match #placed {
                    #rimms::__private::PlacedArgs::Host([#(#bound),*]) => {
                        let #f = #rimms::__private::downcast::<#signature>(#implementation, &#decl, #ctx)?;
                        #f(#(#call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                    #rimms::__private::PlacedArgs::Device([#(#bound),*]) => {
                        let #f = #rimms::__private::downcast::<#device_signature>(#implementation, &#decl, #ctx)?;
                        #f(#(#device_call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                },
            )
        }
    }
}
