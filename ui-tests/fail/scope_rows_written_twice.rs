// Rows handed to scope calls by value keep their buffer borrowed mutably until the scope
// closes: a second loop may not write the same rows while the first one's calls may run.
use rimms::{Complex32, Device, FftDirection, HeteData, Runtime};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<Complex32>::alloc(&rt, 1024)?;
    let mut y = HeteData::<Complex32>::alloc(&rt, 1024)?;
    rt.scope(|s| {
        for (row, out) in x.iter_rows(512)?.zip(y.iter_rows_mut(512)?) {
            s.fft(Device::Cpu, FftDirection::Forward, 512, row, out)?;
        }
        for (row, out) in x.iter_rows(512)?.zip(y.iter_rows_mut(512)?) {
            s.fft(Device::Cpu, FftDirection::Inverse, 512, row, out)?;
        }
        Ok::<(), rimms::Error>(())
    })??;
    Ok(())
}
