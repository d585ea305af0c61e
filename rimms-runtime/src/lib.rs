//! The RIMMS runtime: memory spaces, per-fragment coherence, pools with the NF allocator,
//! device backends, kernel dispatch and stats.
//!
//! Users import everything through the `rimms` facade crate; see its documentation for a tour.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

// The macros name the runtime `::rimms_runtime` when they expand inside this package (its
// library, tests and benches alike); this makes that path resolve in the library too.
extern crate self as rimms_runtime;

pub mod alloc;
pub mod apis;
pub mod backend;
pub mod coherence;
mod data;
mod hal;
mod host_loop;
pub mod input_file;
pub mod kernel;
#[cfg(test)]
mod liveness;
mod machine;
mod runtime;
mod sched;
mod scope;
pub mod space;
pub mod stats;
pub mod vclock;

#[cfg(feature = "fpga")]
pub use backend::fpga::FpgaSource;
pub use backend::sim::SimConfig;
pub use coherence::{Access, FragmentState};
pub use data::{
    HeteData, HeteSlice, HeteSliceMut, Input, Output, Prefetch, ScopeInput, ScopeOutput, Seal,
    SecureKey, DEFAULT_FRAGMENT_BYTES, SECURE_KEY_BYTES,
};
pub use hal::BackendError;
pub use hal::{
    DevSlice, DevSliceMut, DeviceCtx, FftDirection, KernelCtx, KernelValue, Refusal, ZipOp,
};
pub use hal::{Error, Result};
pub use kernel::{
    Api, ApiDecl, Capabilities, HostArg, Joins, KernelArg, MergeRule, MergedArgs, ZipSupport,
};
pub use rimms_macros::{api, kernel, parallel_for};

/// What the macros expand to. Not a stable API: use the macros.
#[doc(hidden)]
pub mod __private {
    pub use crate::coherence::Access;
    pub use crate::hal::assert_kernel_value;
    pub use crate::hal::{ArgForm, DeviceKind};
    pub use crate::host_loop::{
        check_loop_bounds, loop_range, loop_range_inclusive, run_loop, run_reduce, Collect,
        Completed, Extreme, Fold, LoopMut, LoopParts, LoopRead, LoopWrite, Reduction, Sum,
        LOOP_CHUNK,
    };
    pub use crate::kernel::{
        arg_elements, call_registered, check_as, ApiDecl, ApiRegistration, ApiSpec, DevArg,
        FormArgs, KernelImpl, TypedImpls,
    };
    pub use inventory;

    /// Whether managed argument `i` of an API has access mode `mode` (for compile-time checks).
    pub const fn mode_is(modes: &[Access], i: usize, mode: Access) -> bool {
        i < modes.len() && modes[i] as u8 == mode as u8
    }
}
pub use hal::{Device, DeviceGrain, FragmentRule, SpaceId, SpaceName, SpaceSet, Target};
pub use num_complex::Complex32;
pub use runtime::{ExecMode, Runtime, RuntimeBuilder};
pub use sched::{CostTable, Policy};
pub use scope::Scope;
pub use space::LinkModel;
pub use stats::{
    may_replace_with_a_trace, ApiStats, LinkStats, NotATrace, SpaceRef, SpaceStats, Stats,
    TRACE_FILE_ENV, TRACE_FILE_HEAD,
};
