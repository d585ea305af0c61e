//! The runtime crate's integration tests, one module per subject, in one test binary: every
//! binary links the whole runtime (cudarc, rustfft, rayon), so one binary instead of one per
//! file is most of the time and disk a first `cargo test` takes. `cargo test -p rimms-runtime
//! --test it -- cuda_nvrtc::` runs one module's tests.
//!
//! No test here changes the process's environment; the tests that need a process of their own
//! (the "no GPU" paths under a forced or stand-in driver, NVRTC found by a fresh library
//! search, the FPGA emulator as a separate process) re-execute this binary with
//! [`rerun_test`] and the environment they need.

mod alloc_model;
mod cuda_gpu;
mod cuda_no_gpu;
mod cuda_nvrtc;
#[cfg(feature = "fpga-emulator")]
mod fpga_boards;
#[cfg(feature = "fpga-emulator")]
mod fpga_driver;
#[cfg(feature = "fpga-emulator")]
mod fpga_memory;
#[cfg(feature = "fpga-emulator")]
mod fpga_process;
#[cfg(feature = "fpga-emulator")]
mod fpga_results;
#[cfg(feature = "fpga-emulator")]
mod fpga_strict;
mod fragment_rule;
mod layers;
mod merging;
mod nesting_rules;
mod prefetch;
mod raw_declarations;
// Only the FPGA result tests compare against the direct DFT.
#[cfg(feature = "fpga-emulator")]
mod reference;
mod secure;
mod windows;

pub use rimms_test_support::rerun_test;
