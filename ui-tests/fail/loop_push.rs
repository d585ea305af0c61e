fn main() -> rimms::Result<()> {
    let pw = vec![0.5f32; 8];
    let mut dets = Vec::new();
    rimms::parallel_for!(for i in 0..8 {
        if pw[i] > 1.0 {
            dets.push(i);
        }
    })?;
    let _ = dets;
    Ok(())
}
