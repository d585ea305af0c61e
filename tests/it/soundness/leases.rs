//! Issue 26, items 1–5: every path that uses a buffer's blocks holds a lease that eviction,
//! window moves and prefetch honour; a loop's overwrite is proven by counting the iterations
//! that finished; typed views a merge rule makes obey the element rules of `HeteData::alloc`.
//! Each program is a hostile user's, without `unsafe`; Miri runs them in CI.

use rimms::{
    parallel_for, ApiDecl, Device, Error, HeteData, Joins, KernelArg, MergeRule, Runtime, SimConfig,
};

/// Elements of `u32` in one 4 KiB fragment (and one sim0 granule).
const FRAG: usize = 1024;

/// The host and one sim whose pool holds `granules` blocks of 4 KiB: small enough that a
/// second buffer evicts the first, or that a buffer of two fragments gets a window.
fn tight(granules: usize) -> Runtime {
    Runtime::builder()
        .host_pool(1 << 20)
        .granule(4096)
        .sim(SimConfig {
            pool_bytes: granules * 4096,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime")
}

#[rimms::kernel(device = sim)]
fn fill_on_sim(value: u32, #[out] y: &mut [u32]) {
    y.fill(value);
}

static READ_SLOWLY: ApiDecl = ApiDecl::new("read_slowly");

/// Item 1: a kernel reads a one-fragment window of `x` on sim0 while another thread
/// prefetches all of `x` there (it does not fit) and then another buffer (which would take the
/// granule a freed window leaves). The prefetch fails without touching the window, so the
/// kernel reads `x`'s own bytes to its end.
#[test]
fn a_prefetch_leaves_alone_a_window_a_running_kernel_reads() {
    let rt = tight(1);
    let values: Vec<u32> = (0..2 * FRAG as u32).collect();
    let x = HeteData::from_slice(&rt, &values).expect("x");
    let other = HeteData::from_slice(&rt, &vec![0xdead_beef_u32; FRAG]).expect("other");
    let first = x.slice(..FRAG).expect("fragment 0");
    let mut seen = Vec::new();
    rt.launch_host(
        Device::Sim(0),
        &READ_SLOWLY,
        [KernelArg::read("x", &first)],
        |[x_arg]| {
            let window = x_arg.into_slice::<u32>()?;
            let (whole, second) = std::thread::scope(|s| {
                s.spawn(|| (x.prefetch(Device::Sim(0)), other.prefetch(Device::Sim(0))))
                    .join()
                    .expect("the prefetching thread")
            });
            assert!(
                matches!(whole, Err(Error::DoesNotFit { .. })),
                "all of x cannot fit beside the window in use: {whole:?}"
            );
            assert!(
                second.is_err(),
                "the window's granule is not free: {second:?}"
            );
            seen.extend_from_slice(window);
            Ok(())
        },
    )
    .expect("the kernel");
    assert_eq!(seen, values[..FRAG], "the kernel read x's own bytes");
    x.validate().expect("x's copies agree");
    assert_eq!(x.to_vec().expect("x"), values);
}

/// Item 2: sim0 holds `y`'s only valid copy; a loop overwrites every element of `y` on the
/// host (write-discard: nothing copied in), and its last iteration makes another buffer need
/// sim0's room. `y` is leased while the loop writes, so it is not the one evicted, and the
/// loop's values are what `y` holds after.
#[test]
fn an_overwriting_loop_holds_its_buffer_against_eviction() {
    let rt = tight(1);
    let mut y = HeteData::<u32>::alloc(&rt, FRAG).expect("y");
    fill_on_sim(&rt, 9, &mut y).expect("y on sim0 alone");
    let z = HeteData::from_slice(&rt, &vec![5u32; FRAG]).expect("z");
    let n = FRAG;
    parallel_for!(for i in 0..n {
        if i == n - 1 {
            // Room for `z` on sim0: only `y`'s block is there.
            let _ = z.prefetch(Device::Sim(0));
        }
        y[i] = i as u32;
    })
    .expect("the loop");
    let expected: Vec<u32> = (0..FRAG as u32).collect();
    y.validate().expect("y's copies agree");
    assert_eq!(
        y.to_vec().expect("y"),
        expected,
        "no write-back ran over the loop"
    );
}

/// Item 2 from another thread: a thread keeps making room on sim0 while loops overwrite `y`,
/// whose only copy each round is on sim0. Every round reads back the loop's values.
#[test]
fn overwriting_loops_race_evictions_without_losing_a_value() {
    let rt = tight(1);
    let rounds = if cfg!(miri) { 2 } else { 50 };
    let mut y = HeteData::<u32>::alloc(&rt, FRAG).expect("y");
    let z = HeteData::from_slice(&rt, &vec![5u32; FRAG]).expect("z");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = z.prefetch(Device::Sim(0));
                std::thread::yield_now();
            }
        });
        for round in 0..rounds {
            let fill = fill_on_sim(&rt, 1000 + round, &mut y);
            if fill.is_ok() {
                parallel_for!(for i in 0..FRAG {
                    y[i] = round * 7 + i as u32;
                })
                .expect("the loop");
                let expected: Vec<u32> = (0..FRAG as u32).map(|i| round * 7 + i).collect();
                assert_eq!(y.to_vec().expect("y"), expected, "round {round}");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    y.validate().expect("y's copies agree");
}

fn keep_going(i: usize, stop_at: usize) -> Option<u32> {
    (i != stop_at).then_some(i as u32)
}

/// Item 3: a `?` leaves a task early, so the loop's overwrite of `y` is not proven. The loop
/// fails, and `y` keeps its newest copy (on sim0) wherever the loop did not write.
#[test]
fn a_question_mark_cannot_fake_an_overwrite() {
    let rt = tight(4);
    let n = 64;
    let mut y = HeteData::<u32>::alloc(&rt, n).expect("y");
    fill_on_sim(&rt, 9, &mut y).expect("y on sim0 alone");
    let outcome = parallel_for!(min for i in 0..n {
        y[i] = 1;
        keep_going(i, 5)?
    });
    match outcome {
        Err(Error::LoopCutShort {
            buffer: "y",
            completed,
            total,
        }) => assert_eq!((completed, total), (5, n), "iterations 0..5 finished"),
        other => panic!("expected the loop to fail as cut short, got {other:?}"),
    }
    y.validate().expect("y's copies agree");
    let after = y.to_vec().expect("y");
    assert!(
        after.iter().all(|&v| v == 9 || v == 1),
        "every element is its earlier value or the loop's: {after:?}"
    );
    assert!(
        after[6..].iter().all(|&v| v == 9),
        "elements the loop never reached: {after:?}"
    );
}

/// Item 3, the other reductions and the plain case: with every iteration finishing, a `?`
/// that never fires changes nothing, and the overwrite is recorded (the host alone holds y).
#[test]
fn a_loop_whose_every_iteration_finishes_records_its_overwrite() {
    let rt = tight(4);
    let n = 64;
    let mut y = HeteData::<u32>::alloc(&rt, n).expect("y");
    fill_on_sim(&rt, 9, &mut y).expect("y on sim0 alone");
    let least = parallel_for!(min for i in 0..n {
        y[i] = 2 * i as u32;
        keep_going(i, usize::MAX)?
    })
    .expect("the loop");
    assert_eq!(least, Some(0));
    let host = rt.space_of(Device::Cpu).expect("host");
    assert_eq!(
        y.fragment_state(0)
            .expect("fragment")
            .valid
            .iter()
            .collect::<Vec<_>>(),
        [host]
    );
    assert_eq!(
        y.to_vec().expect("y"),
        (0..n as u32).map(|i| 2 * i).collect::<Vec<_>>()
    );
    let total = parallel_for!(reduce(|| Some(0u32), |a: Option<u32>, b: Option<u32>| Some(a? + b?)) for i in 0..n {
        y[i] = 3;
        Some(keep_going(i, 40)?)
    });
    assert!(
        matches!(total, Err(Error::LoopCutShort { completed: 40, .. })),
        "{total:?}"
    );
}

/// Items 4 and 5: a merge rule asks for its arguments as an over-aligned and a zero-sized
/// type. Both are refused with the argument named, as `HeteData::alloc` refuses them, never
/// a misaligned reference or a division by zero.
#[test]
fn merged_arguments_refuse_over_aligned_and_zero_sized_types() {
    #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C, align(128))]
    struct Wide([u8; 128]);
    #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C)]
    struct Nothing;

    static VIEW: ApiDecl = ApiDecl::new("view_as");
    fn as_wide(
        _: &Runtime,
        _: Device,
        _: [u64; 2],
        a: &mut rimms::MergedArgs<'_>,
    ) -> rimms::Result<()> {
        a.input::<Wide>(0).map(drop)
    }
    fn as_nothing(
        _: &Runtime,
        _: Device,
        _: [u64; 2],
        a: &mut rimms::MergedArgs<'_>,
    ) -> rimms::Result<()> {
        a.output::<Nothing>(1).map(drop)
    }
    static WIDE: &[&MergeRule] = &[&MergeRule {
        api: &VIEW,
        runs_as: &VIEW,
        joins: &[Joins::Concat, Joins::Concat],
        run: as_wide,
    }];
    static NOTHING: &[&MergeRule] = &[&MergeRule {
        api: &VIEW,
        runs_as: &VIEW,
        joins: &[Joins::Concat, Joins::Concat],
        run: as_nothing,
    }];
    let rt = Runtime::builder()
        .host_pool(1 << 20)
        .granule(64)
        .build()
        .expect("runtime");
    let x = HeteData::from_slice(&rt, &[1u8; 256]).expect("x");
    for (rules, what) in [(WIDE, "needs 128-byte alignment"), (NOTHING, "no size")] {
        let mut y = HeteData::from_slice(&rt, &[2u8; 256]).expect("y");
        let outcome = rt.scope(|s| {
            s.call(
                Device::Cpu,
                rules,
                [0, 0],
                [KernelArg::read("x", &x), KernelArg::write("y", &mut y)],
            )
        });
        let err = match outcome {
            Ok(Err(e)) | Err(e) => e,
            Ok(Ok(())) => panic!("the typed view was handed out"),
        };
        let text = err.to_string();
        assert!(matches!(err, Error::Shape { .. }), "{err:?}");
        assert!(
            text.contains("merged argument") && text.contains(what),
            "{text}"
        );
        assert_eq!(y.to_vec().expect("y"), [2u8; 256], "nothing was written");
    }
}
