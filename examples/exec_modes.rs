//! How to measure what tracking saves on a program of your own: build its runtime once in
//! each exec mode (`RuntimeBuilder::mode`: `ExecMode::Baseline`, CEDR's copy-in/copy-out at
//! every call, and `ExecMode::Tracked`), run the same code on both, and read the copies and
//! bytes per link from `Runtime::stats`. The program here is an FFT → filter → inverse FFT
//! loop on a simulated PCIe card, the host filling each frame with `parallel_for!`; no line
//! of it copies anything. (`rimms run` / `rimms bench` make the same comparison for the six
//! applications of `rimms-cli`.)
//!
//! `cargo run --release --example exec_modes`

use rimms::{Complex32, Device, ExecMode, FftDirection, HeteData, Runtime, SimConfig, ZipOp};

const POINTS: usize = 2048;
const ROWS: usize = 64;
const FRAMES: usize = 10;

fn frames(mode: ExecMode) -> rimms::Result<()> {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .mode(mode)
        .build()?;
    let len = POINTS * ROWS;
    let dev = Device::Sim(0);
    let mut filter = HeteData::<Complex32>::alloc(&rt, len)?;
    rimms::parallel_for!(for i in 0..len {
        filter[i] = Complex32::new(1.0 / (1 + i % POINTS) as f32, 0.0);
    })?;
    let mut x = HeteData::alloc(&rt, len)?;
    let (mut spectrum, mut filtered, mut y) = (
        HeteData::alloc(&rt, len)?,
        HeteData::alloc(&rt, len)?,
        HeteData::alloc(&rt, len)?,
    );
    for frame in 0..FRAMES {
        rimms::parallel_for!(for i in 0..len {
            x[i] = Complex32::new(((i + frame) % 17) as f32, 0.0);
        })?;
        rt.fft(dev, FftDirection::Forward, POINTS, &x, &mut spectrum)?;
        rt.zip(dev, ZipOp::Mul, &spectrum, &filter, &mut filtered)?;
        rt.fft(dev, FftDirection::Inverse, POINTS, &filtered, &mut y)?;
        if frame == FRAMES - 1 {
            let peak = y.host()?.iter().map(|v| v.norm()).fold(0.0, f32::max);
            println!("{mode:?}: last frame's peak |y| = {peak:.3}");
        }
    }
    let stats = rt.stats();
    println!(
        "{mode:?}: {} copies, {:.1} MiB host->sim0, {:.1} MiB sim0->host",
        stats.total_copies(),
        stats.bytes("host", "sim0")? as f64 / (1 << 20) as f64,
        stats.bytes("sim0", "host")? as f64 / (1 << 20) as f64
    );
    Ok(())
}

fn main() -> rimms::Result<()> {
    frames(ExecMode::Baseline)?;
    frames(ExecMode::Tracked)
}
