fn main() -> rimms::Result<()> {
    let mut y = vec![0.0f32; 8];
    let x = vec![1.0f32; 8];
    rimms::parallel_for!(for i in 0..8 {
        let p = x.as_ptr();
        let q = &x[i] as *const f32;
        y[i] = unsafe { *p.add(i) + *q };
    })?;
    Ok(())
}
