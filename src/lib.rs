//! # RIMMS: runtime-integrated memory management for heterogeneous machines
//!
//! Allocate data once, call kernels on whichever device suits, and never write a copy: the
//! runtime knows, per fragment of every buffer, which memory holds the newest bytes, and moves
//! data only when a kernel on another device needs it.
//!
//! ```
//! use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, ZipOp};
//!
//! # fn main() -> rimms::Result<()> {
//! let rt = Runtime::builder().sim(SimConfig::default()).build()?;
//! let n = 1024;
//! let signal: Vec<Complex32> = (0..n).map(|i| Complex32::new(i as f32, 0.0)).collect();
//! let x = HeteData::from_slice(&rt, &signal)?;
//! let filter = HeteData::from_slice(&rt, &vec![Complex32::new(0.5, 0.0); n])?;
//! let (mut spectrum, mut filtered, mut y) = (
//!     HeteData::alloc(&rt, n)?,
//!     HeteData::alloc(&rt, n)?,
//!     HeteData::alloc(&rt, n)?,
//! );
//! let dev = Device::Sim(0);
//! rt.fft(dev, FftDirection::Forward, n, &x, &mut spectrum)?;
//! rt.zip(dev, ZipOp::Mul, &spectrum, &filter, &mut filtered)?;
//! rt.fft(dev, FftDirection::Inverse, n, &filtered, &mut y)?;
//! let y = y.host()?; // the one copy back
//! assert!((y[10].re - 5.0).abs() < 1e-3);
//! // x and filter went to sim0 once each; only y came back.
//! assert_eq!(rt.stats().bytes("host", "sim0"), 2 * 8 * n as u64);
//! assert_eq!(rt.stats().bytes("sim0", "host"), 8 * n as u64);
//! # Ok(())
//! # }
//! ```
//!
//! Everything a user needs is re-exported here; the crates behind it (`rimms-runtime`,
//! `rimms-macros`) are implementation details.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
pub use rimms_runtime::*;

/// The README's example is compiled and run as a doc test, so it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
