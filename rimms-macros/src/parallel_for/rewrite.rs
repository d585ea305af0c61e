//! The body as the expansion runs it: every indexing of a buffer goes through this task's
//! part of it, or through the whole synced slice, always checked.

use super::analysis::{ident_of, Use};
use proc_macro2::Span;
use quote::format_ident;
use std::collections::BTreeMap;
use syn::visit_mut::VisitMut;
use syn::{Expr, Ident};

/// Rewrites `body` for the expansion.
pub fn body(body: &mut syn::Block, uses: &BTreeMap<String, Use>) {
    Rewrite { uses }.visit_block_mut(body);
}

/// Hygiene for everything the expansion names: user code cannot see or shadow these.
pub fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

pub fn whole(name: &Ident) -> Ident {
    format_ident!("__rimms_whole_{}", name, span = Span::mixed_site())
}

pub fn part(name: &Ident) -> Ident {
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
