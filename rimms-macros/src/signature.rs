//! The model of a kernel or API signature: each parameter as written, and what the runtime
//! makes of it once checked (a managed buffer in some access mode, a value, or the context).
//!
//! Reading a signature never fails: what the user wrote is recorded as it is, odd parts
//! included, and [`crate::signature_check`] judges it.

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, ReturnType, Type};

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
pub enum ArgForm {
    /// `&[T]` / `&mut [T]`: host-addressable memory.
    Host,
    /// `DevSlice<T>` / `DevSliceMut<T>`: device memory.
    Device,
}

impl ArgForm {
    pub fn tokens(self, rimms: &TokenStream) -> TokenStream {
        match self {
            ArgForm::Host => quote!(#rimms::__private::ArgForm::Host),
            ArgForm::Device => quote!(#rimms::__private::ArgForm::Device),
        }
    }
}

/// A whole signature as written.
pub struct Signature {
    pub name: Ident,
    pub generics: Option<Span>,
    pub asyncness: Option<Span>,
    pub params: Vec<Param>,
    pub output: ReturnType,
}

/// One parameter as written.
pub struct Param {
    pub span: Span,
    pub pat_span: Span,
    pub ty_span: Span,
    pub binding: Binding,
    /// The span of its `#[out]`, if it has one.
    pub out: Option<Span>,
    pub shape: Shape,
}

pub enum Binding {
    Name(Ident),
    /// `self` in any form.
    Receiver,
    /// A pattern, not a plain name.
    Pattern,
}

/// What the parameter's type says it is.
pub enum Shape {
    /// `&KernelCtx` in first position.
    Ctx(Type),
    /// `&[T]`, `&mut [T]`, `DevSlice<T>` or `DevSliceMut<T>`.
    Slice {
        mutable: bool,
        elem: Type,
        form: ArgForm,
    },
    /// `*const T` / `*mut T`.
    Pointer,
    /// Anything else: passed by value.
    Value(Type),
}

/// A checked parameter: what expansion works with.
pub enum Arg<'s> {
    Ctx(&'s Type),
    Buffer(Buffer<'s>),
    Value { name: &'s Ident, ty: &'s Type },
}

#[derive(Clone, Copy)]
pub struct Buffer<'s> {
    pub name: &'s Ident,
    pub elem: &'s Type,
    pub mode: Mode,
    pub form: ArgForm,
    pub span: Span,
}

impl Signature {
    pub fn read(sig: &syn::Signature) -> Signature {
        Signature {
            name: sig.ident.clone(),
            generics: sig.generics.params.first().map(|g| g.span()),
            asyncness: sig.asyncness.map(|a| a.span()),
            params: sig.inputs.iter().enumerate().map(Param::read).collect(),
            output: sig.output.clone(),
        }
    }

    /// The parameters as the runtime sees them. Only meaningful once the signature passed its
    /// checks; anything those refuse is left out.
    pub fn args(&self) -> Vec<Arg<'_>> {
        self.params.iter().filter_map(Param::arg).collect()
    }

    pub fn buffers(&self) -> impl Iterator<Item = Buffer<'_>> {
        self.params.iter().filter_map(|p| match p.arg() {
            Some(Arg::Buffer(b)) => Some(b),
            _ => None,
        })
    }

    pub fn has_ctx(&self) -> bool {
        self.params.iter().any(|p| matches!(p.shape, Shape::Ctx(_)))
    }

    /// The one form of the managed arguments (that they agree is a check's business).
    pub fn form(&self) -> ArgForm {
        self.buffers().next().map_or(ArgForm::Host, |b| b.form)
    }
}

impl Param {
    fn read((position, input): (usize, &FnArg)) -> Param {
        let arg = match input {
            FnArg::Receiver(r) => {
                return Param {
                    span: r.span(),
                    pat_span: r.span(),
                    ty_span: r.span(),
                    binding: Binding::Receiver,
                    out: None,
                    shape: Shape::Value(Type::Verbatim(TokenStream::new())),
                }
            }
            FnArg::Typed(arg) => arg,
        };
        let binding = match &*arg.pat {
            Pat::Ident(p) => Binding::Name(p.ident.clone()),
            _ => Binding::Pattern,
        };
        // Errors about the parameter as a whole point at it without our attribute: at its
        // name, where stable rustc shows a span's first token.
        let mut bare = arg.clone();
        bare.attrs.retain(|a| !is_out(a));
        Param {
            span: bare.span(),
            pat_span: arg.pat.span(),
            ty_span: arg.ty.span(),
            binding,
            out: arg.attrs.iter().find(|a| is_out(a)).map(|a| a.span()),
            shape: Shape::of(&arg.ty, position == 0),
        }
    }

    pub fn name(&self) -> Option<&Ident> {
        match &self.binding {
            Binding::Name(name) => Some(name),
            _ => None,
        }
    }

    pub fn mode(&self) -> Option<Mode> {
        match (&self.shape, self.out) {
            (Shape::Slice { mutable: false, .. }, _) => Some(Mode::Read),
            (Shape::Slice { mutable: true, .. }, None) => Some(Mode::ReadWrite),
            (Shape::Slice { mutable: true, .. }, Some(_)) => Some(Mode::Write),
            _ => None,
        }
    }

    fn arg(&self) -> Option<Arg<'_>> {
        let name = self.name()?;
        match &self.shape {
            Shape::Ctx(ty) => Some(Arg::Ctx(ty)),
            Shape::Slice { elem, form, .. } => Some(Arg::Buffer(Buffer {
                name,
                elem,
                mode: self.mode()?,
                form: *form,
                span: self.span,
            })),
            Shape::Pointer => None,
            Shape::Value(ty) => Some(Arg::Value { name, ty }),
        }
    }
}

impl Shape {
    fn of(ty: &Type, first: bool) -> Shape {
        if let Type::Ptr(_) = ty {
            return Shape::Pointer;
        }
        if first && is_kernel_ctx(ty) {
            return Shape::Ctx(ty.clone());
        }
        match slice_of(ty) {
            Some((mutable, elem, form)) => Shape::Slice {
                mutable,
                elem,
                form,
            },
            None => Shape::Value(ty.clone()),
        }
    }
}

/// `&[T]` (false, T), `&mut [T]` (true, T), `DevSlice<T>` and `DevSliceMut<T>` likewise.
fn slice_of(ty: &Type) -> Option<(bool, Type, ArgForm)> {
    match ty {
        Type::Reference(r) => match &*r.elem {
            Type::Slice(s) => Some((r.mutability.is_some(), (*s.elem).clone(), ArgForm::Host)),
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
            Some((mutable, elem, ArgForm::Device))
        }
        _ => None,
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

fn is_out(attr: &syn::Attribute) -> bool {
    attr.path().is_ident("out")
}

/// Removes `#[out]` from the parameters: it is ours, not the compiler's, and the function is
/// emitted again (expanded or, after an error, as written).
pub fn strip_out(sig: &mut syn::Signature) {
    for input in &mut sig.inputs {
        if let FnArg::Typed(arg) = input {
            arg.attrs.retain(|a| !is_out(a));
        }
    }
}

/// `fn(types...) [-> R]`: what every implementation of `form` must coerce to. An API that
/// can fail (a device that reports faults) returns a `rimms::Result<()>`, and so must its
/// implementations. A device implementation always gets the kernel context, which is how it
/// reaches its driver, whether or not the API declares it.
pub fn fn_pointer_type(sig: &Signature, form: ArgForm, rimms: &TokenStream) -> TokenStream {
    let types = sig.args().into_iter().map(|arg| match arg {
        Arg::Ctx(ty) | Arg::Value { ty, .. } => ty.to_token_stream(),
        Arg::Buffer(b) => {
            let elem = b.elem;
            match (form, b.mode) {
                (ArgForm::Host, Mode::Read) => quote!(&[#elem]),
                (ArgForm::Host, Mode::ReadWrite | Mode::Write) => quote!(&mut [#elem]),
                (ArgForm::Device, Mode::Read) => quote!(#rimms::DevSlice<'_, #elem>),
                (ArgForm::Device, Mode::ReadWrite | Mode::Write) => {
                    quote!(#rimms::DevSliceMut<'_, #elem>)
                }
            }
        }
    });
    let ctx = device_gets_ctx(sig, form).then(|| quote!(&#rimms::KernelCtx<'_>,));
    let output = &sig.output;
    quote!(fn(#ctx #(#types),*) #output)
}

/// `fn(&DeviceCtx, …) -> Result<(), Refusal>`: what an implementation's `accepts` check must
/// coerce to. It takes the API's parameters in order without the kernel context, values as they
/// are and each buffer as its length in elements, since it runs before anything moves.
pub fn accepts_fn_type(sig: &Signature, rimms: &TokenStream) -> TokenStream {
    let types = sig.args().into_iter().filter_map(|arg| match arg {
        Arg::Ctx(_) => None,
        Arg::Value { ty, .. } => Some(ty.to_token_stream()),
        Arg::Buffer(_) => Some(quote!(usize)),
    });
    quote!(fn(&#rimms::DeviceCtx<'_>, #(#types),*) -> ::core::result::Result<(), #rimms::Refusal>)
}

/// Whether a device implementation gets the kernel context although the API does not declare
/// it.
pub fn device_gets_ctx(sig: &Signature, form: ArgForm) -> bool {
    form == ArgForm::Device && !sig.has_ctx()
}
