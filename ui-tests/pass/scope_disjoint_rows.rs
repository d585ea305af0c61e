// Disjoint fragment views of one buffer may be written by concurrent calls, and a buffer may
// be read by several at once.
use rimms::{Complex32, Device, HeteData, Runtime, Target, ZipOp};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<Complex32>::alloc(&rt, 2048)?;
    let mut y = HeteData::<Complex32>::alloc(&rt, 2048)?;
    let (mut lo, mut hi) = y.split_at_mut(1024)?;
    let (a, b) = (x.slice(0..1024)?, x.slice(1024..2048)?);
    rt.scope(|s| {
        s.spawn(|rt| rt.zip(Device::Cpu, ZipOp::Add, &a, &b, &mut lo));
        s.spawn(|rt| rt.zip(Target::Auto, ZipOp::Mul, &a, &b, &mut hi));
    })?;
    Ok(())
}
