//! A user API's device limit as an `accepts` check on its implementation: a call on a device
//! whose check refuses fails naming the API, the device and why, before any byte moves; the
//! scheduler, which would prefer that device, places a refused call on one that accepts it,
//! and a call within the limit still goes to the preferred device. Every figure is an exact
//! count of bytes over the links, so a check that is not asked fails these tests.

use rimms::{
    CostTable, Device, DeviceCtx, Error, HeteData, LinkModel, Policy, Refusal, Runtime, SimConfig,
    Target,
};
use std::time::Duration;

/// The most elements the sim's implementation takes.
const SIM_LIMIT: usize = 1024;

/// `y = x + by`, element-wise.
#[rimms::api]
pub fn offset(by: u32, x: &[u32], #[out] y: &mut [u32]);

/// The sim's limit: at most [`SIM_LIMIT`] elements of `x`.
fn fits(dev: &DeviceCtx, _by: u32, x: usize, _y: usize) -> Result<(), Refusal> {
    if x <= SIM_LIMIT {
        Ok(())
    } else {
        Err(Refusal::new(format!(
            "{} adds at most {SIM_LIMIT} elements per call, not {x}",
            dev.device()
        )))
    }
}

#[rimms::kernel(api = offset, device = sim, accepts = fits)]
fn offset_sim(by: u32, x: &[u32], #[out] y: &mut [u32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = x + by;
    }
}

#[rimms::kernel(api = offset, device = cpu)]
fn offset_cpu(by: u32, x: &[u32], #[out] y: &mut [u32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = x + by;
    }
}

/// The CPU and one sim, which the minimum-execution-time policy prefers (eight times faster).
fn runtime() -> Runtime {
    let rate = |bytes_per_second| LinkModel {
        latency: Duration::from_micros(1),
        bytes_per_second,
    };
    Runtime::builder()
        .sim(SimConfig::default())
        .scheduler(Policy::Met)
        .costs(CostTable::uniform(rate(1e9)).device(Device::Sim(0), rate(8e9)))
        .build()
        .expect("runtime")
}

fn input(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| i * 3).collect()
}

#[test]
fn a_refused_call_fails_naming_api_device_and_why_before_anything_moves() {
    let rt = runtime();
    let n = 4 * SIM_LIMIT;
    let x = HeteData::from_slice(&rt, &input(n)).expect("x");
    let mut y = HeteData::from_slice(&rt, &vec![7u32; n]).expect("y");
    let err = offset(&rt, Device::Sim(0), 5, &x, &mut y).expect_err("over the sim's limit");
    match &err {
        Error::Unsupported { api, device, why } => {
            assert_eq!((*api, *device), ("offset", Device::Sim(0)));
            assert_eq!(why, "sim0 adds at most 1024 elements per call, not 4096");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "offset on sim0 is not supported: sim0 adds at most 1024 elements per call, not 4096"
    );
    let stats = rt.stats();
    assert_eq!((stats.total_bytes(), stats.total_copies()), (0, 0));
    assert_eq!(y.host().expect("y"), &vec![7u32; n][..], "y untouched");
}

#[test]
fn the_scheduler_places_a_refused_call_on_a_device_that_accepts_it() {
    let rt = runtime();
    let n = 4 * SIM_LIMIT;
    let x = HeteData::from_slice(&rt, &input(n)).expect("x");
    let mut y = HeteData::<u32>::alloc(&rt, n).expect("y");
    offset(&rt, Target::Auto, 5, &x, &mut y).expect("placed on the CPU");
    let want: Vec<u32> = input(n).iter().map(|v| v + 5).collect();
    assert_eq!(y.host().expect("y"), &want[..]);
    // On the CPU, where x is: nothing moved (on sim0, x would have gone there and y back).
    let stats = rt.stats();
    assert_eq!((stats.total_bytes(), stats.total_copies()), (0, 0));
}

#[test]
fn a_call_within_the_limit_goes_to_the_preferred_device() {
    let rt = runtime();
    let n = SIM_LIMIT;
    let x = HeteData::from_slice(&rt, &input(n)).expect("x");
    let mut y = HeteData::<u32>::alloc(&rt, n).expect("y");
    offset(&rt, Target::Auto, 5, &x, &mut y).expect("placed on sim0");
    // x went to sim0 (y is written whole there, so nothing of it moved in) ...
    let bytes = (4 * n) as u64;
    assert_eq!(rt.stats().bytes("host", "sim0").expect("link"), bytes);
    let want: Vec<u32> = input(n).iter().map(|v| v + 5).collect();
    assert_eq!(y.host().expect("y"), &want[..]);
    // ... and y came back once.
    let stats = rt.stats();
    assert_eq!(stats.bytes("sim0", "host").expect("link"), bytes);
    assert_eq!((stats.total_bytes(), stats.total_copies()), (2 * bytes, 2));
}

/// At most four elements.
fn at_most_four(_dev: &DeviceCtx, x: usize) -> Result<(), Refusal> {
    match x {
        0..=4 => Ok(()),
        _ => Err(Refusal::new(format!("{x} elements, at most 4"))),
    }
}

/// A stand-alone kernel with a check: its one device is asked as an implementation's is.
#[rimms::kernel(device = sim, accepts = at_most_four)]
fn negate_few(x: &mut [i32]) {
    x.iter_mut().for_each(|v| *v = -*v);
}

#[test]
fn a_standalone_kernel_is_asked_too() {
    let rt = runtime();
    let mut many = HeteData::from_slice(&rt, &[1i32; 8]).expect("many");
    let err = negate_few(&rt, &mut many).expect_err("over the limit");
    assert_eq!(
        err.to_string(),
        "negate_few on sim0 is not supported: 8 elements, at most 4"
    );
    assert_eq!(rt.stats().total_bytes(), 0);
    let mut few = HeteData::from_slice(&rt, &[1i32, 2, 3, 4]).expect("few");
    negate_few(&rt, &mut few).expect("within the limit");
    assert_eq!(rt.stats().bytes("host", "sim0").expect("link"), 16);
    assert_eq!(few.host().expect("few"), &[-1, -2, -3, -4]);
}
