//! What a kernel or API signature must be, whichever macro reads it.

use crate::diagnostics::Errors;
use crate::signature::{Binding, Form, Param, Shape, Signature};

/// Every rule of a signature on its own: no generics, not async, plain names, no raw
/// pointers, `#[out]` only on written buffers, at least one buffer.
pub fn check(sig: &Signature, errors: &mut Errors) {
    if let Some(span) = sig.generics {
        errors.at(
            span,
            "kernels and APIs cannot be generic: the runtime registers one implementation per signature; write one function per element type",
        );
    }
    if let Some(span) = sig.asyncness {
        errors.at(
            span,
            "kernels cannot be async: a kernel call blocks until its outputs are marked",
        );
    }
    for param in &sig.params {
        check_param(param, errors);
    }
    if sig.buffers().next().is_none() {
        errors.at(
            sig.name.span(),
            "a kernel needs at least one buffer argument (`&[T]`, `&mut [T]` or `#[out] &mut [T]`): without one there is nothing for the runtime to place",
        );
    }
}

fn check_param(param: &Param, errors: &mut Errors) {
    let name = match &param.binding {
        Binding::Name(name) => name,
        Binding::Receiver => {
            return errors.at(
                param.span,
                "kernels cannot take `self`: pass buffers and values as arguments",
            )
        }
        Binding::Pattern => {
            return errors.at(
                param.pat_span,
                "kernel parameters must be plain names, not patterns",
            )
        }
    };
    match (&param.shape, param.out) {
        (Shape::Pointer, _) => errors.at(
            param.ty_span,
            format!("raw pointer parameter `{name}`: a raw pointer escapes the runtime's tracking, so its data could be stale or moved; take `&[T]` to read or `&mut [T]` to write"),
        ),
        (Shape::Slice { mutable: false, .. }, Some(out)) => errors.at(
            out,
            format!("`#[out]` marks an argument the kernel overwrites, but `{name}` is `&[T]`; make it `&mut [T]`"),
        ),
        (Shape::Ctx(_) | Shape::Value(_), Some(out)) => errors.at(
            out,
            format!("`#[out]` applies to `&mut [T]` buffer arguments only, and `{name}` is not one"),
        ),
        _ => {}
    }
}

/// An implementation's buffers all come one way, and device slices come with the context.
pub fn check_form(sig: &Signature, errors: &mut Errors) {
    let mut buffers = sig.buffers();
    let Some(first) = buffers.next() else {
        return;
    };
    if let Some(other) = buffers.find(|b| b.form != first.form) {
        errors.at(other.span, "a kernel takes all its buffers the same way: `&[T]` / `&mut [T]` for host memory, or `DevSlice<T>` / `DevSliceMut<T>` for device memory");
    }
    if first.form == Form::Device && !sig.has_ctx() {
        errors.at(first.span, "a kernel that takes device slices takes `ctx: &rimms::KernelCtx` first: its device's driver and memory are reached through it");
    }
}
