//! Kernel arguments that live in device memory.
//!
//! A GPU's kernels cannot take `&[T]`: the bytes are not in the CPU's address space, and a
//! reference to them would be undefined behaviour the moment anything read through it. An
//! implementation for such a device takes [`DevSlice`] where the API declares `&[T]` and
//! [`DevSliceMut`] where it declares `&mut [T]`: the device address and length of the
//! argument, valid for the call, which the implementation hands to its driver (a CUDA kernel
//! launch, a cuFFT plan). The runtime has made the bytes current there before the call and
//! records the writes after it, exactly as for host implementations.

use super::arg_names::by_position;
use super::dispatch::ArgPtr;
use super::HostArg;
use crate::hal::{DevSlice, DevSliceMut, Error, Result};
use std::marker::PhantomData;

/// Where a device kernel finds one argument, for the length of the call; what generated code
/// turns into a [`DevSlice`] or [`DevSliceMut`]. Not `Copy`: one argument becomes one slice.
pub struct DevArg<'k> {
    arg: ArgPtr,
    /// Its index in the call: an error names the argument by it (see `arg_names`).
    position: u8,
    _call: PhantomData<&'k ()>,
}

impl<'k> DevArg<'k> {
    /// A call's arguments in order.
    pub(crate) fn all<const N: usize>(ptrs: [ArgPtr; N]) -> [DevArg<'k>; N] {
        let mut next = 0u8;
        ptrs.map(|arg| {
            let position = next;
            // At most `MAX_ARGS` (32) arguments, so the count fits.
            next = next.wrapping_add(1);
            DevArg {
                arg,
                position,
                _call: PhantomData,
            }
        })
    }

    /// The argument's length in elements of `T`, checked to be a whole number of them at an
    /// address aligned for `T`.
    fn elements<T>(&self) -> Result<usize> {
        let size = std::mem::size_of::<T>();
        let why = if size == 0 || self.arg.len % size != 0 {
            "its length is not a whole number of elements of that type"
        } else if self.arg.ptr.addr() % std::mem::align_of::<T>() != 0 {
            "its device address is not aligned for that type"
        } else {
            return Ok(self.arg.len / size);
        };
        Err(Error::ArgumentType {
            arg: by_position(self.position),
            type_name: std::any::type_name::<T>(),
            why,
        })
    }

    /// The argument as a read-only device slice.
    pub fn into_dev_slice<T>(self) -> Result<DevSlice<'k, T>> {
        Ok(DevSlice::new(self.arg.ptr.addr(), self.elements::<T>()?))
    }

    /// The argument as a written device slice; an error for an argument the call only reads.
    pub fn into_dev_slice_mut<T>(self) -> Result<DevSliceMut<'k, T>> {
        if !self.arg.writes {
            return Err(Error::ArgumentType {
                arg: by_position(self.position),
                type_name: std::any::type_name::<T>(),
                why: "the call only reads it, so it cannot be taken as a written device slice",
            });
        }
        Ok(DevSliceMut::new(self.arg.ptr.addr(), self.elements::<T>()?))
    }
}

/// A call's registered implementation, as the signature its caller was compiled against, and
/// its arguments as the device it runs on addresses them: `H` is the API's signature taking
/// slices, `D` the one taking device slices.
pub enum FormArgs<'k, const N: usize, H: 'static, D: 'static> {
    /// In host-addressable memory: the implementation takes slices.
    Host(&'static H, [HostArg<'k>; N]),
    /// In device memory: the implementation takes device slices.
    Device(&'static D, [DevArg<'k>; N]),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device argument's errors name it by its index in the call.
    #[test]
    fn each_argument_is_named_by_its_index() {
        let ptr = |len, writes| ArgPtr {
            ptr: std::ptr::without_provenance_mut(0x1000),
            len,
            writes,
        };
        let [a, b, c] = DevArg::all([ptr(8, true), ptr(8, false), ptr(6, true)]);
        assert_eq!(a.into_dev_slice_mut::<u32>().map(|s| s.len()).ok(), Some(2));
        let named = |err: Error| match err {
            Error::ArgumentType { arg, .. } => arg,
            other => panic!("{other}"),
        };
        let err = b
            .into_dev_slice_mut::<u32>()
            .map(drop)
            .expect_err("read only");
        assert_eq!(named(err), "argument 1");
        let err = c.into_dev_slice::<u32>().map(drop).expect_err("6 bytes");
        assert_eq!(named(err), "argument 2");
    }
}
