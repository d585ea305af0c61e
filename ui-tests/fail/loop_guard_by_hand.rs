//! The guard `parallel_for!` takes for a written buffer trusts its caller (which elements the
//! loop writes, that the guard is not leaked): a program reaches it only by writing `unsafe`,
//! and the macro's own `unsafe` lends nothing to the program's tokens.
use rimms::__private::LoopWrite;
use rimms::{HeteData, Runtime};

static mut SHARED: [f32; 8] = [0.0; 8];

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let mut y = HeteData::<f32>::alloc(&rt, 8)?;
    // Claims to overwrite all 8 elements, writes one, and leaks the guard.
    let mut guard = y.__rimms_loop_write("y", true, &(0..8))?;
    guard.part(0..1)[0] = 1.0;
    std::mem::forget(guard);
    // A mutable static is not made safe to write by the loop around it.
    rimms::parallel_for!(for i in 0..8 {
        SHARED[i] = 2.0;
    })?;
    Ok(())
}
