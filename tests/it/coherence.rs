//! The protocol seen from outside: each transition through the public API, with the bytes and
//! copies it must cost.

use crate::common::{self, signal};
use rimms::{
    Complex32, Device, FftDirection, HeteData, LinkModel, Runtime, SimConfig, SpaceSet, ZipOp,
};
use std::time::Duration;

fn runtime() -> Runtime {
    common::cpu_and_two_sims()
}

fn space(rt: &Runtime, d: Device) -> rimms::SpaceId {
    rt.space_of(d).expect("device")
}

#[test]
fn reading_fresh_data_on_a_device_fills_there_and_transfers_nothing() {
    let rt = runtime();
    let x = HeteData::<Complex32>::alloc(&rt, 4096).expect("alloc");
    let mut y = HeteData::alloc(&rt, 4096).expect("alloc");
    rt.conj(Device::Sim(0), &x, &mut y).expect("conj");
    assert!(y
        .host()
        .expect("host")
        .iter()
        .all(|v| *v == Complex32::new(0.0, 0.0)));
    let s = rt.stats();
    // Only y (written on sim0) comes back; x's zeros were filled on sim0, not sent.
    assert_eq!(s.bytes("host", "sim0").unwrap(), 0);
    assert_eq!(s.bytes("sim0", "host").unwrap(), 4096 * 8);
    assert_eq!(s.total_bytes(), 4096 * 8, "nothing else moved");
    assert_eq!(s.space("sim0").expect("sim0").zero_fills, 1);
    let st = x.fragment_state(0).expect("state");
    assert!(st.zero && st.valid.contains(space(&rt, Device::Sim(0))));
}

#[test]
fn write_discard_moves_nothing_even_over_newer_data_elsewhere() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(2048, 1)).expect("x");
    rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut x)
        .expect("scale");
    rt.reset_stats();
    // The newest bytes are on sim0; a host write-discard must not fetch them.
    let fresh = signal(2048, 2);
    x.host_write().expect("host").copy_from_slice(&fresh);
    assert_eq!(rt.stats().total_copies(), 0);
    assert_eq!(x.host().expect("host"), &fresh[..]);
    assert_eq!(
        x.fragment_state(1).expect("state").valid,
        SpaceSet::only(rimms::SpaceId::HOST)
    );
}

#[test]
fn read_replicas_stay_valid_device_then_host_then_device_moves_once() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(1024, 3)).expect("x");
    let mut y = HeteData::alloc(&rt, 1024).expect("y");
    let mut z = HeteData::alloc(&rt, 1024).expect("z");
    rt.conj(Device::Sim(0), &x, &mut y).expect("conj on sim0");
    let _ = x.host().expect("host read");
    rt.conj(Device::Sim(0), &x, &mut z)
        .expect("conj on sim0 again");
    let s = rt.stats();
    assert_eq!(
        s.copies("host", "sim0").unwrap(),
        1,
        "x went to sim0 exactly once"
    );
    assert_eq!(s.bytes("host", "sim0").unwrap(), 1024 * 8);
    let both = SpaceSet::only(rimms::SpaceId::HOST).with(space(&rt, Device::Sim(0)));
    assert_eq!(x.fragment_state(0).expect("state").valid, both);
}

#[test]
fn device_written_data_read_on_host_then_device_again_moves_once_each_way() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(1024, 4)).expect("x");
    let mut y = HeteData::alloc(&rt, 1024).expect("y");
    let mut z = HeteData::alloc(&rt, 1024).expect("z");
    rt.conj(Device::Sim(1), &x, &mut y).expect("y on sim1");
    let _ = y.host().expect("host read");
    rt.conj(Device::Sim(1), &y, &mut z)
        .expect("read y on sim1 again");
    let s = rt.stats();
    assert_eq!(s.copies("sim1", "host").unwrap(), 1);
    assert_eq!(
        s.copies("host", "sim1").unwrap(),
        1,
        "only x; y is still valid on sim1"
    );
}

#[test]
fn contiguous_fragments_move_in_one_copy_and_gaps_split_copies() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(4096, 5)).expect("x");
    x.fragment(1024).expect("fragment"); // 128 elements a fragment, 32 fragments
                                         // Fragments 8..12 are rewritten on sim0; the rest stay host-only.
    {
        let mut mid = x.slice_mut(1024..1536).expect("view");
        rt.scale(Device::Sim(0), Complex32::new(3.0, 0.0), &mut mid)
            .expect("scale");
    }
    rt.reset_stats();
    let mut y = HeteData::alloc(&rt, 4096).expect("y");
    rt.conj(Device::Sim(1), &x, &mut y).expect("conj");
    let s = rt.stats();
    // Into sim1: host has 0..8 and 12..32 (two runs), sim0 has 8..12 (one run).
    assert_eq!(s.copies("host", "sim1").unwrap(), 2);
    assert_eq!(s.bytes("host", "sim1").unwrap(), (4096 - 512) * 8);
    assert_eq!(s.copies("sim0", "sim1").unwrap(), 1);
    assert_eq!(s.bytes("sim0", "sim1").unwrap(), 512 * 8);
}

#[test]
fn rows_on_different_devices_move_only_the_rows_a_kernel_touches() {
    let rt = runtime();
    let rows = 8;
    let n = 512; // 4 KiB a row: one fragment each
    let mut x = HeteData::from_slice(&rt, &signal(rows * n, 6)).expect("x");
    for (i, mut row) in x.rows_mut(n).expect("rows").into_iter().enumerate() {
        let dev = if i % 2 == 0 {
            Device::Sim(0)
        } else {
            Device::Sim(1)
        };
        rt.fft_in_place(dev, FftDirection::Forward, n, &mut row)
            .expect("fft");
    }
    let s = rt.stats();
    assert_eq!(s.bytes("host", "sim0").unwrap(), (rows / 2 * n * 8) as u64);
    assert_eq!(s.bytes("host", "sim1").unwrap(), (rows / 2 * n * 8) as u64);
    // Rows 0 and 2 back on the host: two rows' bytes from sim0, nothing else.
    rt.reset_stats();
    let _ = x.slice(0..3 * n).expect("view").host().expect("host");
    let s = rt.stats();
    assert_eq!(s.bytes("sim0", "host").unwrap(), (2 * n * 8) as u64);
    assert_eq!(s.bytes("sim1", "host").unwrap(), (n * 8) as u64);
}

#[test]
fn reset_zeroes_without_moving_or_freeing() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(1024, 7)).expect("x");
    x.prefetch(Device::Sim(0)).expect("prefetch");
    let before = rt.stats();
    x.reset();
    assert!(x
        .host()
        .expect("host")
        .iter()
        .all(|v| *v == Complex32::new(0.0, 0.0)));
    let after = rt.stats();
    assert_eq!(after.total_copies(), before.total_copies());
    assert_eq!(
        after.space("sim0").expect("sim0").in_use,
        before.space("sim0").expect("sim0").in_use
    );
}

#[test]
fn prefetch_moves_ahead_and_the_kernel_then_hits() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(2048, 8)).expect("x");
    let mut y = HeteData::alloc(&rt, 2048).expect("y");
    y.prefetch(Device::Sim(0)).expect("prefetch y"); // zero: a fill, no transfer
    x.prefetch(Device::Sim(0)).expect("prefetch x");
    assert_eq!(rt.stats().bytes("host", "sim0").unwrap(), 2048 * 8);
    rt.conj(Device::Sim(0), &x, &mut y).expect("conj");
    let conj = rt.stats().api("conj").expect("stats");
    assert_eq!((conj.calls, conj.hits, conj.misses), (1, 1, 0));
}

#[test]
fn owner_follows_the_last_writer() {
    let rt = runtime();
    let mut x = HeteData::from_slice(&rt, &signal(512, 9)).expect("x");
    assert_eq!(
        x.fragment_state(0).expect("state").owner,
        Some(rimms::SpaceId::HOST)
    );
    rt.scale(Device::Sim(1), Complex32::new(1.0, 1.0), &mut x)
        .expect("scale");
    let st = x.fragment_state(0).expect("state");
    assert_eq!(st.owner, Some(space(&rt, Device::Sim(1))));
    assert!(!st.zero);
}

#[test]
fn changing_the_fragment_size_keeps_contents_and_gathers_only_when_needed() {
    let rt = runtime();
    let data = signal(4096, 10);
    let mut x = HeteData::from_slice(&rt, &data).expect("x");
    x.fragment(512).expect("split");
    assert_eq!(x.fragment_count(), 64);
    {
        let mut part = x.slice_mut(0..64).expect("first fragment");
        rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut part)
            .expect("scale");
    }
    rt.reset_stats();
    x.fragment(8192).expect("merge");
    // The first new fragment mixed sim0-only and host-only data: gathered on the host.
    assert_eq!(rt.stats().bytes("sim0", "host").unwrap(), 64 * 8);
    let mut want = data.clone();
    want[..64].iter_mut().for_each(|v| *v *= 2.0);
    assert_eq!(x.host().expect("host"), &want[..]);
    x.validate().expect("all copies agree");
}

#[test]
fn validate_accepts_every_consistent_state() {
    let rt = runtime();
    let x = HeteData::from_slice(&rt, &signal(3000, 11)).expect("x");
    let mut y = HeteData::alloc(&rt, 3000).expect("y");
    y.validate().expect("fresh");
    rt.zip(Device::Sim(0), ZipOp::Add, &x, &x, &mut y)
        .expect("zip");
    let _ = y.host().expect("host");
    x.prefetch(Device::Sim(1)).expect("prefetch");
    x.validate().expect("x on three spaces");
    y.validate().expect("y on two");
}

#[test]
fn host_code_and_cpu_kernels_use_host_mapped_memory_in_place() {
    // sim0 stands for a device whose memory the CPU also maps (an integrated GPU, a
    // u-dma-buf): data it wrote is read by the host and by CPU kernels where it is.
    let rt = Runtime::builder()
        .sim(SimConfig {
            host_mapped: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let x = HeteData::from_slice(&rt, &signal(4096, 12)).expect("x");
    let mut y = HeteData::alloc(&rt, 4096).expect("y");
    rt.conj(Device::Sim(0), &x, &mut y).expect("y on sim0");
    rt.reset_stats();
    let read: Vec<Complex32> = y.host().expect("in place").to_vec();
    let mut z = HeteData::alloc(&rt, 4096).expect("z");
    rt.conj(Device::Cpu, &y, &mut z)
        .expect("cpu kernel reads y in place");
    assert_eq!(
        rt.stats().total_copies(),
        0,
        "nothing copied: the host reads sim0's memory"
    );
    assert_eq!(z.host().expect("z"), &signal(4096, 12)[..]);
    assert_eq!(
        read.iter().map(|v| v.conj()).collect::<Vec<_>>(),
        signal(4096, 12)
    );
    // A host write in place keeps sim0 the only holder: the next sim0 kernel moves nothing.
    y.host_mut().expect("in place")[0] = Complex32::new(7.0, 7.0);
    assert_eq!(
        y.fragment_state(0).expect("state").valid,
        SpaceSet::only(space(&rt, Device::Sim(0)))
    );
    rt.scale(Device::Sim(0), Complex32::new(2.0, 0.0), &mut y)
        .expect("scale");
    assert_eq!(rt.stats().total_copies(), 0);
    assert_eq!(y.host().expect("host")[0], Complex32::new(14.0, 14.0));
}

/// Two neighbouring fragments, one valid on sim1 only and one on sim0 and sim1 (equally cheap
/// sources): the host gets both in one copy from sim1, not one copy from each.
#[test]
fn a_tie_between_sources_keeps_the_run_in_one_copy() {
    let rt = runtime();
    let n = 1024; // two 4 KiB fragments of Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 3)).expect("x");
    let mut on_sim1 = HeteData::<Complex32>::alloc(&rt, n).expect("on_sim1");
    rt.conj(Device::Sim(1), &x, &mut on_sim1)
        .expect("written on sim1 only");
    let mut second = HeteData::<Complex32>::alloc(&rt, n / 2).expect("second");
    let upper = on_sim1.slice(n / 2..).expect("upper fragment");
    rt.conj(Device::Sim(0), &upper, &mut second)
        .expect("upper half read on sim0");
    let before = rt.stats();
    let want: Vec<Complex32> = signal(n, 3).iter().map(|v| v.conj()).collect();
    assert_eq!(on_sim1.host().expect("host"), &want[..]);
    let s = rt.stats();
    let copies =
        |from: &str| s.copies(from, "host").unwrap() - before.copies(from, "host").unwrap();
    assert_eq!(copies("sim1"), 1, "one copy of both fragments from sim1");
    assert_eq!(
        copies("sim0"),
        0,
        "none from sim0, though it holds the upper fragment"
    );
    assert_eq!(
        s.bytes("sim1", "host").unwrap() - before.bytes("sim1", "host").unwrap(),
        (n * 8) as u64
    );
}

/// A copy between two devices crosses both their links, so at any size it costs at least what
/// either link costs at that size. Here sim0's link has the higher latency and sim1's the lower
/// bandwidth: a fragment on the host and on sim1, read on sim0, comes from the host (no dearer
/// than sim1's copy, and first on a tie). Costing the peer copy by the link that is slower for
/// a MiB (sim1's) priced this 4 KiB copy at sim1's 5 µs latency, under the 10 µs of sim0's
/// own link it must cross, and took it from sim1 (what the first run on a GPU showed).
#[test]
fn a_copy_between_devices_costs_at_least_each_link_it_crosses() {
    let card = LinkModel {
        latency: Duration::from_micros(10),
        bytes_per_second: 40e9,
    };
    let rt = Runtime::builder()
        .sim(SimConfig {
            link: card,
            ..SimConfig::default()
        })
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    assert!(LinkModel::PCIE.latency < card.latency);
    assert!(LinkModel::PCIE.cost_ns(1 << 20) > card.cost_ns(1 << 20));
    let n = 512; // one 4 KiB fragment of Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 7)).expect("x");
    let mut on_sim1 = HeteData::<Complex32>::alloc(&rt, n).expect("on_sim1");
    rt.conj(Device::Sim(1), &x, &mut on_sim1).expect("on sim1");
    on_sim1.host().expect("now on the host too");
    let before = rt.stats();
    let mut out = HeteData::<Complex32>::alloc(&rt, n).expect("out");
    rt.conj(Device::Sim(0), &on_sim1, &mut out)
        .expect("read on sim0");
    let s = rt.stats();
    let copies =
        |from: &str| s.copies(from, "sim0").unwrap() - before.copies(from, "sim0").unwrap();
    assert_eq!((copies("host"), copies("sim1")), (1, 0), "{s:#?}");
}

/// The other side of the same rule: a source whose own link is slow costs its copy that link,
/// even into a device whose link is fast. A fragment on sim0 (a slow link) and sim1 (PCIe) but
/// not the host, read on sim2 (PCIe), comes from sim1, though sim0 comes first on a tie.
#[test]
fn a_source_behind_a_slow_link_loses_to_one_behind_a_fast_link() {
    let slow = LinkModel {
        latency: Duration::from_micros(50),
        bytes_per_second: 1e9,
    };
    let rt = Runtime::builder()
        .sim(SimConfig {
            link: slow,
            ..SimConfig::default()
        })
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    let n = 512; // one 4 KiB fragment of Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 9)).expect("x");
    let mut y = HeteData::<Complex32>::alloc(&rt, n).expect("y");
    rt.conj(Device::Sim(0), &x, &mut y).expect("y on sim0 only");
    let mut on_sim1 = HeteData::<Complex32>::alloc(&rt, n).expect("on_sim1");
    rt.conj(Device::Sim(1), &y, &mut on_sim1)
        .expect("y read on sim1");
    let (host, sim0, sim1) = (
        space(&rt, Device::Cpu),
        space(&rt, Device::Sim(0)),
        space(&rt, Device::Sim(1)),
    );
    let valid = y.fragment_state(0).expect("state").valid;
    assert!(valid.contains(sim0) && valid.contains(sim1) && !valid.contains(host));
    let before = rt.stats();
    let mut out = HeteData::<Complex32>::alloc(&rt, n).expect("out");
    rt.conj(Device::Sim(2), &y, &mut out).expect("read on sim2");
    let s = rt.stats();
    let copies =
        |from: &str| s.copies(from, "sim2").unwrap() - before.copies(from, "sim2").unwrap();
    assert_eq!((copies("sim0"), copies("sim1")), (0, 1), "{s:#?}");
}

/// Issue 29's peer scenario: fragment 0 valid on the host and on sim1, fragment 1 on sim1
/// alone, and the sources tie (host → sim0 and sim1 → sim0 cross one PCIe link each). A read of
/// the whole buffer on sim0 comes in one copy from sim1, the source that holds all of it, not
/// one from the host and one from sim1.
#[test]
fn a_read_that_one_source_holds_whole_comes_in_one_copy_from_it() {
    let rt = runtime();
    let n = 1024; // two 4 KiB fragments of Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 5)).expect("x");
    let mut on_sim1 = HeteData::<Complex32>::alloc(&rt, n).expect("on_sim1");
    rt.conj(Device::Sim(1), &x, &mut on_sim1)
        .expect("written on sim1 only");
    let mut lower_copy = HeteData::<Complex32>::alloc(&rt, n / 2).expect("lower_copy");
    let lower = on_sim1.slice(..n / 2).expect("lower fragment");
    rt.conj(Device::Cpu, &lower, &mut lower_copy)
        .expect("lower half read on the host");
    let (host, sim0, sim1) = (
        space(&rt, Device::Cpu),
        space(&rt, Device::Sim(0)),
        space(&rt, Device::Sim(1)),
    );
    let valid = |f| on_sim1.fragment_state(f).expect("state").valid;
    assert!(valid(0).contains(host) && valid(0).contains(sim1) && !valid(0).contains(sim0));
    assert_eq!(valid(1), SpaceSet::only(sim1));
    let before = rt.stats();
    let mut out = HeteData::<Complex32>::alloc(&rt, n).expect("out");
    rt.conj(Device::Sim(0), &on_sim1, &mut out)
        .expect("the whole buffer read on sim0");
    let s = rt.stats();
    let copies =
        |from: &str| s.copies(from, "sim0").unwrap() - before.copies(from, "sim0").unwrap();
    let bytes = |from: &str| s.bytes(from, "sim0").unwrap() - before.bytes(from, "sim0").unwrap();
    assert_eq!(
        (copies("sim1"), bytes("sim1")),
        (1, (n * 8) as u64),
        "one copy of 8 KiB from sim1"
    );
    assert_eq!(
        (copies("host"), bytes("host")),
        (0, 0),
        "none from the host"
    );
    assert_eq!(
        s.total_copies() - before.total_copies(),
        1,
        "nothing else moved"
    );
    assert_eq!(s.total_bytes() - before.total_bytes(), (n * 8) as u64);
    assert_eq!(out.host().expect("out"), &signal(n, 5)[..]);
}

/// Resetting one row of a matrix that lives on a device zeroes that row only, moves nothing,
/// and the host's read afterwards fills it instead of copying it.
#[test]
fn resetting_a_view_zeroes_its_fragments_only() {
    let rt = runtime();
    let row = 512; // one 4 KiB fragment of Complex32 per row
    let x = HeteData::from_slice(&rt, &signal(4 * row, 8)).expect("x");
    let mut y = HeteData::<Complex32>::alloc(&rt, 4 * row).expect("y");
    rt.conj(Device::Sim(0), &x, &mut y).expect("y on sim0");
    let before = rt.stats();
    y.rows_mut(row).expect("rows")[2].reset().expect("reset");
    assert_eq!(
        rt.stats().total_bytes(),
        before.total_bytes(),
        "a reset moves nothing"
    );
    let got = y.to_vec().expect("host");
    let conj: Vec<Complex32> = signal(4 * row, 8).iter().map(|v| v.conj()).collect();
    for (r, (got, want)) in got.chunks(row).zip(conj.chunks(row)).enumerate() {
        if r == 2 {
            assert!(
                got.iter().all(|v| *v == Complex32::new(0.0, 0.0)),
                "row 2 is zero"
            );
        } else {
            assert_eq!(got, want, "row {r} kept");
        }
    }
    let s = rt.stats();
    assert_eq!(
        s.bytes("sim0", "host").unwrap() - before.bytes("sim0", "host").unwrap(),
        (3 * row * 8) as u64,
        "three rows copied, the reset one filled"
    );
    assert_eq!(s.total_bytes() - before.total_bytes(), (3 * row * 8) as u64);
    let state = y.fragment_state(2).expect("fragment 2");
    assert!(state.zero && state.valid.contains(space(&rt, Device::Cpu)));
}

/// Two adjacent views of one buffer, passed as two arguments of one call, arrive on the device
/// in one copy.
#[test]
fn adjacent_views_in_one_call_come_in_one_copy() {
    let rt = runtime();
    let n = 1024; // two 4 KiB fragments of Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 4)).expect("x");
    let (lo, hi) = (x.slice(..n / 2).expect("lo"), x.slice(n / 2..).expect("hi"));
    let mut out = HeteData::<Complex32>::alloc(&rt, n / 2).expect("out");
    rt.zip(Device::Sim(0), ZipOp::Add, &lo, &hi, &mut out)
        .expect("zip on sim0");
    let s = rt.stats();
    assert_eq!(
        s.copies("host", "sim0").unwrap(),
        1,
        "one copy of both halves"
    );
    assert_eq!(s.bytes("host", "sim0").unwrap(), (n * 8) as u64);
    assert_eq!(s.total_copies(), 1, "nothing else moved");
    let values = signal(n, 4);
    let want: Vec<Complex32> = (0..n / 2).map(|k| values[k] + values[k + n / 2]).collect();
    assert_eq!(out.host().expect("out"), &want[..]);
}

/// A write view whose ends fall inside fragments: the two partly covered fragments are brought
/// to the device before the kernel (read-write), the fully covered one is not (write-discard),
/// and the bytes outside the view keep their values.
#[test]
fn a_write_view_over_part_of_fragments_keeps_the_bytes_outside_it() {
    let rt = runtime();
    let n = 2048; // four 4 KiB fragments of 512 Complex32
    let x = HeteData::from_slice(&rt, &signal(n, 21)).expect("x");
    let mut y = HeteData::from_slice(&rt, &vec![Complex32::new(7.0, 0.0); n]).expect("y");
    // Elements 100..1100: fragment 0 from element 100, fragment 1 whole, fragment 2 to 1100.
    let mut view = y.slice_mut(100..1100).expect("a view inside fragments");
    rt.conj(Device::Sim(0), &x.slice(100..1100).expect("x"), &mut view)
        .expect("conj");
    let s = rt.stats();
    // x's three fragments in; y's two partly covered ones in, its whole one not.
    assert_eq!(s.bytes("host", "sim0").unwrap(), (3 + 2) * 4096);
    assert_eq!(s.total_bytes(), 5 * 4096, "nothing else moved");
    let got = y.to_vec().expect("host");
    let xs = signal(n, 21);
    for (i, (got, x)) in got.iter().zip(&xs).enumerate() {
        let want = if (100..1100).contains(&i) {
            Complex32::new(x.re, -x.im)
        } else {
            Complex32::new(7.0, 0.0)
        };
        assert_eq!(*got, want, "element {i}");
    }
    // Back: the three fragments sim0 wrote.
    assert_eq!(rt.stats().bytes("sim0", "host").unwrap(), 3 * 4096);
}

/// Resetting a view with ends inside fragments: the whole fragment inside it gets the zero
/// mark (no byte moves), the two partly covered ones are zeroed on the host after coming back
/// from the device, and nothing outside the view changes.
#[test]
fn resetting_a_view_over_part_of_fragments_zeroes_only_the_view() {
    let rt = runtime();
    let n = 2048;
    let x = HeteData::from_slice(&rt, &signal(n, 22)).expect("x");
    let mut y = HeteData::alloc(&rt, n).expect("y");
    rt.conj(Device::Sim(0), &x, &mut y).expect("y on sim0");
    let before = rt.stats().bytes("sim0", "host").unwrap();
    y.slice_mut(100..1100)
        .expect("view")
        .reset()
        .expect("reset");
    assert_eq!(
        rt.stats().bytes("sim0", "host").unwrap() - before,
        2 * 4096,
        "only the two partly covered fragments came to the host"
    );
    let got = y.to_vec().expect("host");
    for (i, (got, x)) in got.iter().zip(&signal(n, 22)).enumerate() {
        let want = if (100..1100).contains(&i) {
            Complex32::new(0.0, 0.0)
        } else {
            Complex32::new(x.re, -x.im)
        };
        assert_eq!(*got, want, "element {i}");
    }
    // Reading it all back moved fragment 3 only; fragment 1 was filled on the host.
    assert_eq!(rt.stats().bytes("sim0", "host").unwrap() - before, 3 * 4096);
    y.validate().expect("every copy agrees");
}
