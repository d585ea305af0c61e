//! A user-defined API, implemented for the CPU and for sim devices, called on either: the
//! runtime picks the implementation by the device's kind and moves the data it needs.
//!
//! `cargo run --release --example user_api`

use rimms::{Complex32, Device, HeteData, Runtime, SimConfig};

/// Multiplies each row of `row_len` samples by a Hann window, in place.
#[rimms::api]
pub fn hann(row_len: usize, data: &mut [Complex32]);

fn hann_weight(k: usize, n: usize) -> f32 {
    let phase = 2.0 * std::f32::consts::PI * k as f32 / (n - 1) as f32;
    0.5 - 0.5 * phase.cos()
}

#[rimms::kernel(api = hann, device = cpu)]
fn hann_cpu(row_len: usize, data: &mut [Complex32]) {
    for row in data.chunks_mut(row_len) {
        for (k, v) in row.iter_mut().enumerate() {
            *v *= hann_weight(k, row_len);
        }
    }
}

/// On a sim device the weights are computed once per call and reused across rows, as a device
/// kernel would keep them in fast memory.
#[rimms::kernel(api = hann, device = sim)]
fn hann_sim(row_len: usize, data: &mut [Complex32]) {
    let weights: Vec<f32> = (0..row_len).map(|k| hann_weight(k, row_len)).collect();
    for row in data.chunks_mut(row_len) {
        for (v, w) in row.iter_mut().zip(&weights) {
            *v *= *w;
        }
    }
}

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let row_len = 256;
    let ones = vec![Complex32::new(1.0, 0.0); row_len * 8];
    let mut a = HeteData::from_slice(&rt, &ones)?;
    let mut b = HeteData::from_slice(&rt, &ones)?;
    hann(&rt, Device::Cpu, row_len, &mut a)?;
    hann(&rt, Device::Sim(0), row_len, &mut b)?;
    let (a, b) = (a.to_vec()?, b.to_vec()?);
    let max_diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f32::max);
    println!("cpu and sim implementations agree within {max_diff:.1e}");
    println!(
        "middle weight {:.3}, edge weight {:.3}",
        a[row_len / 2].re,
        a[0].re
    );
    for link in rt.stats().links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }
    Ok(())
}
