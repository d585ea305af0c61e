//! `rimms::parallel_for!`: a host loop over managed buffers, run in parallel.
//!
//! Read the input ([`input`]), check it and learn what the body does with each buffer
//! ([`analysis`]), then generate ([`expand`], with the body rewritten by [`rewrite`]): each
//! buffer is synced once before the loop in the mode its use needs, and the body runs over
//! chunks of the range on rayon. A reduction named before `for` makes the body's value each
//! iteration's contribution: every task folds its own iterations into an accumulator of its
//! own, and `run_reduce` combines them after, so reductions add no shared state.
//!
//! None of the analysis is what keeps the loop sound. Each chunk gets its own disjoint parts
//! of the buffers (`rimms::__private::run_loop` splits them with `split_at_mut`), and the body
//! indexes them with ordinary checked indexing, so an index the analysis misjudged panics
//! inside its own part instead of writing anywhere else. The expansion contains no `unsafe`,
//! and every local it makes has mixed-site hygiene, so user code can neither name nor shadow
//! them.

mod analysis;
mod expand;
mod input;
mod rewrite;

use crate::crate_path;
use analysis::REDUCTIONS;
use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(input: TokenStream) -> TokenStream {
    let lp: input::Loop = match syn::parse2(input) {
        Ok(lp) => lp,
        Err(e) => {
            return syn::Error::new(
                e.span(),
                format!("`parallel_for!` takes one loop over a range, optionally after a reduction: `parallel_for!(for i in 0..n {{ y[i] = x[i]; }})`, `parallel_for!(sum for i in 0..n {{ x[i] }})`; the reductions are {REDUCTIONS}"),
            )
            .to_compile_error()
        }
    };
    let rimms = crate_path::resolve(None);
    match analysis::analyse(&lp) {
        Ok(analysis) => expand::generate(&rimms, lp, &analysis),
        // The errors, in a block of the macro's type, so that code around it type-checks.
        Err(errors) => {
            let errors = errors.to_compile_error();
            quote!({ #errors ::core::result::Result::<(), #rimms::Error>::Ok(()) })
        }
    }
}
