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
//! A reduction named before `for` (`sum`, `min`, `max`, `collect`, `reduce(id, op)`) makes the
//! body's value each iteration's contribution: every task folds its own iterations into an
//! accumulator of its own, and `run_reduce` combines them after, so reductions add no shared
//! state. Shared state the body tries to update itself (`total += …`, `v.push(…)`) is refused
//! with the reduction that does it, since rustc would only say "cannot borrow … in a `Fn`
//! closure".
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
                "`return` in `parallel_for!`: the body runs as separate parallel iterations, not as a function; use `continue` to end this iteration early (with a reduction, a `continue`d iteration gives no value), or a sequential loop to leave it",
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

/// Every name a pattern in the body binds: variables of the iteration itself, which the body
/// may update as it likes.
#[derive(Default)]
struct Locals(std::collections::BTreeSet<String>);

impl<'ast> Visit<'ast> for Locals {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.0.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
}

/// Methods that add to a collection.
const GROWS: [&str; 7] = [
    "push",
    "push_str",
    "push_back",
    "push_front",
    "insert",
    "extend",
    "append",
];

/// Finds state shared between iterations that the body tries to update (`total += x[i]`,
/// `dets.push(i)`), which rustc would refuse with "cannot borrow … in a `Fn` closure": the
/// macro says why and which reduction does it. Also finds a written buffer used whole.
struct Shared<'a> {
    locals: &'a std::collections::BTreeSet<String>,
    buffers: &'a BTreeMap<String, Use>,
    errors: &'a mut Errors,
}

impl Shared<'_> {
    /// A name from outside the body that is not a buffer the loop indexes.
    fn outer<'e>(&self, expr: &'e Expr) -> Option<&'e Ident> {
        ident_of(expr).filter(|name| {
            let name = name.to_string();
            !self.locals.contains(&name) && !self.buffers.contains_key(&name)
        })
    }
}

impl<'ast> Visit<'ast> for Shared<'_> {
    fn visit_expr(&mut self, expr: &'ast Expr) {
        match expr {
            Expr::Binary(b) if is_compound_assign(&b.op) => {
                if let Some(name) = self.outer(&b.left) {
                    self.errors.at(
                        b.span(),
                        format!("`{name}` is updated by every iteration, but iterations run in parallel and cannot share it; make each iteration's share the body's result and let a reduction add them up: `let {name} = parallel_for!(sum for i in … {{ … }})?`; the reductions are {REDUCTIONS}"),
                    );
                }
            }
            Expr::Assign(a) => {
                if let Some(name) = self.outer(&a.left) {
                    self.errors.at(
                        a.span(),
                        format!("`{name}` is assigned by iterations that run in parallel; give each iteration's value as the body's result and combine them with a reduction ({REDUCTIONS}): `let {name} = parallel_for!(max for i in … {{ … }})?`"),
                    );
                }
            }
            Expr::MethodCall(m) if GROWS.iter().any(|g| m.method == g) => {
                if let Some(name) = self.outer(&m.receiver) {
                    self.errors.at(
                        m.method.span(),
                        format!("`{name}.{}(…)` in `parallel_for!`: iterations run in parallel and cannot add to one collection; make the item the body's result (`continue` where there is none) and collect in index order: `let {name} = parallel_for!(collect for i in … {{ if … {{ continue; }} i }})?`", m.method),
                    );
                }
            }
            Expr::Index(ix) if ident_of(&ix.expr).is_some() => {
                // `y[i]`: the indexed name is not a use of the whole buffer.
                self.visit_expr(&ix.index);
                return;
            }
            Expr::Call(c) if ident_of(&c.func).is_some() => {
                for arg in &c.args {
                    self.visit_expr(arg);
                }
                return;
            }
            _ => {
                if let Some(name) = ident_of(expr) {
                    let key = name.to_string();
                    // A name the body binds again is reported as such, not as a whole use.
                    let written = self.buffers.get(&key).is_some_and(|u| u.written);
                    if written && !self.locals.contains(&key) {
                        self.errors.at(
                            name.span(),
                            format!("`{name}` is written in this loop, so it cannot be used whole: each task holds only its own elements of it; index it as `{name}[i]`"),
                        );
                    }
                }
            }
        }
        syn::visit::visit_expr(self, expr);
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
        match expr {
            Expr::Index(ix) => {
                let Some(name) = ident_of(&ix.expr).cloned() else {
                    return syn::visit_mut::visit_expr_mut(self, expr);
                };
                self.visit_expr_mut(&mut ix.index);
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
            Expr::Call(c) if ident_of(&c.func).is_some() => {
                for arg in c.args.iter_mut() {
                    self.visit_expr_mut(arg);
                }
            }
            _ => {
                // A read-only buffer used whole (`f(&pw, i)`, `pw.len()`) is its synced
                // contents, a `&[T]`; a written one was refused before.
                if let Some(name) = ident_of(expr).cloned() {
                    if self.uses.contains_key(&name.to_string()) {
                        let whole = whole(&name);
                        *expr = syn::parse_quote!(#whole);
                        return;
                    }
                }
                syn::visit_mut::visit_expr_mut(self, expr);
            }
        }
    }
}

/// The expansion of a loop the macro refuses: the errors, in a block of the macro's type.
fn failed(errors: Errors) -> TokenStream {
    let rimms = paths::rimms();
    let errors = errors.finish().unwrap_or_default();
    quote!({ #errors ::core::result::Result::<(), #rimms::Error>::Ok(()) })
}

const REDUCTIONS: &str = "`sum`, `min`, `max`, `collect` or `reduce(|| identity, |a, b| op)`";

/// `[REDUCTION] for i in RANGE { … }`: the loop, and the expression that makes its reduction
/// (a `Reduction` of the runtime's), if it has one.
fn parse_input(input: syn::parse::ParseStream) -> syn::Result<(Option<TokenStream>, ExprForLoop)> {
    let rimms = paths::rimms();
    let reduce = if input.peek(Ident) {
        let name: Ident = input.parse()?;
        match name.to_string().as_str() {
            "sum" => Some(quote!(#rimms::__private::Sum::new())),
            "min" => Some(quote!(#rimms::__private::Extreme::min())),
            "max" => Some(quote!(#rimms::__private::Extreme::max())),
            "collect" => Some(quote!(#rimms::__private::Collect::new())),
            "reduce" => {
                let content;
                syn::parenthesized!(content in input);
                let identity: Expr = content.parse()?;
                content.parse::<syn::Token![,]>()?;
                let op: Expr = content.parse()?;
                let _ = content.parse::<Option<syn::Token![,]>>()?;
                Some(quote!(#rimms::__private::Fold::new(#identity, #op)))
            }
            other => {
                return Err(syn::Error::new(
                    name.span(),
                    format!(
                    "unknown reduction `{other}`: `parallel_for!` takes {REDUCTIONS} before `for`"
                ),
                ))
            }
        }
    } else {
        None
    };
    Ok((reduce, input.parse()?))
}

pub fn expand(input: TokenStream) -> TokenStream {
    let (reduce, mut lp) = match syn::parse::Parser::parse2(parse_input, input) {
        Ok(parsed) => parsed,
        Err(e) if e.to_string().starts_with("unknown reduction") => return e.to_compile_error(),
        Err(e) => {
            return syn::Error::new(
                e.span(),
                format!("`parallel_for!` takes one loop over a range, optionally after a reduction: `parallel_for!(for i in 0..n {{ y[i] = x[i]; }})`, `parallel_for!(sum for i in 0..n {{ x[i] }})`; the reductions are {REDUCTIONS}"),
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
    let mut locals = Locals::default();
    locals.visit_block(&lp.body);
    Shared {
        locals: &locals.0,
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
                    #loop_label for #k in 0..#count {
                        let #index = #lo + #k;
                        let #value = #body;
                        #acc = #rimms::__private::Reduction::step(&#reduction, #acc, #value);
                    }
                    #acc
                },
            );
            #(#finish)*
            ::core::result::Result::Ok(#value)
        })()
    }
}
