//! One written view cannot become two arguments: `KernelArg` is not `Copy`.
use rimms::{ApiDecl, Device, HeteData, KernelArg, Runtime};

static TWICE: ApiDecl = ApiDecl::new("twice");

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut y = HeteData::<u32>::alloc(&rt, 8)?;
    let w = KernelArg::write("y", &mut y);
    rt.launch_host(Device::Cpu, &TWICE, [w, w], |_| Ok(()))
}
