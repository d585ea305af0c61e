//! Tests of a card whose memory the CPU cannot address, written once and run for each such
//! device: a sim with `device_memory` (everywhere) and a CUDA GPU (where there is one). A
//! [`Card`] names the device, a plain host-addressable sim beside it, and how to build a
//! runtime with both.
#![allow(dead_code)]

use crate::common::{assert_close, dft_rows, signal, to_f64};
use rimms::{
    Complex32, Device, Error, ExecMode, FftDirection, HeteData, Runtime, RuntimeBuilder, SimConfig,
    SpaceId, SpaceSet, ZipOp,
};

/// A device with memory of its own that the CPU cannot address, and a plain sim beside it.
pub struct Card {
    /// The card.
    pub device: Device,
    /// Its space's name in stats.
    pub name: &'static str,
    /// The plain sim.
    pub sim: Device,
    /// The sim's space's name.
    pub sim_name: &'static str,
    /// Adds the card with a pool of the given bytes, then the plain sim.
    pub add: fn(RuntimeBuilder, usize) -> RuntimeBuilder,
}

impl Card {
    pub fn runtime(&self, mode: ExecMode) -> Runtime {
        self.runtime_with_pool(256 << 20, mode)
    }

    pub fn runtime_with_pool(&self, pool: usize, mode: ExecMode) -> Runtime {
        (self.add)(Runtime::builder(), pool)
            .mode(mode)
            .build()
            .expect("runtime with the card")
    }
}

/// A sim playing a discrete GPU: `sim0` with device memory, `sim1` plain.
pub const SIM_CARD: Card = Card {
    device: Device::Sim(0),
    name: "sim0",
    sim: Device::Sim(1),
    sim_name: "sim1",
    add: |builder, pool| {
        builder
            .sim(SimConfig {
                device_memory: true,
                pool_bytes: pool,
                ..SimConfig::default()
            })
            .sim(SimConfig::default())
    },
};

/// GPU 0, with `sim0` plain beside it.
pub const GPU_CARD: Card = Card {
    device: Device::Gpu(0),
    name: "gpu0",
    sim: Device::Sim(0),
    sim_name: "sim0",
    add: |builder, pool| builder.gpu(0).gpu_pool(pool).sim(SimConfig::default()),
};

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
    for op in ZipOp::ALL {
        rt.zip(device, op, &x, &y, &mut z).expect("zip");
        keep(&z);
    }
    // A filter broadcast over every row: the merged form of per-row ZIPs with one operand.
    let row = HeteData::from_slice(rt, &signal(n, 5)).expect("row");
    for op in ZipOp::ALL {
        rt.zip_rows(device, op, &x, &row, &mut z).expect("zip_rows");
        keep(&z);
    }
    let taper: Vec<f32> = (0..n).map(|j| 0.25 + j as f32 / n as f32).collect();
    let taper = HeteData::from_slice(rt, &taper).expect("taper");
    rt.window(device, &x, &taper, &mut z).expect("window");
    keep(&z);
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
    rt.power(device, &x, &mut mag).expect("power");
    out.extend(mag.host().expect("host").iter().map(|&v| (v as f64, 0.0)));
    out
}

pub fn every_builtin_on_device_memory_matches_the_cpu(card: &Card) {
    let rt = card.runtime(ExecMode::Tracked);
    let on_cpu = every_builtin(&rt, Device::Cpu);
    let on_card = every_builtin(&rt, card.device);
    assert_eq!(on_cpu.len(), on_card.len());
    for (i, (a, b)) in on_cpu.iter().zip(&on_card).enumerate() {
        let scale = a.0.hypot(a.1).max(1.0);
        assert!(
            (a.0 - b.0).hypot(a.1 - b.1) <= 1e-4 * scale,
            "output {i}: cpu {a:?}, card {b:?}"
        );
    }
    // The card's kernels really ran on its own memory: its inputs crossed the link.
    assert!(rt.stats().bytes("host", card.name).unwrap() > 0);
}

pub fn fft_on_device_memory_matches_a_direct_dft(card: &Card) {
    let rt = card.runtime(ExecMode::Tracked);
    let n = 512;
    let input = signal(4 * n, 9);
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::alloc(&rt, 4 * n).expect("y");
    rt.fft(card.device, FftDirection::Forward, n, &x, &mut y)
        .expect("fft");
    let what = format!("fft on {}", card.name);
    assert_close(
        y.host().expect("host"),
        &dft_rows(&input, n, false),
        n.trailing_zeros(),
        &what,
    );
}

pub fn host_card_and_sim_move_exactly_the_protocols_bytes(card: &Card) {
    let rt = card.runtime(ExecMode::Tracked);
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
    rt.fft(card.device, FftDirection::Forward, n, &x, &mut spectrum)
        .expect("fft on the card");
    let s = rt.stats();
    assert_eq!(s.bytes("host", card.name).unwrap(), bytes);
    assert_eq!(s.total_bytes(), bytes);

    // Card -> sim (through the host, counted once as card -> sim), host -> sim for the filter.
    rt.zip(card.sim, ZipOp::Mul, &spectrum, &f, &mut product)
        .expect("zip on the sim");
    let s = rt.stats();
    assert_eq!(s.bytes(card.name, card.sim_name).unwrap(), bytes);
    assert_eq!(s.copies(card.name, card.sim_name).unwrap(), 1);
    assert_eq!(s.bytes("host", card.sim_name).unwrap(), bytes);

    // Sim -> card for the product; the inverse runs in place on the card.
    rt.fft_in_place(card.device, FftDirection::Inverse, n, &mut product)
        .expect("inverse on the card");
    assert_eq!(rt.stats().bytes(card.sim_name, card.name).unwrap(), bytes);

    // Card -> host once; a second read moves nothing.
    rt.reset_stats();
    let got = product.host().expect("host").to_vec();
    assert_eq!(rt.stats().bytes(card.name, "host").unwrap(), bytes);
    let _ = product.host().expect("host again");
    assert_eq!(rt.stats().total_copies(), 1);

    // x: a direct DFT, the product, the inverse DFT, all in f64.
    let spectrum_ref = dft_rows(&input, n, false);
    let product_ref: Vec<Complex32> = spectrum_ref
        .iter()
        .zip(&filter)
        .map(|(&(a, b), f)| c(a as f32, b as f32) * f)
        .collect();
    let what = format!("fft on {0}, zip on the sim, inverse on {0}", card.name);
    assert_close(
        &got,
        &dft_rows(&product_ref, n, true),
        2 * n.trailing_zeros(),
        &what,
    );

    // Every valid copy in every space agrees, the card's read back through its backend.
    for buffer in [&x, &f, &spectrum, &product] {
        buffer.validate().expect("replicas agree");
    }
    let card_space = rt.space_of(card.device).expect("card");
    assert_eq!(
        product.fragment_state(0).expect("state").valid,
        SpaceSet::only(card_space).with(SpaceId::HOST)
    );
}

pub fn fresh_buffers_are_zero_filled_on_the_card_not_sent(card: &Card) {
    let rt = card.runtime(ExecMode::Tracked);
    let x = HeteData::<Complex32>::alloc(&rt, 2048).expect("x");
    let mut y = HeteData::from_slice(&rt, &signal(2048, 7)).expect("y");
    rt.conj(card.device, &x, &mut y).expect("conj");
    let s = rt.stats();
    assert_eq!(
        s.bytes("host", card.name).unwrap(),
        0,
        "y is write-discard, x is zeros"
    );
    assert_eq!(s.space(card.name).expect("card").zero_fills, 1);
    assert!(y.host().expect("host").iter().all(|v| *v == c(0.0, 0.0)));
    x.validate().expect("the card's zeros read back as zeros");
}

pub fn an_exhausted_card_pool_is_an_error_that_loses_nothing(card: &Card) {
    let rt = card.runtime_with_pool(1 << 20, ExecMode::Tracked);
    let input = signal(1 << 17, 8); // 1 MiB
    let x = HeteData::from_slice(&rt, &input).expect("x");
    let mut y = HeteData::alloc(&rt, 1 << 17).expect("y");
    let err = rt
        .conj(card.device, &x, &mut y)
        .expect_err("two 1 MiB buffers do not fit a 1 MiB pool");
    assert!(
        matches!(&err, Error::DoesNotFit { space, needed, in_use, .. }
            if space == card.name && *needed == 1 << 20 && *in_use == 1 << 20),
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
    assert_eq!(rt.stats().space(card.name).expect("card").in_use, 0);
    let small = HeteData::from_slice(&rt, &signal(1024, 9)).expect("small");
    let mut out = HeteData::alloc(&rt, 1024).expect("out");
    rt.conj(card.device, &small, &mut out)
        .expect("a call that fits");
}

pub fn baseline_stages_every_argument_through_the_card_every_call(card: &Card) {
    let n = 512;
    let len = 2 * n;
    let bytes = (len * 8) as u64;
    let run = |mode| {
        let rt = card.runtime(mode);
        let x = HeteData::from_slice(&rt, &signal(len, 10)).expect("x");
        let mut y = HeteData::alloc(&rt, len).expect("y");
        for _ in 0..3 {
            rt.fft(card.device, FftDirection::Forward, n, &x, &mut y)
                .expect("fft");
        }
        let result = y.host().expect("host").to_vec();
        (result, rt.stats())
    };
    let (tracked, t) = run(ExecMode::Tracked);
    let (baseline, b) = run(ExecMode::Baseline);
    assert_eq!(tracked, baseline);
    assert_eq!(t.bytes("host", card.name).unwrap(), bytes);
    assert_eq!(t.bytes(card.name, "host").unwrap(), bytes);
    assert_eq!(b.bytes("host", card.name).unwrap(), 3 * bytes);
    assert_eq!(b.bytes(card.name, "host").unwrap(), 3 * bytes);
    let pool = b.space(card.name).expect("card");
    assert_eq!((pool.allocations, pool.frees, pool.in_use), (6, 6, 0));
}

pub fn rows_on_the_card_and_the_sim_move_at_their_own_offsets(card: &Card) {
    let rt = card.runtime(ExecMode::Tracked);
    let (rows, n) = (8, 512); // 4 KiB a row: one fragment each
    let input = signal(rows * n, 11);
    let mut x = HeteData::from_slice(&rt, &input).expect("x");
    for (i, mut row) in x.rows_mut(n).expect("rows").into_iter().enumerate() {
        let device = if i % 2 == 1 { card.device } else { card.sim };
        rt.fft_in_place(device, FftDirection::Forward, n, &mut row)
            .expect("fft");
    }
    let row_bytes = (n * 8) as u64;
    let s = rt.stats();
    assert_eq!(s.bytes("host", card.name).unwrap(), 4 * row_bytes);
    assert_eq!(s.copies("host", card.name).unwrap(), 4);
    // Back on the host row by row from two memories, each at its own offset.
    let what = format!("rows on {} and the sim", card.name);
    assert_close(
        x.host().expect("host"),
        &dft_rows(&input, n, false),
        n.trailing_zeros(),
        &what,
    );
    assert_eq!(rt.stats().bytes(card.name, "host").unwrap(), 4 * row_bytes);
    // Rows 1..3 to the card again: row 1 is still valid there, row 2 comes from the host in
    // one copy (the sim holds it too, but a copy from the sim crosses the card's link as
    // well, so it is no cheaper, and the host comes first on a tie).
    rt.reset_stats();
    let mut middle = x.slice_mut(n..3 * n).expect("rows 1 and 2");
    rt.scale(card.device, c(2.0, 0.0), &mut middle)
        .expect("scale");
    let s = rt.stats();
    assert_eq!(s.bytes("host", card.name).unwrap(), row_bytes, "{s:#?}");
    assert_eq!(s.total_copies(), 1, "{s:#?}");
    x.validate().expect("replicas agree");
}
