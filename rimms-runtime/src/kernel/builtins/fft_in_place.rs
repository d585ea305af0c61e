//! `fft_in_place`: the FFT of every row of `points` elements of `data`, in place. Its
//! declaration is `apis::fft_in_place`; a method of the handle only (a scope merges no
//! read-write argument).

use super::fft::{check_shape, powers_taken};
use super::Builtin;
use crate::apis;
use crate::data::HeteSliceMut;
use crate::hal::{FftDirection, Result, Target};
use crate::kernel::accepts::check_as;
use crate::kernel::{ApiDecl, ApiSpec};
use crate::machine::{DeviceEntry, Runtime};
use num_complex::Complex32 as C32;

/// A call of `fft_in_place`.
pub(crate) struct FftInPlace<'a> {
    pub(crate) dir: FftDirection,
    pub(crate) points: usize,
    pub(crate) data: HeteSliceMut<'a, C32>,
}

impl Builtin for FftInPlace<'_> {
    const DECL: &'static ApiDecl = apis::fft_in_place::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_shape(target, self.points, self.data.len())
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::fft_in_place(rt, target, self.dir, self.points, &mut self.data)
    }
}

/// The capability probe: the sizes `entry`'s `fft_in_place` takes (empty without one).
pub(crate) fn sizes_taken(entry: &DeviceEntry, implemented: &[&str]) -> Vec<usize> {
    if !implemented.contains(&apis::fft_in_place::DECL.name()) {
        return Vec::new();
    }
    powers_taken(entry, apis::fft_in_place::DECL, |dev, check, n| {
        let fits = check_as::<<apis::fft_in_place as ApiSpec>::Accepts>(check)?;
        fits(dev, FftDirection::Forward, n, n)
    })
}
