// A GPU's buffers are in device memory: its kernels take device slices, not `&[T]`.
#[rimms::api]
fn halve(x: &[f32], #[out] y: &mut [f32]);

#[rimms::kernel(api = halve, device = gpu)]
fn halve_gpu(x: &[f32], #[out] y: &mut [f32]) {
    y.copy_from_slice(x);
}

fn main() {}
