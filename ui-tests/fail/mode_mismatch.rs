#[rimms::api]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]);

#[rimms::kernel(api = axpy, device = cpu)]
fn axpy_cpu(a: f32, x: &[f32], #[out] y: &mut [f32]) {
    let _ = (a, x, y);
}

fn main() {}
