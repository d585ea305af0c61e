//! `power`: `out = |input|²`, element-wise. Its declaration is `apis::power`.

use super::{same_len, Builtin, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::merge::{Joins, MergeRule};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `power`.
pub(crate) struct Power<'a> {
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, f32>,
}

impl Builtin for Power<'_> {
    const DECL: &'static ApiDecl = apis::power::DECL;

    fn check(&self, target: Target) -> Result<()> {
        let lens = [self.input.len(), self.out.len()];
        same_len("power", target, ["input", "out"], lens)
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::power(rt, target, &self.input, &mut self.out)
    }
}

impl<'a> ScopeCall<'a, 2> for Power<'a> {
    const RULES: &'static [&'static MergeRule] = RULES;

    fn args(self) -> [KernelArg<'a>; 2] {
        [
            KernelArg::reads("input", self.input),
            KernelArg::writes("out", self.out),
        ]
    }
}

/// Element-wise: input and output follow one another.
pub static RULES: &[&MergeRule] = &[&MergeRule {
    api: apis::power::DECL,
    runs_as: apis::power::DECL,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, a| {
        let x = a.input::<C32>(0)?;
        apis::power(rt, device, &x, &mut a.output::<f32>(1)?)
    },
}];
