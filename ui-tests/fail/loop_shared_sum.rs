fn main() -> rimms::Result<()> {
    let x = vec![0.5f32; 8];
    let mut total = 0.0;
    let mut peak = 0.0;
    rimms::parallel_for!(for i in 0..8 {
        total += x[i];
        peak = x[i];
    })?;
    let _ = (total, peak);
    Ok(())
}
