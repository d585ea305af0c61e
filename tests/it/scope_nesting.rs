//! Scopes nested at random from several threads of the program at once, on one runtime: jobs
//! on the CPU and two sims that open scopes of their own whose jobs run direct calls or scope
//! calls (held, merged groups) on a device picked at random, each row written by an operation
//! that changes from round to round. Every round must finish and every row hold what its last
//! operation computed from the input (a stale copy, a lost write or a row written twice shows),
//! checked against values computed here on the host.

use crate::common::finishes;
use rimms::{Complex32, Device, HeteData, Runtime, SimConfig, ZipOp};
use std::time::Duration;

/// A fragment of complex values: each row is a mutable view of its own.
const ROW: usize = 512;
const ROWS: usize = 8;
const ROUNDS: usize = 12;
const THREADS: usize = 3;
const DEVICES: [Device; 3] = [Device::Cpu, Device::Sim(0), Device::Sim(1)];
const OPS: [ZipOp; 3] = [ZipOp::Add, ZipOp::Sub, ZipOp::Mul];

/// A xorshift: the same picks on every run.
struct Picks(u64);

impl Picks {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn apply(op: ZipOp, a: Complex32, b: Complex32) -> Complex32 {
    match op {
        ZipOp::Add => a + b,
        ZipOp::Sub => a - b,
        ZipOp::Mul => a * b,
        other => unreachable!("not picked: {other:?}"),
    }
}

/// What one job of the outer scope does with its two rows: a scope of its own, with a job
/// per row on a device picked for it, which writes its row with a direct call or with a
/// scope call in a third scope, on a device picked for that.
#[derive(Clone, Copy)]
struct Plan {
    outer: Device,
    inner: [Device; 2],
    call: [Device; 2],
    held: [bool; 2],
}

fn one_thread(rt: &Runtime, seed: u64) {
    let x: Vec<Complex32> = (0..ROW * ROWS)
        .map(|i| Complex32::new((i % 97) as f32 - 48.0, (i % 13) as f32))
        .collect();
    let input = HeteData::from_slice(rt, &x).expect("x");
    let mut output = HeteData::<Complex32>::alloc(rt, ROW * ROWS).expect("y");
    output.fragment(ROW * 8).expect("a row per fragment");
    let mut picks = Picks(seed);
    for round in 0..ROUNDS {
        let ops: Vec<ZipOp> = (0..ROWS).map(|_| OPS[picks.next(OPS.len())]).collect();
        let plans: Vec<Plan> = (0..ROWS / 2)
            .map(|_| Plan {
                outer: DEVICES[picks.next(3)],
                inner: [DEVICES[picks.next(3)], DEVICES[picks.next(3)]],
                call: [DEVICES[picks.next(3)], DEVICES[picks.next(3)]],
                held: [picks.next(2) == 0, picks.next(2) == 0],
            })
            .collect();
        {
            let rows = input.rows(ROW).expect("rows");
            let mut outs = output.rows_mut(2 * ROW).expect("pairs of rows");
            rt.scope(|s| {
                for (k, (plan, out)) in plans.iter().zip(outs.iter_mut()).enumerate() {
                    let (rows, ops) = (&rows[2 * k..2 * k + 2], &ops[2 * k..2 * k + 2]);
                    s.spawn_on(plan.outer, move |rt| {
                        let mut pair = out.rows_mut(ROW)?;
                        rt.scope(|inner| {
                            for (j, out) in pair.iter_mut().enumerate() {
                                let (row, op) = (&rows[j], ops[j]);
                                let (device, held) = (plan.call[j], plan.held[j]);
                                inner.spawn_on(plan.inner[j], move |rt| {
                                    if !held {
                                        return rt.zip(device, op, row, row, out);
                                    }
                                    rt.scope(|s| s.zip(device, op, row, row, out))?
                                });
                            }
                        })
                    });
                }
            })
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let got = output.to_vec().expect("y");
        for (r, op) in ops.iter().enumerate() {
            for i in r * ROW..(r + 1) * ROW {
                let want = apply(*op, x[i], x[i]);
                assert_eq!(got[i], want, "round {round}, row {r}, element {i}: {op:?}");
            }
        }
        output.validate().expect("the copies agree");
    }
}

/// Three threads of the program, each with its own buffers, open nested scopes on one
/// runtime at once.
#[test]
fn nested_scopes_from_several_threads_finish_with_every_row_right() {
    finishes("nested scopes from several threads", || {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        std::thread::scope(|t| {
            for seed in 0..THREADS as u64 {
                let rt = &rt;
                t.spawn(move || one_thread(rt, 0x9E37_79B9 + 7919 * seed));
            }
        });
    });
}

/// Many jobs queued on sim0, each opening a scope of its own with a short job on sim1: the
/// thread that holds sim0's turn, waiting for the first job's scope, runs the next queued
/// job meanwhile, whose scope waits in turn, and so on (help-while-wait). Each such job used
/// to run one level deeper on that thread's stack, until the stack overflowed and the process
/// aborted ("has overflowed its stack") with a few thousand jobs queued. Every other job's
/// sim1 job sends work back to sim0, which only the thread running sim0's jobs (deep in the
/// nesting, wherever that runs) can take. Every job runs once.
#[test]
fn many_queued_jobs_that_each_wait_on_a_nested_scope_do_not_overflow_the_stack() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const JOBS: usize = 3000;
    let (ran, back) = finishes("many jobs nesting scopes while waiting", || {
        let rt = Runtime::builder()
            .sim(SimConfig::default())
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let (ran, back) = (AtomicUsize::new(0), AtomicUsize::new(0));
        rt.scope(|s| {
            for k in 0..JOBS {
                let (ran, back) = (&ran, &back);
                s.spawn_on(Device::Sim(0), move |rt| {
                    rt.scope(|inner| {
                        inner.spawn_on(Device::Sim(1), move |rt| {
                            std::thread::sleep(Duration::from_micros(100));
                            ran.fetch_add(1, Ordering::Relaxed);
                            if k % 2 == 1 {
                                rt.scope(|again| {
                                    again.spawn_on(Device::Sim(0), move |_| {
                                        back.fetch_add(1, Ordering::Relaxed);
                                        Ok(())
                                    })
                                })?;
                            }
                            Ok(())
                        })
                    })
                });
            }
        })
        .expect("scope");
        (ran.into_inner(), back.into_inner())
    });
    assert_eq!((ran, back), (JOBS, JOBS / 2));
}
