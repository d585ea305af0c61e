//! A kernel's view of its argument lives for the call only.
use rimms::{ApiDecl, Device, HeteData, KernelArg, Runtime};

static KEEP: ApiDecl = ApiDecl::new("keep");

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let y = HeteData::<u32>::alloc(&rt, 8)?;
    let mut kept: Option<&[u32]> = None;
    rt.launch_host(Device::Cpu, &KEEP, [KernelArg::read("y", &y)], |[y]| {
        kept = Some(y.into_slice::<u32>()?);
        Ok(())
    })?;
    drop(y);
    println!("{:?}", kept);
    Ok(())
}
