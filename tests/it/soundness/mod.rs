//! A hostile user's programs, none with `unsafe`: each tries a way to write out of bounds,
//! race, read stale data or lose the last valid copy, and each must end in a clean error, a
//! panic inside the user's own code, or correct data. The cases that must not compile are in
//! `ui-tests/fail`. Miri (Tree Borrows) runs this file in CI, so the pools are kept small.

mod deadlocks;

use rimms::{
    ApiDecl, DevSlice, DevSliceMut, Device, Error, HeteData, KernelArg, KernelCtx, Runtime,
    SimConfig,
};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod leases;
mod pressure;

/// `out[i] = f(input[i])` on `device`, as a call of `api` with a host body.
fn map_on(
    rt: &Runtime,
    device: Device,
    api: &'static ApiDecl,
    input: &rimms::HeteSlice<'_, u32>,
    out: &mut rimms::HeteSliceMut<'_, u32>,
    f: impl Fn(u32) -> u32,
) -> rimms::Result<()> {
    let args = [
        KernelArg::read("input", input),
        KernelArg::write("out", out),
    ];
    rt.launch_host(device, api, args, |[i, o]| {
        let (i, o) = (i.into_slice::<u32>()?, o.into_slice_mut::<u32>()?);
        o.iter_mut().zip(i).for_each(|(o, i)| *o = f(*i));
        Ok(())
    })
}

fn small_sim() -> SimConfig {
    SimConfig {
        pool_bytes: 1 << 20,
        ..SimConfig::default()
    }
}

/// The host and one sim, with pools small enough for Miri.
fn runtime() -> Runtime {
    Runtime::builder()
        .host_pool(4 << 20)
        .sim(small_sim())
        .build()
        .expect("runtime")
}

/// The host and a sim whose memory the CPU cannot address (device addresses, `DevSlice`s).
fn card_runtime() -> Runtime {
    Runtime::builder()
        .host_pool(4 << 20)
        .sim(SimConfig {
            device_memory: true,
            ..small_sim()
        })
        .build()
        .expect("runtime")
}

/// Elements per fragment small enough that a loop over `LEN` runs as several rayon tasks.
const FRAGMENT_BYTES: usize = 64;
const LEN: usize = 100;

fn buffer(rt: &Runtime, values: &[u32]) -> HeteData<u32> {
    let mut data = HeteData::from_slice(rt, values).expect("buffer");
    data.fragment(FRAGMENT_BYTES).expect("fragment");
    data
}

#[rimms::kernel(device = sim)]
fn fill_on_sim(value: u32, #[out] y: &mut [u32]) {
    y.fill(value);
}

/// Item 1: an index that the macro reads as the loop variable but that resolves to another
/// binding (macro hygiene) is caught by the checked index into the task's own part: a panic,
/// never a write into another buffer.
#[test]
fn an_index_from_another_hygiene_context_panics_inside_its_own_part() {
    macro_rules! write_both {
        ($y:ident, $n:expr, $at:ident) => {
            rimms::parallel_for!(for i in 0..$n {
                $y[i] = 1;
                $y[$at] = 2;
            })
        };
    }
    let rt = runtime();
    let mut y = buffer(&rt, &[0; LEN]);
    let neighbour = buffer(&rt, &[7; LEN]);
    let i = LEN + 3;
    let outcome = catch_unwind(AssertUnwindSafe(|| write_both!(y, LEN, i)));
    assert!(outcome.is_err(), "the out-of-range index must panic");
    assert_eq!(neighbour.host().expect("neighbour"), &[7; LEN][..]);
    y.validate().expect("the buffer's copies agree");
    assert!(y.host().expect("y").iter().all(|&v| v <= 2));
}

/// Item 2: locals the expansion makes cannot be shadowed by the body's.
#[test]
fn the_bodys_names_cannot_reach_the_expansions_locals() {
    let rt = runtime();
    let mut y = buffer(&rt, &[0; LEN]);
    rimms::parallel_for!(for i in 0..LEN {
        let __rimms_lo = 1000usize;
        let __rimms_part_y = 5u32;
        let __rimms_count = 0usize;
        y[i] = i as u32 + __rimms_part_y + (__rimms_lo + __rimms_count) as u32;
    })
    .expect("loop");
    let want: Vec<u32> = (0..LEN as u32).map(|i| i + 1005).collect();
    assert_eq!(y.host().expect("y"), &want[..]);
}

/// Item 3: an empty range is checked against the buffers like any other.
#[test]
fn an_empty_or_reversed_range_past_the_end_is_an_error() {
    let rt = runtime();
    let mut y = HeteData::<u32>::alloc(&rt, 4).expect("y");
    let (start, end) = (100, 100);
    let err = rimms::parallel_for!(for i in start..end {
        y[i] = 1;
    })
    .expect_err("100..100 over 4 elements");
    assert!(
        matches!(
            err,
            Error::OutOfBounds {
                start: 100,
                end: 100,
                len: 4
            }
        ),
        "{err}"
    );
    let (start, end) = (5, 2);
    let err = rimms::parallel_for!(for i in start..end {
        y[i] = 1;
    })
    .expect_err("5..2 over 4 elements");
    assert!(
        matches!(
            err,
            Error::OutOfBounds {
                start: 5,
                len: 4,
                ..
            }
        ),
        "{err}"
    );
    let last = usize::MAX;
    let err = rimms::parallel_for!(for i in 0..=last {
        y[i] = 1;
    })
    .expect_err("0..=usize::MAX");
    assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
    let (start, end) = (4, 4);
    rimms::parallel_for!(for i in start..end {
        y[i] = 1;
    })
    .expect("an empty range at the end is fine");
    assert_eq!(y.host().expect("y"), &[0; 4]);
}

/// Item 6: a write under a condition is not write-discard: the elements it skips keep the
/// newest bytes, which live on the sim.
#[test]
fn a_conditional_write_keeps_the_elements_it_skips() {
    let rt = runtime();
    let mut y = buffer(&rt, &[0; LEN]);
    fill_on_sim(&rt, 5, &mut y).expect("fill on sim0");
    rimms::parallel_for!(for i in 0..LEN {
        if i % 2 == 0 {
            y[i] = 1;
        }
    })
    .expect("loop");
    let want: Vec<u32> = (0..LEN).map(|i| if i % 2 == 0 { 1 } else { 5 }).collect();
    assert_eq!(y.host().expect("y"), &want[..]);

    fill_on_sim(&rt, 6, &mut y).expect("fill on sim0 again");
    rimms::parallel_for!(for i in 0..LEN {
        if i % 3 == 0 {
            continue;
        }
        y[i] = 2;
    })
    .expect("loop with continue");
    let want: Vec<u32> = (0..LEN).map(|i| if i % 3 == 0 { 6 } else { 2 }).collect();
    assert_eq!(y.host().expect("y"), &want[..]);
    y.validate().expect("copies agree");
}

/// The other side of item 6: a loop that overwrites every element unread still moves nothing.
#[test]
fn an_unconditional_overwrite_copies_nothing_in() {
    let rt = runtime();
    let mut y = buffer(&rt, &[0; LEN]);
    fill_on_sim(&rt, 5, &mut y).expect("fill on sim0");
    rimms::parallel_for!(for i in 0..LEN {
        y[i] = i as u32;
    })
    .expect("loop");
    let stats = rt.stats();
    assert_eq!(
        stats.bytes("sim0", "host").unwrap(),
        0,
        "write-discard copies nothing"
    );
    assert_eq!(stats.total_bytes(), 0, "no link moved anything");
    let want: Vec<u32> = (0..LEN as u32).collect();
    assert_eq!(y.host().expect("y"), &want[..]);
}

#[rimms::kernel(device = sim)]
fn half_then_panic(y: &mut [u32]) {
    let half = y.len() / 2;
    y[..half].fill(99);
    panic!("the kernel fails part-way");
}

/// Item 7: a kernel that unwinds part-way through a write leaves one trusted copy.
#[test]
fn a_kernel_that_panics_keeps_the_last_valid_copy() {
    let rt = runtime();
    let values: Vec<u32> = (0..LEN as u32).collect();
    let mut y = buffer(&rt, &values);
    let outcome = catch_unwind(AssertUnwindSafe(|| half_then_panic(&rt, &mut y)));
    assert!(outcome.is_err());
    y.validate().expect("no two valid copies differ");
    assert_eq!(y.host().expect("y"), &values[..]);
}

fn explode_at(i: usize, at: usize) -> u32 {
    assert_ne!(i, at, "the loop body fails part-way");
    1
}

/// Item 7, for host loops: a write-discard loop that unwinds keeps the sim's copy.
#[test]
fn a_host_loop_that_panics_keeps_the_last_valid_copy() {
    let rt = runtime();
    let mut y = buffer(&rt, &[0; LEN]);
    fill_on_sim(&rt, 5, &mut y).expect("fill on sim0");
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        rimms::parallel_for!(for i in 0..LEN {
            y[i] = explode_at(i, LEN / 2);
        })
    }));
    assert!(outcome.is_err());
    y.validate().expect("no two valid copies differ");
    assert_eq!(y.host().expect("y"), &[5; LEN][..]);
}

#[rimms::api]
fn halve(values: &[u32], #[out] half: &mut [u32]) -> rimms::Result<()>;

#[rimms::kernel(api = halve, device = cpu)]
fn halve_host(values: &[u32], #[out] half: &mut [u32]) -> rimms::Result<()> {
    for (h, v) in half.iter_mut().zip(values) {
        *h = v / 2;
    }
    Ok(())
}

/// A device kernel reaches device memory only through its own arguments, each checked
/// against the host slice it is copied from or to.
#[rimms::kernel(api = halve, device = sim)]
fn halve_card(
    ctx: &KernelCtx,
    values: DevSlice<u32>,
    #[out] mut half: DevSliceMut<u32>,
) -> rimms::Result<()> {
    let staged: Vec<u32> = ctx.read_device(&values)?.iter().map(|v| v / 2).collect();
    // One element short: refused, nothing written past the argument.
    ctx.copy_to_device(&staged[1..], &mut half)?;
    Ok(())
}

/// Items 5 and 8: device addresses travel as numbers, and a device kernel that asks for
/// more than its argument gets an error, after which the output keeps its last valid copy.
#[test]
fn a_device_kernel_cannot_write_past_its_argument() {
    let rt = card_runtime();
    let values = HeteData::from_slice(&rt, &[10u32; LEN]).expect("values");
    let before: Vec<u32> = (0..LEN as u32).collect();
    let mut half = HeteData::from_slice(&rt, &before).expect("half");
    let err = halve(&rt, Device::Sim(0), &values, &mut half).expect_err("length mismatch");
    assert!(err.to_string().contains("holds 100 elements"), "{err}");
    half.validate().expect("copies agree");
    assert_eq!(half.host().expect("half"), &before[..]);
    halve(&rt, Device::Cpu, &values, &mut half).expect("on the CPU");
    assert_eq!(half.host().expect("half"), &[5; LEN][..]);
}

static PEEK: ApiDecl = ApiDecl::new("peek");

/// Item 10: a kernel's arguments are cast, checked, to the type asked for; a read argument
/// cannot be written.
#[test]
fn host_arguments_are_checked_casts() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &[1u32, 2, 3]).expect("x");
    let err = rt
        .launch_host(Device::Cpu, &PEEK, [KernelArg::read("x", &x)], |[x]| {
            x.into_slice::<u64>().map(drop)
        })
        .expect_err("12 bytes are not whole u64s");
    assert!(matches!(err, Error::ArgumentType { arg: "x", .. }), "{err}");
    let err = rt
        .launch_host(Device::Cpu, &PEEK, [KernelArg::read("x", &x)], |[x]| {
            x.into_slice_mut::<u32>().map(drop)
        })
        .expect_err("a read argument is not writable");
    assert!(err.to_string().contains("only reads it"), "{err}");
    // Two read arguments of one buffer are fine: both are shared borrows.
    let mut sum = 0;
    rt.launch_host(
        Device::Cpu,
        &PEEK,
        [KernelArg::read("a", &x), KernelArg::read("b", &x)],
        |[a, b]| {
            let (a, b) = (a.into_slice::<u32>()?, b.into_slice::<u32>()?);
            sum = a.iter().zip(b).map(|(p, q)| p * q).sum();
            Ok(())
        },
    )
    .expect("two readers");
    assert_eq!(sum, 1 + 4 + 9);
    assert_eq!(x.host().expect("x"), &[1, 2, 3]);
}

/// Items 4 and 1 under Miri: a loop over many tasks, several written and read buffers, and a
/// read at other indices of a read-only buffer, against a plain sequential model.
#[test]
fn a_multi_task_loop_matches_a_sequential_model() {
    let rt = runtime();
    let x: Vec<u32> = (0..LEN as u32).map(|v| v * 3 + 1).collect();
    let xs = buffer(&rt, &x);
    let mut a = buffer(&rt, &[0; LEN]);
    let mut b = buffer(&rt, &[1; LEN]);
    let plain = vec![2u32; LEN];
    rimms::parallel_for!(for i in 0..LEN {
        a[i] = xs[i] + xs[(i + 1) % LEN];
        b[i] = b[i] * plain[i] + a[i];
    })
    .expect("loop");
    let want_a: Vec<u32> = (0..LEN).map(|i| x[i] + x[(i + 1) % LEN]).collect();
    let want_b: Vec<u32> = want_a.iter().map(|a| 2 + a).collect();
    assert_eq!(a.host().expect("a"), &want_a[..]);
    assert_eq!(b.host().expect("b"), &want_b[..]);
}

/// Scope jobs write disjoint rows of one buffer at once; one whose kernel unwinds part-way
/// panics the scope after the others finished, and its row keeps the copy it had.
#[test]
fn scope_jobs_on_disjoint_rows_and_a_panicking_one_lose_nothing() {
    const ROW: usize = 16;
    let rt = runtime();
    let before: Vec<u32> = (0..4 * ROW as u32).collect();
    let mut y = buffer(&rt, &before);
    let mut rows = y.rows_mut(ROW).expect("rows");
    let mut last = rows.pop().expect("four rows");
    let caught = catch_unwind(AssertUnwindSafe(|| {
        rt.scope(|s| {
            for row in rows.iter_mut() {
                s.spawn_on(Device::Sim(0), move |rt| fill_on_sim(rt, 7, row));
            }
            s.spawn(|rt| half_then_panic(rt, &mut last));
        })
    }));
    assert!(caught.is_err(), "the job's panic reaches the caller");
    drop((rows, last));
    y.validate().expect("no two valid copies differ");
    let mut want = vec![7; 3 * ROW];
    want.extend_from_slice(&before[3 * ROW..]);
    assert_eq!(y.host().expect("y"), &want[..]);
}

/// Empty buffers and views are valid (as in Kokkos and SYCL): never allocated, every operation
/// a no-op, and no pointer made from a block they do not have.
#[test]
fn empty_buffers_and_views_are_no_ops_that_allocate_nothing() {
    let rt = runtime();
    let mut empty = HeteData::<u32>::alloc(&rt, 0).expect("an empty buffer");
    assert!(empty.is_empty());
    assert_eq!(empty.host().expect("host"), &[] as &[u32]);
    assert!(empty.host_mut().expect("host_mut").is_empty());
    empty.prefetch(Device::Sim(0)).expect("prefetch");
    fill_on_sim(&rt, 3, &mut empty).expect("a kernel on nothing");
    rimms::parallel_for!(for i in 0..0 {
        empty[i] = 1;
    })
    .expect("a loop over nothing");
    rt.launch_host(
        Device::Sim(0),
        &PEEK,
        [KernelArg::read_write("empty", &mut empty)],
        |[e]| e.into_slice_mut::<u32>().map(|s| assert!(s.is_empty())),
    )
    .expect("a host body over nothing");
    empty.validate().expect("nothing to compare");
    empty.reset();
    assert!(empty.rows_mut(4).expect("no rows").is_empty());

    let mut y = buffer(&rt, &[9; LEN]);
    assert!(y
        .slice(LEN..LEN)
        .expect("empty at the end")
        .host()
        .expect("host")
        .is_empty());
    let (mut none, mut all) = y.split_at_mut(0).expect("split at 0");
    assert!(none.host_mut().expect("host_mut").is_empty());
    fill_on_sim(&rt, 4, &mut none).expect("kernel on the empty half");
    fill_on_sim(&rt, 5, &mut all).expect("kernel on the whole");
    let mut unaligned = y.slice_mut(3..3).expect("an empty view anywhere");
    fill_on_sim(&rt, 6, &mut unaligned).expect("kernel on an empty view");
    assert_eq!(y.host().expect("y"), &[5; LEN][..]);
    let stats = rt.stats();
    let sim0 = stats.space("sim0").expect("sim0");
    assert_eq!(sim0.allocations, 1, "only y was allocated on sim0");
}
