//! A crate that forbids `unsafe` can use every macro. The one `unsafe` block an expansion holds
//! (`parallel_for!` taking a written buffer's guard, whose contract its analysis keeps) is the
//! macro's own, and holds none of the program's tokens (`fail/loop_guard_by_hand.rs`).
#![forbid(unsafe_code)]

use rimms::{DevSlice, DevSliceMut, Device, HeteData, KernelCtx, Runtime, SimConfig};

#[rimms::api]
pub fn scale(factor: f32, x: &[f32], #[out] y: &mut [f32]) -> rimms::Result<()>;

#[rimms::kernel(api = scale, device = cpu)]
fn scale_cpu(factor: f32, x: &[f32], #[out] y: &mut [f32]) -> rimms::Result<()> {
    for (y, x) in y.iter_mut().zip(x) {
        *y = factor * x;
    }
    Ok(())
}

#[rimms::kernel(api = scale, device = sim)]
fn scale_card(
    ctx: &KernelCtx,
    factor: f32,
    x: DevSlice<f32>,
    #[out] mut y: DevSliceMut<f32>,
) -> rimms::Result<()> {
    let values: Vec<f32> = ctx.read_device(&x)?.iter().map(|v| factor * v).collect();
    ctx.copy_to_device(&values, &mut y)
}

#[rimms::kernel(device = sim(1))]
fn fill(value: f32, #[out] y: &mut [f32]) {
    y.fill(value);
}

#[rimms::kernel(device = auto)]
fn bump(y: &mut [f32]) {
    y.iter_mut().for_each(|v| *v += 1.0);
}

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()?;
    let mut x = HeteData::<f32>::alloc(&rt, 64)?;
    let mut y = HeteData::<f32>::alloc(&rt, 64)?;
    fill(&rt, 1.0, &mut x)?;
    scale(&rt, Device::Cpu, 2.0, &x, &mut y)?;
    bump(&rt, &mut y)?;
    let n = y.len();
    let weights = vec![0.5f32; n];
    rimms::parallel_for!(for i in 0..n {
        y[i] = y[i] * weights[i] + x[i];
    })?;
    rimms::parallel_for!('rows: for i in 0..=n - 1 {
        if i % 2 == 0 {
            continue 'rows;
        }
        x[i] = y[i];
    })?;
    Ok(())
}
