//! Every way of binding the loop variable again inside the body is refused: each would make
//! `y[i]` index somewhere the analysis did not check.
fn main() -> rimms::Result<()> {
    let mut y = vec![0u32; 8];
    let pairs = [(1usize, 2usize); 8];
    rimms::parallel_for!(for i in 0..7 {
        let i = i + 1;
        y[i] = 7;
    })?;
    rimms::parallel_for!(for i in 0..7 {
        let f = |i: usize| i;
        y[i] = f(3) as u32;
    })?;
    rimms::parallel_for!(for i in 0..7 {
        if let (i, _) = pairs[i] {
            y[i] = 1;
        }
    })?;
    rimms::parallel_for!(for i in 0..7 {
        y[i] = match pairs[i] {
            (i, _) => i as u32,
        };
    })?;
    rimms::parallel_for!(for i in 0..7 {
        for i in 0..2 {
            let _ = i;
        }
        y[i] = 2;
    })?;
    Ok(())
}
