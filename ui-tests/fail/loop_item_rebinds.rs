//! An item in the body binds its name in the whole body, ahead of the loop variable and the
//! buffers: `const i: usize = 0;` would make every `y[i]` a write of `y[0]` that the analysis
//! took for a write of every element. Such items are refused like a `let`, and so is a glob
//! import, which may bring either name in unseen.
mod consts {
    pub const ZERO: usize = 0;
}

fn main() -> rimms::Result<()> {
    let mut y = vec![0u32; 8];
    let x = vec![1u32; 8];
    rimms::parallel_for!(for i in 0..8 {
        const i: usize = 0;
        y[i] = 5;
    })?;
    rimms::parallel_for!(for i in 0..8 {
        use consts::ZERO as i;
        y[i] = 5;
    })?;
    rimms::parallel_for!(for i in 0..8 {
        static x: [u32; 8] = [2; 8];
        y[i] = x[i];
    })?;
    rimms::parallel_for!(for i in 0..8 {
        use consts::*;
        y[i] = x[i] + ZERO as u32;
    })?;
    Ok(())
}
