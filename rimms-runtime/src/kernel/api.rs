//! API identities: a name for stats and errors and an index into the per-API counters.

/// A typed operation that devices implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Api {
    name: &'static str,
    index: usize,
}

impl Api {
    /// Batched FFT over rows; inverse scaled by 1/N.
    pub const FFT: Api = Api::builtin("fft", 0);
    /// Element-wise complex add, sub, mul, div, mul-by-conjugate.
    pub const ZIP: Api = Api::builtin("zip", 1);
    /// Complex conjugate.
    pub const CONJ: Api = Api::builtin("conj", 2);
    /// Complex magnitude into f32.
    pub const MAGNITUDE: Api = Api::builtin("magnitude", 3);
    /// Swap of the halves of every row.
    pub const FFTSHIFT: Api = Api::builtin("fftshift", 4);
    /// Matrix transpose.
    pub const TRANSPOSE: Api = Api::builtin("transpose", 5);
    /// Multiplication by a complex factor, in place.
    pub const SCALE: Api = Api::builtin("scale", 6);
    /// Complex matrix product.
    pub const GEMM: Api = Api::builtin("gemm", 7);

    /// Every built-in API, in index order.
    pub const BUILTIN: [Api; 8] = [
        Api::FFT,
        Api::ZIP,
        Api::CONJ,
        Api::MAGNITUDE,
        Api::FFTSHIFT,
        Api::TRANSPOSE,
        Api::SCALE,
        Api::GEMM,
    ];

    const fn builtin(name: &'static str, index: usize) -> Api {
        Api { name, index }
    }

    /// A program's own API, for [`crate::Runtime::launch_host`]. Its calls are not yet
    /// counted per API (registration with counters comes with `#[rimms::api]`); its
    /// transfers are, per link.
    pub const fn custom(name: &'static str) -> Api {
        Api {
            name,
            index: usize::MAX,
        }
    }

    /// The API's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }
}
