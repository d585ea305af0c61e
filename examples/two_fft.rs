//! FFT then inverse FFT of the same data, rows spread over two simulated devices: each row's
//! fragments move to the device that transforms it, and only back when the host reads them.
//!
//! `cargo run --release --example two_fft`

use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig};

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()?;
    let (points, rows) = (512, 16); // 4 KiB a row: one fragment each
    let input: Vec<Complex32> = (0..points * rows)
        .map(|i| Complex32::new((i % 29) as f32, (i % 5) as f32))
        .collect();
    let mut x = HeteData::from_slice(&rt, &input)?;
    for (i, mut row) in x.rows_mut(points)?.into_iter().enumerate() {
        let dev = Device::Sim((i % 2) as u8);
        rt.fft_in_place(dev, FftDirection::Forward, points, &mut row)?;
        rt.fft_in_place(dev, FftDirection::Inverse, points, &mut row)?;
    }
    let error = x
        .host()?
        .iter()
        .zip(&input)
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f32::max);
    println!("largest round-trip error: {error:.2e}");
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }
    Ok(())
}
