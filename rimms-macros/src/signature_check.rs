//! What a kernel or API signature must be, whichever macro reads it.

use crate::diagnostics::Errors;
use crate::signature::{ArgForm, Binding, Param, Shape, Signature};

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
    if first.form == ArgForm::Device && !sig.has_ctx() {
        errors.at(first.span, "a kernel that takes device slices takes `ctx: &rimms::KernelCtx` first: its device's driver and memory are reached through it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(sig: syn::Signature) -> Vec<String> {
        let mut errors = Errors::default();
        let sig = Signature::read(&sig);
        check(&sig, &mut errors);
        check_form(&sig, &mut errors);
        errors
            .finish()
            .err()
            .map_or_else(Vec::new, |e| e.into_iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn every_mistake_of_a_signature_is_reported_at_once() {
        let found = messages(syn::parse_quote! {
            async fn k<T>((a, b): f32, p: *const f32, #[out] x: &[f32], #[out] v: u32)
        });
        let expected = [
            "cannot be generic",
            "cannot be async",
            "plain names, not patterns",
            "raw pointer parameter `p`",
            "but `x` is `&[T]`",
            "`v` is not one",
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (message, part) in found.iter().zip(expected) {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }

    #[test]
    fn a_signature_without_buffers_or_with_mixed_forms_is_refused() {
        let none = messages(syn::parse_quote!(fn k(a: f32)));
        assert_eq!(none.len(), 1);
        assert!(none[0].contains("at least one buffer"), "{none:?}");
        let mixed = messages(syn::parse_quote!(fn k(x: DevSlice<f32>, y: &mut [f32])));
        assert_eq!(mixed.len(), 2, "{mixed:#?}");
        assert!(mixed[0].contains("all its buffers the same way"));
        assert!(mixed[1].contains("takes `ctx: &rimms::KernelCtx` first"));
    }

    #[test]
    fn a_good_signature_passes_and_reads_as_the_runtime_sees_it() {
        let sig: syn::Signature = syn::parse_quote! {
            fn k(ctx: &KernelCtx, a: f32, x: &[f32], y: &mut [f32], #[out] z: &mut [f32])
        };
        assert!(messages(sig.clone()).is_empty());
        let sig = Signature::read(&sig);
        let modes: Vec<_> = sig
            .buffers()
            .map(|b| (b.name.to_string(), b.mode))
            .collect();
        use crate::signature::Mode::*;
        let expected =
            [("x", Read), ("y", ReadWrite), ("z", Write)].map(|(n, m)| (n.to_string(), m));
        assert_eq!(modes, expected);
        assert!(sig.has_ctx());
    }
}
