//! The CPU: host memory, kernels with rustfft and rayon.

/// The host kernels, which moved to [`crate::backend::host_kernels`] (the sim runs them too);
/// kept under this name for code that imports them from here.
pub use super::host_kernels as kernels;

use super::{Backend, BackendError, SpaceSpec};
use crate::hal::{ArgForm, Device, DeviceGrain, Forms};
use std::any::Any;

pub(crate) struct CpuBackend {
    /// Its FFT kernels' plans, reached through its handle.
    plans: kernels::FftPlans,
}

impl CpuBackend {
    pub(crate) fn new() -> CpuBackend {
        CpuBackend {
            plans: kernels::FftPlans::new(),
        }
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn own_space(&self) -> Option<SpaceSpec> {
        None
    }

    fn arg_forms(&self) -> Forms {
        Forms::Only(ArgForm::Host)
    }

    /// Its L2 line as Linux reports it (`cache/index2/coherency_line_size` of CPU 0), else
    /// 64 bytes; no DMA engine or warp.
    fn grain(&self) -> DeviceGrain {
        DeviceGrain {
            l2_line: l2_line().unwrap_or(64),
            ..DeviceGrain::CACHE_LINE_64
        }
    }

    /// Its FFT plans, which its FFT kernels reach through their context.
    fn handle(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&self.plans)
    }

    fn completion(&self) -> Result<(), BackendError> {
        // Host kernels validate their shapes before they run and cannot fail after.
        Ok(())
    }

    /// Never: see [`CpuBackend::completion`].
    fn reports_completion(&self) -> bool {
        false
    }
}

/// The host implementations of the built-in APIs, registered for the CPU and for sim devices
/// (which run the CPU's kernels on their own memory); the FFTs are the CPU's alone, since a
/// sim's may have a limit (`backend::sim` registers its own, with its check).
mod implementations {
    use crate::apis;
    use crate::backend::host_kernels::{self as kernels, shape};
    use crate::backend::shape_fits;
    use crate::hal::{BackendError, FftDirection, KernelCtx, Result, ZipOp};
    use num_complex::Complex32 as C32;

    /// The CPU backend's FFT plans, which it hands its kernels as its handle.
    fn plans<'c>(ctx: &'c KernelCtx, api: &'static str) -> Result<&'c kernels::FftPlans> {
        ctx.device_handle::<kernels::FftPlans>().ok_or_else(|| {
            ctx.error(
                api,
                BackendError::Invalid("the device has no FFT plans".to_string()),
            )
        })
    }

    #[rimms_macros::kernel(api = apis::fft, device = cpu)]
    fn fft(
        ctx: &KernelCtx,
        dir: FftDirection,
        points: usize,
        input: &[C32],
        #[out] output: &mut [C32],
    ) -> Result<()> {
        let lens = [input.len(), output.len()];
        shape_fits(ctx, "fft", shape::same_len(&["input", "output"], lens))?;
        shape_fits(ctx, "fft", shape::whole_rows(points, input.len()))?;
        kernels::fft_rows(plans(ctx, "fft")?, dir, points, input, output);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::fft_in_place, device = cpu)]
    fn fft_in_place(
        ctx: &KernelCtx,
        dir: FftDirection,
        points: usize,
        data: &mut [C32],
    ) -> Result<()> {
        shape_fits(ctx, "fft_in_place", shape::whole_rows(points, data.len()))?;
        kernels::fft_rows_in_place(plans(ctx, "fft_in_place")?, dir, points, data);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::zip, device = [cpu, sim])]
    fn zip(ctx: &KernelCtx, op: ZipOp, a: &[C32], b: &[C32], #[out] out: &mut [C32]) -> Result<()> {
        let lens = [a.len(), b.len(), out.len()];
        shape_fits(ctx, "zip", shape::same_len(&["a", "b", "out"], lens))?;
        kernels::zip(op, a, b, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::conj, device = [cpu, sim])]
    fn conj(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [C32]) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "conj", shape::same_len(&["input", "out"], lens))?;
        kernels::conj(input, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::magnitude, device = [cpu, sim])]
    fn magnitude(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [f32]) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "magnitude", shape::same_len(&["input", "out"], lens))?;
        kernels::magnitude(input, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::power, device = [cpu, sim])]
    fn power(ctx: &KernelCtx, input: &[C32], #[out] out: &mut [f32]) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "power", shape::same_len(&["input", "out"], lens))?;
        kernels::power(input, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::window, device = [cpu, sim])]
    fn window(
        ctx: &KernelCtx,
        input: &[C32],
        window: &[f32],
        #[out] out: &mut [C32],
    ) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "window", shape::same_len(&["input", "out"], lens))?;
        kernels::window_rows(input, window, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::zip_rows, device = [cpu, sim])]
    fn zip_rows(
        ctx: &KernelCtx,
        op: ZipOp,
        a: &[C32],
        row: &[C32],
        #[out] out: &mut [C32],
    ) -> Result<()> {
        let lens = [a.len(), out.len()];
        shape_fits(ctx, "zip_rows", shape::same_len(&["a", "out"], lens))?;
        kernels::zip_rows(op, a, row, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::fftshift, device = [cpu, sim])]
    fn fftshift(
        ctx: &KernelCtx,
        row_len: usize,
        input: &[C32],
        #[out] out: &mut [C32],
    ) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "fftshift", shape::same_len(&["input", "out"], lens))?;
        shape_fits(ctx, "fftshift", shape::whole_rows(row_len, input.len()))?;
        kernels::fftshift_rows(row_len, input, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::transpose, device = [cpu, sim])]
    fn transpose(
        ctx: &KernelCtx,
        rows: usize,
        cols: usize,
        input: &[C32],
        #[out] out: &mut [C32],
    ) -> Result<()> {
        let lens = [input.len(), out.len()];
        shape_fits(ctx, "transpose", shape::transpose(rows, cols, lens))?;
        kernels::transpose(rows, cols, input, out);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::scale, device = [cpu, sim])]
    fn scale(_ctx: &KernelCtx, factor: C32, data: &mut [C32]) -> Result<()> {
        kernels::scale(factor, data);
        Ok(())
    }

    #[rimms_macros::kernel(api = apis::gemm, device = [cpu, sim])]
    fn gemm(
        ctx: &KernelCtx,
        m: usize,
        k: usize,
        n: usize,
        a: &[C32],
        b: &[C32],
        #[out] c: &mut [C32],
    ) -> Result<()> {
        let lens = [a.len(), b.len(), c.len()];
        shape_fits(ctx, "gemm", shape::gemm(m, k, n, lens))?;
        kernels::gemm(m, k, n, a, b, c);
        Ok(())
    }
}

/// The L2 line size of CPU 0 from sysfs, where Linux reports a plausible one: read once per
/// process, since every runtime's build asks (for the fragment rule it reports). Not under
/// Miri, whose isolation has no files: the runtime must build there too.
fn l2_line() -> Option<usize> {
    static LINE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    if cfg!(miri) {
        return None;
    }
    *LINE.get_or_init(|| {
        let path = "/sys/devices/system/cpu/cpu0/cache/index2/coherency_line_size";
        let text = std::fs::read_to_string(path).ok()?;
        text.trim()
            .parse::<usize>()
            .ok()
            .filter(|n| n.is_power_of_two() && (16..=4096).contains(n))
    })
}
