fn main() -> rimms::Result<()> {
    let mut y = vec![0.0f32; 8];
    let items = vec![1usize, 2, 3];
    rimms::parallel_for!(for i in items {
        y[i] = 1.0;
    })?;
    Ok(())
}
