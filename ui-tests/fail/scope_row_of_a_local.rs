// A row view handed to a scope call by value is held until the scope closes: it may not be a
// view of a buffer that dies inside the scope's closure.
use rimms::{Complex32, Device, FftDirection, HeteData, Runtime};

fn main() -> rimms::Result<()> {
    let rt = Runtime::new()?;
    let x = HeteData::<Complex32>::alloc(&rt, 1024)?;
    rt.scope(|s| {
        let mut y = HeteData::<Complex32>::alloc(&rt, 1024)?;
        for (row, out) in x.iter_rows(512)?.zip(y.iter_rows_mut(512)?) {
            s.fft(Device::Cpu, FftDirection::Forward, 512, row, out)?;
        }
        Ok::<(), rimms::Error>(())
    })??;
    Ok(())
}
