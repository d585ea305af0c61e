//! Kernel arguments that live in device memory.
//!
//! A GPU's kernels cannot take `&[T]`: the bytes are not in the CPU's address space, and a
//! reference to them would be undefined behaviour the moment anything read through it. An
//! implementation for such a device takes [`DevSlice`] where the API declares `&[T]` and
//! [`DevSliceMut`] where it declares `&mut [T]`: the device address and length of the
//! argument, valid for the call, which the implementation hands to its driver (a CUDA kernel
//! launch, a cuFFT plan). The runtime has made the bytes current there before the call and
//! records the writes after it, exactly as for host implementations.

use super::dispatch::ArgPtr;
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

/// Where a device kernel finds one argument; what generated code turns into a [`DevSlice`]
/// or [`DevSliceMut`].
#[derive(Clone, Copy)]
pub struct DevArg(pub(crate) ArgPtr);

impl DevArg {
    /// The argument as a read-only device slice.
    ///
    /// # Safety
    /// `T` must be the element type the argument was made from.
    pub unsafe fn dev_slice<'k, T>(self) -> DevSlice<'k, T> {
        DevSlice {
            addr: self.0.ptr as usize,
            len: self.0.len / std::mem::size_of::<T>(),
            _elem: PhantomData,
        }
    }

    /// The argument as a written device slice.
    ///
    /// # Safety
    /// As for [`Self::dev_slice`], and the argument must have been made with
    /// [`crate::KernelArg::read_write`] or [`crate::KernelArg::write`].
    pub unsafe fn dev_slice_mut<'k, T>(self) -> DevSliceMut<'k, T> {
        DevSliceMut {
            addr: self.0.ptr as usize,
            len: self.0.len / std::mem::size_of::<T>(),
            _elem: PhantomData,
        }
    }
}

/// A call's arguments as the device it runs on addresses them.
pub enum PlacedArgs<const N: usize> {
    /// In host-addressable memory: the implementation takes slices.
    Host([super::HostArg; N]),
    /// In device memory: the implementation takes device slices.
    Device([DevArg; N]),
}
