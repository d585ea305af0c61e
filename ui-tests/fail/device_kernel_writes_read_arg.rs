//! A device kernel writes device memory only through its written arguments, and reaches no
//! other memory of its device.
use rimms::{DevSlice, DevSliceMut, KernelCtx};

#[rimms::api]
fn copy(x: &[f32], #[out] y: &mut [f32]);

#[rimms::kernel(api = copy, device = sim)]
fn copy_device(ctx: &KernelCtx, x: DevSlice<f32>, #[out] y: DevSliceMut<f32>) {
    let values = ctx.read_device(&x).unwrap_or_default();
    let _ = ctx.copy_to_device(&values, &mut x);
    let _ = ctx.device_memory();
    let _ = y;
}

fn main() {}
