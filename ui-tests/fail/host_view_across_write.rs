use rimms::{Complex32, Device, HeteData, Runtime};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut x = HeteData::<Complex32>::alloc(&rt, 8)?;
    let view = x.host()?;
    rt.scale(Device::Cpu, Complex32::new(2.0, 0.0), &mut x)?;
    println!("{}", view[0]);
    Ok(())
}
