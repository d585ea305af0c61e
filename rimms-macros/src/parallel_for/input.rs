//! The model of `parallel_for!`'s input: `[REDUCTION] for INDEX in RANGE { BODY }`, read as
//! written. Anything a loop can hold is accepted here; what `parallel_for!` refuses (an unknown
//! reduction, a pattern for an index, an unbounded range) is [`super::analysis`]'s to report,
//! with everything else it finds.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Block, Expr, ExprForLoop, Ident, Label, Pat, RangeLimits, Token};

pub struct Loop {
    pub reduction: Option<Reduction>,
    pub label: Option<Label>,
    pub index: Index,
    pub range: Range,
    pub body: Block,
}

/// How iterations' values combine.
pub enum Reduction {
    Sum,
    Min,
    Max,
    Collect,
    Reduce { identity: Box<Expr>, op: Box<Expr> },
    Unknown(Ident),
}

pub enum Index {
    /// A plain name: what every index in the body is checked against.
    Name(Ident),
    /// `mut i`, `ref i`, `(a, b)`, …
    Pattern(Span),
}

pub enum Range {
    Bounded {
        start: Box<Expr>,
        end: Box<Expr>,
        inclusive: bool,
    },
    /// `a..`, `..b`, `..`.
    Unbounded(Span),
    /// Not a range expression at all.
    Other(Span),
}

impl Parse for Loop {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let reduction = if input.peek(Ident) && !input.peek(Token![for]) {
            Some(input.parse()?)
        } else {
            None
        };
        let lp: ExprForLoop = input.parse()?;
        Ok(Loop {
            reduction,
            label: lp.label,
            index: Index::of(&lp.pat),
            range: Range::of(&lp.expr),
            body: lp.body,
        })
    }
}

impl Parse for Reduction {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        Ok(match name.to_string().as_str() {
            "sum" => Reduction::Sum,
            "min" => Reduction::Min,
            "max" => Reduction::Max,
            "collect" => Reduction::Collect,
            "reduce" => {
                let content;
                syn::parenthesized!(content in input);
                let identity = content.parse()?;
                content.parse::<Token![,]>()?;
                let op = content.parse()?;
                let _ = content.parse::<Option<Token![,]>>()?;
                Reduction::Reduce { identity, op }
            }
            _ => Reduction::Unknown(name),
        })
    }
}

impl Index {
    fn of(pat: &Pat) -> Index {
        match pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.mutability.is_none() && p.subpat.is_none() => {
                Index::Name(p.ident.clone())
            }
            other => Index::Pattern(other.span()),
        }
    }
}

impl Range {
    fn of(expr: &Expr) -> Range {
        match expr {
            Expr::Range(r) => match (&r.start, &r.end) {
                (Some(start), Some(end)) => Range::Bounded {
                    start: start.clone(),
                    end: end.clone(),
                    inclusive: matches!(r.limits, RangeLimits::Closed(_)),
                },
                _ => Range::Unbounded(r.span()),
            },
            other => Range::Other(other.span()),
        }
    }
}
