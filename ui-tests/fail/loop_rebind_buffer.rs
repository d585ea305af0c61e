//! A buffer's name bound again inside the body would make `y[i]` mean another slice.
fn main() -> rimms::Result<()> {
    let mut y = vec![0u32; 8];
    let other = vec![0u32; 8];
    rimms::parallel_for!(for i in 0..8 {
        y[i] = 1;
        let y = &other;
        let _ = y;
    })?;
    Ok(())
}
