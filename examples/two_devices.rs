//! One buffer shared by two devices, row by row: `rows_mut` splits it into row views, and the
//! rows go alternately to two simulated cards for an FFT and an inverse FFT in place
//! (`fft_in_place`); then a host-side check with `parallel_for!`. Coherence is per fragment,
//! so each row moves only to the card that transforms it, and back only when the host reads
//! it; the bytes per link at the end show it.
//!
//! `cargo run --release --example two_devices`

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()?;
    let (points, rows) = (512, 16); // 4 KiB a row: one fragment each
    let len = points * rows;
    let mut x = HeteData::<Complex32>::alloc(&rt, len)?;
    let mut original = HeteData::<Complex32>::alloc(&rt, len)?;
    rimms::parallel_for!(for i in 0..len {
        x[i] = Complex32::new((i % 29) as f32, (i % 5) as f32);
        original[i] = x[i];
    })?;
    for (i, mut row) in x.rows_mut(points)?.into_iter().enumerate() {
        let dev = Device::Sim((i % 2) as u8);
        rt.fft_in_place(dev, FftDirection::Forward, points, &mut row)?;
        rt.fft_in_place(dev, FftDirection::Inverse, points, &mut row)?;
    }
    let mut error = HeteData::<f32>::alloc(&rt, len)?;
    rimms::parallel_for!(for i in 0..len {
        error[i] = (x[i] - original[i]).norm();
    })?;
    let worst = error.host()?.iter().copied().fold(0.0, f32::max);
    println!("largest round-trip error: {worst:.2e}");
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }
    Ok(())
}
