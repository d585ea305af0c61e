//! Kernel arguments in host-addressable memory, as a host implementation sees them.
//!
//! Dispatch hands a host implementation each argument's bytes, borrowed for the call: shared
//! bytes for an argument the call reads, exclusive ones for an argument it writes. Turning them
//! into typed slices is a checked cast (`bytemuck`), so generated code and hand-written
//! `launch_host` bodies need no `unsafe`, and a wrong element type is an error, not a
//! reinterpretation past the end of the argument.

use super::arg_names::by_position;
use super::dispatch::ArgPtr;
use crate::hal::{Error, Result};
use bytemuck::{Pod, PodCastError};
use std::any::type_name;

/// One argument of a host kernel call, borrowed for the call.
///
/// It carries its bytes and its position in the call, not its name: the name costs two words
/// per argument on every call, and only an error needs it. A failed cast names the argument by
/// position, and dispatch, which holds the names, puts the real one in (see
/// `super::arg_names`).
pub struct HostArg<'k>(ArgBytes<'k>);

/// The position sits beside the tag, in what would otherwise be padding, so an argument is no
/// bigger than a tagged slice.
enum ArgBytes<'k> {
    Read { bytes: &'k [u8], position: u8 },
    Write { bytes: &'k mut [u8], position: u8 },
}

impl<'k> HostArg<'k> {
    /// The argument's position among the call's arguments, from 0.
    pub fn position(&self) -> usize {
        match self.0 {
            ArgBytes::Read { position, .. } | ArgBytes::Write { position, .. } => {
                usize::from(position)
            }
        }
    }

    /// Whether the call may write the argument.
    pub fn is_written(&self) -> bool {
        matches!(self.0, ArgBytes::Write { .. })
    }

    /// The argument as a slice of `T`.
    pub fn into_slice<T: Pod>(self) -> Result<&'k [T]> {
        let (bytes, position): (&'k [u8], u8) = match self.0 {
            ArgBytes::Read { bytes, position } => (bytes, position),
            ArgBytes::Write { bytes, position } => (bytes, position),
        };
        if bytes.is_empty() {
            // Any empty slice will do; an empty one of bytes need not be aligned for `T`.
            return Ok(&[]);
        }
        bytemuck::try_cast_slice(bytes).map_err(|e| cast_error::<T>(position, e))
    }

    /// The argument as a mutable slice of `T`; an error for an argument the call only reads.
    pub fn into_slice_mut<T: Pod>(self) -> Result<&'k mut [T]> {
        match self.0 {
            ArgBytes::Write { bytes: [], .. } => Ok(&mut []),
            ArgBytes::Write { bytes, position } => {
                bytemuck::try_cast_slice_mut(bytes).map_err(|e| cast_error::<T>(position, e))
            }
            ArgBytes::Read { position, .. } => Err(read_only::<T>(position)),
        }
    }
}

impl std::fmt::Debug for HostArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mode, len) = match &self.0 {
            ArgBytes::Read { bytes, .. } => ("read", bytes.len()),
            ArgBytes::Write { bytes, .. } => ("write", bytes.len()),
        };
        f.debug_struct("HostArg")
            .field("position", &self.position())
            .field("mode", &mode)
            .field("bytes", &len)
            .finish()
    }
}

#[cold]
fn cast_error<T>(position: u8, e: PodCastError) -> Error {
    let why = match e {
        PodCastError::TargetAlignmentGreaterAndInputNotAligned
        | PodCastError::AlignmentMismatch => "its bytes are not aligned for that type",
        PodCastError::OutputSliceWouldHaveSlop | PodCastError::SizeMismatch => {
            "its length is not a whole number of elements of that type"
        }
    };
    Error::ArgumentType {
        arg: by_position(position),
        type_name: type_name::<T>(),
        why,
    }
}

#[cold]
fn read_only<T>(position: u8) -> Error {
    Error::ArgumentType {
        arg: by_position(position),
        type_name: type_name::<T>(),
        why: "the call only reads it; make it with `KernelArg::read_write` or `KernelArg::write` to write it",
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
    let mut next = 0u8;
    ptrs.map(|p| {
        let position = next;
        // The call's arguments in order: at most `MAX_ARGS` (32), so the count fits.
        next = next.wrapping_add(1);
        HostArg(if p.writes {
            // SAFETY: exclusive for 'k and inside one live block, per this function's contract.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.ptr, p.len) };
            ArgBytes::Write { bytes, position }
        } else {
            // SAFETY: unwritten for 'k and inside one live block, per this function's contract.
            let bytes = unsafe { std::slice::from_raw_parts(p.ptr.cast_const(), p.len) };
            ArgBytes::Read { bytes, position }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The argument a type error names.
    fn named(err: &Error) -> Option<&'static str> {
        match err {
            Error::ArgumentType { arg, .. } => Some(arg),
            _ => None,
        }
    }

    /// What the happy path carries per argument: a slice and a tag, the position riding in the
    /// tag's padding. A name here would add two words to every argument of every call.
    #[test]
    fn an_argument_is_a_tagged_slice() {
        assert_eq!(
            std::mem::size_of::<HostArg<'_>>(),
            3 * std::mem::size_of::<usize>()
        );
        assert_eq!(
            std::mem::size_of::<ArgPtr>(),
            3 * std::mem::size_of::<usize>()
        );
    }

    /// The position an argument's errors name is its index in the call.
    #[test]
    fn each_argument_gets_its_index_as_its_position() {
        let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 8], [0u8; 3]);
        let ptr = |bytes: &mut [u8], writes| ArgPtr {
            ptr: bytes.as_mut_ptr(),
            len: bytes.len(),
            writes,
        };
        let ptrs = [ptr(&mut a, false), ptr(&mut b, true), ptr(&mut c, false)];
        // SAFETY: three distinct live arrays, each reached through its argument alone.
        let args = unsafe { host_args(ptrs) };
        let seen: Vec<(usize, bool)> = args
            .iter()
            .map(|arg| (arg.position(), arg.is_written()))
            .collect();
        assert_eq!(seen, [(0, false), (1, true), (2, false)]);
        let [_, _, c] = args;
        let err = c
            .into_slice::<u16>()
            .expect_err("3 bytes are not whole u16s");
        assert_eq!(named(&err), Some("argument 2"), "{err}");
    }

    #[test]
    fn a_failed_cast_names_the_position() {
        let mut bytes = [0u8; 12];
        let arg = HostArg(ArgBytes::Write {
            bytes: &mut bytes,
            position: 2,
        });
        assert_eq!(arg.position(), 2);
        let err = arg
            .into_slice::<u64>()
            .expect_err("12 bytes are not whole u64s");
        assert_eq!(named(&err), Some("argument 2"), "{err}");
        let arg = HostArg(ArgBytes::Read {
            bytes: &bytes,
            position: 0,
        });
        let err = arg.into_slice_mut::<u8>().expect_err("read only");
        assert_eq!(named(&err), Some("argument 0"), "{err}");
    }
}
