//! Asynchronous prefetch (`HeteData::prefetch_async`, RIMMS's `hete_Sync_Async`) on a sim
//! device whose link takes its modelled time: one copy, in flight until its time has passed;
//! the call that needs the bytes shares that copy and starts only once it has landed; a write
//! meanwhile waits for it; and values always match a plain model.

use rimms_runtime::{Access, Device, HeteData, LinkModel, Runtime, SimConfig};
use std::time::Duration;

/// A runtime with one sim device behind a slow, timed link: 1 MiB takes about 50 ms.
fn slow_link() -> Runtime {
    Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(10),
                bytes_per_second: 20e6,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime")
}

fn copies_to_sim(rt: &Runtime) -> (u64, u64) {
    rt.stats()
        .links
        .iter()
        .filter(|l| l.from == "host" && l.to == "sim0")
        .fold((0, 0), |(c, b), l| (c + l.copies, b + l.bytes))
}

#[test]
fn a_prefetch_in_flight_is_one_copy_the_next_call_shares_and_waits_for() {
    let rt = slow_link();
    let sim = rt.space_of(Device::Sim(0)).expect("sim0");
    let n = 1 << 17;
    let input: Vec<rimms_runtime::Complex32> = (0..n)
        .map(|i| rimms_runtime::Complex32::new(i as f32 * 0.5, 3.0))
        .collect();
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    let p = x.prefetch_async(Device::Sim(0)).expect("prefetch");
    assert_eq!(
        copies_to_sim(&rt),
        (1, (n * 8) as u64),
        "the copy is made at once"
    );
    if !p.is_done() {
        // In flight: no call may take the bytes in place without waiting for them.
        assert!(
            !x.is_resident(sim, Access::Read),
            "resident while in flight"
        );
    }
    rt.magnitude(Device::Sim(0), &x, &mut y).expect("magnitude");
    // The call found the bytes there (no second copy) and started after they landed.
    assert!(p.is_done(), "the call ran before its input landed");
    assert_eq!(copies_to_sim(&rt).0, 1, "the call copied again");
    assert!(
        x.is_resident(sim, Access::Read),
        "landed bytes are resident again"
    );
    let got = y.host().expect("y");
    for (i, (v, z)) in got.iter().zip(&input).enumerate() {
        let want = f64::from(z.re).hypot(f64::from(z.im));
        assert!(
            (f64::from(*v) - want).abs() <= 1e-6 * want.max(1.0),
            "{i}: {v} vs {want}"
        );
    }
}

#[test]
fn a_write_during_a_prefetch_waits_for_it_and_the_next_call_reads_the_new_bytes() {
    let rt = slow_link();
    let n = 1 << 17;
    let mut x =
        HeteData::from_slice(&rt, &vec![rimms_runtime::Complex32::new(1.0, 0.0); n]).expect("x");
    let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
    let p = x.prefetch_async(Device::Sim(0)).expect("prefetch");
    x.host_write()
        .expect("write")
        .fill(rimms_runtime::Complex32::new(0.0, 2.0));
    assert!(p.is_done(), "the write did not wait for the copy in flight");
    rt.magnitude(Device::Sim(0), &x, &mut y).expect("magnitude");
    // The prefetched copy was stale after the write: the call copied the new bytes.
    assert_eq!(copies_to_sim(&rt).0, 2);
    assert!(y.host().expect("y").iter().all(|&v| v == 2.0));
}

/// Random programs of host writes, asynchronous prefetches to either of two sim devices,
/// kernels on them and host reads, against a plain model of the values.
#[test]
fn random_programs_with_prefetches_in_flight_keep_every_value() {
    let rt = Runtime::builder()
        .sim(SimConfig {
            link: LinkModel {
                latency: Duration::from_micros(5),
                bytes_per_second: 200e6,
            },
            simulate_link: true,
            ..SimConfig::default()
        })
        .sim(SimConfig {
            simulate_link: true,
            ..SimConfig::default()
        })
        .build()
        .expect("runtime");
    let n = 4096;
    for seed in 0..4u64 {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        };
        let mut model = vec![rimms_runtime::Complex32::new(0.0, 0.0); n];
        let mut x = HeteData::from_slice(&rt, &model).expect("x");
        let mut y = HeteData::<f32>::alloc(&rt, n).expect("y");
        let mut handles = Vec::new();
        for step in 0..40 {
            let device = Device::Sim(next(2) as u8);
            match next(4) {
                0 => {
                    let (at, len) = (next(n as u64) as usize, 1 + next(512) as usize);
                    let end = (at + len).min(n);
                    let v = rimms_runtime::Complex32::new(step as f32, seed as f32);
                    x.slice_mut(at..end)
                        .expect("slice")
                        .host_write()
                        .expect("write")
                        .fill(v);
                    model[at..end].fill(v);
                }
                1 => handles.push(x.prefetch_async(device).expect("prefetch")),
                2 => {
                    rt.magnitude(device, &x, &mut y).expect("magnitude");
                    let got = y.host().expect("y");
                    for (i, z) in model.iter().enumerate() {
                        let want = z.re.hypot(z.im);
                        assert_eq!(got[i], want, "seed {seed} step {step} [{i}]");
                    }
                }
                _ => assert_eq!(x.host().expect("x"), &model[..], "seed {seed} step {step}"),
            }
        }
        handles.into_iter().for_each(|h| h.wait());
    }
}
