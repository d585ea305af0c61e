//! Deadlock freedom: programs that nest scopes on one accelerator and across two, merge rules
//! and `accepts` checks that call back into the runtime, and a window that grows inside one
//! device memory. Each must finish (or fail cleanly) within a bounded time. The scenario runs
//! on a thread of its own and the test waits for it with a timeout, so a deadlock fails the
//! test with its name instead of hanging the suite (the stuck thread is leaked).

use super::small_sim;
use crate::common::finishes;
use rimms::{
    ApiDecl, Complex32, Device, Joins, KernelArg, MergeRule, Refusal, Runtime, SimConfig, Target,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::Duration;

/// The host and two sims, with pools small enough for Miri.
fn two_sims() -> Runtime {
    Runtime::builder()
        .host_pool(4 << 20)
        .sim(small_sim())
        .sim(small_sim())
        .build()
        .expect("runtime")
}

/// A job on sim0 that opens a scope with a job and a held call on sim0 again: both run on the
/// thread that holds sim0's turn instead of waiting behind the job that waits for them.
#[test]
fn nested_scopes_on_one_accelerator_finish() {
    let ran = finishes("a scope nested on sim0's own queue", || {
        let rt = two_sims();
        let ran = AtomicUsize::new(0);
        let mut y = rimms::HeteData::from_slice(&rt, &[1u32; 16]).expect("y");
        rt.scope(|outer| {
            let (ran, y) = (&ran, &mut y);
            outer.spawn_on(Device::Sim(0), move |rt| {
                rt.scope(|inner| {
                    inner.spawn_on(Device::Sim(0), move |_| {
                        ran.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    });
                    let args = [KernelArg::read_write("y", y)];
                    inner.call(Device::Sim(0), BUMP_RULES, [0, 0], args)
                })?
            });
        })
        .expect("scope");
        assert_eq!(y.host().expect("y"), &[2u32; 16][..]);
        ran.into_inner()
    });
    assert_eq!(ran, 1);
}

/// A job on sim0 opens a scope with a job on sim1, which opens one with a job on sim0: sim0's
/// worker, waiting for the middle scope, runs the innermost job of its own queue.
#[test]
fn a_job_that_comes_back_to_its_accelerator_through_another_finishes() {
    let ran = finishes("sim0 → sim1 → sim0 nested scopes", || {
        let rt = two_sims();
        let ran = AtomicUsize::new(0);
        rt.scope(|outer| {
            let ran = &ran;
            outer.spawn_on(Device::Sim(0), move |rt| {
                rt.scope(|middle| {
                    middle.spawn_on(Device::Sim(1), move |rt| {
                        rt.scope(|inner| {
                            inner.spawn_on(Device::Sim(0), move |_| {
                                ran.fetch_add(1, Ordering::Relaxed);
                                Ok(())
                            });
                        })
                    });
                })
            });
        })
        .expect("scope");
        ran.into_inner()
    });
    assert_eq!(ran, 1);
}

/// Item 7: jobs on sim0 and sim1, running at once (the barrier makes sure), each open a scope
/// with a job on the other device. Each worker, waiting for its nested scope, runs the job the
/// other one queued on it.
#[test]
fn two_accelerators_that_nest_into_each_other_finish() {
    let ran = finishes("sim0 and sim1 nesting into each other", || {
        let rt = two_sims();
        let ran = AtomicUsize::new(0);
        let both = Barrier::new(2);
        rt.scope(|outer| {
            for (here, there) in [(0, 1), (1, 0)] {
                let (ran, both) = (&ran, &both);
                outer.spawn_on(Device::Sim(here), move |rt| {
                    both.wait();
                    rt.scope(|inner| {
                        inner.spawn_on(Device::Sim(there), move |_| {
                            ran.fetch_add(1, Ordering::Relaxed);
                            Ok(())
                        });
                    })
                });
            }
        })
        .expect("scope");
        ran.into_inner()
    });
    assert_eq!(ran, 2);
}

/// `y = y + 1` on u32, as a held scope call.
static BUMP: ApiDecl = ApiDecl::new("deadlocks_bump");
static BUMP_RULES: &[&MergeRule] = &[&MergeRule {
    api: &BUMP,
    runs_as: &BUMP,
    joins: &[Joins::Concat],
    run: |rt, device, _, args| {
        let mut y = args.output::<u32>(0)?;
        rt.launch_host(device, &BUMP, [KernelArg::read_write("y", &mut y)], |[y]| {
            y.into_slice_mut::<u32>()?.iter_mut().for_each(|v| *v += 1);
            Ok(())
        })
    },
}];

/// `out = 2 · input` on u32, whose rule does its work in a scope of its own, on a job on the
/// device the call runs on: a merge rule that calls back into the runtime's queues.
static NESTED_DOUBLE: ApiDecl = ApiDecl::new("deadlocks_nested_double");
static NESTED_DOUBLE_RULES: &[&MergeRule] = &[&MergeRule {
    api: &NESTED_DOUBLE,
    runs_as: &NESTED_DOUBLE,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, args| {
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        rt.scope(|s| {
            s.spawn_on(device, move |rt| double_on(rt, device, &input, &mut out));
        })
    },
}];

/// The same, but the rule's scope sends its work to sim1, whose job sends it back to the
/// rule's own device in a scope of its own.
static ROUND_TRIP: ApiDecl = ApiDecl::new("deadlocks_round_trip");
static ROUND_TRIP_RULES: &[&MergeRule] = &[&MergeRule {
    api: &ROUND_TRIP,
    runs_as: &ROUND_TRIP,
    joins: &[Joins::Concat, Joins::Concat],
    run: |rt, device, _, args| {
        let (input, mut out) = (args.input::<u32>(0)?, args.output::<u32>(1)?);
        rt.scope(|s| {
            s.spawn_on(Device::Sim(1), move |rt| {
                rt.scope(|back| {
                    back.spawn_on(device, move |rt| double_on(rt, device, &input, &mut out));
                })
            });
        })
    },
}];

fn double_on(
    rt: &Runtime,
    device: Device,
    input: &rimms::HeteSlice<'_, u32>,
    out: &mut rimms::HeteSliceMut<'_, u32>,
) -> rimms::Result<()> {
    super::map_on(rt, device, &NESTED_DOUBLE, input, out, |v| 2 * v)
}

/// Two rows of scope calls of `rules` on sim0, run by the thread that closes the scope while
/// sim0's queue is idle (it holds sim0's turn); returns the output.
fn held_calls_on_sim0(rt: &Runtime, rules: &'static [&'static MergeRule]) -> Vec<u32> {
    const ROW: usize = 16;
    let x: Vec<u32> = (0..2 * ROW as u32).collect();
    let mut xs = rimms::HeteData::from_slice(rt, &x).expect("x");
    xs.fragment(ROW * 4).expect("a row per fragment");
    let mut ys = rimms::HeteData::<u32>::alloc(rt, 2 * ROW).expect("y");
    ys.fragment(ROW * 4).expect("a row per fragment");
    {
        let (rows, mut outs) = (xs.rows(ROW).expect("rows"), ys.rows_mut(ROW).expect("rows"));
        rt.scope(|s| {
            for (row, out) in rows.iter().zip(outs.iter_mut()) {
                let args = [KernelArg::read("input", row), KernelArg::write("out", out)];
                s.call(Device::Sim(0), rules, [0, 0], args)?;
            }
            Ok::<(), rimms::Error>(())
        })
        .expect("scope")
        .expect("calls");
    }
    ys.validate().expect("one trusted copy per fragment");
    ys.to_vec().expect("y")
}

/// Item 6: the thread that runs a held group on idle sim0 holds sim0's turn; the scope its
/// merge rule opens on sim0 runs its job right there instead of sending it to the worker,
/// which would wait for that turn.
#[test]
fn a_merge_rule_that_opens_a_scope_on_its_own_device_finishes() {
    let y = finishes("a merge rule opening a scope on its own device", || {
        held_calls_on_sim0(&two_sims(), NESTED_DOUBLE_RULES)
    });
    assert_eq!(y, (0..32).map(|v| 2 * v).collect::<Vec<u32>>());
}

/// Item 6 through another device: the rule's job on sim1 sends work back to sim0, whose
/// (already started) worker cannot take sim0's turn; the thread that holds it, waiting for
/// the rule's scope, runs that job from sim0's queue.
#[test]
fn a_merge_rule_whose_work_comes_back_through_another_device_finishes() {
    let y = finishes("a merge rule's scope coming back to its own device", || {
        let rt = two_sims();
        // Sim0's worker is started and idle: the returning job is queued where it can see it.
        // (The pause lets it give back sim0's turn after the warm-up job, so that the scope
        // below finds sim0 idle and runs its calls on this thread; should it not, the worker
        // runs them, and waits for the same nesting on its own.)
        rt.scope(|s| s.spawn_on(Device::Sim(0), |_| Ok(())))
            .expect("warm-up");
        std::thread::sleep(Duration::from_millis(20));
        held_calls_on_sim0(&rt, ROUND_TRIP_RULES)
    });
    assert_eq!(y, (0..32).map(|v| 2 * v).collect::<Vec<u32>>());
}

/// The runtime the reentrant `accepts` check calls back into (a check gets no runtime).
static REENTRANT_RT: OnceLock<Runtime> = OnceLock::new();

/// `y = y + 1`, with a sim implementation whose `accepts` check makes a `Target::Auto` call
/// on the runtime before it answers.
#[rimms::api]
fn guarded_bump(y: &mut [u32]);

/// `y = y + 1`, with only a CPU implementation and no check: what the reentrant check calls.
#[rimms::api]
fn plain_bump(y: &mut [u32]);

#[rimms::kernel(api = plain_bump, device = cpu)]
fn plain_bump_cpu(y: &mut [u32]) {
    y.iter_mut().for_each(|v| *v += 1);
}

/// Asks the scheduler to place a call of its own, then accepts.
fn asks_the_runtime(_: &rimms::DeviceCtx, _y: usize) -> Result<(), Refusal> {
    let Some(rt) = REENTRANT_RT.get() else {
        return Ok(());
    };
    let mut scratch = rimms::HeteData::from_slice(rt, &[41u32]).map_err(refusal)?;
    plain_bump(rt, Target::Auto, &mut scratch).map_err(refusal)?;
    let got = scratch.host().map_err(refusal)?[0];
    if got == 42 {
        Ok(())
    } else {
        Err(Refusal::new(format!("the nested call gave {got}")))
    }
}

fn refusal(e: rimms::Error) -> Refusal {
    Refusal::new(e.to_string())
}

#[rimms::kernel(api = guarded_bump, device = sim, accepts = asks_the_runtime)]
fn guarded_bump_sim(y: &mut [u32]) {
    y.iter_mut().for_each(|v| *v += 1);
}

#[rimms::kernel(api = guarded_bump, device = cpu)]
fn guarded_bump_cpu(y: &mut [u32]) {
    y.iter_mut().for_each(|v| *v += 1);
}

/// Item 8: a `Target::Auto` call whose candidate's `accepts` check places a call of its own
/// on the same runtime: the checks run before the scheduler takes its lock, so the nested
/// placement does not wait for the outer one.
#[test]
fn an_accepts_check_that_calls_the_runtime_finishes() {
    let y = finishes("an accepts check calling the scheduler", || {
        let rt = REENTRANT_RT.get_or_init(|| {
            Runtime::builder()
                .host_pool(4 << 20)
                .sim(small_sim())
                .build()
                .expect("runtime")
        });
        let mut y = rimms::HeteData::from_slice(rt, &[1u32; 8]).expect("y");
        guarded_bump(rt, Target::Auto, &mut y).expect("placed");
        guarded_bump(rt, Device::Sim(0), &mut y).expect("on sim0, asked again");
        y.host().expect("y").to_vec()
    });
    assert_eq!(y, [3u32; 8]);
}

/// Item 9: on a sim whose memory the CPU cannot address, a buffer larger than the pool gets a
/// window; calls on fragment 0, then 1, grow it (its bytes move inside the one device memory,
/// which takes its lock once), then one on fragment 3 retires it. Every value matches a plain
/// `Vec` given the same operations.
#[test]
fn a_window_growing_inside_device_memory_keeps_every_value() {
    const N: usize = 512; // 4 KiB of Complex32: one fragment
    let (got, expected) = finishes("a window growing inside one device memory", || {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .granule(4096)
            .sim(SimConfig {
                pool_bytes: 3 * 4096,
                device_memory: true,
                ..SimConfig::default()
            })
            .build()
            .expect("runtime");
        let values: Vec<Complex32> = (0..4 * N).map(|i| Complex32::new(i as f32, 0.5)).collect();
        let mut x = rimms::HeteData::from_slice(&rt, &values).expect("x");
        let mut expected = values;
        for (frag, by) in [(0usize, 2.0f32), (1, 3.0), (0, 7.0), (3, 5.0)] {
            let mut view = x.slice_mut(frag * N..(frag + 1) * N).expect("view");
            rt.scale(Device::Sim(0), Complex32::new(by, 0.0), &mut view)
                .expect("scale");
            expected[frag * N..(frag + 1) * N]
                .iter_mut()
                .for_each(|v| *v *= by);
        }
        x.validate().expect("copies agree");
        (x.host().expect("host").to_vec(), expected)
    });
    assert!(got == expected, "the values after the window moves differ");
}
