//! FFT → multiply by a filter → inverse FFT on a simulated PCIe device, the chain the RIMMS
//! paper measures, run in both modes to show what tracking saves.
//!
//! `cargo run --release --example fzf`

use rimms::{Complex32, Device, ExecMode, FftDirection, HeteData, Runtime, SimConfig, ZipOp};

fn fzf(mode: ExecMode) -> rimms::Result<()> {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .mode(mode)
        .build()?;
    let (points, rows, frames) = (2048, 64, 10);
    let len = points * rows;
    let dev = Device::Sim(0);
    let filter: Vec<Complex32> = (0..len)
        .map(|i| Complex32::new(1.0 / (1 + i % points) as f32, 0.0))
        .collect();
    let filter = HeteData::from_slice(&rt, &filter)?;
    let mut x = HeteData::alloc(&rt, len)?;
    let (mut spectrum, mut filtered, mut y) = (
        HeteData::alloc(&rt, len)?,
        HeteData::alloc(&rt, len)?,
        HeteData::alloc(&rt, len)?,
    );
    for frame in 0..frames {
        for (i, v) in x.host_write()?.iter_mut().enumerate() {
            *v = Complex32::new(((i + frame) % 17) as f32, 0.0);
        }
        rt.fft(dev, FftDirection::Forward, points, &x, &mut spectrum)?;
        rt.zip(dev, ZipOp::Mul, &spectrum, &filter, &mut filtered)?;
        rt.fft(dev, FftDirection::Inverse, points, &filtered, &mut y)?;
        let peak = y.host()?.iter().map(|v| v.norm()).fold(0.0, f32::max);
        if frame == frames - 1 {
            println!("{mode:?}: last frame's peak |y| = {peak:.3}");
        }
    }
    let stats = rt.stats();
    println!(
        "{mode:?}: {} copies, {:.1} MiB host->sim0, {:.1} MiB sim0->host",
        stats.total_copies(),
        stats.bytes("host", "sim0") as f64 / (1 << 20) as f64,
        stats.bytes("sim0", "host") as f64 / (1 << 20) as f64
    );
    Ok(())
}

fn main() -> rimms::Result<()> {
    fzf(ExecMode::Baseline)?;
    fzf(ExecMode::Tracked)
}
