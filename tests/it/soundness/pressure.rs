//! Whole-runtime operations from several threads on a device pool far smaller than what they
//! use, so every thread's work evicts, windows and writes back another's: kernel calls on the
//! sim and the CPU, host loops that overwrite or update, host views, prefetch, resets, merged
//! scope calls and frees. Each thread owns its buffers (its program is sequential, so a plain
//! `Vec` per buffer is its model) and all read one shared buffer. Every read back must equal
//! the model, whatever the schedule.
//!
//! Under Miri (CI) the threads and programs are short; `RIMMS_PRESSURE_OPS` sets the ops per
//! thread elsewhere. ThreadSanitizer runs it too (the README's command).

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use rimms::{
    parallel_for, ApiDecl, Device, Error, HeteData, Joins, KernelArg, MergeRule, Runtime, SimConfig,
};

/// Elements of a fragment (4 KiB of `u32`); each thread's buffers hold two.
const FRAG: usize = 1024;
const LEN: usize = 2 * FRAG;

static ADD: ApiDecl = ApiDecl::new("pressure_add");
static SHIFTED: ApiDecl = ApiDecl::new("pressure_shifted");

/// `out = input + k`, merged row by row in a scope.
static SHIFTED_RULES: &[&MergeRule] = &[&MergeRule {
    api: &SHIFTED,
    runs_as: &SHIFTED,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, params, args| {
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        shifted(rt, device, params[0] as u32, &input, &mut out)
    },
}];

fn shifted(
    rt: &Runtime,
    device: Device,
    k: u32,
    input: &rimms::HeteSlice<'_, u32>,
    out: &mut rimms::HeteSliceMut<'_, u32>,
) -> rimms::Result<()> {
    super::map_on(rt, device, &SHIFTED, input, out, |v| v.wrapping_add(k))
}

/// `y += k` on `device`, read and written in place.
fn add(
    rt: &Runtime,
    device: Device,
    k: u32,
    y: &mut rimms::HeteSliceMut<'_, u32>,
) -> rimms::Result<()> {
    rt.launch_host(device, &ADD, [KernelArg::read_write("y", y)], |[y]| {
        y.into_slice_mut::<u32>()?
            .iter_mut()
            .for_each(|v| *v = v.wrapping_add(k));
        Ok(())
    })
}

/// Only the pool's room may refuse an operation here; a refused operation changed nothing.
fn room(outcome: rimms::Result<()>, what: &str) -> bool {
    match outcome {
        Ok(()) => true,
        Err(Error::DoesNotFit { .. } | Error::PoolExhausted { .. }) => false,
        Err(other) => panic!("{what}: {other}"),
    }
}

struct Thread {
    rng: TestRng,
    a: HeteData<u32>,
    b: HeteData<u32>,
    model_a: Vec<u32>,
    model_b: Vec<u32>,
}

impl Thread {
    fn new(rt: &Runtime, seed: u64) -> Thread {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let model_a: Vec<u32> = (0..LEN as u32).map(|i| i ^ (seed as u32) << 16).collect();
        let model_b = vec![seed as u32; LEN];
        Thread {
            rng: TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
            a: HeteData::from_slice(rt, &model_a).expect("a"),
            b: HeteData::from_slice(rt, &model_b).expect("b"),
            model_a,
            model_b,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    fn check(&self, step: usize) {
        assert_eq!(
            self.a.to_vec().expect("a"),
            self.model_a,
            "a after step {step}"
        );
        assert_eq!(
            self.b.to_vec().expect("b"),
            self.model_b,
            "b after step {step}"
        );
    }

    /// One random operation, applied to the runtime and, where it succeeded, to the model.
    fn step(&mut self, rt: &Runtime, shared: &HeteData<u32>, model_shared: &[u32], step: usize) {
        let k = self.rng.next_u32() % 1000;
        match self.below(11) {
            0 => {
                let (device, mut view) = (Device::Sim(0), self.a.as_slice_mut());
                if room(add(rt, device, k, &mut view), "add on sim0") {
                    self.model_a.iter_mut().for_each(|v| *v = v.wrapping_add(k));
                }
            }
            1 => {
                let mut second = self.a.slice_mut(FRAG..).expect("second fragment");
                if room(add(rt, Device::Sim(0), k, &mut second), "add on a window") {
                    self.model_a[FRAG..]
                        .iter_mut()
                        .for_each(|v| *v = v.wrapping_add(k));
                }
            }
            2 => {
                add(rt, Device::Cpu, k, &mut self.a.as_slice_mut()).expect("add on the CPU");
                self.model_a.iter_mut().for_each(|v| *v = v.wrapping_add(k));
            }
            3 => {
                let b = &mut self.b;
                parallel_for!(for i in 0..LEN {
                    b[i] = (i as u32).wrapping_mul(k);
                })
                .expect("an overwriting loop");
                for (i, v) in self.model_b.iter_mut().enumerate() {
                    *v = (i as u32).wrapping_mul(k);
                }
            }
            4 => {
                let (a, b) = (&mut self.a, &self.b);
                parallel_for!(for i in 0..LEN {
                    a[i] = a[i].wrapping_add(b[i]);
                })
                .expect("an updating loop");
                for (a, b) in self.model_a.iter_mut().zip(&self.model_b) {
                    *a = a.wrapping_add(*b);
                }
            }
            5 => {
                let j = self.below(LEN);
                self.a.host_mut().expect("a host view")[j] = k;
                self.model_a[j] = k;
            }
            6 => {
                // The shared buffer on the sim, read into b's first fragment.
                let s = shared.as_slice();
                let mut first = self.b.slice_mut(..FRAG).expect("first fragment");
                if room(
                    shifted(rt, Device::Sim(0), k, &s, &mut first),
                    "read shared",
                ) {
                    for (b, s) in self.model_b.iter_mut().zip(model_shared) {
                        *b = s.wrapping_add(k);
                    }
                }
            }
            7 => {
                let _ = self.a.prefetch(Device::Sim(0));
                let _ = shared.prefetch(Device::Sim(0));
            }
            8 => {
                self.b.reset();
                self.model_b.fill(0);
            }
            9 => {
                // b = a + k, one call per fragment, merged in a scope; where the pool refuses
                // (part of the rows may have run), the same overwrite on the CPU decides.
                let outcome = {
                    let (rows, mut outs) = (
                        self.a.rows(FRAG).expect("rows"),
                        self.b.rows_mut(FRAG).expect("rows"),
                    );
                    rt.scope(|s| {
                        for (row, out) in rows.iter().zip(outs.iter_mut()) {
                            let args =
                                [KernelArg::read("input", row), KernelArg::write("out", out)];
                            s.call(Device::Sim(0), SHIFTED_RULES, [u64::from(k), 0], args)?;
                        }
                        Ok::<(), Error>(())
                    })
                    .and_then(|r| r)
                };
                if !room(outcome, "merged rows") {
                    let (a, mut b) = (self.a.as_slice(), self.b.as_slice_mut());
                    shifted(rt, Device::Cpu, k, &a, &mut b).expect("on the CPU");
                }
                for (b, a) in self.model_b.iter_mut().zip(&self.model_a) {
                    *b = a.wrapping_add(k);
                }
            }
            _ => {
                let old = std::mem::replace(
                    &mut self.b,
                    HeteData::from_slice(rt, &self.model_b).expect("a new b"),
                );
                old.free();
            }
        }
        if self.below(4) == 0 {
            self.check(step);
        }
    }
}

#[test]
fn threads_on_a_tiny_pool_match_their_sequential_models() {
    let (threads, ops) = if cfg!(miri) {
        (2, 12)
    } else {
        let ops = std::env::var("RIMMS_PRESSURE_OPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        (4, ops)
    };
    // Five 4 KiB granules for four threads' two-fragment buffers and a shared one.
    let rt = Runtime::builder()
        .host_pool(8 << 20)
        .granule(4096)
        .sim(SimConfig {
            pool_bytes: 5 * 4096,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let model_shared: Vec<u32> = (0..FRAG as u32).map(|i| i * 3 + 1).collect();
    let shared = HeteData::from_slice(&rt, &model_shared).expect("shared");
    // The threads start their programs together, so that they overlap.
    let start = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        for seed in 0..threads {
            let (rt, shared, model_shared, start) = (&rt, &shared, &model_shared, &start);
            s.spawn(move || {
                let mut thread = Thread::new(rt, seed as u64 + 1);
                start.wait();
                for step in 0..ops {
                    thread.step(rt, shared, model_shared, step);
                }
                thread.check(ops);
                thread.a.validate().expect("a's copies agree");
                thread.b.validate().expect("b's copies agree");
            });
        }
    });
    let sim0 = rt.stats().space("sim0").expect("sim0").clone();
    // Miri's few random steps may not fill the pool; every other run does many times over.
    assert!(
        cfg!(miri) || sim0.evictions > 0 && sim0.written_back_bytes > 0,
        "the pool was under pressure: {sim0:?}"
    );
    shared.validate().expect("the shared copies agree");
    assert_eq!(shared.to_vec().expect("shared"), model_shared);
}
