//! A buffer's fragment size cannot change while views split on the old size are alive: they
//! were checked against its boundaries, so `fragment` borrows the buffer mutably.
use rimms::{HeteData, Runtime};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut x = HeteData::<u32>::alloc(&rt, 2048)?;
    let (mut left, _right) = x.split_at_mut(1024)?;
    x.fragment(8192)?;
    left.host_mut()?[0] = 1;
    Ok(())
}
