//! The built-in APIs as methods of [`Runtime`]: each checks its shapes, names its arguments
//! with their access modes, and hands the device's implementation to the dispatch core.

use super::dispatch::{ArgPtr, KernelArg};
use super::{Api, FftDirection, ZipOp};
use crate::backend::cpu::kernels;
use crate::backend::Executor;
use crate::data::{Input, Output};
use crate::error::{Error, Result};
use crate::runtime::{Device, Runtime};
use num_complex::Complex32 as C32;

/// Refuses a call whose shapes do not fit, naming the API and the device.
fn shape(api: Api, device: Device, ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Shape {
            api: api.name(),
            device: device.to_string(),
            what: what(),
        })
    }
}

fn same_len(api: Api, device: Device, names: [&str; 2], lens: [usize; 2]) -> Result<()> {
    shape(api, device, lens[0] == lens[1], || {
        format!(
            "`{}` has {} elements but `{}` has {}",
            names[0], lens[0], names[1], lens[1]
        )
    })
}

impl Runtime {
    fn check_fft(&self, device: Device, points: usize, len: usize) -> Result<()> {
        shape(
            Api::FFT,
            device,
            points.is_power_of_two() && points >= 2,
            || format!("the transform size must be a power of two of at least 2, got {points}"),
        )?;
        shape(Api::FFT, device, len % points == 0, || {
            format!("{len} elements are not a whole number of {points}-point rows")
        })?;
        let entry = self.shared().device(device)?;
        entry
            .backend
            .check_fft(points)
            .map_err(|why| Error::Unsupported {
                api: Api::FFT.name(),
                device: device.to_string(),
                why,
            })
    }

    /// FFT of every row of `points` elements of `input` into `output` (inverse scaled by 1/N).
    pub fn fft(
        &self,
        device: Device,
        dir: FftDirection,
        points: usize,
        input: &impl Input<C32>,
        output: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut output) = (input.input(), output.output());
        same_len(
            Api::FFT,
            device,
            ["input", "output"],
            [input.len(), output.len()],
        )?;
        self.check_fft(device, points, input.len())?;
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("output", &mut output),
        ];
        self.launch(device, Api::FFT, args, |dev, [x, y]: [ArgPtr; 2]| {
            match dev.executor {
                // SAFETY: `input` is read, `output` written and borrowed mutably by the caller,
                // so they cannot overlap; both were acquired in the device's host-addressable
                // space.
                Executor::Host => unsafe {
                    kernels::fft_rows(&self.shared().fft, dir, points, x.slice(), y.slice_mut())
                },
            }
            Ok(())
        })
    }

    /// FFT of every row of `points` elements of `data`, in place.
    pub fn fft_in_place(
        &self,
        device: Device,
        dir: FftDirection,
        points: usize,
        data: &mut impl Output<C32>,
    ) -> Result<()> {
        let mut data = data.output();
        self.check_fft(device, points, data.len())?;
        let args = [KernelArg::read_write("data", &mut data)];
        self.launch(device, Api::FFT, args, |dev, [x]: [ArgPtr; 1]| {
            match dev.executor {
                // SAFETY: the only argument, acquired read-write in a host-addressable space.
                Executor::Host => unsafe {
                    kernels::fft_rows_in_place(&self.shared().fft, dir, points, x.slice_mut())
                },
            }
            Ok(())
        })
    }

    /// `out = a op b`, element-wise.
    pub fn zip(
        &self,
        device: Device,
        op: ZipOp,
        a: &impl Input<C32>,
        b: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, b, mut out) = (a.input(), b.input(), out.output());
        same_len(Api::ZIP, device, ["a", "b"], [a.len(), b.len()])?;
        same_len(Api::ZIP, device, ["a", "out"], [a.len(), out.len()])?;
        let args = [
            KernelArg::read("a", &a),
            KernelArg::read("b", &b),
            KernelArg::write("out", &mut out),
        ];
        self.launch(device, Api::ZIP, args, |dev, [a, b, o]: [ArgPtr; 3]| {
            match dev.executor {
                // SAFETY: `out` is borrowed mutably by the caller, so it overlaps neither input.
                Executor::Host => unsafe { kernels::zip(op, a.slice(), b.slice(), o.slice_mut()) },
            }
            Ok(())
        })
    }

    /// `out = conj(input)`.
    pub fn conj(
        &self,
        device: Device,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        same_len(
            Api::CONJ,
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        self.launch(device, Api::CONJ, args, |dev, [x, o]: [ArgPtr; 2]| {
            match dev.executor {
                // SAFETY: as in `zip`.
                Executor::Host => unsafe { kernels::conj(x.slice(), o.slice_mut()) },
            }
            Ok(())
        })
    }

    /// `out = |input|`.
    pub fn magnitude(
        &self,
        device: Device,
        input: &impl Input<C32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        same_len(
            Api::MAGNITUDE,
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        self.launch(device, Api::MAGNITUDE, args, |dev, [x, o]: [ArgPtr; 2]| {
            match dev.executor {
                // SAFETY: as in `zip`.
                Executor::Host => unsafe { kernels::magnitude(x.slice(), o.slice_mut()) },
            }
            Ok(())
        })
    }

    /// Swaps the halves of every row of `row_len` elements (numpy's `fftshift` per row).
    pub fn fftshift(
        &self,
        device: Device,
        row_len: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        same_len(
            Api::FFTSHIFT,
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        shape(
            Api::FFTSHIFT,
            device,
            row_len > 0 && input.len() % row_len == 0,
            || {
                format!(
                    "{} elements are not a whole number of rows of {row_len}",
                    input.len()
                )
            },
        )?;
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        self.launch(device, Api::FFTSHIFT, args, |dev, [x, o]: [ArgPtr; 2]| {
            match dev.executor {
                // SAFETY: as in `zip`.
                Executor::Host => unsafe {
                    kernels::fftshift_rows(row_len, x.slice(), o.slice_mut())
                },
            }
            Ok(())
        })
    }

    /// `out` (cols × rows) = transpose of `input` (rows × cols), both row-major.
    pub fn transpose(
        &self,
        device: Device,
        rows: usize,
        cols: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        same_len(
            Api::TRANSPOSE,
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        shape(
            Api::TRANSPOSE,
            device,
            rows.checked_mul(cols) == Some(input.len()),
            || format!("{rows} × {cols} does not match {} elements", input.len()),
        )?;
        let args = [
            KernelArg::read("input", &input),
            KernelArg::write("out", &mut out),
        ];
        self.launch(device, Api::TRANSPOSE, args, |dev, [x, o]: [ArgPtr; 2]| {
            match dev.executor {
                // SAFETY: as in `zip`.
                Executor::Host => unsafe {
                    kernels::transpose(rows, cols, x.slice(), o.slice_mut())
                },
            }
            Ok(())
        })
    }

    /// `data *= factor`, in place.
    pub fn scale(&self, device: Device, factor: C32, data: &mut impl Output<C32>) -> Result<()> {
        let mut data = data.output();
        let args = [KernelArg::read_write("data", &mut data)];
        self.launch(device, Api::SCALE, args, |dev, [x]: [ArgPtr; 1]| {
            match dev.executor {
                // SAFETY: the only argument, acquired read-write.
                Executor::Host => unsafe { kernels::scale(factor, x.slice_mut()) },
            }
            Ok(())
        })
    }

    /// `c` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        device: Device,
        m: usize,
        k: usize,
        n: usize,
        a: &impl Input<C32>,
        b: &impl Input<C32>,
        c: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, b, mut c) = (a.input(), b.input(), c.output());
        let fits = |x: usize, y: usize, len: usize| x.checked_mul(y) == Some(len);
        shape(Api::GEMM, device, fits(m, k, a.len()), || {
            format!("`a` has {} elements, not {m} × {k}", a.len())
        })?;
        shape(Api::GEMM, device, fits(k, n, b.len()), || {
            format!("`b` has {} elements, not {k} × {n}", b.len())
        })?;
        shape(Api::GEMM, device, fits(m, n, c.len()), || {
            format!("`c` has {} elements, not {m} × {n}", c.len())
        })?;
        let args = [
            KernelArg::read("a", &a),
            KernelArg::read("b", &b),
            KernelArg::write("c", &mut c),
        ];
        self.launch(device, Api::GEMM, args, |dev, [a, b, o]: [ArgPtr; 3]| {
            match dev.executor {
                // SAFETY: as in `zip`.
                Executor::Host => unsafe {
                    kernels::gemm(m, k, n, a.slice(), b.slice(), o.slice_mut())
                },
            }
            Ok(())
        })
    }
}
