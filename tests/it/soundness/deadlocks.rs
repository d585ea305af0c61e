//! Deadlock freedom: programs that nest scopes on one accelerator and across two, merge rules
//! and `accepts` checks that call back into the runtime, and a window that grows inside one
//! device memory. Each must finish (or fail cleanly) within a bounded time. The scenario runs
//! on a thread of its own and the test waits for it with a timeout, so a deadlock fails the
//! test with its name instead of hanging the suite (the stuck thread is leaked).

use super::small_sim;
use rimms::{Complex32, Device, Refusal, Runtime, SimConfig, Target};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a scenario may take: a liveness bound far above any scheduling delay, not a
/// speed assertion.
const LIVENESS: Duration = Duration::from_secs(30);

/// Runs `scenario` on a thread of its own and returns its value, resumes its panic, or fails
/// naming `deadlock` if it has not finished within [`LIVENESS`].
fn finishes<T: Send + 'static>(deadlock: &str, scenario: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, outcome) = channel();
    std::thread::Builder::new()
        .name(format!("scenario: {deadlock}"))
        .spawn(move || {
            // The receiver is gone only once the test gave up on this thread.
            let _ = done.send(catch_unwind(AssertUnwindSafe(scenario)));
        })
        .expect("the scenario's thread");
    match outcome.recv_timeout(LIVENESS) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(RecvTimeoutError::Timeout) => {
            panic!("deadlock: {deadlock} did not finish within {LIVENESS:?}")
        }
        Err(RecvTimeoutError::Disconnected) => unreachable!("the scenario always sends"),
    }
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
