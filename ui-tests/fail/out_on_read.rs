#[rimms::kernel(device = cpu)]
fn copy(#[out] x: &[f32], y: &mut [f32]) {
    let _ = (x, y);
}

fn main() {}
