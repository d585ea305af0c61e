//! zip3x: two independent element-wise multiplies on a simulated PCIe card, then the sum of
//! their results, out = a·b + c·d (docs/design.md, N = 4096). The products never leave the card,
//! so the runtime moves the four operands in and the sum out, and nothing else; a plain host
//! loop checks the answer.
//!
//! `cargo run --release --example zip3x`

use rimms::{Complex32, Device, HeteData, Runtime, SimConfig, ZipOp};
use std::process::ExitCode;

const N: usize = 4096;

/// Operand `which` (0 … 3) at index `i`: small exact values, so the sum is exact too.
fn operand(which: usize, i: usize) -> Complex32 {
    let k = (i * (which + 3) + which) % 17;
    Complex32::new(k as f32 * 0.125 - 1.0, ((i + which) % 5) as f32 * 0.25)
}

fn main() -> rimms::Result<ExitCode> {
    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let card = Device::Sim(0);

    let mut a = HeteData::alloc(&rt, N)?;
    let mut b = HeteData::alloc(&rt, N)?;
    let mut c = HeteData::alloc(&rt, N)?;
    let mut d = HeteData::alloc(&rt, N)?;
    rimms::parallel_for!(for i in 0..N {
        a[i] = operand(0, i);
        b[i] = operand(1, i);
        c[i] = operand(2, i);
        d[i] = operand(3, i);
    })?;

    let mut p = HeteData::alloc(&rt, N)?;
    let mut q = HeteData::alloc(&rt, N)?;
    let mut out = HeteData::alloc(&rt, N)?;
    rt.zip(card, ZipOp::Mul, &a, &b, &mut p)?;
    rt.zip(card, ZipOp::Mul, &c, &d, &mut q)?;
    rt.zip(card, ZipOp::Add, &p, &q, &mut out)?; // p and q are already on the card

    // The same computation as plain Rust on the host.
    let mut worst = 0.0f32;
    for (i, got) in out.host()?.iter().enumerate() {
        let want = operand(0, i) * operand(1, i) + operand(2, i) * operand(3, i);
        worst = worst.max((got - want).norm());
    }
    let sum: Complex32 = out.host()?.iter().sum();
    println!("zip3x of {N} elements: Σ out = {sum:.3}, largest error {worst:.1e}");

    let stats = rt.stats();
    for link in &stats.links {
        println!(
            "{} -> {}: {} copies, {} bytes",
            link.from, link.to, link.copies, link.bytes
        );
    }
    println!(
        "(the minimum: 4 operands of {} bytes in, the sum out)",
        N * std::mem::size_of::<Complex32>()
    );

    if worst > 1e-5 {
        eprintln!("zip3x: wrong result, off by {worst} from the host computation");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
