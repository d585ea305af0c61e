// An API's declaration is reachable by the API's name, and `crate = path` names the runtime
// for a crate that reaches rimms through a re-export.
use rimms::{Device, HeteData, KernelArg, Runtime};

mod reexport {
    pub use rimms as engine;
}

#[rimms::api(crate = crate::reexport::engine)]
pub fn double(x: &mut [u32]);

#[rimms::kernel(api = double, device = cpu, crate = "crate::reexport::engine")]
fn double_cpu(x: &mut [u32]) {
    for v in x {
        *v *= 2;
    }
}

fn main() {
    let rt = Runtime::new().expect("runtime");
    let mut x = HeteData::from_slice(&rt, &[1u32, 2, 3]).expect("x");
    double(&rt, Device::Cpu, &mut x).expect("registered call");
    // A hand-written body counted as the same API.
    rt.launch_host(
        Device::Cpu,
        double::DECL,
        [KernelArg::read_write("x", &mut x)],
        |[x]| {
            for v in x.into_slice_mut::<u32>()? {
                *v += 1;
            }
            Ok(())
        },
    )
    .expect("hand-written call");
    assert_eq!(x.host().expect("host"), &[3, 5, 7]);
    assert_eq!(double::DECL.name(), "double");
}
