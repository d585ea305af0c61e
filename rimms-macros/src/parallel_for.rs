//! `rimms::parallel_for!`: a host loop over managed buffers, run in parallel.
//!
//! The macro finds every name indexed in the body (`x[...]`), decides per name whether the
//! loop reads it, writes it, or both, and rejects what it can see would race or escape
//! tracking: a write at an index other than the loop variable, a read at another index of a
//! buffer the loop also writes, a raw pointer taken from a buffer, `break` or `return`, and any
//! new binding of the loop variable or of a buffer's name inside the body. It then syncs each
//! buffer once, before the loop, in the mode its use needs, and runs the body over chunks of
//! the range.
//!
//! None of that analysis is what keeps the loop sound. Each chunk gets its own disjoint parts
//! of the buffers (`rimms::__private::run_loop` splits them with `split_at_mut`), and the body
//! indexes them with ordinary checked indexing, so an index the analysis misjudged panics
//! inside its own part instead of writing anywhere else. The expansion contains no `unsafe`,
//! and every local it makes has mixed-site hygiene, so user code can neither name nor shadow
//! them.

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
    /// Assigned whole (`name[i] = …`) by a statement of the body itself, not under a
    /// condition, a loop or a closure.
    written_unconditionally: bool,
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

/// Finds what could skip part of an iteration (`continue`, or a macro, whose tokens could hide
/// one), which makes no write unconditional.
#[derive(Default)]
struct MaySkip(bool);

impl<'ast> Visit<'ast> for MaySkip {
    fn visit_expr(&mut self, expr: &'ast Expr) {
        self.0 |= matches!(expr, Expr::Continue(_) | Expr::Macro(_));
        syn::visit::visit_expr(self, expr);
    }

    fn visit_stmt_macro(&mut self, _: &'ast syn::StmtMacro) {
        self.0 = true;
    }
}

/// The buffers a statement of the body itself assigns whole at the loop index.
fn unconditional_writes(body: &syn::Block, index: &Ident) -> Vec<String> {
    body.stmts
        .iter()
        .filter_map(|stmt| match stmt {
            syn::Stmt::Expr(Expr::Assign(a), _) => match unparen(&a.left) {
                Expr::Index(ix) if is_loop_index(&ix.index, index) => {
                    ident_of(&ix.expr).map(|i| i.to_string())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn unparen(expr: &Expr) -> &Expr {
    match expr {
        Expr::Paren(p) => unparen(&p.expr),
        other => other,
    }
}

/// Reports every new binding, inside the body, of the loop variable or of a buffer's name:
/// the macro reads `y[i]` by name, so a body that rebinds either would mean something else by
/// it than the analysis assumed.
struct Rebinds<'a> {
    index: &'a Ident,
    buffers: &'a BTreeMap<String, Use>,
    errors: &'a mut Errors,
}

impl<'ast> Visit<'ast> for Rebinds<'_> {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        let name = &p.ident;
        if name == self.index {
            self.errors.at(
                name.span(),
                format!("`{name}` is bound again inside `parallel_for!`: the loop variable must keep its meaning in the whole body, because each iteration's writes are checked against it; use another name"),
            );
        } else if self.buffers.contains_key(&name.to_string()) {
            self.errors.at(
                name.span(),
                format!("`{name}` is bound again inside `parallel_for!`, but the loop indexes a buffer of that name; use another name"),
            );
        }
        syn::visit::visit_pat_ident(self, p);
    }
}

/// Hygiene for everything the expansion names: user code cannot see or shadow these.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn whole(name: &Ident) -> Ident {
    format_ident!("__rimms_whole_{}", name, span = Span::mixed_site())
}

fn part(name: &Ident) -> Ident {
    format_ident!("__rimms_part_{}", name, span = Span::mixed_site())
}

/// Rewrites indexing of buffers: at the loop variable into this chunk's part (checked, at the
/// index's offset from the chunk's start), elsewhere into the whole synced slice (checked,
/// read-only).
struct Rewrite<'a> {
    uses: &'a BTreeMap<String, Use>,
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
            let (part, lo) = (part(&name), local("__rimms_lo"));
            syn::parse_quote!(#part[(#index).wrapping_sub(#lo)])
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
        Pat::Ident(p) if p.by_ref.is_none() && p.mutability.is_none() && p.subpat.is_none() => {
            p.ident.clone()
        }
        other => {
            errors.at(
                other.span(),
                "the loop variable of `parallel_for!` must be a plain name (not `mut`, not a pattern): every index is checked against it",
            );
            return failed(errors);
        }
    };
    let range_fn = match &*lp.expr {
        Expr::Range(r) => match (&r.start, &r.end, r.limits) {
            (Some(s), Some(e), RangeLimits::HalfOpen(_)) => {
                quote!(loop_range(#s, #e))
            }
            (Some(s), Some(e), RangeLimits::Closed(_)) => {
                quote!(loop_range_inclusive(#s, #e))
            }
            _ => {
                errors.at(
                    r.span(),
                    "`parallel_for!` needs a bounded range: `start..end` or `start..=end`",
                );
                return failed(errors);
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
        mut uses,
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
    Rebinds {
        index: &index,
        buffers: &uses,
        errors: &mut errors,
    }
    .visit_block(&lp.body);
    if errors.has_any() {
        return failed(errors);
    }
    let mut may_skip = MaySkip::default();
    may_skip.visit_block(&lp.body);
    if !may_skip.0 {
        for name in unconditional_writes(&lp.body, &index) {
            if let Some(u) = uses.get_mut(&name) {
                u.written_unconditionally = true;
            }
        }
    }

    let rimms = paths::rimms();
    let (range, chunk, sub, lo, count, k) = (
        local("__rimms_range"),
        local("__rimms_chunk"),
        local("__rimms_sub"),
        local("__rimms_lo"),
        local("__rimms_count"),
        local("__rimms_k"),
    );
    let mut prologue = Vec::new();
    let mut finish = Vec::new();
    // Parts in the order they are nested in the value handed to `run_loop`.
    let mut parts: Vec<(Ident, TokenStream, bool)> = Vec::new();
    for (name, u) in &uses {
        let buf = Ident::new(name, u.first_span.unwrap_or_else(Span::call_site));
        let (whole, part) = (whole(&buf), part(&buf));
        let label = name.as_str();
        if u.written {
            // Write-discard only where every element of the range is overwritten unread.
            let discard = u.written_unconditionally && !u.read;
            prologue.push(quote! {
                let mut #whole = {
                    use #rimms::__private::LoopWrite as _;
                    (#buf).__rimms_loop_write(#label, #discard, &#range)?
                };
                #chunk = ::core::cmp::min(#chunk, #whole.chunk());
            });
            parts.push((
                part,
                quote!(#whole.part(::core::clone::Clone::clone(&#range))),
                true,
            ));
            finish.push(quote!(#whole.finish();));
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
    Rewrite { uses: &uses }.visit_block_mut(&mut lp.body);
    let body = &lp.body;
    let loop_label = &lp.label;
    quote! {
        (|| -> #rimms::Result<()> {
            let #range: ::core::ops::Range<usize> = #rimms::__private::#range_fn?;
            #[allow(unused_mut)]
            let mut #chunk: usize = #rimms::__private::LOOP_CHUNK;
            #(#prologue)*
            #rimms::__private::run_loop(
                ::core::clone::Clone::clone(&#range),
                #chunk,
                #parts_value,
                |#sub: ::core::ops::Range<usize>, #parts_pat| {
                    let #lo = #sub.start;
                    let #count = #sub.end - #sub.start;
                    #(#trims)*
                    #loop_label for #k in 0..#count {
                        let #index = #lo + #k;
                        #body
                    }
                },
            );
            #(#finish)*
            ::core::result::Result::Ok(())
        })()
    }
}
