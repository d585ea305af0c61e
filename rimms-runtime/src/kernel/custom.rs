//! The generic kernel entry: any host function over managed arguments. This is what
//! `#[rimms::kernel]` expands to; until that macro exists it is also how a program calls a
//! kernel of its own, and how the dispatch overhead is measured.

use super::dispatch::{ArgPtr, KernelArg};
use super::Api;
use crate::backend::Executor;
use crate::coherence::Access;
use crate::data::{Input, Output};
use crate::error::{Error, Result};
use crate::runtime::{Device, Runtime};
use bytemuck::Pod;

impl<'a> KernelArg<'a> {
    /// An argument the kernel only reads.
    pub fn read<T: Pod>(name: &'static str, view: &'a impl Input<T>) -> KernelArg<'a> {
        let view = view.input();
        let (start, len) = view.byte_range();
        KernelArg {
            name,
            raw: view.raw(),
            start,
            len,
            access: Access::Read,
        }
    }

    /// An argument the kernel reads and changes.
    pub fn read_write<T: Pod>(name: &'static str, view: &'a mut impl Output<T>) -> KernelArg<'a> {
        Self::written(name, view, Access::ReadWrite)
    }

    /// An argument the kernel overwrites entirely without reading (write-discard).
    pub fn write<T: Pod>(name: &'static str, view: &'a mut impl Output<T>) -> KernelArg<'a> {
        Self::written(name, view, Access::Write)
    }

    fn written<T: Pod>(
        name: &'static str,
        view: &'a mut impl Output<T>,
        access: Access,
    ) -> KernelArg<'a> {
        let view = view.output();
        let (start, len) = view.as_slice().byte_range();
        KernelArg {
            name,
            raw: view.into_raw(),
            start,
            len,
            access,
        }
    }
}

/// Where a custom kernel finds one argument.
#[derive(Clone, Copy)]
pub struct HostArg(ArgPtr);

impl HostArg {
    /// The argument as a slice.
    ///
    /// # Safety
    /// `T` must be the element type the argument was made from, and no argument of the same
    /// call that overlaps it may be used mutably at the same time.
    pub unsafe fn slice<'k, T: Pod>(self) -> &'k [T] {
        self.0.slice()
    }

    /// The argument as a mutable slice.
    ///
    /// # Safety
    /// As for [`Self::slice`], and the argument must have been made with
    /// [`KernelArg::read_write`] or [`KernelArg::write`].
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut<'k, T: Pod>(self) -> &'k mut [T] {
        self.0.slice_mut()
    }
}

impl Runtime {
    /// Runs `body` on `device` as a kernel of `api`, with `args` acquired in the device's
    /// memory first and written arguments marked after, exactly as the built-in APIs do. The
    /// body gets the arguments in order.
    pub fn launch_host<const N: usize>(
        &self,
        device: Device,
        api: Api,
        args: [KernelArg<'_>; N],
        body: impl FnOnce([HostArg; N]),
    ) -> Result<()> {
        self.launch(device, api, args, |dev, ptrs| {
            match dev.executor {
                Executor::Host => body(ptrs.map(HostArg)),
            }
            Ok::<(), Error>(())
        })
    }
}
