//! A program's own kernel through `launch_host`, on a non-complex element type: the same
//! acquire / run / mark path as the built-ins, counted per link.

use rimms::{ApiDecl, Device, HeteData, KernelArg, Runtime, SimConfig};

static ADD: ApiDecl = ApiDecl::new("add_u32");
static BUMP: ApiDecl = ApiDecl::new("bump");

/// out[i] = a[i] + b[i] (wrapping), as a custom kernel on `device`.
fn add(
    rt: &Runtime,
    device: Device,
    a: &HeteData<u32>,
    b: &HeteData<u32>,
    out: &mut HeteData<u32>,
) -> rimms::Result<()> {
    rt.launch_host(
        device,
        &ADD,
        [
            KernelArg::read("a", a),
            KernelArg::read("b", b),
            KernelArg::write("out", out),
        ],
        |[a, b, out]| {
            let (a, b) = (a.into_slice::<u32>()?, b.into_slice::<u32>()?);
            for ((o, x), y) in out.into_slice_mut::<u32>()?.iter_mut().zip(a).zip(b) {
                *o = x.wrapping_add(*y);
            }
            Ok(())
        },
    )
}

/// Increments in place, as a read-write custom kernel.
fn bump(rt: &Runtime, device: Device, x: &mut HeteData<u32>) -> rimms::Result<()> {
    rt.launch_host(device, &BUMP, [KernelArg::read_write("x", x)], |[x]| {
        x.into_slice_mut::<u32>()?
            .iter_mut()
            .for_each(|v| *v = v.wrapping_add(1));
        Ok(())
    })
}

#[test]
fn a_custom_kernel_chain_moves_only_what_it_must() {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .sim(SimConfig::default())
        .build()
        .expect("rt");
    let n = 3000u32;
    let a = HeteData::from_slice(&rt, &(0..n).collect::<Vec<_>>()).expect("a");
    let b =
        HeteData::from_slice(&rt, &(0..n).map(|i| u32::MAX - i).collect::<Vec<_>>()).expect("b");
    let mut sum = HeteData::alloc(&rt, n as usize).expect("sum");
    add(&rt, Device::Sim(0), &a, &b, &mut sum).expect("add on sim0");
    bump(&rt, Device::Sim(0), &mut sum).expect("bump on sim0");
    bump(&rt, Device::Sim(1), &mut sum).expect("bump on sim1");
    // a[i] + b[i] = u32::MAX, plus two wraps to 1.
    assert!(sum.host().expect("host").iter().all(|&v| v == 1));
    let s = rt.stats();
    let bytes = u64::from(n) * 4;
    assert_eq!(
        s.bytes("host", "sim0").unwrap(),
        2 * bytes,
        "a and b once each"
    );
    assert_eq!(
        s.bytes("sim0", "sim1").unwrap(),
        bytes,
        "sum, held only by sim0, moves to sim1"
    );
    assert_eq!(
        s.bytes("sim1", "host").unwrap(),
        bytes,
        "the result comes back once"
    );
    assert_eq!(s.total_copies(), 4);
}
