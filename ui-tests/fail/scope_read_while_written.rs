// A scope's call may not read a buffer another of its calls writes.
use rimms::{Complex32, Device, HeteData, Runtime, ZipOp};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<Complex32>::alloc(&rt, 64)?;
    let mut y = HeteData::<Complex32>::alloc(&rt, 64)?;
    let mut z = HeteData::<Complex32>::alloc(&rt, 64)?;
    rt.scope(|s| {
        s.spawn(|rt| rt.zip(Device::Cpu, ZipOp::Add, &x, &x, &mut y));
        s.spawn(|rt| rt.zip(Device::Sim(0), ZipOp::Mul, &y, &x, &mut z));
    })?;
    Ok(())
}
