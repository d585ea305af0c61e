//! The built-in APIs as typed methods of the handle (`fft`, `zip`, …): each builds its call's
//! description and forwards it to `kernel::builtins::call`, which checks its shapes and calls
//! the API's declaration (`apis`), which finds the implementation for the device and runs the
//! call. Each built-in's checks and call live in its home, `kernel/builtins/<name>.rs`. The
//! row-wise ones go through `call_rows`, which on a simulated device behind a timed link may
//! run the call in parts, so that its copies overlap its work (`kernel::ahead`).
//!
//! Each method is inlined into its caller (`#[inline(always)]`): it is a shape check and a
//! forward, and its own frame was 28 of the 562 instructions of a 1-element `zip`
//! (`benches/per_call_instructions.rs`).

use super::Runtime;
use crate::data::{Input, Output};
use crate::hal::{FftDirection, Result, Target, ZipOp};
use crate::kernel::builtins::{
    call, call_rows, conj::Conj, element_wise, fft::Fft, fft_in_place::FftInPlace,
    fftshift::Fftshift, gemm::Gemm, magnitude::Magnitude, power::Power, scale::Scale,
    transpose::Transpose, window::Window, zip::Zip, zip_rows::ZipRows,
};
use num_complex::Complex32 as C32;

impl Runtime {
    /// FFT of every row of `points` elements of `input` into `output` (inverse scaled by 1/N).
    #[inline(always)]
    pub fn fft(
        &self,
        device: impl Into<Target>,
        dir: FftDirection,
        points: usize,
        input: &impl Input<C32>,
        output: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, output) = (input.input(), output.output());
        call_rows(
            self,
            device.into(),
            Fft {
                dir,
                points,
                input,
                output,
            },
        )
    }

    /// FFT of every row of `points` elements of `data`, in place.
    #[inline(always)]
    pub fn fft_in_place(
        &self,
        device: impl Into<Target>,
        dir: FftDirection,
        points: usize,
        data: &mut impl Output<C32>,
    ) -> Result<()> {
        let data = data.output();
        call(self, device.into(), FftInPlace { dir, points, data })
    }

    /// `out = a op b`, element-wise.
    #[inline(always)]
    pub fn zip(
        &self,
        device: impl Into<Target>,
        op: ZipOp,
        a: &impl Input<C32>,
        b: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, b, out) = (a.input(), b.input(), out.output());
        call_rows(self, device.into(), Zip { op, a, b, out })
    }

    /// `out = conj(input)`.
    #[inline(always)]
    pub fn conj(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        self.element_wise::<Conj>(device.into(), input, out)
    }

    /// `out = |input|`.
    #[inline(always)]
    pub fn magnitude(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        self.element_wise::<Magnitude>(device.into(), input, out)
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
    #[inline(always)]
    pub fn power(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        out: &mut impl Output<f32>,
    ) -> Result<()> {
        self.element_wise::<Power>(device.into(), input, out)
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
    #[inline(always)]
    pub fn window(
        &self,
        device: impl Into<Target>,
        input: &impl Input<C32>,
        window: &impl Input<f32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, window, out) = (input.input(), window.input(), out.output());
        call_rows(self, device.into(), Window { input, window, out })
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
    #[inline(always)]
    pub fn zip_rows(
        &self,
        device: impl Into<Target>,
        op: ZipOp,
        a: &impl Input<C32>,
        row: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (a, row, out) = (a.input(), row.input(), out.output());
        call_rows(self, device.into(), ZipRows { op, a, row, out })
    }

    /// Swaps the halves of every row of `row_len` elements (numpy's `fftshift` per row).
    #[inline(always)]
    pub fn fftshift(
        &self,
        device: impl Into<Target>,
        row_len: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, out) = (input.input(), out.output());
        call_rows(
            self,
            device.into(),
            Fftshift {
                row_len,
                input,
                out,
            },
        )
    }

    /// `out` (cols × rows) = transpose of `input` (rows × cols), both row-major.
    #[inline(always)]
    pub fn transpose(
        &self,
        device: impl Into<Target>,
        rows: usize,
        cols: usize,
        input: &impl Input<C32>,
        out: &mut impl Output<C32>,
    ) -> Result<()> {
        let (input, out) = (input.input(), out.output());
        call(
            self,
            device.into(),
            Transpose {
                rows,
                cols,
                input,
                out,
            },
        )
    }

    /// `data *= factor`, in place.
    #[inline(always)]
    pub fn scale(
        &self,
        device: impl Into<Target>,
        factor: C32,
        data: &mut impl Output<C32>,
    ) -> Result<()> {
        let data = data.output();
        call(self, device.into(), Scale { factor, data })
    }

    /// `c` (m × n) = `a` (m × k) · `b` (k × n), complex, row-major.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
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
        let (a, b, c) = (a.input(), b.input(), c.output());
        call(self, device.into(), Gemm { m, k, n, a, b, c })
    }

    /// What `conj`, `magnitude` and `power` share: the element-wise built-in `K` of `input`
    /// into `out`.
    fn element_wise<K: element_wise::ElementWise>(
        &self,
        device: Target,
        input: &impl Input<C32>,
        out: &mut impl Output<K::Out>,
    ) -> Result<()> {
        let call_of = element_wise::Call::<K>::new(input.input(), out.output());
        call_rows(self, device, call_of)
    }
}
