//! Every reduction of `parallel_for!`, and a read-only buffer handed whole to a helper.
use rimms::{HeteData, Runtime};

/// The mean of a cell's neighbours, by a helper that takes the whole row.
fn neighbours(row: &[f32], i: usize) -> f32 {
    let left = if i > 0 { row[i - 1] } else { 0.0 };
    let right = row.get(i + 1).copied().unwrap_or(0.0);
    (left + right) / 2.0
}

fn main() -> rimms::Result<()> {
    let rt = Runtime::builder().build()?;
    let pw = HeteData::from_slice(&rt, &[1.0f32, 9.0, 1.0, 1.0, 8.0, 1.0])?;
    let n = pw.len();
    let total: f32 = rimms::parallel_for!(sum for i in 0..n { pw[i] })?;
    let low = rimms::parallel_for!(min for i in 0..n { (pw[i], i) })?;
    let high = rimms::parallel_for!(max for i in 0..n { pw[i] })?;
    let dets: Vec<usize> = rimms::parallel_for!(collect for i in 0..n {
        if pw[i] < 2.0 * neighbours(&pw, i) {
            continue;
        }
        i
    })?;
    let product = rimms::parallel_for!(reduce(|| 1.0f32, |a, b| a * b) for i in 0..n { pw[i] })?;
    assert_eq!((total, low, high, dets, product), (21.0, Some((1.0, 0)), Some(9.0), vec![1, 4], 72.0));
    Ok(())
}
