//! The schedulers behind `Target::Auto`: where each policy puts calls, device limits, the
//! cost tables, that the data-aware policy follows the data, and link calibration.

use rimms::{
    Complex32, CostTable, Device, Error, FftDirection, HeteData, KernelCtx, LinkModel, Policy,
    Runtime, SimConfig, SpaceId, Target, ZipOp,
};
use std::sync::Mutex;
use std::time::Duration;

/// Every device a `where_am_i` call ran on, in order.
static PLACED: Mutex<Vec<(usize, Device)>> = Mutex::new(Vec::new());

/// A stand-alone kernel the scheduler places; it records where it ran under a tag, so tests
/// running in parallel can tell their calls apart.
#[rimms::kernel(device = auto)]
fn where_am_i(ctx: &KernelCtx, tag: usize, data: &mut [f32]) {
    data.fill(tag as f32);
    PLACED.lock().unwrap().push((tag, ctx.device()));
}

fn placed(tag: usize) -> Vec<Device> {
    PLACED
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t == tag)
        .map(|(_, d)| *d)
        .collect()
}

fn model(latency: Duration, bytes_per_second: f64) -> LinkModel {
    LinkModel {
        latency,
        bytes_per_second,
    }
}

fn rate(bytes_per_second: f64) -> LinkModel {
    model(Duration::from_micros(1), bytes_per_second)
}

fn runtime(policy: Policy, costs: CostTable) -> Runtime {
    Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .scheduler(policy)
        .costs(costs)
        .build()
        .unwrap()
}

#[test]
fn round_robin_takes_the_devices_in_turn() {
    let rt = runtime(Policy::RoundRobin, CostTable::default());
    let mut data = HeteData::<f32>::alloc(&rt, 1024).unwrap();
    for _ in 0..6 {
        where_am_i(&rt, 1, &mut data).unwrap();
    }
    use Device::*;
    assert_eq!(placed(1), [Cpu, Sim(0), Sim(1), Cpu, Sim(0), Sim(1)]);
}

#[test]
fn met_picks_the_fastest_device_by_the_cost_table() {
    let costs = CostTable::uniform(rate(1e9)).device(Device::Sim(1), rate(8e9));
    let rt = runtime(Policy::Met, costs);
    let mut data = HeteData::<f32>::alloc(&rt, 1024).unwrap();
    for _ in 0..3 {
        where_am_i(&rt, 2, &mut data).unwrap();
    }
    assert_eq!(placed(2), [Device::Sim(1); 3]);
    assert_eq!(data.host().unwrap()[7], 2.0);
}

#[test]
fn fixed_uses_the_named_device_per_api() {
    let policy = Policy::Fixed {
        default: Device::Sim(0),
        per_api: vec![("fft".to_string(), Device::Sim(1))],
    };
    let rt = runtime(policy, CostTable::default());
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 256]).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    let mut z = HeteData::<Complex32>::alloc(&rt, 256).unwrap();
    rt.fft(Target::Auto, FftDirection::Forward, 256, &x, &mut y)
        .unwrap();
    rt.zip(Target::Auto, ZipOp::Add, &x, &x, &mut z).unwrap();
    let stats = rt.stats();
    // The FFT read x on sim1, the ZIP on sim0.
    assert_eq!(stats.bytes("host", "sim1").unwrap(), 256 * 8);
    assert_eq!(stats.bytes("host", "sim0").unwrap(), 256 * 8);
}

#[test]
fn fixed_to_a_device_that_cannot_take_the_call_is_an_error() {
    let policy = Policy::Fixed {
        default: Device::Fpga(0),
        per_api: Vec::new(),
    };
    let rt = runtime(policy, CostTable::default());
    let mut data = HeteData::<f32>::alloc(&rt, 16).unwrap();
    let err = where_am_i(&rt, 3, &mut data).unwrap_err();
    assert!(
        matches!(&err, Error::NoImplementation { device, .. } if *device == Target::Auto),
        "{err}"
    );
    assert!(placed(3).is_empty());
}

#[test]
fn auto_skips_devices_whose_limits_the_call_exceeds() {
    // sim0 is the fastest but takes FFTs of at most 512 points.
    let rt = Runtime::builder()
        .sim(SimConfig {
            max_fft_points: Some(512),
            ..SimConfig::default()
        })
        .scheduler(Policy::Met)
        .costs(CostTable::uniform(rate(1e9)).device(Device::Sim(0), rate(8e9)))
        .build()
        .unwrap();
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 1024]).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, 1024).unwrap();
    rt.fft(Target::Auto, FftDirection::Forward, 1024, &x, &mut y)
        .unwrap();
    assert_eq!(
        rt.stats().total_bytes(),
        0,
        "the 1,024-point FFT ran on the CPU"
    );
    rt.fft(Target::Auto, FftDirection::Forward, 512, &x, &mut y)
        .unwrap();
    assert_eq!(rt.stats().bytes("host", "sim0").unwrap(), 1024 * 8);
    assert_eq!(y.host().unwrap()[0], Complex32::new(512.0, 0.0));
}

#[test]
fn a_bad_shape_with_auto_is_refused_before_placing() {
    let rt = runtime(Policy::RoundRobin, CostTable::default());
    let x = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 6]).unwrap();
    let mut y = HeteData::<Complex32>::alloc(&rt, 6).unwrap();
    let err = rt
        .fft(Target::Auto, FftDirection::Forward, 3, &x, &mut y)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Shape { device, .. } if *device == Target::Auto),
        "{err}"
    );
    assert_eq!(rt.stats().total_bytes(), 0);
}

/// An API only an FPGA implements.
#[rimms::api]
fn only_on_fpga(#[out] y: &mut [f32]);

#[rimms::kernel(api = only_on_fpga, device = fpga)]
fn only_on_fpga_impl(#[out] y: &mut [f32]) {
    y.fill(1.0);
}

#[test]
fn auto_with_no_device_that_implements_the_api_is_an_error_naming_auto() {
    let rt = runtime(Policy::DataAwareEft, CostTable::default());
    let mut y = HeteData::<f32>::alloc(&rt, 8).unwrap();
    let err = only_on_fpga(&rt, Target::Auto, &mut y).unwrap_err();
    match &err {
        Error::NoImplementation { api, device, .. } => {
            assert_eq!((*api, *device), ("only_on_fpga", Target::Auto))
        }
        other => panic!("expected NoImplementation, got {other}"),
    }
}

/// An FFT → multiply → inverse FFT chain per row, every call `Target::Auto`, on a runtime
/// whose devices all cost the same: what each policy moves.
fn chain_bytes(policy: Policy) -> (u64, Vec<Complex32>) {
    const N: usize = 512;
    const ROWS: usize = 6;
    let rt = runtime(policy, CostTable::default());
    let x: Vec<Complex32> = (0..N * ROWS)
        .map(|i| Complex32::new((i % 7) as f32, (i % 3) as f32))
        .collect();
    let input = HeteData::from_slice(&rt, &x).unwrap();
    let filter = HeteData::from_slice(&rt, &vec![Complex32::new(0.5, 0.0); N]).unwrap();
    let mut spectra = HeteData::<Complex32>::alloc(&rt, N * ROWS).unwrap();
    let mut products = HeteData::<Complex32>::alloc(&rt, N * ROWS).unwrap();
    let mut output = HeteData::<Complex32>::alloc(&rt, N * ROWS).unwrap();
    for m in [&mut spectra, &mut products, &mut output] {
        m.fragment(N * 8).unwrap();
    }
    let rows = input.rows(N).unwrap();
    let mut s_rows = spectra.rows_mut(N).unwrap();
    let mut p_rows = products.rows_mut(N).unwrap();
    let mut o_rows = output.rows_mut(N).unwrap();
    for k in 0..ROWS {
        let auto = Target::Auto;
        rt.fft(auto, FftDirection::Forward, N, &rows[k], &mut s_rows[k])
            .unwrap();
        rt.zip(auto, ZipOp::Mul, &s_rows[k], &filter, &mut p_rows[k])
            .unwrap();
        rt.fft(auto, FftDirection::Inverse, N, &p_rows[k], &mut o_rows[k])
            .unwrap();
    }
    drop((s_rows, p_rows, o_rows));
    let result = output.to_vec().unwrap();
    (rt.stats().total_bytes(), result)
}

#[test]
fn the_data_aware_policy_moves_less_than_round_robin_for_the_same_result() {
    let (aware, aware_out) = chain_bytes(Policy::DataAwareEft);
    let (rr, rr_out) = chain_bytes(Policy::RoundRobin);
    // A multiply by 0.5 between a transform and its inverse halves every sample.
    let want: Vec<Complex32> = (0..512 * 6)
        .map(|i| Complex32::new((i % 7) as f32, (i % 3) as f32) * 0.5)
        .collect();
    for out in [&aware_out, &rr_out] {
        assert!(out.iter().zip(&want).all(|(a, b)| (a - b).norm() < 1e-4));
    }
    // The data is on the host and every device costs the same, so the data-aware policy keeps
    // every chain on the CPU; round-robin sends two of every three calls to a sim.
    assert_eq!(aware, 0);
    assert!(rr > 0, "round-robin moved nothing");
}

#[test]
fn the_data_aware_policy_follows_data_already_on_a_device() {
    let rt = runtime(Policy::DataAwareEft, CostTable::default());
    let mut data = HeteData::<f32>::alloc(&rt, 4096).unwrap();
    // Written on sim1, so valid only there.
    fill_on_sim1(&rt, &mut data).unwrap();
    for _ in 0..3 {
        where_am_i(&rt, 4, &mut data).unwrap();
    }
    assert_eq!(placed(4), [Device::Sim(1); 3]);
    assert_eq!(rt.stats().total_bytes(), 0);
}

#[rimms::kernel(device = sim(1))]
fn fill_on_sim1(#[out] data: &mut [f32]) {
    data.fill(1.0);
}

/// Three calls at once, each held until all three are placed: where `policy` put them.
fn three_held_calls(policy: Policy, costs: CostTable, tag: usize) -> Vec<Device> {
    let rt = runtime(policy, costs);
    let mut bufs: Vec<HeteData<f32>> = (0..3)
        .map(|_| HeteData::alloc(&rt, 1 << 16).unwrap())
        .collect();
    let barrier = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        for buf in bufs.iter_mut() {
            let (rt, barrier) = (&rt, &barrier);
            s.spawn(move || hold_then_tag(rt, tag, barrier, buf).unwrap());
        }
    });
    let mut got = placed(tag);
    got.sort_by_key(|d| d.to_string());
    got
}

#[test]
fn eft_spreads_concurrent_calls_over_devices_that_run_one_at_a_time() {
    // Slow estimates: each call stays queued on its device while the others are placed, and
    // the CPU, like the cards, is said to run one call at a time.
    let costs = CostTable::uniform(rate(1e6)).concurrency(Device::Cpu, 1);
    let got = three_held_calls(Policy::Eft, costs, 5);
    assert_eq!(got, [Device::Cpu, Device::Sim(0), Device::Sim(1)]);
}

#[test]
fn eft_keeps_concurrent_calls_on_a_cpu_with_free_workers() {
    // The same calls, but the CPU runs three at once: none of them waits there, so the ties
    // go to the CPU and nothing crosses a link.
    let costs = CostTable::uniform(rate(1e6)).concurrency(Device::Cpu, 3);
    for policy in [Policy::Eft, Policy::DataAwareEft] {
        let tag = if policy == Policy::Eft { 6 } else { 7 };
        assert_eq!(
            three_held_calls(policy, costs.clone(), tag),
            [Device::Cpu; 3]
        );
    }
}

/// Records where it runs, then waits for the other two calls: each is placed while the others
/// are still running, so their estimates are on their devices' queues.
#[rimms::kernel(device = auto)]
fn hold_then_tag(ctx: &KernelCtx, tag: usize, barrier: &std::sync::Barrier, data: &mut [f32]) {
    PLACED.lock().unwrap().push((tag, ctx.device()));
    barrier.wait();
    data.fill(tag as f32);
}

/// A sim whose link is `link`, its copies taking that long if `simulate`.
fn sim_with_link(link: LinkModel, simulate: bool) -> SimConfig {
    SimConfig {
        link,
        simulate_link: simulate,
        ..SimConfig::default()
    }
}

#[test]
fn calibration_never_reports_a_simulated_link_faster_than_it_is() {
    // A copy over this simulated link takes at least 200 µs + bytes / 200 MB/s, however fast
    // the memcpy under it.
    let configured = model(Duration::from_micros(200), 200e6);
    let plain = Runtime::builder()
        .sim(sim_with_link(configured, true))
        .build()
        .unwrap();
    let sim0 = plain.space_of(Device::Sim(0)).unwrap();
    assert_eq!(plain.link_model(sim0), Some(configured), "uncalibrated");

    let rt = Runtime::builder()
        .sim(sim_with_link(configured, true))
        .calibrate_links(true)
        .build()
        .unwrap();
    let measured = rt.link_model(sim0).unwrap();
    // Both models are a line in the bytes; the fit passes through the two measured sizes
    // (16 KiB and 1 MiB), so it is at or above the configured line between them.
    for bytes in [16 << 10, 256 << 10, 1 << 20] {
        assert!(
            measured.cost_ns(bytes) >= configured.cost_ns(bytes),
            "{bytes} bytes: measured {measured:?} is below the configured {configured:?}"
        );
    }
    assert_eq!(rt.link_model(SpaceId::HOST), None);
    assert_eq!(
        rt.stats().total_bytes(),
        0,
        "calibration copies are not counted"
    );
}

#[test]
fn a_calibrated_link_turns_the_data_aware_decision() {
    // The configured link is absurdly slow (a second per copy) but copies are plain memcpys;
    // the sims are said to compute far faster than the CPU.
    let wrong = model(Duration::from_secs(1), 1e6);
    let costs = CostTable::default()
        .device(Device::Cpu, rate(0.2e9))
        .device(Device::Sim(0), rate(1e12));
    let sim0_reads = |calibrate: bool| {
        let rt = Runtime::builder()
            .sim(sim_with_link(wrong, false))
            .scheduler(Policy::DataAwareEft)
            .costs(costs.clone())
            .calibrate_links(calibrate)
            .build()
            .unwrap();
        let x: Vec<Complex32> = (0..1 << 16)
            .map(|i| Complex32::new(i as f32, 1.0))
            .collect();
        let input = HeteData::from_slice(&rt, &x).unwrap();
        let mut out = HeteData::<Complex32>::alloc(&rt, 1 << 16).unwrap();
        rt.zip(Target::Auto, ZipOp::Add, &input, &input, &mut out)
            .unwrap();
        let got = out.to_vec().unwrap();
        assert!(got.iter().zip(&x).all(|(g, v)| *g == v + v));
        rt.stats().bytes("host", "sim0").unwrap()
    };
    // Trusting the configured second, the CPU's 8 ms is cheaper; measured, the copies cost
    // well under a millisecond, so the call goes to sim0 and its input crosses.
    assert_eq!(sim0_reads(false), 0);
    assert_eq!(sim0_reads(true), (1 << 16) * 8);
}
