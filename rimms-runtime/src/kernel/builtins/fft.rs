//! `fft`: the FFT of every row of `points` elements of `input` into `output` (inverse scaled
//! by 1/N). Its declaration is `apis::fft`.

use super::{call, elements, same_len, shape, Builtin, BuiltinId, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Device, FftDirection, Result, Target};
use crate::kernel::accepts::{self, check_as, Check};
use crate::kernel::capabilities::FFT_PROBE_MAX_LOG2;
use crate::kernel::merge::{Joins, MergeRule, Params, Part};
use crate::kernel::{Api, ApiDecl, ApiSpec, DeviceCtx, KernelArg, Refusal};
use crate::machine::{DeviceEntry, Runtime, Shared};
use num_complex::Complex32 as C32;

/// A call of `fft`.
pub(crate) struct Fft<'a> {
    pub(crate) dir: FftDirection,
    pub(crate) points: usize,
    pub(crate) input: HeteSlice<'a, C32>,
    pub(crate) output: HeteSliceMut<'a, C32>,
}

impl Builtin for Fft<'_> {
    const DECL: &'static ApiDecl = apis::fft::DECL;

    /// Inlined: a scope's row FFT asks it per row, and a call of it cost as much again as the
    /// few comparisons it makes (callgrind, `benches/per_call_instructions.rs`).
    #[inline]
    fn check(&self, target: Target) -> Result<()> {
        check_lens(target, self.points, [self.input.len(), self.output.len()])
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        apis::fft(
            rt,
            target,
            self.dir,
            self.points,
            &self.input,
            &mut self.output,
        )
    }
}

impl<'a> ScopeCall<'a, 2> for Fft<'a> {
    const ID: BuiltinId = BuiltinId::Fft;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    fn params(&self) -> Params {
        params(self.dir, self.points)
    }

    fn args(self) -> [KernelArg<'a>; 2] {
        [
            KernelArg::reads("input", self.input),
            KernelArg::writes("output", self.output),
        ]
    }

    #[inline]
    fn parts(&self) -> [Part; 2] {
        [Part::reads(&self.input), Part::writes(&self.output)]
    }

    #[inline]
    fn check_args(target: Target, params: Params, args: &[KernelArg<'_>; 2]) -> Result<()> {
        let lens = [elements::<C32>(&args[0]), elements::<C32>(&args[1])];
        check_lens(target, params[1] as usize, lens)
    }

    /// The implementation's `accepts` check, which depends on the device and the transform
    /// only (every member of a group has the group's shape, checked at its submission).
    fn check_group_on(
        shared: &Shared,
        device: Device,
        params: Params,
        args: &[KernelArg<'_>; 2],
    ) -> Result<()> {
        let len = elements::<C32>(&args[0]);
        let (dir, points) = (direction(params[0]), params[1] as usize);
        let entry = shared.device(device)?;
        accepts::ask(entry, Api::of(apis::fft::DECL).index(), |dev, check| {
            check_as::<<apis::fft as ApiSpec>::Accepts>(check)?(dev, dir, points, len, len)
        })
        .map_err(|why| accepts::refused("fft", device, why))
    }
}

/// [`Fft`]'s shape check on its views' lengths, `[input, output]`.
#[inline]
fn check_lens(target: Target, points: usize, [len, out_len]: [usize; 2]) -> Result<()> {
    same_len(Fft::api(), target, ["input", "output"], [len, out_len])?;
    check_shape(target, points, len)
}

/// Refuses an FFT whose shape does not fit: `points` a power of two of at least 2, and
/// `len` a whole number of rows of it (`fft_in_place` asks the same). Inlined, as
/// `Fft::check` is: its errors' messages are built only on the way out.
#[inline]
pub(crate) fn check_shape(target: Target, points: usize, len: usize) -> Result<()> {
    shape(
        "fft",
        target,
        points.is_power_of_two() && points >= 2,
        || format!("the transform size must be a power of two of at least 2, got {points}"),
    )?;
    shape("fft", target, len % points == 0, || {
        format!("{len} elements are not a whole number of {points}-point rows")
    })
}

fn params(dir: FftDirection, points: usize) -> Params {
    [dir as u64, points as u64]
}

fn direction(code: u64) -> FftDirection {
    if code == FftDirection::Forward as u64 {
        FftDirection::Forward
    } else {
        FftDirection::Inverse
    }
}

/// Input and output rows follow one another (the batch dimension; every call's length is a
/// multiple of the transform size, so their union is too).
pub static RULES: &[&MergeRule] = &[&MergeRule {
    api: apis::fft::DECL,
    runs_as: apis::fft::DECL,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, p, a| {
        let (input, output) = (a.input::<C32>(0)?, a.output::<C32>(1)?);
        let (dir, points) = (direction(p[0]), p[1] as usize);
        let fft = Fft {
            dir,
            points,
            input,
            output,
        };
        call(rt, device.into(), fft)
    },
}];

/// The capability probe: the sizes `entry`'s `fft` takes (empty without one).
pub(crate) fn sizes_taken(entry: &DeviceEntry, implemented: &[&str]) -> Vec<usize> {
    if !implemented.contains(&apis::fft::DECL.name()) {
        return Vec::new();
    }
    powers_taken(entry, apis::fft::DECL, |dev, check, n| {
        let fits = check_as::<<apis::fft as ApiSpec>::Accepts>(check)?;
        fits(dev, FftDirection::Forward, n, n, n)
    })
}

/// The FFT sizes (powers of two up to 2^[`FFT_PROBE_MAX_LOG2`]) that the `accepts` check of
/// `entry`'s implementation of the FFT API `decl` takes; `ask` calls the check for one size.
pub(crate) fn powers_taken(
    entry: &DeviceEntry,
    decl: &'static ApiDecl,
    ask: impl Fn(&DeviceCtx<'_>, Check, usize) -> std::result::Result<(), Refusal>,
) -> Vec<usize> {
    let index = Api::of(decl).index();
    (1..=FFT_PROBE_MAX_LOG2)
        .map(|log2| 1usize << log2)
        .filter(|&n| accepts::ask(entry, index, |dev, check| ask(dev, check, n)).is_ok())
        .collect()
}
