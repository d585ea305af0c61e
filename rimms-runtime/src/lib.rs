//! The RIMMS runtime: memory spaces, per-fragment coherence, pools with the NF allocator,
//! device backends, kernel dispatch and stats.
//!
//! Users import everything through the `rimms` facade crate; see its documentation for a tour.

#![warn(missing_docs)]

pub mod alloc;
pub mod backend;
pub mod coherence;
mod data;
mod error;
pub mod kernel;
mod runtime;
pub mod space;
pub mod stats;

pub use backend::sim::SimConfig;
pub use coherence::{Access, FragmentState};
pub use data::{HeteData, HeteSlice, HeteSliceMut, Input, Output, DEFAULT_FRAGMENT_BYTES};
pub use error::{Error, Result};
pub use kernel::{Api, FftDirection, HostArg, KernelArg, ZipOp};
pub use num_complex::Complex32;
pub use runtime::{Device, ExecMode, Runtime, RuntimeBuilder};
pub use space::{LinkModel, SpaceId, SpaceSet};
pub use stats::{ApiStats, LinkStats, SpaceStats, Stats};
