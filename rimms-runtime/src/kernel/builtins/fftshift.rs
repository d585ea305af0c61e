//! `fftshift`: swaps the halves of every row of `row_len` elements. Its declaration is
//! `apis::fftshift`.

use super::{call, elements, same_len, shape, Builtin, BuiltinId, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::merge::{Joins, MergeRule, Params, Part};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `fftshift`.
pub(crate) struct Fftshift<'a> {
    pub(crate) row_len: usize,
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for Fftshift<'_> {
    const DECL: &'static ApiDecl = apis::fftshift::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_lens(target, self.row_len, [self.input.len(), self.out.len()])
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::fftshift(rt, target, self.row_len, &self.input, &mut self.out)
    }
}

/// [`Fftshift`]'s shape check on its views' lengths, `[input, out]`.
fn check_lens(target: Target, row_len: usize, [len, out]: [usize; 2]) -> Result<()> {
    same_len("fftshift", target, ["input", "out"], [len, out])?;
    shape(
        "fftshift",
        target,
        row_len > 0 && len % row_len == 0,
        || format!("{len} elements are not a whole number of rows of {row_len}"),
    )
}

impl<'a> ScopeCall<'a, 2> for Fftshift<'a> {
    const ID: BuiltinId = BuiltinId::Fftshift;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    fn check_args(target: Target, params: Params, args: &[KernelArg<'_>; 2]) -> Result<()> {
        let lens = args.each_ref().map(elements::<C32>);
        check_lens(target, params[0] as usize, lens)
    }

    fn params(&self) -> Params {
        [self.row_len as u64, 0]
    }

    fn args(self) -> [KernelArg<'a>; 2] {
        [
            KernelArg::reads("input", self.input),
            KernelArg::writes("out", self.out),
        ]
    }

    #[inline]
    fn parts(&self) -> [Part; 2] {
        [Part::reads(&self.input), Part::writes(&self.out)]
    }
}

/// Rows follow one another (the row length is a parameter).
pub static RULES: &[&MergeRule] = &[&MergeRule {
    api: apis::fftshift::DECL,
    runs_as: apis::fftshift::DECL,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, p, a| {
        let (input, out) = (a.input::<C32>(0)?, a.output::<C32>(1)?);
        let row_len = p[0] as usize;
        call(
            rt,
            device.into(),
            Fftshift {
                row_len,
                input,
                out,
            },
        )
    },
}];
