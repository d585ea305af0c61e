//! A built-in added the way the module's documentation says, all in this one file: what a new
//! built-in's home (`kernel/builtins/<name>.rs`) holds, its declaration (which would go to
//! `apis.rs`), its CPU implementation (which would go to `backend/`), and its two public
//! methods, one line each (which would go to `runtime/builtins.rs` and `scope/calls.rs`).
//! Nothing else of the runtime changes for it: the checks, the merging and the dispatch it
//! gets are the generic ones every built-in uses.

use super::{call, elements, same_len, Builtin, BuiltinId, ScopeCall};
use crate::data::{HeteSlice, HeteSliceMut, Input, Output};
use crate::hal::{Device, Error, KernelCtx, Result, Target};
use crate::kernel::merge::{Joins, MergeRule, Params, Part};
use crate::kernel::{ApiDecl, KernelArg};
use crate::machine::Runtime;
use crate::scope::Scope;
use crate::HeteData;

// --- The declaration (in `apis.rs` for a real built-in). ---

/// `out = gain · input + 1`.
#[rimms_macros::api]
pub fn toy_affine(ctx: &KernelCtx, gain: f32, input: &[f32], #[out] out: &mut [f32]) -> Result<()>;

// --- Its home (`kernel/builtins/toy_affine.rs`). ---

/// A call of `toy_affine`.
struct ToyAffine<'a> {
    gain: f32,
    input: HeteSlice<'a, f32>,
    out: HeteSliceMut<'a, f32>,
}

impl Builtin for ToyAffine<'_> {
    const DECL: &'static ApiDecl = toy_affine::DECL;

    fn check(&self, target: Target) -> Result<()> {
        check_lens(target, [self.input.len(), self.out.len()])
    }

    fn run(mut self, rt: &Runtime, target: Target) -> Result<()> {
        toy_affine(rt, target, self.gain, &self.input, &mut self.out)
    }
}

/// Its shape check on its views' lengths, `[input, out]`: the method's and the scope's.
fn check_lens(target: Target, lens: [usize; 2]) -> Result<()> {
    same_len(ToyAffine::api(), target, ["input", "out"], lens)
}

impl<'a> ScopeCall<'a, 2> for ToyAffine<'a> {
    const ID: BuiltinId = BuiltinId::Toy;

    fn rules() -> &'static [&'static MergeRule] {
        RULES
    }

    fn check_args(target: Target, _: Params, args: &[KernelArg<'_>; 2]) -> Result<()> {
        check_lens(target, args.each_ref().map(elements::<f32>))
    }

    fn params(&self) -> Params {
        [u64::from(self.gain.to_bits()), 0]
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

/// Element-wise: input and output follow one another.
static RULES: &[&MergeRule] = &[&MergeRule {
    api: toy_affine::DECL,
    runs_as: toy_affine::DECL,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, p, a| {
        let x = a.input::<f32>(0)?;
        toy_affine(
            rt,
            device,
            f32::from_bits(p[0] as u32),
            &x,
            &mut a.output::<f32>(1)?,
        )
    },
}];

// --- Its implementation (in `backend/` for a real built-in). ---

#[rimms_macros::kernel(api = toy_affine, device = cpu)]
fn toy_affine_cpu(
    _ctx: &KernelCtx,
    gain: f32,
    input: &[f32],
    #[out] out: &mut [f32],
) -> Result<()> {
    for (o, i) in out.iter_mut().zip(input) {
        *o = gain * i + 1.0;
    }
    Ok(())
}

// --- Its public methods, one line each (in `runtime/builtins.rs` and `scope/calls.rs`). ---

impl Runtime {
    fn toy_affine(
        &self,
        device: impl Into<Target>,
        gain: f32,
        input: &impl Input<f32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        let (input, out) = (input.input(), out.output());
        call(self, device.into(), ToyAffine { gain, input, out })
    }
}

impl<'scope> Scope<'scope, '_> {
    fn toy_affine(
        &'scope self,
        device: Device,
        gain: f32,
        input: &'scope impl Input<f32>,
        out: &'scope mut impl Output<f32>,
    ) -> Result<()> {
        let (input, out) = (input.input(), out.output());
        self.builtin(device, ToyAffine { gain, input, out })
    }
}

// --- The checks. ---

/// The reference: the same formula over plain vectors, without the runtime.
fn reference(gain: f32, input: &[f32]) -> Vec<f32> {
    input.iter().map(|x| gain * x + 1.0).collect()
}

#[test]
fn a_toy_built_in_runs_direct_and_merged_in_a_scope_as_its_reference_says() {
    let rt = Runtime::new().expect("runtime");
    // Four rows of 1,024 (4 KiB, a fragment each, so each row is a mutable view of its own).
    let values: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25 - 7.0).collect();
    let x = HeteData::from_slice(&rt, &values).expect("x");

    // Direct: the handle's method.
    let mut y = HeteData::<f32>::alloc(&rt, 4096).expect("y");
    rt.toy_affine(Device::Cpu, 3.0, &x, &mut y)
        .expect("direct call");
    assert_eq!(y.host().expect("host"), reference(3.0, &values));

    // In a scope: the rows' calls merge into one device call.
    let mut z = HeteData::<f32>::alloc(&rt, 4096).expect("z");
    let (rows, mut outs) = (x.rows(1024).expect("rows"), z.rows_mut(1024).expect("rows"));
    rt.scope(|s| {
        for (row, out) in rows.iter().zip(outs.iter_mut()) {
            s.toy_affine(Device::Cpu, -2.0, row, out)?;
        }
        Ok::<(), Error>(())
    })
    .expect("scope")
    .expect("scope calls");
    drop(outs);
    assert_eq!(z.host().expect("host"), reference(-2.0, &values));
    let stats = rt.stats();
    let toy = stats
        .apis
        .iter()
        .find(|a| a.name == "toy_affine")
        .expect("toy_affine ran");
    assert_eq!((toy.merged, toy.merged_into), (4, 1));
    assert_eq!(toy.calls, 2, "one direct call, one merged call");

    // Its shape check: the handle's method and the scope's refuse alike, naming the API.
    let short = HeteData::<f32>::alloc(&rt, 10).expect("short");
    let mut out = HeteData::<f32>::alloc(&rt, 11).expect("out");
    let direct = rt.toy_affine(Device::Cpu, 1.0, &short, &mut out);
    let scoped = rt
        .scope(|s| s.toy_affine(Device::Cpu, 1.0, &short, &mut out))
        .expect("scope");
    for refused in [direct, scoped] {
        match refused {
            Err(Error::Shape { api, what, .. }) => {
                assert_eq!(api, "toy_affine");
                assert_eq!(what, "`input` has 10 elements but `out` has 11");
            }
            other => panic!("expected a shape error, got {other:?}"),
        }
    }
}

/// `zip`'s shape check, which fits calls pay only a comparison for: each mismatched pair is
/// refused with the same typed error as before, naming the API, the device asked and both
/// arguments with their lengths, and the refused call is not counted and moves nothing. A
/// fitting call of the same buffers then runs, and counts as a resident hit.
#[test]
fn zip_refuses_each_mismatched_pair_naming_both_arguments() {
    use crate::hal::ZipOp;
    use num_complex::Complex32 as C32;
    let rt = crate::runtime::small_test_runtime();
    let ones = |n| HeteData::from_slice(&rt, &vec![C32::new(1.0, 0.0); n]).expect("data");
    let (a, b3, b4) = (ones(4), ones(3), ones(4));
    let (mut out4, mut out5) = (ones(4), ones(5));
    let cases = [
        (&b3, &mut out4, "`a` has 4 elements but `b` has 3"),
        (&b4, &mut out5, "`a` has 4 elements but `out` has 5"),
    ];
    for (b, out, expected) in cases {
        match rt.zip(Device::Cpu, ZipOp::Mul, &a, b, out) {
            Err(Error::Shape { api, device, what }) => {
                assert_eq!(api, "zip");
                assert_eq!(device, Target::On(Device::Cpu));
                assert_eq!(what, expected);
            }
            other => panic!("expected a shape error, got {other:?}"),
        }
    }
    let stats = rt.stats();
    assert_eq!(
        stats.api("zip").expect("zip").calls,
        0,
        "refused calls count"
    );
    assert_eq!(stats.total_bytes(), 0, "refused calls moved nothing");
    rt.zip(Device::Cpu, ZipOp::Mul, &a, &b4, &mut out4)
        .expect("a call that fits");
    let zip = rt.stats().api("zip").expect("zip");
    assert_eq!((zip.calls, zip.hits), (1, 1));
}

/// A row call of a built-in is told from a group's by its [`BuiltinId`] alone
/// (`Group::continued_alike_builtin`), so two built-ins with one ID and different rules would
/// merge into each other: every built-in with scope methods has an ID of its own and its own
/// rules (red with `Zip`'s ID given to `ZipRows`, say). A built-in left out here is one the
/// enum's distinct discriminants still cover, unless it reuses another's variant.
#[test]
fn scope_call_ids_tell_the_rules_apart() {
    use super::element_wise::Call;
    use super::{conj, fft, fftshift, magnitude, power, window, zip, zip_rows};
    fn id_and_rules<'a, const N: usize, B: ScopeCall<'a, N>>() -> (BuiltinId, *const ()) {
        (B::ID, B::rules().as_ptr().cast())
    }
    let all = [
        id_and_rules::<2, fft::Fft<'_>>(),
        id_and_rules::<2, fftshift::Fftshift<'_>>(),
        id_and_rules::<3, window::Window<'_>>(),
        id_and_rules::<3, zip::Zip<'_>>(),
        id_and_rules::<3, zip_rows::ZipRows<'_>>(),
        id_and_rules::<2, Call<'_, conj::Conj>>(),
        id_and_rules::<2, Call<'_, magnitude::Magnitude>>(),
        id_and_rules::<2, Call<'_, power::Power>>(),
        id_and_rules::<2, ToyAffine<'_>>(),
    ];
    for (i, (id, rules)) in all.iter().enumerate() {
        assert_ne!(*id as u8, 0, "{id:?}: 0 is no built-in's");
        for (other, other_rules) in &all[i + 1..] {
            assert_ne!(id, other, "two built-ins are {id:?}");
            assert_ne!(rules, other_rules, "{id:?} and {other:?} share their rules");
        }
    }
}
