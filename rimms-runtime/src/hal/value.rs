//! What a kernel may take by value.
//!
//! A kernel's buffers are tracked by the runtime; everything else it takes is passed as it is.
//! Which types may be passed is a question for the type system, not for the macro's reading of
//! tokens: a raw pointer behind an alias (`type P = *const u32`) or a wrapper (`Option<*mut
//! u32>`) would otherwise carry an address past the runtime's tracking. [`KernelValue`] is
//! sealed and implemented for plain values, so such a parameter is a compile error that names
//! the type.

use super::ops::{FftDirection, ZipOp};
use num_complex::Complex;

mod sealed {
    pub trait Sealed {}
}

/// A type a kernel may take by value: numbers, `bool`, `char`, complex numbers, the built-in
/// APIs' enums, arrays, tuples and `Option`s of these, and shared references to anything that
/// is `Sync` (a configuration, a barrier). Sealed: raw pointers, and anything that holds one,
/// are not kernel values.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a buffer and not a plain value",
    note = "a kernel takes buffers (`&[T]`, `&mut [T]`, `DevSlice<T>`, `DevSliceMut<T>`), an optional `ctx: &KernelCtx` first, and plain values (numbers, `bool`, `char`, complex numbers, `FftDirection`, `ZipOp`, arrays, tuples and `Option`s of them, `&T` for a `Sync` T); a raw pointer would escape the runtime's tracking"
)]
pub trait KernelValue: sealed::Sealed {}

macro_rules! plain {
    ($($t:ty),* $(,)?) => {
        $(
            impl sealed::Sealed for $t {}
            impl KernelValue for $t {}
        )*
    };
}

plain!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    char,
    (),
    FftDirection,
    ZipOp,
);

impl<T: KernelValue> sealed::Sealed for Complex<T> {}
impl<T: KernelValue> KernelValue for Complex<T> {}
impl<T: KernelValue, const N: usize> sealed::Sealed for [T; N] {}
impl<T: KernelValue, const N: usize> KernelValue for [T; N] {}
impl<T: KernelValue> sealed::Sealed for Option<T> {}
impl<T: KernelValue> KernelValue for Option<T> {}
impl<T: ?Sized + Sync> sealed::Sealed for &T {}
impl<T: ?Sized + Sync> KernelValue for &T {}
impl<A: KernelValue, B: KernelValue> sealed::Sealed for (A, B) {}
impl<A: KernelValue, B: KernelValue> KernelValue for (A, B) {}
impl<A: KernelValue, B: KernelValue, C: KernelValue> sealed::Sealed for (A, B, C) {}
impl<A: KernelValue, B: KernelValue, C: KernelValue> KernelValue for (A, B, C) {}

/// Compiles only for a [`KernelValue`]: what `#[rimms::api]` emits for each by-value
/// parameter.
#[inline(always)]
pub fn assert_kernel_value<T: KernelValue + ?Sized>() {}
