//! The facade's integration tests, one module per subject, in one test binary: every binary
//! links the whole runtime (cudarc, rustfft, rayon), so one binary instead of one per file
//! is most of the time and disk a first `cargo test` takes. `cargo test -p rimms --test it
//! -- fpga::` runs one module's tests. `tests/ui.rs` (trybuild) stays its own binary.
//!
//! No test here changes the process's environment or installs a global subscriber, so the
//! modules can share a process; a test that needs its own process (the FPGA emulator as a
//! separate process) re-executes this binary with [`rerun_test`].

mod cards;
mod common;

mod accepts;
mod bad_input;
mod builtins;
// Uses the FPGA emulator (the facade's default feature `fpga-emulator`).
#[cfg(feature = "fpga-emulator")]
mod capabilities;
mod coherence;
mod custom_kernel;
mod device_memory;
mod eviction;
// Uses the FPGA emulator (the facade's default feature `fpga-emulator`).
#[cfg(feature = "fpga-emulator")]
mod fpga;
mod ghost_writes;
mod gpu;
mod macros;
mod pipelines;
mod programs;
// Uses the FPGA emulator (the facade's default feature `fpga-emulator`).
#[cfg(feature = "fpga-emulator")]
mod reductions;
// Uses the FPGA emulator (the facade's default feature `fpga-emulator`).
#[cfg(feature = "fpga-emulator")]
mod scheduling;
mod scope;
mod scope_errors;
mod scope_nesting;
mod scope_panics;
mod scope_queue;
mod soundness;
mod stress;
mod trace;
mod views_and_fragments;

pub use rimms_test_support::rerun_test;
