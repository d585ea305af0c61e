//! Reading a kernel or API signature: which parameters are managed buffers (and in which
//! access mode), which pass by value, and whether the first asks for the kernel context.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, ReturnType, Signature, Type};

/// How a managed argument is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    ReadWrite,
    Write,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Read, Mode::ReadWrite, Mode::Write];

    pub fn tokens(self, rimms: &TokenStream) -> TokenStream {
        match self {
            Mode::Read => quote!(#rimms::__private::Access::Read),
            Mode::ReadWrite => quote!(#rimms::__private::Access::ReadWrite),
            Mode::Write => quote!(#rimms::__private::Access::Write),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mode::Read => "`&[T]` (read)",
            Mode::ReadWrite => "`&mut [T]` (read-write)",
            Mode::Write => "`#[out] &mut [T]` (write-discard)",
        }
    }
}

/// How an implementation takes a managed argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `&[T]` / `&mut [T]`: host-addressable memory.
    Host,
    /// `DevSlice<T>` / `DevSliceMut<T>`: device memory.
    Device,
}

impl Form {
    pub fn tokens(self, rimms: &TokenStream) -> TokenStream {
        match self {
            Form::Host => quote!(#rimms::__private::Form::Host),
            Form::Device => quote!(#rimms::__private::Form::Device),
        }
    }
}

pub enum Param {
    /// `ctx: &KernelCtx`, first only.
    Ctx { ty: Type },
    /// A slice argument tracked by the runtime.
    Managed {
        name: Ident,
        elem: Type,
        mode: Mode,
        form: Form,
        span: Span,
    },
    /// Passed by value.
    Plain { name: Ident, ty: Type },
}

impl Param {
    /// The parameter's type in the `fn` pointer type of an implementation of `form`.
    pub fn impl_type(&self, form: Form, rimms: &TokenStream) -> TokenStream {
        match self {
            Param::Ctx { ty } | Param::Plain { ty, .. } => ty.to_token_stream(),
            Param::Managed { elem, mode, .. } => match (form, mode) {
                (Form::Host, Mode::Read) => quote!(&[#elem]),
                (Form::Host, Mode::ReadWrite | Mode::Write) => quote!(&mut [#elem]),
                (Form::Device, Mode::Read) => quote!(#rimms::DevSlice<'_, #elem>),
                (Form::Device, Mode::ReadWrite | Mode::Write) => {
                    quote!(#rimms::DevSliceMut<'_, #elem>)
                }
            },
        }
    }
}

/// `&[T]` (false, T), `&mut [T]` (true, T), `DevSlice<T>` and `DevSliceMut<T>` likewise.
fn managed_type(ty: &Type) -> Option<(bool, Type, Form)> {
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Slice(s) => Some((r.mutability.is_some(), (*s.elem).clone(), Form::Host)),
            _ => None,
        },
        Type::Path(p) => {
            let last = p.path.segments.last()?;
            let mutable = if last.ident == "DevSlice" {
                false
            } else if last.ident == "DevSliceMut" {
                true
            } else {
                return None;
            };
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            let elem = args.args.iter().find_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t.clone()),
                _ => None,
            })?;
            Some((mutable, elem, Form::Device))
        }
        _ => None,
    }
}

/// Collects errors so that an item reports all of them at once.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    pub fn has_any(&self) -> bool {
        self.0.is_some()
    }

    pub fn finish(self) -> Option<TokenStream> {
        self.0.map(|e| e.to_compile_error())
    }
}

fn is_kernel_ctx(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Path(p) => p
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "KernelCtx"),
            _ => false,
        },
        _ => false,
    }
}

/// Removes `#[out]` from the signature's parameters (it is ours, not the compiler's) and
/// reads every parameter.
pub fn read_params(sig: &mut Signature, errors: &mut Errors) -> Vec<Param> {
    if let Some(g) = sig.generics.params.first() {
        errors.at(
            g.span(),
            "kernels and APIs cannot be generic: the runtime registers one implementation per signature; write one function per element type",
        );
    }
    if let Some(a) = &sig.asyncness {
        errors.at(
            a.span(),
            "kernels cannot be async: a kernel call blocks until its outputs are marked",
        );
    }
    let mut params = Vec::new();
    let count = sig.inputs.len();
    for (position, input) in sig.inputs.iter_mut().enumerate() {
        let arg = match input {
            FnArg::Receiver(r) => {
                errors.at(
                    r.span(),
                    "kernels cannot take `self`: pass buffers and values as arguments",
                );
                continue;
            }
            FnArg::Typed(arg) => arg,
        };
        let out = arg.attrs.iter().position(|a| a.path().is_ident("out"));
        let out_span = out.map(|i| arg.attrs[i].span());
        if let Some(i) = out {
            arg.attrs.remove(i);
        }
        let name = match &*arg.pat {
            Pat::Ident(p) => p.ident.clone(),
            other => {
                errors.at(
                    other.span(),
                    "kernel parameters must be plain names, not patterns",
                );
                continue;
            }
        };
        let ty = (*arg.ty).clone();
        if let Type::Ptr(p) = &ty {
            errors.at(
                p.span(),
                format!("raw pointer parameter `{name}`: a raw pointer escapes the runtime's tracking, so its data could be stale or moved; take `&[T]` to read or `&mut [T]` to write"),
            );
            continue;
        }
        if position == 0 && is_kernel_ctx(&ty) {
            params.push(Param::Ctx { ty });
            continue;
        }
        match (managed_type(&ty), out_span) {
            (Some((mutable, elem, form)), out) => {
                let mode = match (mutable, out) {
                    (false, None) => Mode::Read,
                    (true, None) => Mode::ReadWrite,
                    (true, Some(_)) => Mode::Write,
                    (false, Some(span)) => {
                        errors.at(span, format!("`#[out]` marks an argument the kernel overwrites, but `{name}` is `&[T]`; make it `&mut [T]`"));
                        Mode::Read
                    }
                };
                params.push(Param::Managed {
                    name,
                    elem,
                    mode,
                    form,
                    span: arg.span(),
                });
            }
            (None, Some(span)) => {
                errors.at(span, format!("`#[out]` applies to `&mut [T]` buffer arguments only, and `{name}` is not one"));
            }
            (None, None) => params.push(Param::Plain { name, ty }),
        }
        let _ = count;
    }
    let managed: Vec<&Ident> = params
        .iter()
        .filter_map(|p| match p {
            Param::Managed { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    if managed.is_empty() {
        errors.at(
            sig.ident.span(),
            "a kernel needs at least one buffer argument (`&[T]`, `&mut [T]` or `#[out] &mut [T]`): without one there is nothing for the runtime to place",
        );
    }
    params
}

/// `fn(types...) [-> R]`: what every implementation of `form` must coerce to. An API that
/// can fail (a device that reports faults) returns a `rimms::Result<()>`, and so must its
/// implementations.
pub fn fn_pointer_type(
    params: &[Param],
    output: &ReturnType,
    form: Form,
    rimms: &TokenStream,
) -> TokenStream {
    let types = params.iter().map(|p| p.impl_type(form, rimms));
    let ctx = device_ctx(params, form).then(|| quote!(&#rimms::KernelCtx<'_>,));
    quote!(fn(#ctx #(#types),*) #output)
}

/// Whether a device implementation gets the kernel context although the API does not
/// declare it: a device kernel always needs its driver, which it reaches through the context.
pub fn device_ctx(params: &[Param], form: Form) -> bool {
    form == Form::Device && !params.iter().any(|p| matches!(p, Param::Ctx { .. }))
}

/// The one form of an implementation's managed arguments; a mix is an error at the first
/// argument that differs from the first.
pub fn form_of(params: &[Param], errors: &mut Errors) -> Form {
    let mut managed = params.iter().filter_map(|p| match p {
        Param::Managed { form, span, .. } => Some((*form, *span)),
        _ => None,
    });
    let Some((first, first_span)) = managed.next() else {
        return Form::Host;
    };
    for (form, span) in managed {
        if form != first {
            errors.at(span, "a kernel takes all its buffers the same way: `&[T]` / `&mut [T]` for host memory, or `DevSlice<T>` / `DevSliceMut<T>` for device memory");
            break;
        }
    }
    let has_ctx = params.iter().any(|p| matches!(p, Param::Ctx { .. }));
    if first == Form::Device && !has_ctx {
        errors.at(first_span, "a kernel that takes device slices takes `ctx: &rimms::KernelCtx` first: its device's driver and memory are reached through it");
    }
    first
}
