//! A host view's slice cannot outlive its buffer: `free` takes the buffer by value.
use rimms::{HeteData, Runtime};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<u32>::alloc(&rt, 16)?;
    let values = x.host()?;
    x.free();
    println!("{}", values[0]);
    Ok(())
}
