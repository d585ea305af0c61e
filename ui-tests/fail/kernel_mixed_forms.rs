// One kernel takes all its buffers one way: host slices or device slices.
use rimms::DevSlice;

#[rimms::api]
fn halve(x: &[f32], #[out] y: &mut [f32]);

#[rimms::kernel(api = halve, device = sim)]
fn halve_mixed(ctx: &rimms::KernelCtx, x: DevSlice<f32>, #[out] y: &mut [f32]) {
    let _ = (ctx, x, y);
}

fn main() {}
