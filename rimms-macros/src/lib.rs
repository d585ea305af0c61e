//! Procedural macros of RIMMS: `#[rimms::kernel]`, `#[rimms::api]` and `rimms::parallel_for!`.
//!
//! They expand to calls of the runtime's generic kernel entry (`Runtime::launch_host` and
//! its successors), so a kernel written as an ordinary Rust function gets acquire, run and mark
//! without the user writing a copy. Until they land, programs call that entry directly.
