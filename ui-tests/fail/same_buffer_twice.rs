use rimms::{HeteData, Runtime};

#[rimms::kernel(device = cpu)]
fn add(x: &[f32], y: &mut [f32]) {
    let _ = (x, y);
}

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut x = HeteData::<f32>::alloc(&rt, 8)?;
    add(&rt, &x, &mut x)?;
    Ok(())
}
