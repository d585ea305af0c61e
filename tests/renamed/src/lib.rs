//! A user crate that imports `rimms` under another name: the macros must still find it.

use my_rimms::{Device, HeteData, Runtime};

/// Declared and implemented through the renamed import.
#[my_rimms::api]
pub fn double(x: &mut [u32]);

#[my_rimms::kernel(api = double, device = cpu)]
fn double_cpu(x: &mut [u32]) {
    x.iter_mut().for_each(|v| *v *= 2);
}

#[my_rimms::kernel(device = cpu)]
fn ones(#[out] x: &mut [u32]) {
    x.fill(1);
}

/// Runs both kernels and a parallel loop; returns the sum.
pub fn run() -> my_rimms::Result<u32> {
    let rt = Runtime::new()?;
    let mut x = HeteData::<u32>::alloc(&rt, 100)?;
    ones(&rt, &mut x)?;
    double(&rt, Device::Cpu, &mut x)?;
    my_rimms::parallel_for!(for i in 0..100 {
        x[i] += 1;
    })?;
    Ok(x.host()?.iter().sum())
}

#[cfg(test)]
mod tests {
    #[test]
    fn macros_work_under_a_renamed_import() {
        assert_eq!(super::run().expect("runs"), 300);
    }
}
