fn main() -> rimms::Result<()> {
    let mut y = vec![0.0f32; 8];
    let x = vec![1.0f32; 8];
    rimms::parallel_for!(for i in 0..7 {
        let j = i + 1;
        y[j] = x[i];
    })?;
    Ok(())
}
