//! `parallel_for!` reductions over managed buffers wherever their data is (host, a sim card,
//! the FPGA emulator's u-dma-buf), against plain sequential loops, on ranges long enough to be
//! split over many rayon tasks.

use rimms::{Complex32, Device, FpgaSource, HeteData, Runtime, SimConfig, ZipOp};

/// More than a few loop chunks, so tasks really combine partial results.
const N: usize = 5 * 16_384 + 123;

fn values() -> Vec<f32> {
    (0..N)
        .map(|i| ((i * 7919) % 10_007) as f32 / 100.0 - 50.0)
        .collect()
}

/// Checks every reduction of `buf` (which holds `want`) against a sequential loop.
fn check_reductions(buf: &HeteData<f32>, want: &[f32], place: &str) -> rimms::Result<()> {
    let n = buf.len();
    // Integer-valued sums are exact in any order.
    let count: usize = rimms::parallel_for!(sum for i in 0..n {
        if buf[i] < 0.0 {
            continue;
        }
        1usize
    })?;
    assert_eq!(
        count,
        want.iter().filter(|v| **v >= 0.0).count(),
        "{place}: count"
    );
    let sum: f64 = rimms::parallel_for!(sum for i in 0..n { buf[i] as f64 })?;
    let seq: f64 = want.iter().map(|v| *v as f64).sum();
    assert!(
        (sum - seq).abs() < 1e-6 * seq.abs().max(1.0),
        "{place}: {sum} vs {seq}"
    );
    let min = rimms::parallel_for!(min for i in 0..n { (buf[i], i) })?;
    let mut seq_min: Option<(f32, usize)> = None;
    for (i, v) in want.iter().enumerate() {
        if seq_min.is_none_or(|(m, _)| *v < m) {
            seq_min = Some((*v, i));
        }
    }
    assert_eq!(min, seq_min, "{place}: arg-min, first of equals");
    let max = rimms::parallel_for!(max for i in 10..n { buf[i] })?;
    let seq_max = want[10..].iter().copied().fold(f32::MIN, f32::max);
    assert_eq!(max, Some(seq_max), "{place}: max");
    let peaks: Vec<usize> = rimms::parallel_for!(collect for i in 1..n - 1 {
        if buf[i] <= buf_at(&buf, i - 1) || buf[i] <= buf_at(&buf, i + 1) {
            continue;
        }
        i
    })?;
    let seq_peaks: Vec<usize> = (1..n - 1)
        .filter(|&i| want[i] > want[i - 1] && want[i] > want[i + 1])
        .collect();
    assert_eq!(peaks, seq_peaks, "{place}: local peaks in index order");
    let spread = rimms::parallel_for!(reduce(|| (f32::MAX, f32::MIN), |a: (f32, f32), b: (f32, f32)| (a.0.min(b.0), a.1.max(b.1))) for i in 0..n {
        (buf[i], buf[i])
    })?;
    let seq_spread = want
        .iter()
        .fold((f32::MAX, f32::MIN), |a, v| (a.0.min(*v), a.1.max(*v)));
    assert_eq!(spread, seq_spread, "{place}: user fold");
    Ok(())
}

/// A helper that takes the whole buffer, as a user's would.
fn buf_at(row: &[f32], i: usize) -> f32 {
    row[i]
}

#[test]
fn reductions_on_host_data() -> rimms::Result<()> {
    let rt = Runtime::builder().build()?;
    let want = values();
    let buf = HeteData::from_slice(&rt, &want)?;
    check_reductions(&buf, &want, "host")
}

/// The data comes from a kernel on a sim card: the loop syncs it back once, then reduces.
#[test]
fn reductions_on_data_a_sim_card_wrote() -> rimms::Result<()> {
    let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    let want = values();
    // power of (sqrt|v|, 0) is |v|; keep the sign with a second pass on the host.
    let x: Vec<Complex32> = want
        .iter()
        .map(|v| Complex32::new(v.abs().sqrt(), 0.0))
        .collect();
    let x = HeteData::from_slice(&rt, &x)?;
    let mut p = HeteData::<f32>::alloc(&rt, N)?;
    rt.power(Device::Sim(0), &x, &mut p)?;
    let magnitudes: Vec<f32> = want.iter().map(|v| v.abs().sqrt().powi(2)).collect();
    check_reductions(&p, &magnitudes, "sim0")?;
    assert_eq!(
        rt.stats().bytes("sim0", "host")?,
        4 * N as u64,
        "synced back once"
    );
    Ok(())
}

/// The data was written by the FPGA emulator's ZIP core into the u-dma-buf; the loop reads
/// it there.
#[test]
fn reductions_on_data_the_fpga_wrote() -> rimms::Result<()> {
    let rt = Runtime::builder()
        .fpga(FpgaSource::Emulated(FpgaSource::default_layout()))
        .build()?;
    let len = 4096;
    let a: Vec<Complex32> = (0..len).map(|i| Complex32::new(i as f32, 1.0)).collect();
    let b: Vec<Complex32> = (0..len)
        .map(|i| Complex32::new(0.5, (i % 3) as f32))
        .collect();
    let (ha, hb) = (
        HeteData::from_slice(&rt, &a)?,
        HeteData::from_slice(&rt, &b)?,
    );
    let mut out = HeteData::<Complex32>::alloc(&rt, len)?;
    rt.zip(Device::Fpga(2), ZipOp::Add, &ha, &hb, &mut out)?;
    // Halves and whole numbers: exact in f64 in any order.
    let total_re: f64 = rimms::parallel_for!(sum for i in 0..len { out[i].re as f64 })?;
    let want: f64 = (0..len).map(|i| i as f64 + 0.5).sum();
    assert_eq!(total_re, want);
    let odd: Vec<usize> = rimms::parallel_for!(collect for i in 0..len {
        if out[i].im != 2.0 {
            continue;
        }
        i
    })?;
    assert_eq!(odd, (0..len).filter(|i| i % 3 == 1).collect::<Vec<_>>());
    Ok(())
}
