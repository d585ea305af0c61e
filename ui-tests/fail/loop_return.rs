fn main() -> rimms::Result<()> {
    let mut y = vec![0.0f32; 8];
    rimms::parallel_for!(for i in 0..8 {
        if i == 4 {
            return;
        }
        y[i] = 1.0;
    })?;
    Ok(())
}
