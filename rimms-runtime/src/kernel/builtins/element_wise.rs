//! What the element-wise built-ins of one complex input share (`conj`, `magnitude`, `power`):
//! the call's description, its shape check (input and output of one length) and its merge rule
//! (input and output concatenate). Each of those built-ins is only what differs: its
//! declaration, its output element and the generated function it calls ([`ElementWise`]).

use super::{call, elements, same_len, Builtin, BuiltinId, ScopeCall};
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Device, Result, Target};
use crate::kernel::merge::{Joins, MergeRule, MergedArgs, Params, Part};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use bytemuck::Pod;
use num_complex::Complex32 as C32;
use std::marker::PhantomData;

/// One element-wise built-in of a complex input.
pub(crate) trait ElementWise: Sized + 'static {
    /// The element it writes.
    type Out: Pod;
    /// Its declaration in `apis`.
    const DECL: &'static ApiDecl;
    /// Runs it: the generated function of its declaration.
    fn call(
        rt: &Runtime,
        target: Target,
        input: &HeteSlice<'_, C32>,
        out: &mut HeteSliceMut<'_, Self::Out>,
    ) -> Result<()>;

    /// Input and output concatenate: calls over following rows run as one.
    const RULE: MergeRule = MergeRule {
        api: Self::DECL,
        runs_as: Self::DECL,
        joins: &[Joins::Concat, Joins::Concat],
        run: merged::<Self>,
    };
    /// Its merge rules, as a scope and `merge_rules` name them: what its `static` holds.
    const RULES: &'static [&'static MergeRule] = &[&Self::RULE];
    /// The `static` holding [`ElementWise::RULES`], read at run time
    /// ([`ScopeCall::rules`] says why).
    fn rules() -> &'static [&'static MergeRule];
    /// Its [`ScopeCall::ID`]: the variant of the kind's name.
    const ID: BuiltinId;
}

/// One element-wise built-in's home in a line: `element_wise_kind!(Conj = conj -> C32)`
/// defines the kind `Conj` of `apis::conj`, whose output element is `C32`, and its `RULES`.
macro_rules! element_wise_kind {
    ($kind:ident = $api:ident -> $out:ty) => {
        #[doc = concat!("`", stringify!($api), "`, the kind of an element-wise call.")]
        pub(crate) struct $kind;

        impl $crate::kernel::builtins::element_wise::ElementWise for $kind {
            type Out = $out;
            const DECL: &'static $crate::kernel::ApiDecl = $crate::apis::$api::DECL;

            fn call(
                rt: &$crate::machine::Runtime,
                target: $crate::hal::Target,
                input: &$crate::data::HeteSlice<'_, num_complex::Complex32>,
                out: &mut $crate::data::HeteSliceMut<'_, $out>,
            ) -> $crate::hal::Result<()> {
                $crate::apis::$api(rt, target, input, out)
            }

            fn rules() -> &'static [&'static $crate::kernel::merge::MergeRule] {
                RULES
            }

            const ID: $crate::kernel::builtins::BuiltinId =
                $crate::kernel::builtins::BuiltinId::$kind;
        }

        /// Element-wise: input and output follow one another.
        pub static RULES: &[&$crate::kernel::merge::MergeRule] =
            <$kind as $crate::kernel::builtins::element_wise::ElementWise>::RULES;
    };
}
pub(crate) use element_wise_kind;

/// The merge rule's run: one call of `K` over the merged views.
fn merged<K: ElementWise>(
    rt: &Runtime,
    device: Device,
    _: Params,
    args: &mut MergedArgs<'_>,
) -> Result<()> {
    let (input, out) = (args.input::<C32>(0)?, args.output::<K::Out>(1)?);
    call(rt, device.into(), Call::<K>::new(input, out))
}

/// A call of the element-wise built-in `K`.
pub(crate) struct Call<'a, K: ElementWise> {
    input: HeteSlice<'a, C32>,
    out: HeteSliceMut<'a, K::Out>,
    kind: PhantomData<K>,
}

impl<'a, K: ElementWise> Call<'a, K> {
    /// `out = K(input)`.
    pub(crate) fn new(input: HeteSlice<'a, C32>, out: HeteSliceMut<'a, K::Out>) -> Self {
        Call {
            input,
            out,
            kind: PhantomData,
        }
    }
}

impl<K: ElementWise> Builtin for Call<'_, K> {
    const DECL: &'static ApiDecl = K::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_lens::<K>(target, [self.input.len(), self.out.len()])
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        K::call(rt, target, &self.input, &mut self.out)
    }
}

/// `K`'s shape check on its views' lengths, `[input, out]`.
fn check_lens<K: ElementWise>(target: Target, lens: [usize; 2]) -> Result<()> {
    same_len(K::DECL.name(), target, ["input", "out"], lens)
}

impl<'a, K: ElementWise> ScopeCall<'a, 2> for Call<'a, K> {
    const ID: BuiltinId = K::ID;

    fn rules() -> &'static [&'static MergeRule] {
        K::rules()
    }

    fn check_args(target: Target, _: Params, args: &[KernelArg<'_>; 2]) -> Result<()> {
        let lens = [elements::<C32>(&args[0]), elements::<K::Out>(&args[1])];
        check_lens::<K>(target, lens)
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
