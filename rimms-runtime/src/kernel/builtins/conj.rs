//! `conj`: `out = conj(input)`, element-wise. Its declaration is `apis::conj`.
//! The rest (the call's description, shape check and merge rule) is `element_wise.rs`'s.

use super::element_wise::ElementWise;
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::merge::MergeRule;
use crate::kernel::ApiDecl;
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// `conj`, the kind of an element-wise call.
pub(crate) struct Conj;

impl ElementWise for Conj {
    type Out = C32;
    const DECL: &'static ApiDecl = apis::conj::DECL;

    fn call(
        rt: &Runtime,
        target: Target,
        input: &HeteSlice<'_, C32>,
        out: &mut HeteSliceMut<'_, C32>,
    ) -> Result<()> {
        apis::conj(rt, target, input, out)
    }
}

/// Element-wise: input and output follow one another.
pub static RULES: &[&MergeRule] = Conj::RULES;
