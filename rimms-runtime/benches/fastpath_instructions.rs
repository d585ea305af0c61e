//! Instruction counts (callgrind, so repeatable on a noisy machine) of the resident check,
//! beside an empty benchmark that measures the harness's own call so it can be subtracted.
//! Goal: the check itself at most 10 instructions.
//!
//! Needs `gungraun-runner` 0.20 and valgrind:
//! `cargo bench -p rimms-runtime --bench fastpath_instructions`

use gungraun::{library_benchmark, library_benchmark_group, main};
use num_complex::Complex32;
use rimms_runtime::{Access, ApiDecl, Device, HeteData, KernelArg, Runtime, SpaceId};
use std::hint::black_box;

/// The setup (not counted): a runtime and a buffer written on the host, so that the check
/// for `access` on the host succeeds.
fn resident_buffer(access: Access) -> (Runtime, HeteData<Complex32>, Access) {
    let rt = Runtime::new().expect("runtime");
    let mut x = HeteData::alloc(&rt, 1024).expect("alloc");
    x.host_write().expect("host").fill(Complex32::new(1.0, 0.0));
    (rt, x, access)
}

#[library_benchmark]
#[bench::read(setup = resident_buffer, args = (Access::Read,))]
#[bench::write(setup = resident_buffer, args = (Access::Write,))]
fn resident_check(state: (Runtime, HeteData<Complex32>, Access)) -> bool {
    let (rt, x, access) = state;
    let hit = black_box(x.is_resident(black_box(SpaceId::HOST), black_box(access)));
    std::mem::forget((rt, x));
    hit
}

// The same function with the check replaced by a constant: what remains is the harness
// (argument and result spills through `black_box`, the state's forget), to subtract.
#[library_benchmark]
#[bench::read(setup = resident_buffer, args = (Access::Read,))]
fn harness_only(state: (Runtime, HeteData<Complex32>, Access)) -> bool {
    let (rt, x, access) = state;
    black_box(SpaceId::HOST);
    black_box(access);
    let hit = black_box(true);
    std::mem::forget((rt, x));
    hit
}

fn three_resident() -> (Runtime, [HeteData<Complex32>; 3]) {
    let (rt, a, _) = resident_buffer(Access::Read);
    let make = || {
        let mut x = HeteData::alloc(&rt, 1024).expect("alloc");
        x.host_write().expect("host").fill(Complex32::new(1.0, 0.0));
        x
    };
    let (b, c) = (make(), make());
    (rt, [a, b, c])
}

#[library_benchmark]
#[bench::noop(setup = three_resident, args = ())]
fn dispatch_noop_three_resident_args(state: (Runtime, [HeteData<Complex32>; 3])) {
    let (rt, [a, b, mut c]) = state;
    static NOOP: ApiDecl = ApiDecl::new("noop");
    let outcome = rt.launch_host(
        black_box(Device::Cpu),
        &NOOP,
        [
            KernelArg::read("a", &a),
            KernelArg::read("b", &b),
            KernelArg::write::<Complex32>("c", &mut c),
        ],
        |args| {
            black_box(args);
            Ok(())
        },
    );
    black_box(outcome.is_ok());
    // Keep the teardown (unmapping the pools) out of the count.
    std::mem::forget((rt, a, b, c));
}

library_benchmark_group!(
    name = fast_path,
    benchmarks = [
        resident_check,
        harness_only,
        dispatch_noop_three_resident_args
    ]
);
main!(library_benchmark_groups = fast_path);
