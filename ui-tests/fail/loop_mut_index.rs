//! A mutable loop variable could be changed between two indexings.
fn main() -> rimms::Result<()> {
    let mut y = vec![0u32; 8];
    rimms::parallel_for!(for mut i in 0..7 {
        i += 1;
        y[i] = 1;
    })?;
    Ok(())
}
