//! What an API is in the generated code: a type of the API's name that carries its
//! declaration and signature, and a function of the same name that calls it.
//!
//! The type (`pub enum name {}`, in the type namespace, so it sits beside the function of the
//! same name) is the API's public path: `#[rimms::kernel(api = name)]` checks against it and
//! registers for it, and hand-written code reaches the declaration as `name::DECL`.

use crate::signature::{self, Arg, ArgForm, Mode, Signature};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Ident, ReturnType, Visibility};

/// Which device a generated caller runs on.
pub enum Caller {
    /// The caller names it: `name(rt, device, …)`.
    AnyDevice,
    /// Fixed by `#[rimms::kernel(device = …)]`: `name(rt, …)`.
    Fixed(TokenStream),
}

pub fn generate(
    rimms: &TokenStream,
    vis: &Visibility,
    attrs: &[Attribute],
    sig: &Signature,
    caller: Caller,
) -> TokenStream {
    let declaration = declaration(rimms, vis, sig);
    let caller = caller_fn(rimms, vis, attrs, sig, caller);
    quote!(#declaration #caller)
}

/// `enum name {}` with the registered declaration, its signatures and its access modes.
fn declaration(rimms: &TokenStream, vis: &Visibility, sig: &Signature) -> TokenStream {
    let name = &sig.name;
    let name_str = name.to_string();
    let doc = format!("The declaration of API [`{name_str}()`](fn@{name_str}): what `#[rimms::kernel(api = {name_str}, …)]` implements; `{name_str}::DECL` names it in hand-written calls.");
    let host = signature::fn_pointer_type(sig, ArgForm::Host, rimms);
    let device = signature::fn_pointer_type(sig, ArgForm::Device, rimms);
    let accepts = signature::accepts_fn_type(sig, rimms);
    let modes = sig.buffers().map(|b| b.mode.tokens(rimms));
    let decl = Ident::new("DECL", Span::mixed_site());
    let implementations = Ident::new("IMPLEMENTATIONS", Span::mixed_site());
    quote! {
        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #vis enum #name {}

        const _: () = {
            static #decl: #rimms::__private::ApiDecl = #rimms::__private::ApiDecl::new(#name_str);

            #rimms::__private::inventory::submit! {
                #rimms::__private::ApiRegistration(&#decl)
            }

            static #implementations: #rimms::__private::TypedImpls<#host, #device> =
                #rimms::__private::TypedImpls::new(&#decl);

            impl #name {
                /// The API's declaration.
                #vis const DECL: &'static #rimms::__private::ApiDecl = &#decl;
            }

            impl #rimms::__private::ApiSpec for #name {
                type Signature = #host;
                type DeviceSignature = #device;
                type Accepts = #accepts;
                const MODES: &'static [#rimms::__private::Access] = &[#(#modes),*];
                fn decl() -> &'static #rimms::__private::ApiDecl {
                    &#decl
                }
                fn implementations() -> &'static #rimms::__private::TypedImpls<#host, #device> {
                    &#implementations
                }
            }
        };
    }
}

/// `fn name(rt, [device,] values…, &buffers…) -> rimms::Result<()>`.
fn caller_fn(
    rimms: &TokenStream,
    vis: &Visibility,
    attrs: &[Attribute],
    sig: &Signature,
    caller: Caller,
) -> TokenStream {
    let name = &sig.name;
    // An implementation that can fail returns the runtime's `Result`; its error becomes the
    // call's.
    let propagate = match sig.output {
        ReturnType::Default => quote!(),
        ReturnType::Type(..) => quote!(?),
    };
    // Everything the expansion names itself has mixed-site hygiene: no user token can refer
    // to it or shadow it.
    let hidden = |name: &str| Ident::new(name, Span::mixed_site());
    let (ctx, placed, f) = (
        hidden("__rimms_ctx"),
        hidden("__rimms_args"),
        hidden("__rimms_f"),
    );
    let (dev, check, shapes) = (
        hidden("__rimms_dev"),
        hidden("__rimms_check"),
        hidden("__rimms_shapes"),
    );
    let accepts = signature::accepts_fn_type(sig, rimms);
    // What an `accepts` check gets: the values, and each buffer's length in elements.
    let mut accepts_args = Vec::new();
    let (rt, device_name) = (hidden("rt"), hidden("device"));
    let mut inputs = Vec::new();
    let mut value_checks = Vec::new();
    let mut kernel_args = Vec::new();
    let mut bound = Vec::new();
    let mut call_args = Vec::new();
    let mut device_call_args = Vec::new();
    if signature::device_gets_ctx(sig, ArgForm::Device) {
        device_call_args.push(quote!(#ctx));
    }
    for arg in sig.args() {
        match arg {
            Arg::Ctx(_) => {
                call_args.push(quote!(#ctx));
                device_call_args.push(quote!(#ctx));
            }
            Arg::Value { name, ty } => {
                inputs.push(quote!(#name: #ty));
                // The type system, not the tokens, decides what may pass by value: an alias
                // or a wrapper of a raw pointer is refused here too, spanned on the type.
                value_checks.push(quote_spanned! {ty.span()=>
                    #rimms::__private::assert_kernel_value::<#ty>();
                });
                call_args.push(quote!(#name));
                device_call_args.push(quote!(#name));
                accepts_args.push(quote!(#name));
            }
            Arg::Buffer(b) => {
                let (name, elem) = (b.name, b.elem);
                let label = name.to_string();
                let position = bound.len();
                accepts_args
                    .push(quote!(#rimms::__private::arg_elements::<#elem>(&#shapes[#position])));
                let local = format_ident!("__rimms_arg_{}", name, span = Span::mixed_site());
                bound.push(local.clone());
                let ctor = match b.mode {
                    Mode::Read => quote!(read),
                    Mode::ReadWrite => quote!(read_write),
                    Mode::Write => quote!(write),
                };
                kernel_args.push(quote!(#rimms::KernelArg::#ctor(#label, #name)));
                if b.mode == Mode::Read {
                    inputs.push(quote!(#name: &impl #rimms::Input<#elem>));
                    call_args.push(quote!(#local.into_slice::<#elem>()?));
                    device_call_args.push(quote!(#local.into_dev_slice::<#elem>()?));
                } else {
                    inputs.push(quote!(#name: &mut impl #rimms::Output<#elem>));
                    call_args.push(quote!(#local.into_slice_mut::<#elem>()?));
                    device_call_args.push(quote!(#local.into_dev_slice_mut::<#elem>()?));
                }
            }
        }
    }
    // An API without buffers gives its check nothing of the arguments.
    let shapes_param = if bound.is_empty() {
        quote!(_)
    } else {
        quote!(#shapes)
    };
    let (device_param, target) = match caller {
        Caller::AnyDevice => (
            quote!(#device_name: impl ::core::convert::Into<#rimms::Target>,),
            quote!(#device_name),
        ),
        Caller::Fixed(device) => (quote!(), device),
    };
    let arity = proc_macro2::Literal::usize_unsuffixed(bound.len());
    quote! {
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#rt: &#rimms::Runtime, #device_param #(#inputs),*) -> #rimms::Result<()> {
            #(#value_checks)*
            #rimms::__private::call_registered::<#arity, #name>(
                #rt,
                ::core::convert::Into::<#rimms::Target>::into(#target),
                [#(#kernel_args),*],
                // The implementation's limits, asked before anything moves (values are plain
                // data, so each ask copies them).
                |#dev, #check, #shapes_param| {
                    let #f = #rimms::__private::check_as::<#accepts>(#check)?;
                    #f(#dev, #(#accepts_args),*)
                },
                // The implementation comes as the signature named here (checked by
                // `call_registered`). Each argument is cast to the element type named here,
                // checked; written ones come from `&mut` views, which the borrow checker keeps
                // apart from every other argument.
                move |#ctx, #placed| match #placed {
                    #rimms::__private::FormArgs::Host(#f, [#(#bound),*]) => {
                        #f(#(#call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                    #rimms::__private::FormArgs::Device(#f, [#(#bound),*]) => {
                        #f(#(#device_call_args),*)#propagate;
                        ::core::result::Result::Ok(())
                    }
                },
            )
        }
    }
}
