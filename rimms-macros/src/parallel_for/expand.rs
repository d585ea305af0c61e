//! The code `parallel_for!` generates for a checked loop.

use super::analysis::Analysis;
use super::input::{Loop, Range, Reduction};
use super::rewrite::{self, local, part, whole};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

pub fn generate(rimms: &TokenStream, mut lp: Loop, analysis: &Analysis) -> TokenStream {
    let Analysis { index, uses } = analysis;
    let range_fn = match &lp.range {
        Range::Bounded {
            start,
            end,
            inclusive: false,
        } => quote!(loop_range(#start, #end)),
        Range::Bounded { start, end, .. } => quote!(loop_range_inclusive(#start, #end)),
        // Refused by the analysis.
        Range::Unbounded(_) | Range::Other(_) => quote!(),
    };
    let reduce = lp.reduction.as_ref().map(|r| match r {
        Reduction::Sum => quote!(#rimms::__private::Sum::new()),
        Reduction::Min => quote!(#rimms::__private::Extreme::min()),
        Reduction::Max => quote!(#rimms::__private::Extreme::max()),
        Reduction::Collect => quote!(#rimms::__private::Collect::new()),
        Reduction::Reduce { identity, op } => quote!(#rimms::__private::Fold::new(#identity, #op)),
        // Refused by the analysis.
        Reduction::Unknown(_) => quote!(),
    });
    let (range, chunk, sub, lo, count, k) = (
        local("__rimms_range"),
        local("__rimms_chunk"),
        local("__rimms_sub"),
        local("__rimms_lo"),
        local("__rimms_count"),
        local("__rimms_k"),
    );
    // Iterations that ran to their end: all the loop's tasks' (`completed`), one task's
    // (`finished`). Counted only where the loop overwrites a buffer unread, whose write is
    // recorded only if every iteration finished (`LoopMut::finish_overwrite`).
    let (completed, finished) = (local("__rimms_completed"), local("__rimms_finished"));
    let mut prologue = Vec::new();
    let mut finish = Vec::new();
    let mut overwrites = Vec::new();
    // Parts in the order they are nested in the value handed to `run_loop`.
    let mut parts: Vec<(Ident, TokenStream, bool)> = Vec::new();
    for (name, u) in uses {
        let buf = Ident::new(name, u.first_span.unwrap_or_else(Span::call_site));
        let (whole, part) = (whole(&buf), part(&buf));
        let label = name.as_str();
        if u.written {
            let discard = u.discards();
            // The buffer is borrowed outside the `unsafe` block, which holds no token of the
            // caller's: a name that needs `unsafe` to touch (a `static mut`) still needs the
            // caller's own.
            let target = local("__rimms_target");
            prologue.push(quote! {
                let mut #whole = {
                    use #rimms::__private::LoopWrite as _;
                    let #target = (#buf).__rimms_loop_target();
                    // SAFETY: the analysis proved `discard` (every finished iteration writes
                    // this buffer at its index before any read there), and the guard ends in
                    // `finish` or `finish_overwrite` with the loop's count below, or is dropped.
                    unsafe { #target.__rimms_loop_write(#label, #discard, &#range) }?
                };
                #chunk = ::core::cmp::min(#chunk, #whole.chunk());
            });
            parts.push((
                part,
                quote!(#whole.part(::core::clone::Clone::clone(&#range))),
                true,
            ));
            if discard {
                overwrites.push(quote! {
                    #whole.finish_overwrite(
                        #label,
                        #completed.get(),
                        ::core::iter::ExactSizeIterator::len(&#range),
                    )?;
                });
            } else {
                finish.push(quote!(#whole.finish();));
            }
        } else {
            prologue.push(quote! {
                let #whole: &[_] = {
                    use #rimms::__private::LoopRead as _;
                    (#buf).__rimms_loop_read()?
                };
            });
            if u.only_at_loop_index {
                prologue.push(quote! {
                    #rimms::__private::check_loop_bounds(#label, #whole.len(), &#range)?;
                });
                parts.push((
                    part,
                    quote!(&#whole[::core::clone::Clone::clone(&#range)]),
                    false,
                ));
            }
        }
    }
    // `(a, (b, ()))`: one generic `LoopParts` impl covers any number of buffers.
    let (parts_value, parts_pat) = parts
        .iter()
        .rev()
        .fold((quote!(()), quote!(())), |(value, pat), (name, made, _)| {
            (quote!((#made, #value)), quote!((#name, #pat)))
        });
    // Cutting every part to the chunk's length lets the compiler see that the checked
    // indexing below stays in bounds, so the loop still vectorises.
    let trims = parts.iter().map(|(name, _, written)| {
        if *written {
            quote!(let #name = &mut #name[..#count];)
        } else {
            quote!(let #name = &#name[..#count];)
        }
    });
    // Writes that need no proof are recorded first: a failed proof returns before the rest.
    finish.append(&mut overwrites);
    let counts = uses.values().any(|u| u.written && u.discards());
    // A task's count goes into the loop's when it is dropped: at the task's end, or when a
    // `?` returns from it early.
    let (count_setup, finished_setup, count_step) = if counts {
        (
            quote!(let #completed = #rimms::__private::Completed::new();),
            quote!(let mut #finished = #completed.task();),
            quote!(#finished.step();),
        )
    } else {
        (quote!(), quote!(), quote!())
    };
    rewrite::body(&mut lp.body, uses);
    let body = &lp.body;
    let loop_label = &lp.label;
    let (reduction, acc, value) = (
        local("__rimms_reduction"),
        local("__rimms_acc"),
        local("__rimms_value"),
    );
    let Some(made) = reduce else {
        return quote! {
            (|| -> #rimms::Result<()> {
                let #range: ::core::ops::Range<usize> = #rimms::__private::#range_fn?;
                #[allow(unused_mut)]
                let mut #chunk: usize = #rimms::__private::LOOP_CHUNK;
                #(#prologue)*
                #count_setup
                #rimms::__private::run_loop(
                    ::core::clone::Clone::clone(&#range),
                    #chunk,
                    #parts_value,
                    |#sub: ::core::ops::Range<usize>, #parts_pat| {
                        let #lo = #sub.start;
                        let #count = #sub.end - #sub.start;
                        #(#trims)*
                        #finished_setup
                        #loop_label for #k in 0..#count {
                            let #index = #lo + #k;
                            #body
                            #count_step
                        }
                    },
                );
                #(#finish)*
                ::core::result::Result::Ok(())
            })()
        };
    };
    // Each task folds its own iterations into its own accumulator; `run_reduce` combines the
    // accumulators after, in index order. A `continue` skips the fold: no value.
    quote! {
        (|| -> #rimms::Result<_> {
            let #range: ::core::ops::Range<usize> = #rimms::__private::#range_fn?;
            #[allow(unused_mut)]
            let mut #chunk: usize = #rimms::__private::LOOP_CHUNK;
            #(#prologue)*
            #count_setup
            let #reduction = #made;
            let #value = #rimms::__private::run_reduce(
                ::core::clone::Clone::clone(&#range),
                #chunk,
                #parts_value,
                &#reduction,
                |#sub: ::core::ops::Range<usize>, #parts_pat| {
                    let #lo = #sub.start;
                    let #count = #sub.end - #sub.start;
                    #(#trims)*
                    let mut #acc = #rimms::__private::Reduction::identity(&#reduction);
                    #finished_setup
                    #loop_label for #k in 0..#count {
                        let #index = #lo + #k;
                        let #value = #body;
                        #acc = #rimms::__private::Reduction::step(&#reduction, #acc, #value);
                        #count_step
                    }
                    #acc
                },
            );
            #(#finish)*
            ::core::result::Result::Ok(#value)
        })()
    }
}
