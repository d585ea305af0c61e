//! `zip`: `out = a op b`, element-wise. Its declaration is `apis::zip`.

use super::zip_rows;
use super::{call, elements, same_len, Builtin, BuiltinId, ScopeCall};
use crate::apis;
use crate::data::{HeteSlice, HeteSliceMut};
use crate::hal::{Device, Error, Result, Target, ZipOp};
use crate::kernel::accepts::{self, check_as};
use crate::kernel::capabilities::{zip_support, ZipSupport};
use crate::kernel::merge::{Joins, MergeRule, MergedArgs, Params, Part};
use crate::kernel::{Api, ApiDecl, ApiSpec, KernelArg};
use crate::machine::{DeviceEntry, Runtime, Shared};
use num_complex::Complex32 as C32;

/// A call of `zip`.
pub(crate) struct Zip<'a> {
    pub(crate) op: ZipOp,
    pub(crate) a: HeteSlice<'a, C32>,
    pub(crate) b: HeteSlice<'a, C32>,
    pub(crate) out: HeteSliceMut<'a, C32>,
}

impl Builtin for Zip<'_> {
    const DECL: &'static ApiDecl = apis::zip::DECL;

    #[inline]
    fn check(&self, target: Target) -> Result<()> {
        check_lens(target, [self.a.len(), self.b.len(), self.out.len()])
    }

    #[inline]
    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        let op = self.op;
        // The call asks a named device's check before anything moves (the scheduler asks each
        // candidate itself); a refusal gains what would do instead.
        apis::zip(rt, target, op, &self.a, &self.b, &mut self.out).map_err(|e| match e {
            Error::Unsupported {
                api: "zip",
                device,
                why,
            } => Error::Unsupported {
                api: "zip",
                device,
                why: format!("{why}{}", equivalent(op)),
            },
            e => e,
        })
    }
}

/// [`Zip`]'s shape check on its views' lengths, `[a, b, out]`.
#[inline]
fn check_lens(target: Target, lens: [usize; 3]) -> Result<()> {
    // The lengths compared before anything of an error is built: `same_len` stored its
    // arguments' names on every call, a dozen instructions of a 1-element call.
    if lens[0] == lens[1] && lens[0] == lens[2] {
        return Ok(());
    }
    same_len("zip", target, ["a", "b"], [lens[0], lens[1]])?;
    same_len("zip", target, ["a", "out"], [lens[0], lens[2]])
}

impl<'a> ScopeCall<'a, 3> for Zip<'a> {
    const ID: BuiltinId = BuiltinId::Zip;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    #[inline]
    fn check_args(target: Target, _: Params, args: &[KernelArg<'_>; 3]) -> Result<()> {
        check_lens(target, args.each_ref().map(elements::<C32>))
    }

    fn params(&self) -> Params {
        params(self.op)
    }

    fn args(self) -> [KernelArg<'a>; 3] {
        [
            KernelArg::reads("a", self.a),
            KernelArg::reads("b", self.b),
            KernelArg::writes("out", self.out),
        ]
    }

    #[inline]
    fn parts(&self) -> [Part; 3] {
        [
            Part::reads(&self.a),
            Part::reads(&self.b),
            Part::writes(&self.out),
        ]
    }

    /// The implementation's `accepts` check of this call's length, saying what would do
    /// instead.
    fn check_call_on(
        shared: &Shared,
        device: Device,
        params: Params,
        args: &[KernelArg<'_>; 3],
    ) -> Result<()> {
        let (op, len) = (zip_op(params[0]), elements::<C32>(&args[0]));
        let entry = shared.device(device)?;
        accepts::ask(entry, Api::of(apis::zip::DECL).index(), |dev, check| {
            check_as::<<apis::zip as ApiSpec>::Accepts>(check)?(dev, op, len, len, len)
        })
        .map_err(|why| Error::Unsupported {
            api: "zip",
            device,
            why: format!("{why}{}", equivalent(op)),
        })
    }
}

/// The short equivalent of a ZIP operation a device lacks, for its error.
pub(crate) fn equivalent(op: ZipOp) -> &'static str {
    match op {
        ZipOp::MulConj => "; the same result in two calls: conjugate `b` once where `conj` runs (`rt.conj(Device::Cpu, &b, &mut b_conj)`), then `rt.zip(device, ZipOp::Mul, &a, &b_conj, &mut out)` here",
        ZipOp::Div => "; `rimms devices` lists the devices that divide",
        _ => "",
    }
}

/// A ZIP's parameters: its operation (`zip_rows` shares them).
pub(crate) fn params(op: ZipOp) -> Params {
    [op as u64, 0]
}

/// The operation [`params`] encoded.
pub(crate) fn zip_op(code: u64) -> ZipOp {
    // Codes come from `params`, so one of them matches; `Add` is never reached.
    ZipOp::ALL
        .into_iter()
        .find(|&op| op as u64 == code)
        .unwrap_or(ZipOp::Add)
}

fn run_merged(rt: &Runtime, device: Device, p: Params, a: &mut MergedArgs<'_>) -> Result<()> {
    let (x, y, out) = (a.input::<C32>(0)?, a.input::<C32>(1)?, a.output::<C32>(2)?);
    let op = zip_op(p[0]);
    call(
        rt,
        device.into(),
        Zip {
            op,
            a: x,
            b: y,
            out,
        },
    )
}

/// All three follow one another; or, where `b` is the same view in every call (a filter
/// applied to every row), the merged call is one `zip_rows`.
pub static RULES: &[&MergeRule] = &[
    &MergeRule {
        api: apis::zip::DECL,
        runs_as: apis::zip::DECL,
        joins: &[Joins::Concat, Joins::Concat, Joins::Concat],
        run: run_merged,
    },
    &MergeRule {
        api: apis::zip::DECL,
        runs_as: apis::zip_rows::DECL,
        joins: &[Joins::Concat, Joins::Same, Joins::Concat],
        run: zip_rows::run_merged,
    },
];

/// The capability probe: per ZIP operation, what `entry`'s `zip` does with it (empty without
/// one).
pub(crate) fn support(entry: &DeviceEntry, implemented: &[&str]) -> Vec<(ZipOp, ZipSupport)> {
    if !implemented.contains(&apis::zip::DECL.name()) {
        return Vec::new();
    }
    let index = Api::of(apis::zip::DECL).index();
    ZipOp::ALL
        .into_iter()
        .map(|op| {
            let support = zip_support(|n| {
                accepts::ask(entry, index, |dev, check| {
                    check_as::<<apis::zip as ApiSpec>::Accepts>(check)?(dev, op, n, n, n)
                })
            });
            (op, support)
        })
        .collect()
}
