//! What `#[rimms::kernel]` refuses, all of it found before anything is generated.

use super::attr::{Attr, DeviceSpec};
use super::{AUTO, KINDS};
use crate::diagnostics::Errors;
use crate::signature::{ArgForm, Signature};
use crate::signature_check;
use proc_macro2::Span;
use syn::spanned::Spanned;

pub fn check(attr: &Attr, sig: &Signature) -> syn::Result<()> {
    let mut errors = Errors::default();
    if attr.devices.is_empty() {
        errors.at(
            Span::call_site(),
            "`#[rimms::kernel]` needs `device = cpu | sim | fpga | gpu` (or a list `[cpu, sim]`)",
        );
    }
    for device in &attr.devices {
        if !KINDS.iter().any(|k| device.kind == k) && device.kind != AUTO {
            errors.at(
                device.kind.span(),
                format!(
                    "unknown device `{}`: expected one of cpu, sim, fpga, gpu, auto",
                    device.kind
                ),
            );
        }
    }
    accepts(&attr.accepts, &mut errors);
    signature_check::check(sig, &mut errors);
    match &attr.api {
        Some(_) => implementation(attr, &mut errors),
        None => standalone(attr, sig, &mut errors),
    }
    signature_check::check_form(sig, &mut errors);
    host_form_on_gpu(&attr.devices, sig.form(), &mut errors);
    errors.finish()
}

/// `accepts` names one function (its signature is the compiler's to check against the API's).
fn accepts(given: &[syn::Expr], errors: &mut Errors) {
    for (i, expr) in given.iter().enumerate() {
        if i > 0 {
            errors.at(
                expr.span(),
                "`accepts` is given twice: an implementation has one check; let one function ask everything",
            );
            continue;
        }
        if !matches!(expr, syn::Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty()) {
            errors.at(
                expr.span(),
                "`accepts` names a function of the calls the device takes, `fn(&rimms::DeviceCtx, <the API's values>, <each buffer's length>) -> Result<(), rimms::Refusal>`: write `accepts = fits`",
            );
        }
    }
}

/// An implementation names kinds of device, never one instance or `auto`.
fn implementation(attr: &Attr, errors: &mut Errors) {
    for d in &attr.devices {
        if let Some(index) = &d.index {
            errors.at(index.span(), "an implementation is registered for a kind of device, not one instance: write `device = sim`");
        }
        if d.kind == AUTO {
            errors.at(d.kind.span(), "an implementation names the kinds of device it is written for; `auto` is for stand-alone kernels, and calls pass `Target::Auto`");
        }
    }
}

/// A stand-alone kernel runs on one device, or on `auto` devices that run host code.
fn standalone(attr: &Attr, sig: &Signature, errors: &mut Errors) {
    let [device] = attr.devices.as_slice() else {
        if !attr.devices.is_empty() {
            errors.at(
                attr.device_key.unwrap_or_else(Span::call_site),
                "a stand-alone kernel runs on one device: write `device = sim` or `device = sim(1)`, or declare an API and implement it per kind",
            );
        }
        return;
    };
    if device.kind != AUTO {
        return;
    }
    if let Some(index) = &device.index {
        errors.at(
            index.span(),
            "`auto` lets the scheduler pick the device: it takes no instance",
        );
    }
    if sig.form() == ArgForm::Device {
        errors.at(device.kind.span(), "`auto` places a kernel on devices that run host code; a kernel that takes device slices names its device kind");
    }
}

/// A GPU's memory is not the CPU's: an implementation for it takes device slices.
fn host_form_on_gpu(devices: &[DeviceSpec], form: ArgForm, errors: &mut Errors) {
    if form == ArgForm::Host {
        if let Some(gpu) = devices.iter().find(|d| d.kind == "gpu") {
            errors.at(gpu.kind.span(), "a GPU kernel cannot take `&[T]` / `&mut [T]`: its buffers are in device memory; take `rimms::DevSlice<T>` / `rimms::DevSliceMut<T>` and hand their addresses to the driver");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(attr: proc_macro2::TokenStream, func: syn::ItemFn) -> Vec<String> {
        let attr: Attr = syn::parse2(attr).expect("the attribute parses");
        check(&attr, &Signature::read(&func.sig))
            .err()
            .map_or_else(Vec::new, |e| e.into_iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn the_attribute_and_the_signature_are_judged_together() {
        let found = messages(
            quote::quote!(
                api = saxpy,
                device = [cpu(1), auto, tpu, gpu],
                accepts = 2048
            ),
            syn::parse_quote!(
                fn k(p: *mut f32, x: &[f32]) {}
            ),
        );
        let expected = [
            "unknown device `tpu`",
            "`accepts` names a function",
            "raw pointer parameter `p`",
            "not one instance",
            "`auto` is for stand-alone kernels",
            "a GPU kernel cannot take `&[T]`",
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (message, part) in found.iter().zip(expected) {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }

    #[test]
    fn a_standalone_kernel_names_one_device() {
        let func: syn::ItemFn = syn::parse_quote!(
            fn k(x: &mut [f32]) {}
        );
        assert!(messages(quote::quote!(device = sim(1)), func.clone()).is_empty());
        assert!(messages(quote::quote!(device = auto), func.clone()).is_empty());
        let two = messages(quote::quote!(device = [cpu, sim]), func.clone());
        assert!(
            two.len() == 1 && two[0].contains("runs on one device"),
            "{two:?}"
        );
        let none = messages(quote::quote!(), func.clone());
        assert!(
            none.len() == 1 && none[0].contains("needs `device"),
            "{none:?}"
        );
        let auto = messages(quote::quote!(device = auto(2)), func);
        assert!(
            auto.len() == 1 && auto[0].contains("takes no instance"),
            "{auto:?}"
        );
    }

    #[test]
    fn accepts_names_one_function() {
        let func: syn::ItemFn = syn::parse_quote!(
            fn k(x: &mut [f32]) {}
        );
        let fine = messages(
            quote::quote!(api = saxpy, device = sim, accepts = limits::fits),
            func.clone(),
        );
        assert!(fine.is_empty(), "{fine:?}");
        let closure = messages(
            quote::quote!(api = saxpy, device = sim, accepts = |_| Ok(())),
            func.clone(),
        );
        assert!(
            closure.len() == 1 && closure[0].contains("`accepts` names a function"),
            "{closure:?}"
        );
        let twice = messages(
            quote::quote!(api = saxpy, device = sim, accepts = a, accepts = b),
            func,
        );
        assert!(
            twice.len() == 1 && twice[0].contains("given twice"),
            "{twice:?}"
        );
    }

    #[test]
    fn crate_takes_a_path_or_a_string() {
        for attr in [
            quote::quote!(device = cpu, crate = ::my::rimms),
            quote::quote!(device = cpu, crate = "::my::rimms"),
        ] {
            let attr: Attr = syn::parse2(attr).expect("parses");
            let path = crate::crate_path::resolve(attr.krate.as_ref());
            assert_eq!(path.to_string(), ":: my :: rimms");
        }
    }
}
