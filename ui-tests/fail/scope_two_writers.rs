// Two concurrent calls of one scope may not write the same buffer.
use rimms::{Complex32, Device, HeteData, Runtime, ZipOp};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<Complex32>::alloc(&rt, 64)?;
    let mut y = HeteData::<Complex32>::alloc(&rt, 64)?;
    rt.scope(|s| {
        s.spawn(|rt| rt.zip(Device::Cpu, ZipOp::Add, &x, &x, &mut y));
        s.spawn(|rt| rt.zip(Device::Cpu, ZipOp::Mul, &x, &x, &mut y));
    })?;
    Ok(())
}
