fn first(v: &[f32]) -> f32 {
    v[0]
}

fn main() -> rimms::Result<()> {
    let mut y = vec![0.5f32; 8];
    rimms::parallel_for!(for i in 0..8 {
        y[i] = first(&y) + 1.0;
    })?;
    Ok(())
}
