// A device kernel reaches its driver through the kernel context, so it takes one.
use rimms::{DevSlice, DevSliceMut};

#[rimms::api]
fn halve(x: &[f32], #[out] y: &mut [f32]);

#[rimms::kernel(api = halve, device = gpu)]
fn halve_gpu(x: DevSlice<f32>, #[out] y: DevSliceMut<f32>) {
    let _ = (x, y);
}

fn main() {}
