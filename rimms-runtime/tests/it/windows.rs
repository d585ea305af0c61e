//! Windows, eviction and the host views they must not invalidate: small pools that
//! force windows, trims, give-ups and evictions while host slices are alive, from one thread
//! and from two.

use rimms_runtime::{Complex32, Device, Error, HeteData, Runtime, SimConfig, ZipOp};

const GRANULE: usize = 4096;
/// Complex32 elements in one 4 KiB fragment.
const N: usize = GRANULE / 8;

fn runtime(sim_granules: usize, host_mapped: bool) -> Runtime {
    Runtime::builder()
        .host_pool(1 << 22)
        .granule(GRANULE)
        .sim(SimConfig {
            pool_bytes: sim_granules * GRANULE,
            host_mapped,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime")
}

fn values(len: usize, seed: f32) -> Vec<Complex32> {
    (0..len)
        .map(|i| Complex32::new(seed + i as f32, -seed))
        .collect()
}

/// A host view into a window of a host-mapped sim space (the buffer's home, too large for the
/// pool) stays valid while other buffers need the room and while another view of the same
/// buffer asks for a fragment the window does not cover: neither evicts, moves nor retires
/// the window the first view points into.
#[test]
fn a_host_view_into_a_mapped_window_outlives_pressure_on_its_space() {
    let rt = runtime(2, true);
    let mut x = HeteData::<Complex32>::alloc(&rt, 4 * N).expect("x");
    x.set_home(Device::Sim(0)).expect("home");
    let want = values(N, 3.0);
    // The whole buffer does not fit in sim0: only the view's fragment gets a window there.
    x.slice_mut(0..N)
        .expect("view")
        .host_write()
        .expect("write")
        .copy_from_slice(&want);
    let sim0 = rt.space_of(Device::Sim(0)).expect("sim0");
    assert!(x.fragment_state(0).expect("frag 0").valid.contains(sim0));
    let view = x.slice(0..N).expect("view");
    let seen = view.host().expect("in place");
    assert_eq!(seen, &want[..]);
    // Another buffer needs all of sim0: x's window is held by the view.
    let y = HeteData::from_slice(&rt, &values(2 * N, 9.0)).expect("y");
    let err = y
        .prefetch(Device::Sim(0))
        .expect_err("x's window is pinned");
    assert!(matches!(err, Error::DoesNotFit { .. }), "{err}");
    // Another view of x needs fragment 2 in sim0: the window may not grow or be retired.
    let other = x.slice(2 * N..3 * N).expect("other");
    let _ = other.host();
    let _ = x.slice(N..3 * N).expect("wider").host();
    assert_eq!(seen, &want[..], "the view still reads its bytes");
    x.validate().expect("copies agree");
}

/// The same, from two threads: one reads a host view of `x` in place in a host-mapped space
/// over and over, the other keeps a tiny pool full with calls on other buffers.
#[test]
fn host_views_in_a_mapped_space_race_evictions_from_another_thread() {
    let rt = runtime(2, true);
    let want = values(N, 5.0);
    let mut x = HeteData::<Complex32>::alloc(&rt, N).expect("x");
    x.set_home(Device::Sim(0)).expect("home");
    x.host_write().expect("write").copy_from_slice(&want);
    let (mut y, mut z) = (
        HeteData::from_slice(&rt, &values(N, 1.0)).expect("y"),
        HeteData::from_slice(&rt, &values(N, 2.0)).expect("z"),
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..200 {
                let _ = rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut y);
                let _ = rt.conj(Device::Sim(0), &y, &mut z);
                let _ = rt.conj(Device::Sim(0), &z, &mut y);
            }
        });
        for _ in 0..200 {
            let seen = x.host().expect("x");
            assert_eq!(seen, &want[..]);
        }
    });
    assert_eq!(x.host().expect("x"), &want[..]);
    x.validate().expect("copies agree");
}

/// One call reads two views of the same buffer (so it holds two leases on it and may not move
/// its window) and writes a third buffer, in a pool too small for all of it at once: the call
/// either succeeds with the right values or fails with `DoesNotFit`, and loses nothing.
#[test]
fn two_views_of_one_buffer_in_one_call_on_a_tight_pool_lose_nothing() {
    for granules in 1..=4 {
        let rt = runtime(granules, false);
        let xs = values(4 * N, 1.0);
        let mut x = HeteData::from_slice(&rt, &xs).expect("x");
        // Make x's only valid copy of fragments 1 and 3 live in sim0 (windows, write-backs).
        let mut model = xs.clone();
        for frag in [1usize, 3] {
            let mut view = x.slice_mut(frag * N..(frag + 1) * N).expect("view");
            match rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut view) {
                Ok(()) => model[frag * N..(frag + 1) * N]
                    .iter_mut()
                    .for_each(|v| *v *= 2.0),
                Err(Error::DoesNotFit { .. }) => {}
                Err(e) => panic!("{granules} granules: scale: {e}"),
            }
        }
        let mut out = HeteData::<Complex32>::alloc(&rt, N).expect("out");
        let (a, b) = (
            x.slice(N..2 * N).expect("a"),
            x.slice(3 * N..4 * N).expect("b"),
        );
        match rt.zip(Device::Sim(0), ZipOp::Add, &a, &b, &mut out) {
            Ok(()) => {
                let sum: Vec<Complex32> = (0..N).map(|i| model[N + i] + model[3 * N + i]).collect();
                assert_eq!(out.host().expect("out"), &sum[..], "{granules} granules");
            }
            Err(Error::DoesNotFit { .. }) => {}
            Err(e) => panic!("{granules} granules: zip: {e}"),
        }
        assert_eq!(x.host().expect("x"), &model[..], "{granules} granules");
        x.validate().expect("copies agree");
    }
}

/// Fragments smaller than the pool granule on a one-granule pool: every call on a fragment
/// retires the window of the last (writing it back), and a call that needs two fragments at
/// once and a call needing a fragment plus an output either fit or fail cleanly.
#[test]
fn small_fragments_on_a_one_granule_pool_keep_every_value() {
    let rt = Runtime::builder()
        .host_pool(1 << 20)
        .granule(64)
        .sim(SimConfig {
            pool_bytes: 64,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    // 8 elements a fragment of 64 bytes.
    let len = 64;
    let mut model = values(len, 0.5);
    let mut x = HeteData::from_slice(&rt, &model).expect("x");
    x.fragment(64).expect("fragment");
    for (frag, by) in [(0usize, 2.0f32), (3, 3.0), (7, 5.0), (3, 7.0)] {
        let mut view = x.slice_mut(frag * 8..(frag + 1) * 8).expect("view");
        rt.scale(Device::Sim(0), Complex32::new(by, 0.0), &mut view)
            .expect("scale");
        model[frag * 8..(frag + 1) * 8]
            .iter_mut()
            .for_each(|v| *v *= by);
    }
    // An unaligned view inside fragment 7 (its only copy is in sim0's window).
    let inner = x.slice(57..61).expect("inner");
    assert_eq!(inner.host().expect("inner"), &model[57..61]);
    let mut out = HeteData::<Complex32>::alloc(&rt, 8).expect("out");
    let err = rt
        .conj(Device::Sim(0), &x.slice(0..8).expect("in"), &mut out)
        .expect_err("input and output do not fit in one granule");
    assert!(matches!(err, Error::DoesNotFit { .. }), "{err}");
    assert_eq!(x.host().expect("x"), &model[..]);
    x.validate().expect("copies agree");
}

/// A fragment size far larger than the buffer (up to 2^62 bytes) is a valid power of two:
/// no shift or size computation in the window, trim or eviction code may overflow on it.
#[test]
fn huge_fragment_sizes_do_not_overflow_window_arithmetic() {
    for shift in [20u32, 40, 62, 63] {
        let rt = runtime(1, false);
        let model = values(N / 2, 1.5);
        let mut x = HeteData::from_slice(&rt, &model).expect("x");
        x.fragment(1usize << shift).expect("fragment");
        assert_eq!(x.fragment_count(), 1);
        rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut x)
            .expect("scale");
        // Another buffer evicts x's block (a write-back of the one huge fragment).
        let mut y = HeteData::from_slice(&rt, &values(N, 4.0)).expect("y");
        rt.scale(Device::Sim(0), Complex32::new(1.0, 0.0), &mut y)
            .expect("scale y");
        let doubled: Vec<Complex32> = model.iter().map(|v| v * 2.0).collect();
        assert_eq!(x.host().expect("x"), &doubled[..], "2^{shift}");
        assert_eq!(x.slice(3..9).expect("v").host().expect("v"), &doubled[3..9]);
    }
}

/// A host view of a buffer whose home is a host-mapped evictable space, whose window there
/// does not cover the view: with no other view alive (the buffer was just borrowed mutably)
/// and room in the pool, the window may grow, so the view is served. (The view's own
/// host-view pin must not count as another view's.)
#[test]
fn a_host_view_may_grow_its_buffers_window_when_no_other_view_is_alive() {
    let rt = runtime(4, true);
    let mut x = HeteData::<Complex32>::alloc(&rt, 8 * N).expect("x");
    x.set_home(Device::Sim(0)).expect("home");
    let want = values(2 * N, 2.0);
    // x (8 fragments) does not fit in sim0 (4): a window of fragment 0 holds this write.
    x.slice_mut(0..N)
        .expect("view")
        .host_write()
        .expect("write")
        .copy_from_slice(&want[..N]);
    // No view is alive now; fragment 1's write needs the window grown over it (room: 2 of 4).
    x.slice_mut(N..2 * N)
        .expect("view")
        .host_write()
        .expect("the window grows: no other view points into it")
        .copy_from_slice(&want[N..]);
    x.as_slice_mut();
    assert_eq!(
        x.slice(0..2 * N).expect("v").host().expect("read"),
        &want[..]
    );
    x.validate().expect("copies agree");
}

/// Host views of an over-aligned Pod type (u128, align 16) in windows of one small fragment
/// at an odd place in a host-mapped space: every slice handed out is aligned.
#[test]
fn host_views_into_small_windows_are_aligned_for_their_type() {
    let rt = Runtime::builder()
        .host_pool(1 << 20)
        .granule(64)
        .sim(SimConfig {
            pool_bytes: 128,
            host_mapped: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let mut x = HeteData::<u128>::alloc(&rt, 64).expect("x");
    x.fragment(16).expect("fragment");
    x.set_home(Device::Sim(0)).expect("home");
    {
        let mut view = x.slice_mut(5..6).expect("view");
        let w = view.host_write().expect("write");
        assert_eq!(w.as_ptr() as usize % std::mem::align_of::<u128>(), 0);
        w[0] = 0x0123_4567_89ab_cdef_0011_2233_4455_6677;
    }
    let r = x.slice(5..6).expect("view").host().expect("read");
    assert_eq!(r.as_ptr() as usize % std::mem::align_of::<u128>(), 0);
    assert_eq!(r[0], 0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    // No view alive: the window (byte 80 of the buffer at the start of its granule) grows
    // to bytes 64..128, so element 5 now sits 16 bytes into its block.
    x.as_slice_mut();
    let wider = x.slice(4..8).expect("view").host().expect("wider");
    assert_eq!(wider.as_ptr() as usize % std::mem::align_of::<u128>(), 0);
    assert_eq!(wider, &[0, 0x0123_4567_89ab_cdef_0011_2233_4455_6677, 0, 0]);
    x.validate().expect("copies agree");
}
