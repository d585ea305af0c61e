//! `gemm`: `c` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major. Its declaration is
//! `apis::gemm`; a method of the handle only.

use super::{shape, Builtin};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Result, Target};
use crate::kernel::ApiDecl;
use crate::machine::Runtime;
use num_complex::Complex32 as C32;

/// A call of `gemm`.
pub(crate) struct Gemm<'a> {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) a: HeteSlice<'a, C32>,
    pub(crate) b: HeteSlice<'a, C32>,
    pub(crate) c: HeteSliceMut<'a, C32>,
}

impl Builtin for Gemm<'_> {
    const DECL: &'static ApiDecl = apis::gemm::DECL;

    fn check(&self, target: Target) -> Result<()> {
        let (m, k, n) = (self.m, self.k, self.n);
        let (a, b, c) = (self.a.len(), self.b.len(), self.c.len());
        let fits = |x: usize, y: usize, len: usize| x.checked_mul(y) == Some(len);
        shape("gemm", target, fits(m, k, a), || {
            format!("`a` has {a} elements, not {m} × {k}")
        })?;
        shape("gemm", target, fits(k, n, b), || {
            format!("`b` has {b} elements, not {k} × {n}")
        })?;
        shape("gemm", target, fits(m, n, c), || {
            format!("`c` has {c} elements, not {m} × {n}")
        })
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        let (m, k, n) = (self.m, self.k, self.n);
        apis::gemm(rt, target, m, k, n, &self.a, &self.b, &mut self.c)
    }
}
