#[rimms::kernel(device = cpu)]
fn scale(x: *mut f32, y: &mut [f32]) {
    let _ = (x, y);
}

fn main() {}
