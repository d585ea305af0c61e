//! The built-in APIs as typed methods of the handle (`fft`, `zip`, …): each checks its
//! shapes (`kernel::builtin_checks`) and calls the API's declaration (`apis`), which finds the
//! implementation for the device and runs the call.

use super::Runtime;
use crate::apis;
use crate::data::{Input, Output};
use crate::hal::{Error, FftDirection, Result, Target, ZipOp};
use crate::kernel::builtin_checks::{check_fft_shape, equivalent, same_len, shape, whole_rows};
use num_complex::Complex32 as C32;

impl Runtime {
    /// FFT of every row of `points` elements of `input` into `output` (inverse scaled by 1/N).
    pub fn fft(
        &self,
        device: impl Into<Target>,
        dir: FftDirection,
        points: usize,
        input: &impl Input<C32>,
        output: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut output) = (input.input(), output.output());
        let target = device.into();
        same_len(
            "fft",
            target,
            ["input", "output"],
            [input.len(), output.len()],
        )?;
        check_fft_shape(target, points, input.len())?;
        apis::fft(self, target, dir, points, &input, &mut output)
    }

    /// FFT of every row of `points` elements of `data`, in place.
    pub fn fft_in_place(
        &self,
        device: impl Into<Target>,
        dir: FftDirection,
        points: usize,
        data: &mut impl Output<C32>,
    ) -> Result<()> {
        let mut data = data.output();
        let target = device.into();
        check_fft_shape(target, points, data.len())?;
        apis::fft_in_place(self, target, dir, points, &mut data)
    }

    /// `out = a op b`, element-wise.
    pub fn zip(
        &self,
        device: impl Into<Target>,
        op: ZipOp,
        a: &impl Input<C32>,
        b: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, b, mut out) = (a.input(), b.input(), out.output());
        let target = device.into();
        same_len("zip", target, ["a", "b"], [a.len(), b.len()])?;
        same_len("zip", target, ["a", "out"], [a.len(), out.len()])?;
        // The call asks a named device's check before anything moves (the scheduler asks each
        // candidate itself); a refusal gains what would do instead.
        apis::zip(self, target, op, &a, &b, &mut out).map_err(|e| match e {
            Error::Unsupported {
                api: "zip",
                device,
                why,
            } => Error::Unsupported {
                api: "zip",
                device,
                why: format!("{why}{}", equivalent(op)),
            },
            e => e,
        })
    }

    /// `out = conj(input)`.
    pub fn conj(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        let device: Target = device.into();
        same_len("conj", device, ["input", "out"], [input.len(), out.len()])?;
        apis::conj(self, device, &input, &mut out)
    }

    /// `out = |input|`.
    pub fn magnitude(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        let device: Target = device.into();
        same_len(
            "magnitude",
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        apis::magnitude(self, device, &input, &mut out)
    }

    /// `out = |input|²`, element-wise: the power of each sample ([`Runtime::magnitude`]
    /// gives `|input|`).
    ///
    /// ```
    /// # fn main() -> rimms_runtime::Result<()> {
    /// use rimms_runtime::{Complex32, Device, HeteData, Runtime, SimConfig};
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let x = HeteData::from_slice(&rt, &[Complex32::new(3.0, 4.0), Complex32::new(0.0, -2.0)])?;
    /// let mut p = HeteData::<f32>::alloc(&rt, 2)?;
    /// rt.power(Device::Sim(0), &x, &mut p)?;
    /// assert_eq!(p.host()?, &[25.0, 4.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn power(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        let device: Target = device.into();
        same_len("power", device, ["input", "out"], [input.len(), out.len()])?;
        apis::power(self, device, &input, &mut out)
    }

    /// Multiplies every row of `input` by a real `window` (a Hann taper before a Doppler FFT,
    /// or any per-element real scale): `out[r·L + j] = input[r·L + j] · window[j]` with
    /// `L = window.len()`. A window as long as `input` scales each element by its own factor.
    ///
    /// ```
    /// # fn main() -> rimms_runtime::Result<()> {
    /// use rimms_runtime::{Complex32, Device, HeteData, Runtime, SimConfig};
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// // Two rows of three samples, each row tapered by the same window.
    /// let x = HeteData::from_slice(&rt, &[Complex32::new(2.0, 2.0); 6])?;
    /// let w = HeteData::from_slice(&rt, &[0.0f32, 1.0, 0.5])?;
    /// let mut y = HeteData::<Complex32>::alloc(&rt, 6)?;
    /// rt.window(Device::Sim(0), &x, &w, &mut y)?;
    /// let y = y.host()?;
    /// assert_eq!(y[1], Complex32::new(2.0, 2.0));
    /// assert_eq!(y[5], Complex32::new(1.0, 1.0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn window(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        window: &impl Input<f32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, window, mut out) = (input.input(), window.input(), out.output());
        let device: Target = device.into();
        same_len("window", device, ["input", "out"], [input.len(), out.len()])?;
        whole_rows("window", device, "window", window.len(), input.len())?;
        apis::window(self, device, &input, &window, &mut out)
    }

    /// `out = a op row` with `row` broadcast over every row of `a`:
    /// `out[r·L + j] = a[r·L + j] op row[j]`, `L = row.len()`. One call applies a matched
    /// filter's spectrum (or any per-column factor) to every pulse of a matrix.
    ///
    /// ```
    /// # fn main() -> rimms_runtime::Result<()> {
    /// use rimms_runtime::{Complex32, Device, HeteData, Runtime, SimConfig, ZipOp};
    /// let rt = Runtime::builder().sim(SimConfig::default()).build()?;
    /// let a = HeteData::from_slice(&rt, &[Complex32::new(1.0, 0.0); 4])?; // 2 × 2
    /// let row = HeteData::from_slice(&rt, &[Complex32::new(0.0, 1.0), Complex32::new(2.0, 0.0)])?;
    /// let mut out = HeteData::<Complex32>::alloc(&rt, 4)?;
    /// rt.zip_rows(Device::Sim(0), ZipOp::MulConj, &a, &row, &mut out)?;
    /// let out = out.host()?;
    /// assert_eq!(out[0], Complex32::new(0.0, -1.0)); // 1 · conj(i)
    /// assert_eq!(out[3], Complex32::new(2.0, 0.0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn zip_rows(
        &self,
        device: impl Into<Target>,
        op: ZipOp,
        a: &impl Input<C32>,
        row: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, row, mut out) = (a.input(), row.input(), out.output());
        let device: Target = device.into();
        same_len("zip_rows", device, ["a", "out"], [a.len(), out.len()])?;
        whole_rows("zip_rows", device, "row", row.len(), a.len())?;
        apis::zip_rows(self, device, op, &a, &row, &mut out)
    }

    /// Swaps the halves of every row of `row_len` elements (numpy's `fftshift` per row).
    pub fn fftshift(
        &self,
        device: impl Into<Target>,
        row_len: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        let device: Target = device.into();
        same_len(
            "fftshift",
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        shape(
            "fftshift",
            device,
            row_len > 0 && input.len() % row_len == 0,
            || {
                format!(
                    "{} elements are not a whole number of rows of {row_len}",
                    input.len()
                )
            },
        )?;
        apis::fftshift(self, device, row_len, &input, &mut out)
    }

    /// `out` (cols × rows) = transpose of `input` (rows × cols), both row-major.
    pub fn transpose(
        &self,
        device: impl Into<Target>,
        rows: usize,
        cols: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, mut out) = (input.input(), out.output());
        let device: Target = device.into();
        same_len(
            "transpose",
            device,
            ["input", "out"],
            [input.len(), out.len()],
        )?;
        shape(
            "transpose",
            device,
            rows.checked_mul(cols) == Some(input.len()),
            || format!("{rows} × {cols} does not match {} elements", input.len()),
        )?;
        apis::transpose(self, device, rows, cols, &input, &mut out)
    }

    /// `data *= factor`, in place.
    pub fn scale(
        &self,
        device: impl Into<Target>,
        factor: C32,
        data: &mut impl Output<C32>,
    ) -> Result<()> {
        apis::scale(self, device, factor, &mut data.output())
    }

    /// `c` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        device: impl Into<Target>,
        m: usize,
        k: usize,
        n: usize,
        a: &impl Input<C32>,
        b: &impl Input<C32>,
        c: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, b, mut c) = (a.input(), b.input(), c.output());
        let device: Target = device.into();
        let fits = |x: usize, y: usize, len: usize| x.checked_mul(y) == Some(len);
        shape("gemm", device, fits(m, k, a.len()), || {
            format!("`a` has {} elements, not {m} × {k}", a.len())
        })?;
        shape("gemm", device, fits(k, n, b.len()), || {
            format!("`b` has {} elements, not {k} × {n}", b.len())
        })?;
        shape("gemm", device, fits(m, n, c.len()), || {
            format!("`c` has {} elements, not {m} × {n}", c.len())
        })?;
        apis::gemm(self, device, m, k, n, &a, &b, &mut c)
    }
}
