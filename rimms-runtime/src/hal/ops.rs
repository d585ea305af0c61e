//! Plain parameters of the built-in APIs: what a call asks for, independent of the device.

/// Element-wise operation of the `zip` API on complex f32 data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZipOp {
    /// `out = a + b`
    Add,
    /// `out = a - b`
    Sub,
    /// `out = a * b`
    Mul,
    /// `out = a / b`
    Div,
    /// `out = a * conj(b)`: the correlation step of matched filters. Not every device has
    /// it (the FPGA's ZIP core does not; [`Runtime::capabilities`](crate::Runtime::capabilities)
    /// says which do): there, conjugate `b` once with `Runtime::conj` and ZIP with [`ZipOp::Mul`].
    MulConj,
}

impl ZipOp {
    /// Every operation.
    pub const ALL: [ZipOp; 5] = [
        ZipOp::Add,
        ZipOp::Sub,
        ZipOp::Mul,
        ZipOp::Div,
        ZipOp::MulConj,
    ];
}

/// Direction of the `fft` API. The inverse is scaled by 1/N so that a forward transform
/// followed by an inverse one returns the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftDirection {
    /// `X[k] = Σ x[j] e^{-2πi jk/N}`
    Forward,
    /// `x[j] = (1/N) Σ X[k] e^{+2πi jk/N}`
    Inverse,
}
