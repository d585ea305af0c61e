//! The `rimms` command's library: the applications (`apps`), the benchmark table (`bench`) and
//! the scheduling benchmark (`sched_bench`), kept here so that tests, examples and other tools can run exactly what the
//! command runs.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
pub mod apps;
pub mod bench;
pub mod bench_model;
pub mod fpga_emu;
pub mod human;
pub mod interrupt;
pub mod legend;
pub mod logging;
pub mod memstat;
pub mod out_file;
pub mod output;
pub mod plot;
pub mod pools;
pub mod progress;
pub mod ranks;
pub mod scaling;
pub mod sched_bench;
