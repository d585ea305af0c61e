//! `rimms::parallel_for!`: a host loop over managed buffers, run in parallel.
//!
//! The macro finds every name indexed in the body (`x[...]`), decides per name whether the
//! loop reads it, writes it, or both, and rejects what would race or escape tracking: a write
//! at an index other than the loop variable, a read at another index of a buffer the loop also
//! writes, a raw pointer taken from a buffer, `break` or `return` (iterations run
//! independently). It then syncs each buffer once, before the loop, in the mode its use needs,
//! checks the range against each buffer once, and runs the body over chunks of the range, each
//! with its own slice of every buffer, so `x[i]` becomes unchecked access to a plain slice that
//! the compiler can vectorise.

use crate::paths;
use crate::signature::Errors;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use std::collections::BTreeMap;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, ExprForLoop, Ident, Pat, RangeLimits};

#[derive(Default)]
struct Use {
    read: bool,
    written: bool,
    /// Read or written only as `name[i]`, so one bounds check before the loop covers it.
    only_at_loop_index: bool,
    first_span: Option<Span>,
}

struct Collect<'a> {
    index: &'a Ident,
    uses: BTreeMap<String, Use>,
    errors: Errors,
    /// Writes at a non-loop index, reported after collection so reads can be judged too.
    racy_writes: Vec<(String, Span)>,
    other_index_reads: Vec<(String, Span)>,
}

fn ident_of(expr: &Expr) -> Option<&Ident> {
    match expr {
        Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
        Expr::Paren(p) => ident_of(&p.expr),
        _ => None,
    }
}

fn is_loop_index(expr: &Expr, index: &Ident) -> bool {
    ident_of(expr).is_some_and(|i| i == index)
}

/// The indexed buffer at the root of a place expression (`y[i]`, `y[i].re`).
fn place_root(expr: &Expr) -> Option<&syn::ExprIndex> {
    match expr {
        Expr::Index(ix) => Some(ix),
        Expr::Field(f) => place_root(&f.base),
        Expr::Paren(p) => place_root(&p.expr),
        _ => None,
    }
}

impl Collect<'_> {
    fn record(&mut self, name: &Ident, at_loop_index: bool, write: bool, span: Span) {
        let entry = self.uses.entry(name.to_string()).or_insert_with(|| Use {
            only_at_loop_index: true,
            ..Use::default()
        });
        entry.first_span.get_or_insert(name.span());
        entry.only_at_loop_index &= at_loop_index;
        if write {
            entry.written = true;
            if !at_loop_index {
                self.racy_writes.push((name.to_string(), span));
            }
        } else {
            entry.read = true;
            if !at_loop_index {
                self.other_index_reads.push((name.to_string(), span));
            }
        }
    }

    fn visit_place(&mut self, place: &Expr, reads_too: bool) {
        match place_root(place) {
            Some(ix) => match ident_of(&ix.expr) {
                Some(name) => {
                    let at = is_loop_index(&ix.index, self.index);
                    let name = name.clone();
                    self.record(&name, at, true, ix.index.span());
                    if reads_too {
                        self.record(&name, at, false, ix.index.span());
                    }
                    self.visit_expr(&ix.index);
                }
                None => self.visit_expr(place),
            },
            None => self.visit_expr(place),
        }
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_expr(&mut self, expr: &'ast Expr) {
        match expr {
            Expr::Assign(a) => {
                self.visit_place(&a.left, false);
                self.visit_expr(&a.right);
            }
            Expr::Binary(b) if is_compound_assign(&b.op) => {
                self.visit_place(&b.left, true);
                self.visit_expr(&b.right);
            }
            Expr::Index(ix) => match ident_of(&ix.expr) {
                Some(name) => {
                    let at = is_loop_index(&ix.index, self.index);
                    self.record(&name.clone(), at, false, ix.index.span());
                    self.visit_expr(&ix.index);
                }
                None => syn::visit::visit_expr(self, expr),
            },
            Expr::Break(b) => self.errors.at(
                b.span(),
                "`break` in `parallel_for!`: iterations run in parallel, so one cannot stop the others; use a sequential loop",
            ),
            Expr::Return(r) => self.errors.at(
                r.span(),
                "`return` in `parallel_for!`: the body runs as separate parallel iterations; use a sequential loop",
            ),
            _ => syn::visit::visit_expr(self, expr),
        }
    }
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

/// Finds raw pointers taken from managed buffers, once the buffers are known.
struct Escapes<'a> {
    buffers: &'a BTreeMap<String, Use>,
    errors: &'a mut Errors,
}

fn mentions_buffer(expr: &Expr, buffers: &BTreeMap<String, Use>) -> Option<Ident> {
    struct Find<'b> {
        buffers: &'b BTreeMap<String, Use>,
        found: Option<Ident>,
    }
    impl<'ast> Visit<'ast> for Find<'_> {
        fn visit_ident(&mut self, i: &'ast Ident) {
            if self.found.is_none() && self.buffers.contains_key(&i.to_string()) {
                self.found = Some(i.clone());
            }
        }
    }
    let mut f = Find {
        buffers,
        found: None,
    };
    f.visit_expr(expr);
    f.found
}

impl<'ast> Visit<'ast> for Escapes<'_> {
    fn visit_expr(&mut self, expr: &'ast Expr) {
        match expr {
            Expr::MethodCall(m) if m.method == "as_ptr" || m.method == "as_mut_ptr" => {
                if let Some(buf) = mentions_buffer(&m.receiver, self.buffers) {
                    self.errors.at(
                        m.method.span(),
                        format!("`{}` on `{buf}`: a raw pointer escapes the runtime's tracking, so it could point at a stale copy; index `{buf}[i]` instead", m.method),
                    );
                }
            }
            Expr::Cast(c) if matches!(&*c.ty, syn::Type::Ptr(_)) => {
                if let Some(buf) = mentions_buffer(&c.expr, self.buffers) {
                    self.errors.at(
                        c.ty.span(),
                        format!("casting `{buf}` to a raw pointer escapes the runtime's tracking; index `{buf}[i]` instead"),
                    );
                }
            }
            _ => {}
        }
        syn::visit::visit_expr(self, expr);
    }
}

/// Rewrites indexing of buffers into the synced host slices: at the loop variable into this
/// chunk's part (unchecked: the whole range was checked before the loop), elsewhere into the
/// whole buffer (checked, read-only).
struct Rewrite<'a> {
    uses: &'a BTreeMap<String, Use>,
}

fn whole(name: &Ident) -> Ident {
    format_ident!("__rimms_{}", name, span = name.span())
}

fn part(name: &Ident) -> Ident {
    format_ident!("__rimms_part_{}", name, span = name.span())
}

impl VisitMut for Rewrite<'_> {
    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, expr);
        let Expr::Index(ix) = expr else { return };
        let Some(name) = ident_of(&ix.expr).cloned() else {
            return;
        };
        let Some(u) = self.uses.get(&name.to_string()) else {
            return;
        };
        let index = &ix.index;
        *expr = if u.only_at_loop_index {
            let part = part(&name);
            let accessor = if u.written {
                quote!(get_unchecked_mut)
            } else {
                quote!(get_unchecked)
            };
            syn::parse_quote!((*unsafe { #part.#accessor(#index - __rimms_lo) }))
        } else {
            let whole = whole(&name);
            syn::parse_quote!(#whole[#index])
        };
    }
}

/// The expansion of a loop the macro refuses: the errors, in a block of the macro's type.
fn failed(errors: Errors) -> TokenStream {
    let rimms = paths::rimms();
    let errors = errors.finish().unwrap_or_default();
    quote!({ #errors ::core::result::Result::<(), #rimms::Error>::Ok(()) })
}

pub fn expand(input: TokenStream) -> TokenStream {
    let mut lp: ExprForLoop = match syn::parse2(input) {
        Ok(lp) => lp,
        Err(e) => {
            return syn::Error::new(
                e.span(),
                "`parallel_for!` takes one loop over a range: `parallel_for!(for i in 0..n { y[i] = x[i]; })`",
            )
            .to_compile_error()
        }
    };
    let mut errors = Errors::default();
    let index = match &*lp.pat {
        Pat::Ident(p) => p.ident.clone(),
        other => {
            errors.at(
                other.span(),
                "the loop variable of `parallel_for!` must be a plain name",
            );
            return errors.finish().unwrap_or_default();
        }
    };
    let (start, end) = match &*lp.expr {
        Expr::Range(r) => match (&r.start, &r.end) {
            (Some(s), Some(e)) => {
                let end = match r.limits {
                    RangeLimits::HalfOpen(_) => quote!(#e),
                    RangeLimits::Closed(_) => quote!((#e) + 1),
                };
                (quote!(#s), end)
            }
            _ => {
                errors.at(
                    r.span(),
                    "`parallel_for!` needs a bounded range: `start..end` or `start..=end`",
                );
                return errors.finish().unwrap_or_default();
            }
        },
        other => {
            errors.at(
                other.span(),
                "`parallel_for!` runs over a range of indices like `0..n`; to loop over items, index them: `for i in 0..v.len() { … v[i] … }`",
            );
            return failed(errors);
        }
    };

    let mut collect = Collect {
        index: &index,
        uses: BTreeMap::new(),
        errors,
        racy_writes: Vec::new(),
        other_index_reads: Vec::new(),
    };
    collect.visit_block(&lp.body);
    let Collect {
        uses,
        mut errors,
        racy_writes,
        other_index_reads,
        ..
    } = collect;
    for (name, span) in racy_writes {
        errors.at(
            span,
            format!("`{name}` is written at an index that is not the loop variable `{index}`: iterations run in parallel, so two of them could write the same element; write `{name}[{index}]`, or use a sequential loop"),
        );
    }
    for (name, span) in other_index_reads {
        if uses.get(&name).is_some_and(|u| u.written) {
            errors.at(
                span,
                format!("`{name}` is written in this loop, so reading it at an index other than `{index}` could read an element another iteration is writing; read from a separate buffer, or split the loop in two"),
            );
        }
    }
    Escapes {
        buffers: &uses,
        errors: &mut errors,
    }
    .visit_block(&lp.body);
    let rimms = paths::rimms();
    if errors.has_any() {
        return failed(errors);
    }

    let mut prologue = Vec::new();
    let mut parts = Vec::new();
    for (name, u) in &uses {
        let buf = Ident::new(name, u.first_span.unwrap_or_else(Span::call_site));
        let (whole, part) = (whole(&buf), part(&buf));
        let label = name.as_str();
        if u.written {
            let reads = u.read;
            prologue.push(quote! {
                let #whole = {
                    use #rimms::__private::LoopWrite as _;
                    (#buf).__rimms_loop_write(#reads, &__rimms_range)?
                };
                #rimms::__private::check_loop_bounds(#label, #whole.len(), &__rimms_range)?;
                __rimms_chunk = __rimms_chunk.min(#whole.chunk());
            });
            parts.push(quote! {
                // SAFETY: chunks are disjoint and inside the checked range.
                let #part: &mut [_] = unsafe { #whole.part(__rimms_sub.clone()) };
            });
        } else {
            prologue.push(quote! {
                let #whole: &[_] = {
                    use #rimms::__private::LoopRead as _;
                    (#buf).__rimms_loop_read()?
                };
            });
            if u.only_at_loop_index {
                prologue.push(quote! {
                    #rimms::__private::check_loop_bounds(#label, #whole.len(), &__rimms_range)?;
                });
                parts.push(quote! {
                    let #part: &[_] = &#whole[__rimms_sub.clone()];
                });
            }
        }
    }
    Rewrite { uses: &uses }.visit_block_mut(&mut lp.body);
    let body = &lp.body;
    quote! {
        (|| -> #rimms::Result<()> {
            let __rimms_range: ::core::ops::Range<usize> = (#start)..(#end);
            let mut __rimms_chunk: usize = #rimms::__private::LOOP_CHUNK;
            #(#prologue)*
            #rimms::__private::run_loop(__rimms_range.clone(), __rimms_chunk, |__rimms_sub: ::core::ops::Range<usize>| {
                let __rimms_lo = __rimms_sub.start;
                #(#parts)*
                // SAFETY (of the unchecked accesses in the rewritten body): each is at the
                // loop variable, inside this chunk, whose part was cut from a buffer checked
                // against the whole range above.
                for #index in __rimms_sub {
                    #body
                }
            });
            ::core::result::Result::Ok(())
        })()
    }
}
