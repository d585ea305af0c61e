//! Collecting errors, so that a macro reports every mistake in its input at once.
//!
//! Each checking pass pushes what it finds here and carries on; expansion starts only when the
//! whole input has been checked and nothing was found.

use proc_macro2::{Span, TokenStream};

/// The errors found so far, combined into one `syn::Error` (which keeps each span).
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

    /// What was found, with one last error that ends the check (when nothing after it can be
    /// judged).
    pub fn fail(self, span: Span, message: impl std::fmt::Display) -> syn::Error {
        let last = syn::Error::new(span, message);
        match self.0 {
            Some(mut all) => {
                all.combine(last);
                all
            }
            None => last,
        }
    }

    /// `Ok` when nothing was found, so a checking pass can end with `errors.finish()?`.
    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// An attribute's output: the expansion, or the errors followed by the item itself (with our
/// attributes removed), so that the user sees our messages rather than a cascade of "cannot
/// find function" errors from code that uses the item.
pub fn or_item(
    expanded: syn::Result<TokenStream>,
    item: impl FnOnce() -> TokenStream,
) -> TokenStream {
    match expanded {
        Ok(tokens) => tokens,
        Err(errors) => {
            let errors = errors.to_compile_error();
            let item = item();
            quote::quote!(#errors #item)
        }
    }
}
