// A GPU implementation takes device slices and gets the kernel context (for its driver) even
// where the API does not declare one; a stand-alone GPU kernel does the same.
use rimms::{DevSlice, DevSliceMut, KernelCtx};

#[rimms::api]
pub fn halve(x: &[f32], #[out] y: &mut [f32]);

#[rimms::kernel(api = halve, device = cpu)]
fn halve_cpu(x: &[f32], #[out] y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = x / 2.0;
    }
}

#[rimms::kernel(api = halve, device = gpu)]
fn halve_gpu(ctx: &KernelCtx, x: DevSlice<f32>, #[out] y: DevSliceMut<f32>) {
    let _ = (ctx.device(), x.addr(), x.len(), y.addr(), y.bytes());
}

#[rimms::kernel(device = gpu)]
fn clear(ctx: &KernelCtx, #[out] y: DevSliceMut<f32>) {
    let _ = (ctx.device(), y.addr());
}

fn main() -> rimms::Result<()> {
    let rt = rimms::Runtime::new()?;
    let x = rimms::HeteData::from_slice(&rt, &[2.0f32; 8])?;
    let mut y = rimms::HeteData::alloc(&rt, 8)?;
    halve(&rt, rimms::Device::Cpu, &x, &mut y)?;
    // No GPU in this runtime: a clear error, not a panic.
    assert!(clear(&rt, &mut y).is_err());
    Ok(())
}
