//! `zip_rows`: `out = a op row` with `row` broadcast over every row of `a`. Its declaration
//! is `apis::zip_rows`; a merged `zip` whose `b` is shared runs as one too.

use super::zip::{self, zip_op};
use super::{call, elements, same_len, whole_rows, Builtin, BuiltinId, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Device, Result, Target, ZipOp};
use crate::kernel::merge::{Joins, MergeRule, MergedArgs, Params, Part};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `zip_rows`.
pub(crate) struct ZipRows<'a> {
    pub(crate) op: ZipOp,
    pub(crate) a: HeteSlice<'a, C32>,
    pub(crate) row: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for ZipRows<'_> {
    const DECL: &'static ApiDecl = apis::zip_rows::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_lens(target, [self.a.len(), self.row.len(), self.out.len()])
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::zip_rows(rt, target, self.op, &self.a, &self.row, &mut self.out)
    }
}

/// [`ZipRows`]'s shape check on its views' lengths, `[a, row, out]`.
fn check_lens(target: Target, [a, row, out]: [usize; 3]) -> Result<()> {
    same_len("zip_rows", target, ["a", "out"], [a, out])?;
    whole_rows("zip_rows", target, "row", row, a)
}

impl<'a> ScopeCall<'a, 3> for ZipRows<'a> {
    const ID: BuiltinId = BuiltinId::ZipRows;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    fn check_args(target: Target, _: Params, args: &[KernelArg<'_>; 3]) -> Result<()> {
        check_lens(target, args.each_ref().map(elements::<C32>))
    }

    fn params(&self) -> Params {
        zip::params(self.op)
    }

    fn args(self) -> [KernelArg<'a>; 3] {
        [
            KernelArg::reads("a", self.a),
            KernelArg::reads("row", self.row),
            KernelArg::writes("out", self.out),
        ]
    }

    #[inline]
    fn parts(&self) -> [Part; 3] {
        [
            Part::reads(&self.a),
            Part::reads(&self.row),
            Part::writes(&self.out),
        ]
    }
}

/// Runs a merged `zip_rows` (or a `zip` whose `b` every member shares).
pub(crate) fn run_merged(
    rt: &Runtime,
    device: Device,
    p: Params,
    a: &mut MergedArgs<'_>,
) -> Result<()> {
    let (x, row, out) = (a.input::<C32>(0)?, a.input::<C32>(1)?, a.output::<C32>(2)?);
    let op = zip_op(p[0]);
    call(rt, device.into(), ZipRows { op, a: x, row, out })
}

/// The matrix and the result follow one another, the row is shared.
pub static RULES: &[&MergeRule] = &[&MergeRule {
    api: apis::zip_rows::DECL,
    runs_as: apis::zip_rows::DECL,
    joins: &[Joins::Concat, Joins::Same, Joins::Concat],
    run: run_merged,
}];
