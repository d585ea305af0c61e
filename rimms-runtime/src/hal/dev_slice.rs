//! Kernel arguments that live in device memory, as a device implementation sees them.
//!
//! A GPU's kernels cannot take `&[T]`: the bytes are not in the CPU's address space, and a
//! reference to them would be undefined behaviour the moment anything read through it. An
//! implementation for such a device takes [`DevSlice`] where the API declares `&[T]` and
//! [`DevSliceMut`] where it declares `&mut [T]`: the device address and length of the
//! argument, valid for the call, which the implementation hands to its driver (a CUDA kernel
//! launch, a cuFFT plan). Only the runtime makes them (`kernel::DevArg`), so a kernel reaches
//! no other memory through them.

use std::fmt;
use std::marker::PhantomData;

/// A read-only argument in device memory: `len` elements of `T` at device address `addr`.
#[derive(Clone, Copy)]
pub struct DevSlice<'k, T> {
    addr: usize,
    len: usize,
    _elem: PhantomData<&'k [T]>,
}

/// A written argument in device memory; no other argument of the call overlaps it.
pub struct DevSliceMut<'k, T> {
    addr: usize,
    len: usize,
    _elem: PhantomData<&'k mut [T]>,
}

macro_rules! accessors {
    ($ty:ident) => {
        impl<T> $ty<'_, T> {
            /// Device address of the first element.
            pub fn addr(&self) -> usize {
                self.addr
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether it has no elements (never, for a managed argument).
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Length in bytes.
            pub fn bytes(&self) -> usize {
                self.len * std::mem::size_of::<T>()
            }

            /// Device address and length in bytes, as a driver call takes them.
            pub fn extent(&self) -> (usize, usize) {
                (self.addr, self.bytes())
            }
        }

        impl<T> fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("addr", &format_args!("{:#x}", self.addr))
                    .field("len", &self.len)
                    .finish()
            }
        }
    };
}

impl<'k, T> DevSlice<'k, T> {
    /// The handle to `len` elements at device address `addr`; only dispatch makes them, from
    /// an argument it has made current in the device's memory.
    pub(crate) fn new(addr: usize, len: usize) -> Self {
        DevSlice {
            addr,
            len,
            _elem: PhantomData,
        }
    }
}

impl<'k, T> DevSliceMut<'k, T> {
    /// As [`DevSlice::new`], for an argument the call writes.
    pub(crate) fn new(addr: usize, len: usize) -> Self {
        DevSliceMut {
            addr,
            len,
            _elem: PhantomData,
        }
    }
}

accessors!(DevSlice);
accessors!(DevSliceMut);

impl<'k, T> DevSliceMut<'k, T> {
    /// The same argument, read-only (for a driver call that reads what the kernel wrote).
    pub fn as_dev_slice(&self) -> DevSlice<'_, T> {
        DevSlice {
            addr: self.addr,
            len: self.len,
            _elem: PhantomData,
        }
    }
}
