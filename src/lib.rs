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
//! assert_eq!(rt.stats().bytes("host", "sim0")?, 2 * 8 * n as u64);
//! assert_eq!(rt.stats().bytes("sim0", "host")?, 8 * n as u64);
//! # Ok(())
//! # }
//! ```
//!
//! ## A small pipeline of your own
//!
//! A matched filter on every pulse of a matrix, the power of the result, and the detections
//! collected by a parallel host loop. `zip_rows` applies one row to all rows in one call;
//! `parallel_for!(collect …)` gathers each iteration's value in index order (an iteration
//! that `continue`s gives none).
//!
//! ```
//! use rimms::{Complex32, Device, FftDirection, HeteData, Runtime, SimConfig, ZipOp};
//!
//! # fn main() -> rimms::Result<()> {
//! let rt = Runtime::builder().sim(SimConfig::default()).build()?;
//! let (pulses, n) = (4, 64);
//! // Each pulse holds an echo of a 3-sample pulse at range cell 10 + pulse.
//! let code = [Complex32::new(1.0, 0.0), Complex32::new(0.0, 1.0), Complex32::new(-1.0, 0.0)];
//! let mut echoes = vec![Complex32::new(0.0, 0.0); pulses * n];
//! for p in 0..pulses {
//!     for (t, c) in code.iter().enumerate() {
//!         echoes[p * n + 10 + p + t] = *c;
//!     }
//! }
//! let mut reference = vec![Complex32::new(0.0, 0.0); n];
//! reference[..3].copy_from_slice(&code);
//! let (echoes, reference) = (HeteData::from_slice(&rt, &echoes)?, HeteData::from_slice(&rt, &reference)?);
//! let mut spectra = HeteData::alloc(&rt, pulses * n)?;
//! let mut filter = HeteData::alloc(&rt, n)?;
//! let mut product = HeteData::alloc(&rt, pulses * n)?;
//! let mut compressed = HeteData::alloc(&rt, pulses * n)?;
//! let mut power = HeteData::<f32>::alloc(&rt, pulses * n)?;
//! let dev = Device::Sim(0);
//! rt.fft(dev, FftDirection::Forward, n, &echoes, &mut spectra)?;
//! rt.fft(dev, FftDirection::Forward, n, &reference, &mut filter)?;
//! rt.zip_rows(dev, ZipOp::MulConj, &spectra, &filter, &mut product)?; // correlate every pulse
//! rt.fft(dev, FftDirection::Inverse, n, &product, &mut compressed)?;
//! rt.power(dev, &compressed, &mut power)?;
//! let cells = power.len();
//! let hits: Vec<usize> = rimms::parallel_for!(collect for i in 0..cells {
//!     if power[i] < 6.0 {
//!         continue;
//!     }
//!     i
//! })?;
//! // The compressed peak is |3|² = 9 at each pulse's echo; the sidelobes are 4 and 1.
//! assert_eq!(hits, vec![10, n + 11, 2 * n + 12, 3 * n + 13]);
//! // In: the echoes and the reference once; out: only the power map, once.
//! let stats = rt.stats();
//! assert_eq!(stats.bytes("host", "sim0")?, 8 * (pulses * n + n) as u64);
//! assert_eq!(stats.bytes("sim0", "host")?, 4 * (pulses * n) as u64);
//! # Ok(())
//! # }
//! ```
//!
//! ## What each device runs
//!
//! [`Runtime::capabilities`] reports it for the devices of a runtime, and `rimms devices`
//! prints it for this machine's; a call a device cannot make is refused before anything moves,
//! with the reason (and, where one exists, the short equivalent).
//!
//! | device | APIs | limits |
//! |---|---|---|
//! | `cpu` | every built-in: `fft`, `fft_in_place`, `zip`, `zip_rows`, `conj`, `magnitude`, `power`, `window`, `scale`, `fftshift`, `transpose`, `gemm` | none |
//! | `sim` | the CPU's kernels on the card's own memory (or staged through device-only memory) | FFT size up to `SimConfig::max_fft_points` |
//! | `fpga` FFT core | `fft`, `fft_in_place` | 8 to 2,048 points (the emulator's default board) |
//! | `fpga` ZIP core | `zip` | `Add`, `Sub`, `Mul`; no `Div`, no `MulConj` (conjugate `b` first, then `Mul`); longer ZIPs than the core's 4,096 elements are cut into pieces by the runtime |
//! | `gpu` | `fft`, `fft_in_place`, `zip`, `conj`, `magnitude`, `fftshift`, `transpose`, `scale`, `gemm` | its buffers are in device memory |
//!
//! Every API without an implementation for a device kind (a user's kernel, `power` on an
//! FPGA) runs on the devices that have one; [`Error::NoImplementation`] lists them.
//!
//! ## Names of devices and memories
//!
//! A device computes in a memory space: `sim0` in `sim0`, but every FPGA core of a board in
//! its u-dma-buf, `udmabuf0`. Stats are per space; [`Stats::bytes`] and friends take a space
//! name or a [`SpaceId`] ([`Runtime::space_of`] gives a device's), and a name that is not a
//! space is an error, never a silent zero.
//!
//! ## What is here
//!
//! This page is the user API: the [`Runtime`] and its [builder](RuntimeBuilder) with the
//! device configurations ([`SimConfig`], [`FpgaSource`], the GPU's `gpu(n)`), managed data
//! ([`HeteData`] and its views, with the RIMMS paper's calls named on its page), the built-in
//! APIs ([`apis`], [`FftDirection`], [`ZipOp`]), errors, [`Stats`], scopes, scheduling, and
//! what a `#[rimms::api]` / `#[rimms::kernel]` author writes against ([`KernelCtx`],
//! [`DevSlice`], [`KernelArg`], [`KernelValue`]). Driver access for hand-written code (the
//! FPGA driver stack and its emulator, the CUDA layer, the CPU kernels, the allocators) is
//! under [`drivers`]; the per-fragment state a buffer reports for inspection is under
//! [`coherence`]. The crates behind this one (`rimms-runtime`, `rimms-macros`) are
//! implementation details.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

// The runtime and its configuration.
#[cfg(feature = "fpga")]
pub use rimms_runtime::FpgaSource;
pub use rimms_runtime::{Device, ExecMode, Runtime, RuntimeBuilder, SimConfig};
// Managed data.
pub use rimms_runtime::{HeteData, HeteSlice, HeteSliceMut, Input, Output, DEFAULT_FRAGMENT_BYTES};
// Secure buffers (`HeteData::alloc_secure`): the key, and a fragment's seal for a layer that
// moves sealed runs itself.
pub use rimms_runtime::{Prefetch, Seal, SecureKey, SECURE_KEY_BYTES};
// Memory spaces and links, by name or id.
pub use rimms_runtime::{LinkModel, SpaceId, SpaceName, SpaceSet};
// The built-in APIs and what each device runs.
pub use rimms_runtime::{apis, Capabilities, Complex32, FftDirection, ZipOp, ZipSupport};
// Errors.
pub use rimms_runtime::{BackendError, Error, Result};
// What moved where.
pub use rimms_runtime::stats;
pub use rimms_runtime::{
    may_replace_with_a_trace, ApiStats, LinkStats, NotATrace, SpaceRef, SpaceStats, Stats,
    TRACE_FILE_ENV, TRACE_FILE_HEAD,
};
// Concurrency and choosing the device a call runs on.
pub use rimms_runtime::{CostTable, Policy, Scope, Target};
// How calls submitted to a scope merge into one device call (`Scope::call` for your own APIs).
pub use rimms_runtime::{Joins, MergeRule, MergedArgs};
// Writing kernels and APIs of your own.
// From the macro crate itself: `rimms_runtime::kernel` also names a module, which a `use` of
// it here would re-export with the attribute.
pub use rimms_macros::{api, kernel, parallel_for};
pub use rimms_runtime::{
    ApiDecl, DevSlice, DevSliceMut, DeviceCtx, KernelArg, KernelCtx, KernelValue, Refusal,
};

/// A buffer's per-fragment coherence state as [`HeteData::fragment_state`] and
/// [`HeteData::is_resident`] report it, for tests and tools that inspect where data is valid.
pub mod coherence {
    pub use rimms_runtime::coherence::{Access, FragmentState};
}

/// Driver access for hand-written code: what the runtime drives, for programs that drive it
/// themselves (the CLI's `native` apps, benchmarks against a hand-written floor, board
/// bring-up). A program that uses [`Runtime`] needs none of it.
pub mod drivers {
    /// The allocators behind every memory pool (the NF allocator and a bitset reference).
    pub use rimms_runtime::alloc;
    /// The CPU's kernels (FFT plans, ZIP, reshapes) as plain functions on slices.
    pub use rimms_runtime::backend::cpu;
    /// The CUDA layer: device probe, library search, NVRTC, cuFFT plans and GPU memory.
    #[cfg(feature = "cuda")]
    pub use rimms_runtime::backend::cuda;
    /// The FPGA driver stack (AXI DMA, the FFT and ZIP cores, the u-dma-buf), its board
    /// configuration and the register-level emulator.
    #[cfg(feature = "fpga")]
    pub use rimms_runtime::backend::fpga;
    /// Reading a file a user names without blocking on a FIFO or reading a device without
    /// end, as the runtime reads board files and stats pages: for programs that read inputs
    /// of their own (the CLI's CEDR files).
    pub use rimms_runtime::input_file;
    /// What [`Runtime::launch_host`](crate::Runtime::launch_host)'s body gets: each argument
    /// in its host form.
    pub use rimms_runtime::kernel::HostArg;
    /// Memory a backend provides: a device's own memory, or one mapped into the process.
    pub use rimms_runtime::space::{DeviceMemory, MappedMemory};
    /// The virtual clock: modelled time for what an emulator stands in for (an emulated FPGA
    /// under a timing model); frames read it to count modelled time, not the emulator's.
    pub use rimms_runtime::vclock;
}

/// What the macros expand to. Not a stable API: use the macros.
#[doc(hidden)]
pub use rimms_runtime::__private;

/// The README's example is compiled and run as a doc test, so it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
