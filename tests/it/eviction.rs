//! Eviction under memory pressure: random programs on sim pools of a few blocks, checked
//! against the shared protocol model (`common/programs_model.rs`, which predicts every
//! eviction, write-back and copy per link) and the host-only model of the contents; fixed
//! programs that show an eviction's choices; and copy faults during write-back.
//!
//! `RIMMS_PROPTEST_CASES` raises the case count (2,000 by default).

use crate::common::programs_model as model;

use model::{check_program, op, Op, Pools};
use proptest::prelude::*;
use rimms::{Complex32, Device, Error, HeteData, Runtime, SimConfig, SpaceId};

fn cases() -> u32 {
    std::env::var("RIMMS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// Programs that start with four to seven buffers, more than a pool of three blocks holds,
/// then go on as `programs.rs`'s do.
fn program() -> impl Strategy<Value = Vec<Op>> {
    let alloc = (1usize..1500, 3u32..14).prop_map(|(len, frag_log2)| Op::Alloc { len, frag_log2 });
    (
        prop::collection::vec(alloc, 4..8),
        prop::collection::vec(op(), 1..40),
    )
        .prop_map(|(mut ops, rest)| {
            ops.extend(rest);
            ops
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Three blocks per sim: a call (at most three buffers) always fits, and programs of more
    /// live buffers than that evict.
    #[test]
    fn random_programs_under_pressure_match_both_models(ops in program()) {
        check_program(&ops, false, Some(Pools::blocks(3)))?;
    }
}

/// The property above is only worth its cases if programs evict: of 300 programs drawn as it
/// draws them, many evict, and many of those write back.
#[test]
fn random_programs_evict_and_write_back() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let programs = program();
    let (mut evicting, mut writing_back) = (0, 0);
    for _ in 0..300 {
        let ops = programs.new_tree(&mut runner).expect("program").current();
        let totals =
            check_program(&ops, false, Some(Pools::blocks(3))).expect("program matches the models");
        evicting += usize::from(totals.evictions.iter().any(|t| t.0 > 0));
        writing_back += usize::from(totals.evictions.iter().any(|t| t.2 > 0));
    }
    assert!(
        evicting >= 60 && writing_back >= 30,
        "{evicting} evicting, {writing_back} writing back"
    );
}

const GRANULE: usize = 4096;
const N: usize = GRANULE / 8;

/// The CPU and one sim whose pool holds `blocks` blocks of one buffer each.
fn runtime(blocks: usize) -> Runtime {
    Runtime::builder()
        .host_pool(1 << 20)
        .granule(GRANULE)
        .sim(SimConfig {
            pool_bytes: blocks * GRANULE,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime")
}

fn values(seed: f32) -> Vec<Complex32> {
    (0..N)
        .map(|i| Complex32::new(seed + i as f32, -seed))
        .collect()
}

fn sim0(rt: &Runtime) -> SpaceId {
    rt.space_of(Device::Sim(0)).expect("sim0")
}

/// With room for two blocks, a third buffer evicts the least recently used one: `a` was used
/// on sim0 before `b`, so `a` goes. `a`'s sim0 copy was a read copy (the host still held it):
/// dropped for free. Then `b`, written on sim0 alone, is evicted for `a`: written back to the
/// host first, one copy of its 4 KiB.
#[test]
fn the_least_recently_used_block_goes_first_and_last_copies_are_written_back() {
    let rt = runtime(2);
    let a = HeteData::from_slice(&rt, &values(1.0)).expect("a");
    let mut b = HeteData::<Complex32>::alloc(&rt, N).expect("b");
    let mut c = HeteData::<Complex32>::alloc(&rt, N).expect("c");
    // a and b on sim0: b = conj(a), so b's only valid copy is there.
    rt.conj(Device::Sim(0), &a, &mut b).expect("conj");
    rt.reset_stats();
    // c needs a block: a (older) is dropped, b stays.
    rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut c)
        .expect("scale");
    let s = rt.stats();
    let sim = s.space("sim0").expect("sim0");
    assert_eq!(
        (sim.evictions, sim.dropped_bytes, sim.written_back_bytes),
        (1, GRANULE as u64, 0)
    );
    assert_eq!(s.total_bytes(), 0, "dropping a read copy moves nothing");
    assert!(!a.fragment_state(0).expect("frag").valid.contains(sim0(&rt)));
    assert!(b.fragment_state(0).expect("frag").valid.contains(sim0(&rt)));
    // a back on sim0: b is now the oldest of b and c, and holds the only copy of its data.
    rt.reset_stats();
    rt.conj(Device::Sim(0), &a, &mut c).expect("conj");
    let s = rt.stats();
    let sim = s.space("sim0").expect("sim0");
    assert_eq!(
        (sim.evictions, sim.dropped_bytes, sim.written_back_bytes),
        (1, 0, GRANULE as u64)
    );
    assert_eq!(
        (
            s.copies("sim0", "host").unwrap(),
            s.bytes("sim0", "host").unwrap()
        ),
        (1, GRANULE as u64)
    );
    let state = b.fragment_state(0).expect("frag");
    assert_eq!(state.valid.iter().collect::<Vec<_>>(), vec![SpaceId::HOST]);
    let expected: Vec<Complex32> = values(1.0).iter().map(|v| v.conj()).collect();
    assert_eq!(b.host().expect("b"), &expected[..]);
    b.validate().expect("b");
}

/// A call whose own arguments do not fit fails with how much it needs and what could be
/// freed, and changes nothing.
#[test]
fn a_call_that_cannot_fit_says_how_much_it_needs() {
    let rt = runtime(1);
    let a = HeteData::from_slice(&rt, &values(1.0)).expect("a");
    let mut b = HeteData::<Complex32>::alloc(&rt, N).expect("b");
    let err = rt
        .conj(Device::Sim(0), &a, &mut b)
        .expect_err("two blocks in a pool of one");
    match &err {
        Error::DoesNotFit {
            space,
            needed,
            free,
            evictable,
            ..
        } => {
            assert_eq!(
                (space.as_str(), *needed, *free, *evictable),
                ("sim0", GRANULE, 0, 0),
                "{err}"
            );
            // The error names the space by its id too, so a program can act on it.
            assert_eq!(Ok(space.id()), rt.space_of(Device::Sim(0)).map_err(drop));
        }
        other => panic!("expected DoesNotFit, got {other}"),
    }
    assert!(
        err.to_string().contains("sim0") && err.to_string().contains("4096"),
        "{err}"
    );
    assert_eq!(a.host().expect("a"), &values(1.0)[..]);
}

/// Copies fail while a block that holds the only copy of its data must be written back: the
/// call fails naming the space, the block and its state stay, nothing is lost; once the fault
/// is gone the same call succeeds and writes it back.
#[test]
fn a_failed_write_back_loses_nothing_and_the_next_call_succeeds() {
    let rt = runtime(2);
    let a = HeteData::from_slice(&rt, &values(3.0)).expect("a");
    let mut b = HeteData::<Complex32>::alloc(&rt, N).expect("b");
    let mut c = HeteData::<Complex32>::alloc(&rt, N).expect("c");
    rt.conj(Device::Sim(0), &a, &mut b).expect("conj");
    // b is the only copy of conj(a), on sim0; make b the least recently used.
    rt.scale(
        Device::Sim(0),
        Complex32::new(1.0, 0.0),
        &mut c.as_slice_mut(),
    )
    .expect("scale");
    let before = b.fragment_state(0).expect("frag");
    rt.inject_copy_faults(sim0(&rt), true).expect("fault");
    let mut d = HeteData::<Complex32>::alloc(&rt, N).expect("d");
    rt.reset_stats();
    let err = rt
        .scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut d)
        .expect_err("write-back fails");
    assert!(
        matches!(&err, Error::WriteBack { space, .. } if space == "sim0"),
        "{err}"
    );
    assert!(err.to_string().contains("sim0"), "{err}");
    assert_eq!(
        b.fragment_state(0).expect("frag"),
        before,
        "the block and its state stay"
    );
    let sim = rt.stats().space("sim0").expect("sim0").clone();
    assert_eq!((sim.evictions, sim.written_back_bytes), (0, 0));
    rt.inject_copy_faults(sim0(&rt), false).expect("fault gone");
    rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut d)
        .expect("scale succeeds now");
    let sim = rt.stats().space("sim0").expect("sim0").clone();
    assert!(
        sim.evictions >= 1 && sim.written_back_bytes >= GRANULE as u64,
        "{sim:?}"
    );
    let expected: Vec<Complex32> = values(3.0).iter().map(|v| v.conj()).collect();
    assert_eq!(b.host().expect("b"), &expected[..]);
    for x in [&a, &b, &c, &d] {
        x.validate().expect("copies agree");
    }
}

/// A buffer a running scope job uses is never evicted: while a job on sim0 holds `a`, calls
/// on other buffers that need room evict around it or fail, and `a` stays valid.
#[test]
fn buffers_in_use_by_another_thread_are_not_evicted() {
    let rt = runtime(3);
    let mut bufs: Vec<HeteData<Complex32>> = (0..6)
        .map(|i| HeteData::from_slice(&rt, &values(i as f32)).expect("buf"))
        .collect();
    let (first, rest) = bufs.split_at_mut(1);
    std::thread::scope(|s| {
        let rt2 = rt.clone();
        let a = &mut first[0];
        let worker = s.spawn(move || {
            for _ in 0..200 {
                rt2.scale(Device::Sim(0), Complex32::new(-1.0, 0.0), a)
                    .expect("scale a");
            }
        });
        for round in 0..50 {
            for b in rest.iter_mut() {
                // May fail for want of room while the other thread's call is in flight; it
                // must never take a's block from under it.
                let _ = rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), b);
                let _ = round;
            }
        }
        worker.join().expect("worker");
    });
    // 200 negations leave a as it was.
    assert_eq!(bufs[0].host().expect("a"), &values(0.0)[..]);
    for (i, b) in bufs.iter().enumerate().skip(1) {
        assert_eq!(b.host().expect("b"), &values(i as f32)[..]);
        b.validate().expect("copies agree");
    }
}

/// A host view into a host-mapped space (a u-dma-buf the CPU reads in place) is a plain slice
/// whose end the runtime cannot see: while it may be alive, the block it points into stays.
/// Once the buffer is borrowed mutably (so no view is alive), the block can go again.
#[test]
fn a_host_view_into_a_mapped_space_keeps_its_block() {
    let rt = Runtime::builder()
        .host_pool(1 << 20)
        .granule(GRANULE)
        .sim(SimConfig {
            pool_bytes: 2 * GRANULE,
            host_mapped: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let mut a = HeteData::<Complex32>::alloc(&rt, N).expect("a");
    a.set_home(Device::Sim(0)).expect("set home");
    a.host_write().expect("a").copy_from_slice(&values(7.0));
    assert!(
        a.is_resident(sim0(&rt), rimms::coherence::Access::Read),
        "a lives in sim0"
    );
    let (mut b, mut c) = (
        HeteData::<Complex32>::alloc(&rt, N).expect("b"),
        HeteData::<Complex32>::alloc(&rt, N).expect("c"),
    );
    let view = a.host().expect("view in place");
    // b fits beside a; c would need a's block, which the view still points into.
    rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut b)
        .expect("b");
    let err = rt
        .conj(Device::Sim(0), &b, &mut c)
        .expect_err("a's block is held by the view");
    assert!(matches!(err, Error::DoesNotFit { .. }), "{err}");
    assert_eq!(view, &values(7.0)[..]);
    // A mutable borrow ends every view: a's block may go now (written back first).
    a.as_slice_mut();
    rt.conj(Device::Sim(0), &b, &mut c)
        .expect("room made by evicting a");
    let sim = rt.stats().space("sim0").expect("sim0").clone();
    assert_eq!((sim.evictions, sim.written_back_bytes), (1, GRANULE as u64));
    assert_eq!(a.host().expect("a"), &values(7.0)[..]);
}

/// With tracing on, each eviction is one `rimms::evict` event naming the space, what was
/// dropped and written back, and why (the allocation that did not fit); the write-back copy
/// is a `rimms::transfer` event whose reason says it was a write-back.
#[test]
fn evictions_are_traced_with_their_reason() {
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::Layer;

    #[derive(Default)]
    struct Fields(Vec<(String, String)>);
    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .push((field.name().to_string(), format!("{value:?}")));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().to_string(), value.to_string()));
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.push((field.name().to_string(), value.to_string()));
        }
    }
    /// Each event's target and its fields, as (name, value).
    type Event = (String, Vec<(String, String)>);
    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<Event>>>);
    impl<S: tracing::Subscriber> Layer<S> for Collect {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut fields = Fields::default();
            event.record(&mut fields);
            let target = event.metadata().target().to_string();
            self.0.lock().expect("lock").push((target, fields.0));
        }
    }

    let events = Collect::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    tracing::subscriber::with_default(subscriber, || {
        let rt = Runtime::builder()
            .host_pool(1 << 20)
            .granule(GRANULE)
            .sim(SimConfig {
                pool_bytes: GRANULE,
                ..SimConfig::default()
            })
            .trace(true)
            .build()
            .expect("runtime");
        let mut a = HeteData::<Complex32>::alloc(&rt, N).expect("a");
        let mut b = HeteData::<Complex32>::alloc(&rt, N).expect("b");
        rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut a)
            .expect("a");
        a.as_slice_mut()
            .host_mut()
            .expect("a")
            .copy_from_slice(&values(1.0));
        rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut a)
            .expect("a on sim0 alone");
        rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut b)
            .expect("b evicts a");
    });
    let events = events.0.lock().expect("lock");
    let field = |fields: &[(String, String)], name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let evictions: Vec<_> = events.iter().filter(|(t, _)| t == "rimms::evict").collect();
    assert_eq!(evictions.len(), 1, "{events:?}");
    let fields = &evictions[0].1;
    assert_eq!(field(fields, "space"), "sim0");
    assert_eq!(field(fields, "written_back_bytes"), GRANULE.to_string());
    assert_eq!(field(fields, "dropped_bytes"), "0");
    assert_eq!(field(fields, "written_back_to"), "host");
    assert!(
        field(fields, "reason").contains("pool full: 4096 bytes needed"),
        "{fields:?}"
    );
    let write_backs: Vec<_> = events
        .iter()
        .filter(|(t, f)| t == "rimms::transfer" && field(f, "reason").contains("write-back"))
        .collect();
    assert_eq!(write_backs.len(), 1, "{events:?}");
    assert_eq!(field(&write_backs[0].1, "from"), "sim0");
}

/// Sim pools of 2 to 16 granules of 1 KiB beside buffers of up to 12 KiB: whole buffers often
/// do not fit, so blocks become windows of what an access needs, which grow or are retired
/// (their last copies written back), and some calls find no room at all, which the model
/// predicts.
fn small_pools() -> impl Strategy<Value = Pools> {
    (2usize..17).prop_map(|granules| Pools {
        granule: 1024,
        granules,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Windows: values, copies and bytes per link, evictions, fragment states and which calls
    /// fail, all as the models say.
    #[test]
    fn random_programs_on_pools_smaller_than_a_buffer_match_both_models(
        (pools, ops) in (small_pools(), program())
    ) {
        check_program(&ops, false, Some(pools))?;
    }
}

/// The property above exercises windows: of 300 programs drawn as it draws them, many make
/// windows, grow one, retire one and cut blocks down for a call.
#[test]
fn random_programs_on_small_pools_make_grow_and_retire_windows() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let programs = (small_pools(), program());
    let (mut making, mut growing, mut retiring, mut trimming) = (0, 0, 0, 0);
    let (mut giving_up, mut refusing) = (0, 0);
    for _ in 0..300 {
        let (pools, ops) = programs.new_tree(&mut runner).expect("program").current();
        let totals = check_program(&ops, false, Some(pools)).expect("program matches the models");
        making += usize::from(totals.windows > 0);
        growing += usize::from(totals.grown > 0);
        retiring += usize::from(totals.retired > 0);
        trimming += usize::from(totals.trimmed > 0);
        giving_up += usize::from(totals.given_up > 0);
        refusing += usize::from(totals.refused > 0);
    }
    let counts = format!(
        "{making} make, {growing} grow, {retiring} retire, {trimming} cut down windows; \
         {giving_up} give blocks up; {refusing} refuse a call"
    );
    eprintln!("{counts}");
    assert!(
        making >= 100 && growing >= 30 && retiring >= 30 && trimming >= 30,
        "{counts}"
    );
}

/// `len` fragments of 4 KiB of distinct values, on the host.
fn fragments(rt: &Runtime, len: usize) -> (HeteData<Complex32>, Vec<Complex32>) {
    let values: Vec<Complex32> = (0..len * N)
        .map(|i| Complex32::new(i as f32, 1.0 - i as f32))
        .collect();
    (HeteData::from_slice(rt, &values).expect("buffer"), values)
}

/// (copies, bytes) of a link, and (evictions, dropped, written back) of sim0.
fn moved(rt: &Runtime, from: &str, to: &str) -> (u64, u64) {
    let s = rt.stats();
    (s.copies(from, to).unwrap(), s.bytes(from, to).unwrap())
}

fn evicted(rt: &Runtime) -> (u64, u64, u64) {
    let s = rt.stats();
    let sim = s.space("sim0").expect("sim0");
    (sim.evictions, sim.dropped_bytes, sim.written_back_bytes)
}

fn scaled(values: &mut [Complex32], by: f32) {
    values.iter_mut().for_each(|v| *v *= by);
}

/// A buffer of four 4 KiB fragments does not fit a pool of three: writing its fragment 2 on
/// sim0 gives it a window of that fragment alone; writing fragment 3 then grows the window to
/// fragments 2..4 (a window that starts 8 KiB into the buffer), moving fragment 2 (whose only
/// copy is there) inside sim0 rather than writing it back, and copies in fragment 3 only.
/// Every value is where it belongs.
#[test]
fn a_window_grows_and_keeps_the_bytes_it_holds() {
    let rt = runtime(3);
    let (mut x, mut expected) = fragments(&rt, 4);
    rt.scale(
        Device::Sim(0),
        Complex32::new(2.0, 0.0),
        &mut x.slice_mut(2 * N..3 * N).expect("view"),
    )
    .expect("fragment 2 on sim0");
    rt.scale(
        Device::Sim(0),
        Complex32::new(3.0, 0.0),
        &mut x.slice_mut(3 * N..4 * N).expect("view"),
    )
    .expect("fragment 3 on sim0");
    assert_eq!(moved(&rt, "host", "sim0"), (2, 2 * GRANULE as u64));
    assert_eq!(moved(&rt, "sim0", "host"), (0, 0));
    assert_eq!(evicted(&rt), (0, 0, 0), "growing evicts nothing");
    let valid = |f: usize| {
        x.fragment_state(f)
            .expect("frag")
            .valid
            .iter()
            .collect::<Vec<_>>()
    };
    assert_eq!(valid(2), vec![sim0(&rt)]);
    assert_eq!(valid(3), vec![sim0(&rt)]);
    assert_eq!(valid(1), vec![SpaceId::HOST]);
    x.validate().expect("copies agree");
    scaled(&mut expected[2 * N..3 * N], 2.0);
    scaled(&mut expected[3 * N..], 3.0);
    assert_eq!(x.host().expect("host"), &expected[..]);
    assert_eq!(moved(&rt, "sim0", "host"), (1, 2 * GRANULE as u64));
}

/// In a pool of two fragments, fragment 0 of a four-fragment buffer is written on sim0 (its
/// only copy), then fragment 3: the window cannot grow (the hull is the whole buffer), so it
/// is retired: fragment 0 written back to the host (one eviction, 4 KiB written back), and a
/// window of fragment 3 takes its place. Nothing is lost.
#[test]
fn retiring_a_window_writes_back_its_last_copies() {
    let rt = runtime(2);
    let (mut x, mut expected) = fragments(&rt, 4);
    rt.scale(
        Device::Sim(0),
        Complex32::new(2.0, 0.0),
        &mut x.slice_mut(0..N).expect("view"),
    )
    .expect("fragment 0 on sim0");
    rt.scale(
        Device::Sim(0),
        Complex32::new(5.0, 0.0),
        &mut x.slice_mut(3 * N..4 * N).expect("view"),
    )
    .expect("fragment 3 on sim0");
    assert_eq!(evicted(&rt), (1, 0, GRANULE as u64));
    assert_eq!(moved(&rt, "sim0", "host"), (1, GRANULE as u64));
    assert_eq!(moved(&rt, "host", "sim0"), (2, 2 * GRANULE as u64));
    let state = x.fragment_state(0).expect("frag");
    assert_eq!(state.valid.iter().collect::<Vec<_>>(), vec![SpaceId::HOST]);
    x.validate().expect("copies agree");
    scaled(&mut expected[..N], 2.0);
    scaled(&mut expected[3 * N..], 5.0);
    assert_eq!(x.host().expect("host"), &expected[..]);
}

/// A call whose output finds no room cuts its input's whole-buffer block down to the
/// fragment it reads: the other fragment, also valid on the host, is dropped (one eviction),
/// and the output gets a window. The result is exact.
#[test]
fn a_call_cuts_its_other_arguments_blocks_down_to_what_it_uses() {
    let rt = runtime(2);
    let (x, values) = fragments(&rt, 2);
    let mut y = HeteData::<Complex32>::alloc(&rt, 2 * N).expect("y");
    x.prefetch(Device::Sim(0)).expect("x fills sim0");
    rt.reset_stats();
    rt.conj(
        Device::Sim(0),
        &x.slice(N..2 * N).expect("view"),
        &mut y.slice_mut(0..N).expect("view"),
    )
    .expect("conj fits once x is cut down");
    assert_eq!(evicted(&rt), (1, GRANULE as u64, 0));
    assert_eq!(
        rt.stats().total_bytes(),
        0,
        "nothing moved: y's fragment is zero"
    );
    let got = y.host().expect("y");
    for (i, got) in got.iter().enumerate() {
        let want = if i < N {
            values[N + i].conj()
        } else {
            Complex32::new(0.0, 0.0)
        };
        assert_eq!(*got, want, "element {i}");
    }
    x.validate().expect("x");
}

/// Found by the property above (a window move that counted both arguments' leases as the
/// call's own): a call whose two arguments read one buffer at offsets 32 and 960, on a pool of
/// two 1 KiB granules where that buffer (1,032 bytes) gets a window. Moving the window for the
/// second argument would leave the first argument's pointer outside it, so the window stays
/// and the call is refused for want of room, as the models say.
#[test]
fn two_arguments_on_one_buffer_never_move_its_window() {
    let one = || Op::Alloc {
        len: 1,
        frag_log2: 3,
    };
    let ops = vec![
        one(),
        one(),
        one(),
        Op::Alloc {
            len: 129,
            frag_log2: 3,
        },
        one(),
        one(),
        Op::Drop { buf: 487420 },
        Op::Drop { buf: 506450 },
        Op::Zip {
            x: 129310,
            y: 179360,
            out: 164903,
            a: 585781,
            b: 405316,
            c: 257223,
            dev: 2,
            op: 0,
        },
        Op::Drop { buf: 434061 },
        Op::Zip {
            x: 303979,
            y: 761254,
            out: 525141,
            a: 620752,
            b: 417822,
            c: 846181,
            dev: 2,
            op: 1,
        },
    ];
    let pools = Pools {
        granule: 1024,
        granules: 2,
    };
    check_program(&ops, false, Some(pools)).expect("the program matches the models");
}
