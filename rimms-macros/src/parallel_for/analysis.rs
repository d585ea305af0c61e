//! The checking pass of `rimms::parallel_for!`: what the body does with each buffer, and
//! everything the macro refuses.
//!
//! Every name indexed in the body (`x[...]`) is a buffer; per buffer the pass records whether
//! the loop reads it, writes it, or both, and whether every iteration overwrites its element
//! unread (then the loop can discard its old contents). It refuses what it can see would race
//! or escape tracking: a write at an index other than the loop variable, a read at another
//! index of a buffer the loop also writes, a raw pointer taken from a buffer, `break` or
//! `return`, any new binding of the loop variable or of a buffer's name inside the body, and
//! shared state the body updates itself (`total += …`, `v.push(…)`), which is refused with the
//! reduction that does it, since rustc would only say "cannot borrow … in a `Fn` closure".
//!
//! None of this is what keeps the loop sound (see [`super`]): it only adds compile errors
//! and chooses write-discard.

use super::input::{Index, Loop, Range, Reduction};
use crate::diagnostics::Errors;
use proc_macro2::Span;
use std::collections::BTreeMap;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Expr, Ident};

/// What the checked body does with each buffer, keyed by name.
pub struct Analysis {
    pub index: Ident,
    pub uses: BTreeMap<String, Use>,
}

/// How the body uses one buffer.
#[derive(Default)]
pub struct Use {
    pub read: bool,
    pub written: bool,
    /// Read or written only as `name[i]`, so one bounds check before the loop covers it.
    pub only_at_loop_index: bool,
    /// Assigned whole (`name[i] = …`) by a statement of the body itself, not under a
    /// condition, a loop or a closure, in a body that nothing can cut short.
    pub written_unconditionally: bool,
    pub first_span: Option<Span>,
}

struct Collect<'a> {
    index: &'a Ident,
    uses: BTreeMap<String, Use>,
    errors: Errors,
    /// Writes at a non-loop index, reported after collection so reads can be judged too.
    racy_writes: Vec<(String, Span)>,
    other_index_reads: Vec<(String, Span)>,
}

pub fn ident_of(expr: &Expr) -> Option<&Ident> {
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

impl Rebinds<'_> {
    /// Reports `name`, bound inside the body, if it is the loop variable's or a buffer's.
    fn bound(&mut self, name: &Ident) {
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
    }
}

impl<'ast> Visit<'ast> for Rebinds<'_> {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.bound(&p.ident);
        syn::visit::visit_pat_ident(self, p);
    }

    // Items bind names too, and an item in a block is in scope in the whole block, ahead of
    // any outer variable: `const i: usize = 0;` in the body makes every `y[i]` there `y[0]`,
    // which the write-discard analysis would still take for a write of every element (the
    // elements no iteration wrote were then recorded as overwritten, their last valid copy
    // lost). So a constant, a static or an import of either name is refused like a `let`.
    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        self.bound(&c.ident);
        syn::visit::visit_item_const(self, c);
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        self.bound(&s.ident);
        syn::visit::visit_item_static(self, s);
    }

    fn visit_use_name(&mut self, u: &'ast syn::UseName) {
        self.bound(&u.ident);
    }

    fn visit_use_rename(&mut self, u: &'ast syn::UseRename) {
        self.bound(&u.rename);
    }

    // A glob import may bring in any name, the loop variable's included, unseen here.
    fn visit_use_glob(&mut self, g: &'ast syn::UseGlob) {
        self.errors.at(
            g.star_token.span(),
            "a glob import inside `parallel_for!` may bind the loop variable or a buffer's name again; import the names you need one by one",
        );
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

pub const REDUCTIONS: &str = "`sum`, `min`, `max`, `collect` or `reduce(|| identity, |a, b| op)`";

impl Use {
    /// Write-discard only where every element of the range is overwritten unread.
    pub fn discards(&self) -> bool {
        self.written_unconditionally && !self.read
    }
}

/// Checks the loop and, if nothing is wrong with it, says what it does with each buffer.
pub fn analyse(lp: &Loop) -> syn::Result<Analysis> {
    let mut errors = Errors::default();
    if let Some(Reduction::Unknown(name)) = &lp.reduction {
        errors.at(
            name.span(),
            format!("unknown reduction `{name}`: `parallel_for!` takes {REDUCTIONS} before `for`"),
        );
    }
    match lp.range {
        Range::Bounded { .. } => {}
        Range::Unbounded(span) => errors.at(
            span,
            "`parallel_for!` needs a bounded range: `start..end` or `start..=end`",
        ),
        Range::Other(span) => errors.at(
            span,
            "`parallel_for!` runs over a range of indices like `0..n`; to loop over items, index them: `for i in 0..v.len() { … v[i] … }`",
        ),
    }
    let index = match &lp.index {
        Index::Name(index) => index,
        Index::Pattern(span) => {
            // Every rule of the body is about the loop variable: without one, nothing to check.
            return Err(errors.fail(
                *span,
                "the loop variable of `parallel_for!` must be a plain name (not `mut`, not a pattern): every index is checked against it",
            ));
        }
    };
    let uses = body(index, &lp.body, &mut errors);
    errors.finish()?;
    Ok(Analysis {
        index: index.clone(),
        uses,
    })
}

/// Every rule of the body, and the uses of its buffers.
fn body(index: &Ident, body: &syn::Block, errors: &mut Errors) -> BTreeMap<String, Use> {
    let mut collect = Collect {
        index,
        uses: BTreeMap::new(),
        errors: Errors::default(),
        racy_writes: Vec::new(),
        other_index_reads: Vec::new(),
    };
    collect.visit_block(body);
    let Collect {
        mut uses,
        errors: found,
        racy_writes,
        other_index_reads,
        ..
    } = collect;
    if let Err(found) = found.finish() {
        errors.push(found);
    }
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
        errors,
    }
    .visit_block(body);
    Rebinds {
        index,
        buffers: &uses,
        errors,
    }
    .visit_block(body);
    let mut locals = Locals::default();
    locals.visit_block(body);
    Shared {
        locals: &locals.0,
        buffers: &uses,
        errors,
    }
    .visit_block(body);
    let mut may_skip = MaySkip::default();
    may_skip.visit_block(body);
    if !may_skip.0 {
        for name in unconditional_writes(body, index) {
            if let Some(u) = uses.get_mut(&name) {
                u.written_unconditionally = true;
            }
        }
    }
    uses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysed(tokens: proc_macro2::TokenStream) -> syn::Result<Analysis> {
        analyse(&syn::parse2(tokens).expect("the loop parses"))
    }

    fn messages(tokens: proc_macro2::TokenStream) -> Vec<String> {
        match analysed(tokens) {
            Ok(_) => Vec::new(),
            Err(e) => e.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    /// (read, written, discarded) per buffer, in name order.
    fn modes(tokens: proc_macro2::TokenStream) -> Vec<(String, bool, bool, bool)> {
        let analysis = analysed(tokens).expect("a good loop");
        analysis
            .uses
            .iter()
            .map(|(name, u)| (name.clone(), u.read, u.written, u.discards()))
            .collect()
    }

    fn mode(name: &str, read: bool, written: bool, discards: bool) -> (String, bool, bool, bool) {
        (name.to_string(), read, written, discards)
    }

    #[test]
    fn every_mistake_of_a_loop_is_reported_at_once() {
        let found = messages(quote::quote!(product for i in 0.. {
            y[i + 1] = x[i];
            total += x[i];
            break;
        }));
        let expected = [
            "unknown reduction `product`",
            "needs a bounded range",
            "`break` in `parallel_for!`",
            "`y` is written at an index that is not the loop variable",
            "`total` is updated by every iteration",
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (message, part) in found.iter().zip(expected) {
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }

    #[test]
    fn a_pattern_for_the_index_ends_the_check() {
        let found = messages(quote::quote!(for (i, j) in 0..n {
            y[i] = 1.0;
        }));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("must be a plain name"));
    }

    #[test]
    fn only_an_unconditional_unread_whole_write_discards() {
        assert_eq!(
            modes(quote::quote!(for i in 0..n {
                y[i] = a * x[i];
            })),
            [mode("x", true, false, false), mode("y", false, true, true)]
        );
        // Read too: the old contents are needed.
        assert_eq!(
            modes(quote::quote!(for i in 0..n {
                y[i] = y[i] + x[i];
            })),
            [mode("x", true, false, false), mode("y", true, true, false)]
        );
        assert_eq!(
            modes(quote::quote!(for i in 0..n {
                y[i] += 1.0;
            })),
            [mode("y", true, true, false)]
        );
        // Under a condition, after a `continue`, behind a macro, or a field only: elements
        // may be skipped, so they must arrive.
        for body in [
            quote::quote!({
                if c {
                    y[i] = 1.0;
                }
            }),
            quote::quote!({
                if c {
                    continue;
                }
                y[i] = 1.0;
            }),
            quote::quote!({
                y[i] = 1.0;
                m!();
            }),
            quote::quote!({
                y[i].re = 1.0;
            }),
        ] {
            assert_eq!(
                modes(quote::quote!(for i in 0..n #body)),
                [mode("y", false, true, false)],
                "{body}"
            );
        }
        // The assignment as the body's value (no semicolon) is a statement of its own too.
        assert_eq!(
            modes(quote::quote!(for i in 0..=n {
                y[i] = 2.0
            })),
            [mode("y", false, true, true)]
        );
    }

    /// An item in the body binds its name for the whole block, ahead of the loop variable:
    /// `const i: usize = 0;` turned `y[i] = 5` into a write of `y[0]` alone that the
    /// analysis still took for write-discard of every element, so the loop recorded the
    /// elements no iteration wrote as overwritten and their only valid copy (on a device) was
    /// lost (audit; red before `Rebinds` looked at items). Each such item, and a glob import,
    /// is refused like a `let`; an item of another name is not.
    #[test]
    fn an_item_that_binds_the_loop_variable_or_a_buffer_is_refused() {
        for (body, what) in [
            (
                quote::quote!({
                    const i: usize = 0;
                    y[i] = 5;
                }),
                "`i` is bound again",
            ),
            (
                quote::quote!({
                    y[i] = {
                        static i: usize = 0;
                        x[i]
                    };
                }),
                "`i` is bound again",
            ),
            (
                quote::quote!({
                    use consts::ZERO as i;
                    y[i] = 5;
                }),
                "`i` is bound again",
            ),
            (
                quote::quote!({
                    use consts::i;
                    y[i] = 5;
                }),
                "`i` is bound again",
            ),
            (
                quote::quote!({
                    use consts::*;
                    y[i] = 5;
                }),
                "a glob import",
            ),
            (
                quote::quote!({
                    const x: usize = 0;
                    y[i] = x[i];
                }),
                "the loop indexes a buffer of that name",
            ),
        ] {
            let found = messages(quote::quote!(for i in 0..n #body));
            assert_eq!(found.len(), 1, "{body}: {found:#?}");
            assert!(found[0].contains(what), "{body}: {found:?} lacks {what:?}");
        }
        assert_eq!(
            modes(quote::quote!(for i in 0..n {
                const K: f32 = 2.0;
                y[i] = K;
            })),
            [mode("y", false, true, true)]
        );
    }

    /// One case per rule: a body the rule refuses, with what its one error says, or a body
    /// it must let through (`None`).
    #[test]
    fn each_rule_refuses_its_case_and_only_it() {
        let cases: [(proc_macro2::TokenStream, Option<&str>); 24] = [
            (
                quote::quote!({
                    y[i] = x[i];
                    return;
                }),
                Some("`return` in"),
            ),
            (
                quote::quote!({
                    let p = x.as_ptr();
                    y[i] = x[i];
                }),
                Some("`as_ptr` on `x`"),
            ),
            (
                quote::quote!({
                    let p = x.as_mut_ptr();
                    y[i] = x[i];
                }),
                Some("`as_mut_ptr` on `x`"),
            ),
            (
                quote::quote!({
                    let p = v.as_ptr();
                    y[i] = x[i];
                }),
                None,
            ),
            (
                quote::quote!({
                    let p = &x[i] as *const f32;
                    y[i] = 1.0;
                }),
                Some("casting `x` to a raw pointer"),
            ),
            (
                quote::quote!({
                    y[i] = x[i] as f32;
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = x[i] * x.len() as f32;
                }),
                None,
            ),
            (
                quote::quote!({
                    let i = 0;
                    y[i] = 1.0;
                }),
                Some("`i` is bound again"),
            ),
            (
                quote::quote!({
                    let x = 1.0;
                    y[i] = x[i];
                }),
                Some("the loop indexes a buffer of that name"),
            ),
            (
                quote::quote!({
                    let t = x[i];
                    y[i] = t;
                }),
                None,
            ),
            (
                quote::quote!({
                    let mut t = 0.0;
                    t += x[i];
                    y[i] = t;
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = x[i];
                    best = x[i];
                }),
                Some("`best` is assigned by iterations"),
            ),
            (
                quote::quote!({
                    y[i] = x[i];
                    dets.push(i);
                }),
                Some("`dets.push(…)`"),
            ),
            (
                quote::quote!({
                    y[i] = x[i] * v.len() as f32;
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = [{
                        total += x[i];
                        1.0
                    }][0];
                }),
                Some("`total` is updated"),
            ),
            (
                quote::quote!({
                    (|| total += x[i])();
                    y[i] = 1.0;
                }),
                Some("`total` is updated"),
            ),
            (
                quote::quote!({
                    y[i] = 1.0;
                    y(3);
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = 1.0;
                    let n = y.len();
                }),
                Some("`y` is written in this loop, so it cannot be used whole"),
            ),
            (
                quote::quote!({
                    z[i] = x[i] + 1.0;
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = 1.0;
                    z[i] = y[i + 1];
                }),
                Some("reading it at an index other than `i`"),
            ),
            (
                quote::quote!({
                    y[i] = 1.0;
                    z[i] = y[i];
                }),
                None,
            ),
            (
                quote::quote!({
                    y[i] = <S>::C[i];
                }),
                None,
            ),
            (
                quote::quote!({
                    (y)[(i)] = 1.0;
                }),
                None,
            ),
            (
                quote::quote!({
                    y[2 * i] = 1.0;
                }),
                Some("`y` is written at an index that is not the loop variable"),
            ),
        ];
        for (body, expected) in cases {
            let found = messages(quote::quote!(for i in 0..n #body));
            match expected {
                None => assert!(found.is_empty(), "{body}: {found:#?}"),
                Some(part) => assert!(
                    found.len() == 1 && found[0].contains(part),
                    "{body}: expected one error with {part:?}, got {found:#?}"
                ),
            }
        }
    }

    /// What each case makes of the buffers: only `x`, `y`, `z` are buffers, each in the mode
    /// and with the bounds check (`only_at_loop_index`) its uses need.
    #[test]
    fn buffers_are_the_indexed_names_in_the_modes_their_uses_need() {
        let uses = |tokens: proc_macro2::TokenStream| -> Vec<(String, bool, bool, bool)> {
            let analysis = analysed(quote::quote!(for i in 0..n #tokens)).expect("a good loop");
            analysis
                .uses
                .iter()
                .map(|(name, u)| (name.clone(), u.read, u.written, u.only_at_loop_index))
                .collect()
        };
        let case = |n: &str, read, written, at| (n.to_string(), read, written, at);
        // Not a compound assignment: `x` is only read.
        assert_eq!(
            uses(quote::quote!({
                z[i] = x[i] + 1.0;
            })),
            [case("x", true, false, true), case("z", false, true, true)]
        );
        // A read at another index anywhere takes `x` off the per-chunk parts.
        assert_eq!(
            uses(quote::quote!({
                y[i] = x[i] + x[0];
            })),
            [case("x", true, false, false), case("y", false, true, true)]
        );
        assert_eq!(
            uses(quote::quote!({
                y[i] = x[0] + x[i];
            })),
            [case("x", true, false, false), case("y", false, true, true)]
        );
        // Parentheses change nothing; a qualified path is not a buffer.
        assert_eq!(
            uses(quote::quote!({
                (y)[(i)] = (x)[i];
                (z[i]) = 1.0;
            })),
            [
                case("x", true, false, true),
                case("y", false, true, true),
                case("z", false, true, true)
            ]
        );
        assert_eq!(
            uses(quote::quote!({
                y[i] = <S>::C[i];
            })),
            [case("y", false, true, true)]
        );
    }
}
