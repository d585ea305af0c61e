//! A written view and its parent cannot be arguments of one call: the view borrows the buffer
//! mutably for as long as the call holds it.
use rimms::{ApiDecl, Device, HeteData, KernelArg, Runtime};

static BOTH: ApiDecl = ApiDecl::new("both");

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut x = HeteData::<u32>::alloc(&rt, 2048)?;
    let mut part = x.slice_mut(0..1024)?;
    let args = [KernelArg::read("x", &x), KernelArg::write("part", &mut part)];
    rt.launch_host(Device::Cpu, &BOTH, args, |_| Ok(()))
}
