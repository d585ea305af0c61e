//! `scale`: `data *= factor`, in place. Its declaration is `apis::scale`; a method of the
//! handle only, with no shape to check.

use super::Builtin;
use crate::apis;
use crate::data::HeteSliceMut;
use crate::hal::{Result, Target};
use crate::kernel::ApiDecl;
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `scale`.
pub(crate) struct Scale<'a> {
    pub(crate) factor: C32,
    pub(crate) data: HeteSliceMut<'a, C32>,
}

impl Builtin for Scale<'_> {
    const DECL: &'static ApiDecl = apis::scale::DECL;

    fn check(&self, _target: Target) -> Result<()> {
        Ok(())
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::scale(rt, target, self.factor, &mut self.data)
    }
}
