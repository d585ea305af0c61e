//! `transpose`: `out` (cols × rows) = transpose of `input` (rows × cols). Its declaration
//! is `apis::transpose`; a method of the handle only.

use super::{same_len, shape, Builtin};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::ApiDecl;
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `transpose`.
pub(crate) struct Transpose<'a> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for Transpose<'_> {
    const DECL: &'static ApiDecl = apis::transpose::DECL;

    fn check(&self, target: Target) -> Result<()> {
        let (rows, cols, len) = (self.rows, self.cols, self.input.len());
        same_len("transpose", target, ["input", "out"], [len, self.out.len()])?;
        shape(
            "transpose",
            target,
            rows.checked_mul(cols) == Some(len),
            || format!("{rows} × {cols} does not match {len} elements"),
        )
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::transpose(rt, target, self.rows, self.cols, &self.input, &mut self.out)
    }
}
