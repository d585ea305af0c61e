//! Kernel arguments in host-addressable memory, as a host implementation sees them.
//!
//! Dispatch hands a host implementation each argument's bytes, borrowed for the call: shared
//! bytes for an argument the call reads, exclusive ones for an argument it writes. Turning them
//! into typed slices is a checked cast (`bytemuck`), so generated code and hand-written
//! `launch_host` bodies need no `unsafe`, and a wrong element type is an error, not a
//! reinterpretation past the end of the argument.

use super::dispatch::ArgPtr;
use crate::error::{Error, Result};
use bytemuck::{Pod, PodCastError};
use std::any::type_name;

/// One argument of a host kernel call, borrowed for the call.
pub struct HostArg<'k> {
    name: &'static str,
    bytes: ArgBytes<'k>,
}

enum ArgBytes<'k> {
    Read(&'k [u8]),
    Write(&'k mut [u8]),
}

impl<'k> HostArg<'k> {
    /// The argument's name, as its [`crate::KernelArg`] gave it.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the call may write the argument.
    pub fn is_written(&self) -> bool {
        matches!(self.bytes, ArgBytes::Write(_))
    }

    /// The argument as a slice of `T`.
    pub fn into_slice<T: Pod>(self) -> Result<&'k [T]> {
        let name = self.name;
        let bytes: &'k [u8] = match self.bytes {
            ArgBytes::Read(bytes) => bytes,
            ArgBytes::Write(bytes) => bytes,
        };
        if bytes.is_empty() {
            // Any empty slice will do; an empty one of bytes need not be aligned for `T`.
            return Ok(&[]);
        }
        bytemuck::try_cast_slice(bytes).map_err(|e| cast_error::<T>(name, e))
    }

    /// The argument as a mutable slice of `T`; an error for an argument the call only reads.
    pub fn into_slice_mut<T: Pod>(self) -> Result<&'k mut [T]> {
        match self.bytes {
            ArgBytes::Write([]) => Ok(&mut []),
            ArgBytes::Write(bytes) => {
                bytemuck::try_cast_slice_mut(bytes).map_err(|e| cast_error::<T>(self.name, e))
            }
            ArgBytes::Read(_) => Err(Error::ArgumentType {
                arg: self.name,
                type_name: type_name::<T>(),
                why: "the call only reads it; make it with `KernelArg::read_write` or `KernelArg::write` to write it",
            }),
        }
    }
}

impl std::fmt::Debug for HostArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mode, len) = match &self.bytes {
            ArgBytes::Read(b) => ("read", b.len()),
            ArgBytes::Write(b) => ("write", b.len()),
        };
        f.debug_struct("HostArg")
            .field("name", &self.name)
            .field("mode", &mode)
            .field("bytes", &len)
            .finish()
    }
}

fn cast_error<T>(arg: &'static str, e: PodCastError) -> Error {
    let why = match e {
        PodCastError::TargetAlignmentGreaterAndInputNotAligned
        | PodCastError::AlignmentMismatch => "its bytes are not aligned for that type",
        PodCastError::OutputSliceWouldHaveSlop | PodCastError::SizeMismatch => {
            "its length is not a whole number of elements of that type"
        }
    };
    Error::ArgumentType {
        arg,
        type_name: type_name::<T>(),
        why,
    }
}

/// The arguments of a call on a host-addressable device, as borrowed byte slices.
///
/// # Safety
/// Each `ptrs[i]` must be non-null and aligned, and address `len` bytes that were acquired for the call in a space the CPU
/// addresses, inside one live block, and stay so for `'k`; a written argument's bytes must be
/// reachable through no other argument of the call and by nobody else for `'k`, and a read
/// argument's bytes must not be written by anyone for `'k`. Dispatch upholds this: the buffers
/// are borrowed for the call (written ones through `&mut` views, which the borrow checker keeps
/// apart from every other view, and which cover whole fragments, so no other mutable view
/// shares their bytes), and `KernelArg` is not `Copy`, so one view cannot become two arguments.
pub(crate) unsafe fn host_args<'k, const N: usize>(ptrs: [ArgPtr; N]) -> [HostArg<'k>; N] {
    ptrs.map(|p| {
        let bytes = if p.writes {
            // SAFETY: exclusive for 'k and inside one live block, per this function's contract.
            ArgBytes::Write(unsafe { std::slice::from_raw_parts_mut(p.ptr, p.len) })
        } else {
            // SAFETY: unwritten for 'k and inside one live block, per this function's contract.
            ArgBytes::Read(unsafe { std::slice::from_raw_parts(p.ptr.cast_const(), p.len) })
        };
        HostArg {
            name: p.name,
            bytes,
        }
    })
}
