fn main() -> rimms::Result<()> {
    let mut y = vec![0.0f32; 8];
    rimms::parallel_for!(for i in 0..7 {
        y[i] = y[i + 1] * 0.5;
    })?;
    Ok(())
}
