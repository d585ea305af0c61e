//! The `rimms` command's and the apps' integration tests, one module per subject, in one test
//! binary: every binary links the whole runtime (cudarc, rustfft, rayon), so one binary
//! instead of one per file is most of the time and disk a first `cargo test` takes. `cargo
//! test -p rimms-cli --test it -- cedr::` runs one module's tests. The command itself runs as
//! a child process (`CARGO_BIN_EXE_rimms`), so no test changes this process's environment.

mod common;

mod cedr;
mod cli;
mod distributed;
mod fpga_emu;
mod fpga_emu_folder;
mod fpga_mappings;
mod generated;
mod help;
mod left_behind;
mod memstat;
mod modes;
mod newcomer;
mod out_files;
mod progress;
mod scheduled;
mod trace_file;
