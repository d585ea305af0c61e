//! An API with two implementations, a stand-alone kernel and a parallel loop, all compiling.
use rimms::{Device, HeteData, Runtime, SimConfig};

#[rimms::api]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]);

#[rimms::kernel(api = axpy, device = cpu)]
fn axpy_cpu(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

#[rimms::kernel(api = axpy, device = sim)]
fn axpy_sim(a: f32, x: &[f32], y: &mut [f32]) {
    axpy_cpu(a, x, y);
}

#[rimms::kernel(device = sim(1))]
fn fill(value: f32, #[out] y: &mut [f32]) {
    y.fill(value);
}

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder().sim(SimConfig::default()).sim(SimConfig::default()).build()?;
    let x = HeteData::<f32>::alloc(&rt, 64)?;
    let mut y = HeteData::<f32>::alloc(&rt, 64)?;
    fill(&rt, 1.0, &mut y)?;
    axpy(&rt, Device::Sim(0), 2.0, &x, &mut y)?;
    let n = y.len();
    rimms::parallel_for!(for i in 0..n {
        y[i] = y[i] * 2.0 + x[i];
    })?;
    Ok(())
}
