fn main() -> rimms::Result<()> {
    let x = vec![0.5f32; 8];
    let _ = rimms::parallel_for!(average for i in 0..8 { x[i] })?;
    Ok(())
}
