//! Memory the CPU cannot address, played by a sim device with `device_memory`: the path a
//! discrete GPU takes (device addresses in the pool, copies and fills through the backend,
//! implementations that take `DevSlice`s), checked on any machine against independent
//! references and exact byte counts.

mod common;

use common::{dft_rows, rel_error, signal, to_f64};
use rimms::{
    Complex32, DevSlice, DevSliceMut, Device, Error, ExecMode, FftDirection, HeteData, KernelCtx,
    Runtime, SimConfig, SpaceId, SpaceSet, ZipOp,
};

const CARD: Device = Device::Sim(0);
const SIM: Device = Device::Sim(1);

fn card() -> SimConfig {
    SimConfig {
        device_memory: true,
        ..SimConfig::default()
    }
}

/// The CPU, a card with device memory, and a plain sim with host-addressable memory.
fn runtime(mode: ExecMode) -> Runtime {
    Runtime::builder()
        .sim(card())
        .sim(SimConfig::default())
        .mode(mode)
        .build()
        .expect("runtime")
}

fn c(re: f32, im: f32) -> Complex32 {
    Complex32::new(re, im)
}

/// Runs every built-in on `device` over the same seeded inputs and returns all outputs in one
/// vector of f64 pairs (magnitudes as real parts).
fn every_builtin(rt: &Runtime, device: Device) -> Vec<(f64, f64)> {
    let (rows, n) = (8, 256);
    let len = rows * n;
    let x = HeteData::from_slice(rt, &signal(len, 1)).expect("x");
    let y = HeteData::from_slice(rt, &signal(len, 2)).expect("y");
    let mut out = Vec::new();
    let mut keep = |v: &HeteData<Complex32>| out.extend(to_f64(v.host().expect("host")));

    let mut z = HeteData::alloc(rt, len).expect("z");
    rt.fft(device, FftDirection::Forward, n, &x, &mut z)
        .expect("fft");
    keep(&z);
    rt.fft_in_place(device, FftDirection::Inverse, n, &mut z)
        .expect("ifft in place");
    keep(&z);
    for op in [ZipOp::Add, ZipOp::Sub, ZipOp::Mul, ZipOp::Div] {
        rt.zip(device, op, &x, &y, &mut z).expect("zip");
        keep(&z);
    }
    rt.conj(device, &x, &mut z).expect("conj");
    keep(&z);
    rt.fftshift(device, n, &x, &mut z).expect("fftshift");
    keep(&z);
    rt.transpose(device, rows, n, &x, &mut z)
        .expect("transpose");
    keep(&z);
    rt.scale(device, c(0.5, -2.0), &mut z).expect("scale");
    keep(&z);
    let (m, k, p) = (16, 32, 8);
    let a = HeteData::from_slice(rt, &signal(m * k, 3)).expect("a");
    let b = HeteData::from_slice(rt, &signal(k * p, 4)).expect("b");
    let mut g = HeteData::alloc(rt, m * p).expect("g");
    rt.gemm(device, m, k, p, &a, &b, &mut g).expect("gemm");
    keep(&g);
    let mut mag = HeteData::<f32>::alloc(rt, len).expect("mag");
    rt.magnitude(device, &x, &mut mag).expect("magnitude");
    out.extend(mag.host().expect("host").iter().map(|&v| (v as f64, 0.0)));
    out
}

#[test]
fn every_builtin_on_device_memory_matches_the_cpu() {
    let rt = runtime(ExecMode::Tracked);
    let on_cpu = every_builtin(&rt, Device::Cpu);
    let on_card = every_builtin(&rt, CARD);
    assert_eq!(on_cpu.len(), on_card.len());
    for (i, (a, b)) in on_cpu.iter().zip(&on_card).enumerate() {
        let scale = a.0.hypot(a.1).max(1.0);
        assert!(
            (a.0 - b.0).hypot(a.1 - b.1) <= 1e-4 * scale,
            "output {i}: cpu {a:?}, card {b:?}"
        );
    }
    // The card's kernels really ran on its own memory: its inputs crossed the link.
    assert!(rt.stats().bytes("host", "sim0") > 0);
}

#[test]
fn fft_on_device_memory_matches_a_direct_dft() {
    let rt = runtime(ExecMode::Tracked);
    let n = 512;
    let input = signal(4 * n, 9);
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::alloc(&rt, 4 * n).expect("y");
    rt.fft(CARD, FftDirection::Forward, n, &x, &mut y)
        .expect("fft");
    let err = rel_error(y.host().expect("host"), &dft_rows(&input, n, false));
    assert!(err < 1e-4, "relative error {err}");
}

#[test]
fn host_card_and_sim_move_exactly_the_protocols_bytes() {
    let rt = runtime(ExecMode::Tracked);
    let n = 1024;
    let len = 4 * n; // 32 KiB: 8 fragments of 4 KiB
    let bytes = (len * 8) as u64;
    let input = signal(len, 5);
    let filter = signal(len, 6);
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let f = HeteData::from_slice(&rt, &filter).expect("f");
    let mut spectrum = HeteData::alloc(&rt, len).expect("spectrum");
    let mut product = HeteData::alloc(&rt, len).expect("product");

    // Host -> card: x only; the spectrum is write-discard and is never sent anywhere.
    rt.fft(CARD, FftDirection::Forward, n, &x, &mut spectrum)
        .expect("fft on the card");
    let s = rt.stats();
    assert_eq!(s.bytes("host", "sim0"), bytes);
    assert_eq!(s.total_bytes(), bytes);

    // Card -> sim (through the host, counted once as card -> sim), host -> sim for the filter.
    rt.zip(SIM, ZipOp::Mul, &spectrum, &f, &mut product)
        .expect("zip on the sim");
    let s = rt.stats();
    assert_eq!(s.bytes("sim0", "sim1"), bytes);
    assert_eq!(s.copies("sim0", "sim1"), 1);
    assert_eq!(s.bytes("host", "sim1"), bytes);

    // Sim -> card for the product; the inverse runs in place on the card.
    rt.fft_in_place(CARD, FftDirection::Inverse, n, &mut product)
        .expect("inverse on the card");
    assert_eq!(rt.stats().bytes("sim1", "sim0"), bytes);

    // Card -> host once; a second read moves nothing.
    rt.reset_stats();
    let got = product.host().expect("host").to_vec();
    assert_eq!(rt.stats().bytes("sim0", "host"), bytes);
    let _ = product.host().expect("host again");
    assert_eq!(rt.stats().total_copies(), 1);

    // x: a direct DFT, the product, the inverse DFT, all in f64.
    let spectrum_ref = dft_rows(&input, n, false);
    let product_ref: Vec<Complex32> = spectrum_ref
        .iter()
        .zip(&filter)
        .map(|(&(a, b), f)| c(a as f32, b as f32) * f)
        .collect();
    let err = rel_error(&got, &dft_rows(&product_ref, n, true));
    assert!(err < 1e-4, "relative error {err}");

    // Every valid copy in every space agrees, the card's read back through its backend.
    for buffer in [&x, &f, &spectrum, &product] {
        buffer.validate().expect("replicas agree");
    }
    let card_space = rt.space_of(CARD).expect("card");
    assert_eq!(
        product.fragment_state(0).expect("state").valid,
        SpaceSet::only(card_space).with(SpaceId::HOST)
    );
}

#[test]
fn fresh_buffers_are_zero_filled_on_the_card_not_sent() {
    let rt = runtime(ExecMode::Tracked);
    let x = HeteData::<Complex32>::alloc(&rt, 2048).expect("x");
    let mut y = HeteData::from_slice(&rt, &signal(2048, 7)).expect("y");
    rt.conj(CARD, &x, &mut y).expect("conj");
    let s = rt.stats();
    assert_eq!(s.bytes("host", "sim0"), 0, "y is write-discard, x is zeros");
    assert_eq!(s.space("sim0").expect("sim0").zero_fills, 1);
    assert!(y.host().expect("host").iter().all(|v| *v == c(0.0, 0.0)));
    x.validate().expect("the card's zeros read back as zeros");
}

#[test]
fn an_exhausted_card_pool_is_an_error_that_loses_nothing() {
    let rt = Runtime::builder()
        .sim(SimConfig {
            pool_bytes: 1 << 20,
            ..card()
        })
        .build()
        .expect("runtime");
    let input = signal(1 << 17, 8); // 1 MiB
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::alloc(&rt, 1 << 17).expect("y");
    let err = rt
        .conj(CARD, &x, &mut y)
        .expect_err("two 1 MiB buffers do not fit a 1 MiB pool");
    assert!(
        matches!(&err, Error::PoolExhausted { space, .. } if space == "sim0"),
        "{err}"
    );
    assert_eq!(x.host().expect("host"), &input[..]);
    // x reached the card before y found no room: a replica, not a loss. y was never written.
    assert!(x
        .fragment_state(0)
        .expect("state")
        .valid
        .contains(SpaceId::HOST));
    x.validate().expect("x's replicas agree");
    assert!(y.fragment_state(0).expect("state").zero);
    // The same call on the CPU still works; once the buffers go, so do their card blocks, and
    // a smaller call fits.
    rt.conj(Device::Cpu, &x, &mut y).expect("conj on the cpu");
    drop((x, y));
    assert_eq!(rt.stats().space("sim0").expect("sim0").in_use, 0);
    let small = HeteData::from_slice(&rt, &signal(1024, 9)).expect("small");
    let mut out = HeteData::alloc(&rt, 1024).expect("out");
    rt.conj(CARD, &small, &mut out).expect("a call that fits");
}

#[test]
fn baseline_stages_every_argument_through_the_card_every_call() {
    let n = 512;
    let len = 2 * n;
    let bytes = (len * 8) as u64;
    let run = |mode| {
        let rt = runtime(mode);
        let x = HeteData::from_slice(&rt, &signal(len, 10)).expect("x");
        let mut y = HeteData::alloc(&rt, len).expect("y");
        for _ in 0..3 {
            rt.fft(CARD, FftDirection::Forward, n, &x, &mut y)
                .expect("fft");
        }
        let result = y.host().expect("host").to_vec();
        (result, rt.stats())
    };
    let (tracked, t) = run(ExecMode::Tracked);
    let (baseline, b) = run(ExecMode::Baseline);
    assert_eq!(tracked, baseline);
    assert_eq!(t.bytes("host", "sim0"), bytes);
    assert_eq!(t.bytes("sim0", "host"), bytes);
    assert_eq!(b.bytes("host", "sim0"), 3 * bytes);
    assert_eq!(b.bytes("sim0", "host"), 3 * bytes);
    let pool = b.space("sim0").expect("sim0");
    assert_eq!((pool.allocations, pool.frees, pool.in_use), (6, 6, 0));
}

#[rimms::api]
fn halve(values: &[f32], #[out] half: &mut [f32]);

#[rimms::kernel(api = halve, device = cpu)]
fn halve_host(values: &[f32], #[out] half: &mut [f32]) {
    for (h, v) in half.iter_mut().zip(values) {
        *h = v / 2.0;
    }
}

/// A device implementation written by a user: it gets device addresses and stages through
/// the device's memory interface (a GPU implementation would launch a kernel on them).
#[rimms::kernel(api = halve, device = sim)]
fn halve_device(ctx: &KernelCtx, values: DevSlice<f32>, #[out] half: DevSliceMut<f32>) {
    let memory = ctx.device_memory().expect("the card has device memory");
    let mut staged = vec![0f32; values.len()];
    memory
        .copy_out(values.addr(), bytemuck::cast_slice_mut(&mut staged))
        .expect("read");
    for v in &mut staged {
        *v /= 2.0;
    }
    assert_eq!(half.len(), staged.len());
    memory
        .copy_in(half.addr(), bytemuck::cast_slice(&staged))
        .expect("write");
}

#[rimms::api]
fn host_only(values: &mut [f32]);

#[rimms::kernel(api = host_only, device = [cpu, sim])]
fn host_only_impl(values: &mut [f32]) {
    values.iter_mut().for_each(|v| *v += 1.0);
}

#[test]
fn user_apis_run_in_the_form_the_device_takes() {
    let rt = runtime(ExecMode::Tracked);
    let input: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let values = HeteData::from_slice(&rt, &input).expect("values");
    let mut half = HeteData::alloc(&rt, input.len()).expect("half");
    halve(&rt, CARD, &values, &mut half).expect("halve on the card");
    let want: Vec<f32> = input.iter().map(|v| v / 2.0).collect();
    assert_eq!(half.host().expect("host"), &want[..]);
    // The plain sim runs host code; this API has no host implementation for sims.
    let err = halve(&rt, SIM, &values, &mut half).expect_err("no host-form sim kernel");
    assert!(matches!(err, Error::NoImplementation { .. }), "{err}");
    // And an API with only host implementations is refused on the card, before anything moves.
    rt.reset_stats();
    let mut data = HeteData::from_slice(&rt, &input).expect("data");
    let err = host_only(&rt, CARD, &mut data).expect_err("no device-form kernel");
    let message = err.to_string();
    assert!(
        message.contains("sim1") || message.contains("Sim"),
        "{message}"
    );
    assert_eq!(rt.stats().total_bytes(), 0);
    host_only(&rt, SIM, &mut data).expect("host form on the plain sim");
}

#[test]
fn host_bodies_are_refused_on_device_memory() {
    let rt = runtime(ExecMode::Tracked);
    let mut x = HeteData::from_slice(&rt, &[1.0f32; 64]).expect("x");
    let err = rt
        .launch_host(
            CARD,
            &__RIMMS_API_DECL_host_only,
            [rimms::KernelArg::read_write("x", &mut x)],
            |_| unreachable!("a host body never runs over device addresses"),
        )
        .expect_err("refused");
    assert!(err.to_string().contains("not host-addressable"), "{err}");
}

#[test]
fn a_card_cannot_also_be_host_mapped() {
    let err = Runtime::builder()
        .sim(SimConfig {
            host_mapped: true,
            ..card()
        })
        .build()
        .expect_err("contradictory config");
    assert!(err.to_string().contains("sim0"), "{err}");
}

#[test]
fn rows_on_the_card_and_the_sim_move_at_their_own_offsets() {
    let rt = runtime(ExecMode::Tracked);
    let (rows, n) = (8, 512); // 4 KiB a row: one fragment each
    let input = signal(rows * n, 11);
    let mut x = HeteData::from_slice(&rt, &input).expect("x");
    for (i, mut row) in x.rows_mut(n).expect("rows").into_iter().enumerate() {
        let device = if i % 2 == 1 { CARD } else { SIM };
        rt.fft_in_place(device, FftDirection::Forward, n, &mut row)
            .expect("fft");
    }
    let row_bytes = (n * 8) as u64;
    let s = rt.stats();
    assert_eq!(s.bytes("host", "sim0"), 4 * row_bytes);
    assert_eq!(s.copies("host", "sim0"), 4);
    // Back on the host row by row from two memories, each at its own offset.
    let err = rel_error(x.host().expect("host"), &dft_rows(&input, n, false));
    assert!(err < 1e-4, "relative error {err}");
    assert_eq!(rt.stats().bytes("sim0", "host"), 4 * row_bytes);
    // Rows 1..3 to the card again: row 1 is still valid there, row 2 comes from the host.
    rt.reset_stats();
    let mut middle = x.slice_mut(n..3 * n).expect("rows 1 and 2");
    rt.scale(CARD, c(2.0, 0.0), &mut middle).expect("scale");
    assert_eq!(rt.stats().bytes("host", "sim0"), row_bytes);
    x.validate().expect("replicas agree");
}
