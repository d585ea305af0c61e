//! The body runs on several threads at once: state it captures must be `Sync`, so a `Cell`
//! (which would race) does not compile.
use std::cell::Cell;

fn main() -> rimms::Result<()> {
    let mut y = vec![0usize; 8];
    let last = Cell::new(0);
    rimms::parallel_for!(for i in 0..8 {
        last.set(i);
        y[i] = 1;
    })?;
    Ok(())
}
