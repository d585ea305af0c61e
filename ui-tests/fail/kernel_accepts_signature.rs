use rimms::{DeviceCtx, Refusal};

#[rimms::api]
pub fn scale(by: f32, y: &mut [f32]);

// A check takes each buffer as its length, not its slice: nothing has moved when it runs.
fn fits(_dev: &DeviceCtx, _by: f32, y: &[f32]) -> Result<(), Refusal> {
    let _ = y;
    Ok(())
}

#[rimms::kernel(api = scale, device = cpu, accepts = fits)]
fn scale_cpu(by: f32, y: &mut [f32]) {
    for v in y {
        *v *= by;
    }
}

fn main() {}
