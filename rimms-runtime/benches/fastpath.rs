//! The cost of the fast path: the resident check alone, and a whole kernel dispatch whose three
//! arguments are already where it runs (the kernel body does nothing, so what is timed is the
//! runtime). Goal: dispatch at most 50 ns median. The `_evictable_runtime` variant adds what
//! pinning arguments against eviction costs.
//!
//! `cargo bench -p rimms-runtime --bench fastpath`

use divan::{black_box, Bencher};
use num_complex::Complex32;
use rimms_runtime::{
    Access, ApiDecl, CostTable, Device, HeteData, KernelArg, LinkModel, Runtime, SimConfig,
    SpaceId, Target,
};
use std::time::Duration;

fn main() {
    divan::main();
}

fn resident_buffers(rt: &Runtime) -> [HeteData<Complex32>; 3] {
    let make = || {
        let mut x = HeteData::<Complex32>::alloc(rt, 1024).expect("alloc");
        x.host_write().expect("host").fill(Complex32::new(1.0, 0.0));
        x
    };
    [make(), make(), make()]
}

#[divan::bench]
fn resident_check(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let [x, ..] = resident_buffers(&rt);
    bencher.bench_local(|| black_box(&x).is_resident(black_box(SpaceId::HOST), Access::Read));
}

#[divan::bench]
fn dispatch_noop_three_resident_args(bencher: Bencher) {
    static NOOP: ApiDecl = ApiDecl::new("noop");
    bench_noop(bencher, Runtime::new().expect("runtime"), &NOOP);
}

/// As above on a runtime that also has a sim device, whose pool can evict. A CPU call on
/// host-resident data pins nothing even here (only arguments used in an evictable space are
/// pinned), so the two should match: the difference is what eviction costs this fast path.
#[divan::bench]
fn dispatch_noop_three_resident_args_evictable_runtime(bencher: Bencher) {
    static NOOP_PINNED: ApiDecl = ApiDecl::new("noop_pinned");
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    bench_noop(bencher, rt, &NOOP_PINNED);
}

/// A host call of `api` on three host-resident buffers whose body does nothing: the cost of
/// dispatch alone.
fn bench_noop(bencher: Bencher, rt: Runtime, api: &'static ApiDecl) {
    let [a, b, mut c] = resident_buffers(&rt);
    bencher.bench_local(|| {
        rt.launch_host(
            black_box(Device::Cpu),
            api,
            [
                KernelArg::read("a", &a),
                KernelArg::read("b", &b),
                KernelArg::write::<Complex32>("c", &mut c),
            ],
            |args| {
                black_box(args);
                Ok(())
            },
        )
    });
}

#[divan::bench]
fn dispatch_builtin_zip_one_element_resident(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 2.0)]).expect("x");
    let mut y = HeteData::from_slice(&rt, &[Complex32::new(0.0, 0.0)]).expect("y");
    bencher.bench_local(|| {
        rt.zip(
            black_box(Device::Cpu),
            rimms_runtime::ZipOp::Mul,
            &x,
            &x,
            &mut y,
        )
    });
}

/// The same call left to the data-aware scheduler on the CPU and two sims: what placing a call
/// costs when its data is already on the host. Where every device costs the same, the sims
/// cannot win, so their transfers are never estimated.
#[divan::bench]
fn dispatch_builtin_zip_one_element_auto(bencher: Bencher) {
    bench_auto_zip(bencher, CostTable::default());
}

/// As above, but the cost table says the sims run calls faster, so each sim's transfer
/// estimate (the buffer's lock and a copy plan per argument) is worked out on every call.
#[divan::bench]
fn dispatch_builtin_zip_one_element_auto_faster_sims(bencher: Bencher) {
    let fast = LinkModel {
        latency: Duration::from_nanos(100),
        bytes_per_second: 1e12,
    };
    let costs = CostTable::default()
        .device(Device::Sim(0), fast)
        .device(Device::Sim(1), fast);
    bench_auto_zip(bencher, costs);
}

fn bench_auto_zip(bencher: Bencher, costs: CostTable) {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .costs(costs)
        .build()
        .expect("runtime");
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 2.0)]).expect("x");
    let mut y = HeteData::from_slice(&rt, &[Complex32::new(0.0, 0.0)]).expect("y");
    bencher.bench_local(|| rt.zip(Target::Auto, rimms_runtime::ZipOp::Mul, &x, &x, &mut y));
}

/// The floor under `dispatch_noop_three_resident_args`: the same argument construction and
/// closure call with no runtime in between, so the difference is what dispatch costs.
#[divan::bench]
fn harness_three_args_no_dispatch(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    let [a, b, mut c] = resident_buffers(&rt);
    bencher.bench_local(|| {
        let args = [
            KernelArg::read("a", &a),
            KernelArg::read("b", &b),
            KernelArg::write::<Complex32>("c", &mut c),
        ];
        black_box(args);
    });
}
