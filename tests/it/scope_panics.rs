//! Panics inside a scope that run the program's own code where the runtime does its
//! bookkeeping: a job's or a held group's panic whose payload panics again when the scope drops
//! it (the scope keeps only the first payload). Whatever the program's code does, the scope
//! returns (or unwinds) only after every job has finished: a job still running after it would
//! use borrows that have ended.

use crate::common::finishes;
use rimms::{ApiDecl, Device, HeteData, Joins, KernelArg, MergeRule, Runtime, SimConfig};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::time::Duration;

fn two_sims() -> Runtime {
    Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()
        .expect("runtime")
}

/// A panic payload whose drop panics again when `armed`.
struct Bomb {
    armed: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed {
            panic!("a panic payload that panics when dropped");
        }
    }
}

/// A job on sim1 that takes a while and says when it is done; it borrows nothing, so a scope
/// that returns too early shows as the flag still unset, not as undefined behaviour.
fn slow_job(done: &Arc<AtomicBool>) -> impl FnOnce(&Runtime) -> rimms::Result<()> + Send {
    let done = Arc::clone(done);
    move |_| {
        std::thread::sleep(Duration::from_millis(300));
        done.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Two jobs panic on sim0, the second with a payload that panics when dropped; a slow job
/// runs on sim1. The scope unwinds with the first payload, and only after the sim1 job has
/// finished (it returned at once, or hung, when dropping the second payload unwound through
/// the job's bookkeeping).
#[test]
fn a_second_panic_whose_payload_panics_on_drop_still_waits_for_every_job() {
    let (unwound, slow_finished) = finishes("a job's payload that panics on drop", || {
        let rt = two_sims();
        let slow = Arc::new(AtomicBool::new(false));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            rt.scope(|s| {
                s.spawn_on(Device::Sim(1), slow_job(&slow));
                s.spawn_on(Device::Sim(0), |_| {
                    std::panic::panic_any(Bomb { armed: false })
                });
                s.spawn_on(Device::Sim(0), |_| {
                    std::panic::panic_any(Bomb { armed: true })
                });
            })
        }));
        let slow_finished = slow.load(Ordering::SeqCst);
        let unwound = outcome.expect_err("the jobs' panic reaches the caller");
        let first = unwound.downcast_ref::<Bomb>().map(|b| b.armed);
        (first, slow_finished)
    });
    assert!(slow_finished, "the scope returned while a job still ran");
    assert_eq!(unwound, Some(false), "the first job's payload is resumed");
}

/// `y += 1`, whose merge rule panics with a payload that panics when dropped.
static BOMB_API: ApiDecl = ApiDecl::new("scope_panics_bomb");
static BOMB_RULES: &[&MergeRule] = &[&MergeRule {
    api: &BOMB_API,
    runs_as: &BOMB_API,
    joins: &[Joins::Concat],
    run: |_, _, _, _| std::panic::panic_any(Bomb { armed: true }),
}];

/// A held call whose rule panics with such a payload, after a job already panicked: the
/// group runs on the thread that closes the scope, and the scope still waits for the slow
/// job before it unwinds with the first payload.
#[test]
fn a_held_group_whose_payload_panics_on_drop_still_waits_for_every_job() {
    let (unwound, slow_finished) = finishes("a group's payload that panics on drop", || {
        let rt = two_sims();
        let mut y = HeteData::<u32>::alloc(&rt, 16).expect("y");
        let slow = Arc::new(AtomicBool::new(false));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            rt.scope(|s| {
                s.spawn_on(Device::Sim(1), |_| {
                    std::panic::panic_any(Bomb { armed: false })
                });
                // Sim1 runs its jobs one after the other: once the next one runs, the first
                // job's payload is the scope's.
                let (after, first_done) = channel();
                s.spawn_on(Device::Sim(1), move |_| {
                    let _ = after.send(());
                    Ok(())
                });
                first_done.recv().expect("the first job finished");
                s.spawn_on(Device::Sim(1), slow_job(&slow));
                s.call(
                    Device::Sim(0),
                    BOMB_RULES,
                    [0, 0],
                    [KernelArg::read_write("y", &mut y)],
                )
                .expect("held");
            })
        }));
        let slow_finished = slow.load(Ordering::SeqCst);
        let unwound = outcome.expect_err("the panic reaches the caller");
        let first = unwound.downcast_ref::<Bomb>().map(|b| b.armed);
        (first, slow_finished)
    });
    assert!(slow_finished, "the scope returned while a job still ran");
    assert_eq!(unwound, Some(false), "the first job's payload is resumed");
}

/// Scope calls and jobs on devices the runtime lacks, and scope calls of the wrong shape, are
/// typed errors naming the device or the API, from the call (or, for a job, from the scope),
/// never a panic; the calls that were right still run.
#[test]
fn scope_calls_on_missing_devices_and_of_the_wrong_shape_are_errors() {
    use rimms::{Complex32, Error, FftDirection, ZipOp};
    let rt = two_sims();
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 2.0); 64]).expect("x");
    let mut ys: Vec<HeteData<Complex32>> = (0..9)
        .map(|_| HeteData::alloc(&rt, 64).expect("y"))
        .collect();
    let mut z = HeteData::<Complex32>::alloc(&rt, 64).expect("z");
    let short = HeteData::<Complex32>::alloc(&rt, 8).expect("short");
    let mut errors = Vec::new();
    let mut ys = ys.iter_mut();
    let mut y = || ys.next().expect("an output per call");
    let outcome = rt.scope(|s| {
        for device in [Device::Sim(2), Device::Sim(u8::MAX), Device::Gpu(0)] {
            errors.push(s.fft(device, FftDirection::Forward, 64, &x, y()));
            errors.push(s.zip(device, ZipOp::Add, &x, &x, y()));
        }
        errors.push(s.zip(Device::Sim(0), ZipOp::Add, &x, &short, y()));
        errors.push(s.fft(Device::Sim(0), FftDirection::Forward, 3, &x, y()));
        errors.push(s.fft(Device::Sim(0), FftDirection::Forward, 0, &x, y()));
        s.zip(Device::Sim(1), ZipOp::Add, &x, &x, &mut z)
            .expect("a right call");
        s.spawn_on(Device::Fpga(7), |_| unreachable!("a job on no device runs"));
    });
    assert!(
        matches!(
            outcome,
            Err(Error::NoDevice {
                device: Device::Fpga(7),
                ..
            })
        ),
        "{outcome:?}"
    );
    for (k, error) in errors.iter().enumerate() {
        match (k, error) {
            (0..=5, Err(Error::NoDevice { device, .. })) => {
                assert_eq!(
                    *device,
                    [Device::Sim(2), Device::Sim(u8::MAX), Device::Gpu(0)][k / 2]
                )
            }
            (6.., Err(Error::Shape { .. } | Error::BadPieces { .. })) => {}
            _ => panic!("call {k}: {error:?}"),
        }
    }
    assert_eq!(
        z.host().expect("z"),
        &[Complex32::new(2.0, 4.0); 64][..],
        "the right call ran"
    );
}

/// A `tracing` subscriber whose every transfer event panics: the program's own code, which
/// the runtime runs wherever it copies.
struct PanicsOnTransfers;

impl tracing::Subscriber for PanicsOnTransfers {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "rimms::transfer" {
            panic!("a subscriber that panics on a transfer");
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The scope's thread, closing the scope, hands a held group on sim0 over to its queue and
/// starts its input's copy ahead (sim0 sits behind a timed link); the copy's transfer event
/// reaches a subscriber of the program's that panics. The scope still waits for the slow job
/// on sim1 before it unwinds (the panic left `Runtime::scope` before its wait).
#[test]
fn a_subscriber_that_panics_as_the_scope_closes_still_waits_for_every_job() {
    use rimms::{Complex32, LinkModel, ZipOp};
    let (said, slow_finished) = finishes("a subscriber panicking as the scope closes", || {
        let timed = SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(1),
                bytes_per_second: 1e9,
            },
            simulate_link: true,
            ..SimConfig::default()
        };
        let rt = Runtime::builder()
            .trace(true)
            .sim(timed)
            .sim(SimConfig::default())
            .build()
            .expect("runtime");
        let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 1024]).expect("x");
        let mut y = HeteData::<Complex32>::alloc(&rt, 1024).expect("y");
        let mut z = HeteData::<Complex32>::alloc(&rt, 1024).expect("z");
        let slow = Arc::new(AtomicBool::new(false));
        let outcome = tracing::subscriber::with_default(PanicsOnTransfers, || {
            catch_unwind(AssertUnwindSafe(|| {
                rt.scope(|s| {
                    s.spawn_on(Device::Sim(1), slow_job(&slow));
                    // Held until the body returns: the CPU's group runs on this thread then,
                    // sim0's goes to its queue, its input's copy started here.
                    s.zip(Device::Sim(0), ZipOp::Add, &x, &x, &mut y)
                        .expect("held");
                    s.zip(Device::Cpu, ZipOp::Add, &x, &x, &mut z)
                        .expect("held");
                })
            }))
        });
        let slow_finished = slow.load(Ordering::SeqCst);
        let payload = outcome.expect_err("the subscriber's panic reaches the caller");
        let said = payload.downcast_ref::<&str>().copied();
        (said, slow_finished)
    });
    assert!(slow_finished, "the scope returned while a job still ran");
    assert_eq!(said, Some("a subscriber that panics on a transfer"));
}
