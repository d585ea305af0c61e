#[rimms::api]
pub fn scale(by: f32, y: &mut [f32]);

// A limit written in place of the function that checks it.
#[rimms::kernel(api = scale, device = cpu, accepts = 2048)]
fn scale_cpu(by: f32, y: &mut [f32]) {
    for v in y {
        *v *= by;
    }
}

fn main() {}
