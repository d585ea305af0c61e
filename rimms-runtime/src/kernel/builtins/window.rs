//! `window`: every row of `input` times a real `window`. Its declaration is `apis::window`.

use super::{call, elements, same_len, whole_rows, Builtin, BuiltinId, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::merge::{Joins, MergeRule, Params, Part};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `window`.
pub(crate) struct Window<'a> {
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) window: HeteSlice<'a, f32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for Window<'_> {
    const DECL: &'static ApiDecl = apis::window::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_lens(
            target,
            [self.input.len(), self.window.len(), self.out.len()],
        )
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::window(rt, target, &self.input, &self.window, &mut self.out)
    }
}

/// [`Window`]'s shape check on its views' lengths, `[input, window, out]`.
fn check_lens(target: Target, [input, window, out]: [usize; 3]) -> Result<()> {
    same_len("window", target, ["input", "out"], [input, out])?;
    whole_rows("window", target, "window", window, input)
}

impl<'a> ScopeCall<'a, 3> for Window<'a> {
    const ID: BuiltinId = BuiltinId::Window;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    fn check_args(target: Target, _: Params, args: &[KernelArg<'_>; 3]) -> Result<()> {
        let lens = [
            elements::<C32>(&args[0]),
            elements::<f32>(&args[1]),
            elements::<C32>(&args[2]),
        ];
        check_lens(target, lens)
    }

    fn args(self) -> [KernelArg<'a>; 3] {
        [
            KernelArg::reads("input", self.input),
            KernelArg::reads("window", self.window),
            KernelArg::writes("out", self.out),
        ]
    }

    #[inline]
    fn parts(&self) -> [Part; 3] {
        [
            Part::reads(&self.input),
            Part::reads(&self.window),
            Part::writes(&self.out),
        ]
    }
}

/// Input and output follow one another, the window is shared.
pub static RULES: &[&MergeRule] = &[&MergeRule {
    api: apis::window::DECL,
    runs_as: apis::window::DECL,
    joins: &[Joins::Concat, Joins::Same, Joins::Concat],
    run: |rt, device, _, a| {
        let (input, window, out) = (a.input::<C32>(0)?, a.input::<f32>(1)?, a.output::<C32>(2)?);
        call(rt, device.into(), Window { input, window, out })
    },
}];
