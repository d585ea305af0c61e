//! `conj`: `out = conj(input)`, element-wise. Its declaration is `apis::conj`.

use super::{same_len, Builtin, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::merge::{Joins, MergeRule};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `conj`.
pub(crate) struct Conj<'a> {
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for Conj<'_> {
    const DECL: &'static ApiDecl = apis::conj::DECL;

    fn check(&self, target: Target) -> Result<()> {
        let lens = [self.input.len(), self.out.len()];
        same_len("conj", target, ["input", "out"], lens)
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::conj(rt, target, &self.input, &mut self.out)
    }
}

impl<'a> ScopeCall<'a, 2> for Conj<'a> {
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
    api: apis::conj::DECL,
    runs_as: apis::conj::DECL,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, a| {
        let x = a.input::<C32>(0)?;
        apis::conj(rt, device, &x, &mut a.output::<C32>(1)?)
    },
}];
