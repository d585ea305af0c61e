//! Decides at build time whether the tests on CEDR's input files can run, so that a clone
//! without the files reports them as *ignored* (with the reason) in the test summary rather
//! than as passed.
//!
//! `cedr_data` is set when `RIMMS_CEDR_DATA` is set, whatever it names: a wrong path must make
//! those tests fail, not skip them. Otherwise it is set when the default folder beside the
//! workspace (`../shared/data/cedr`) exists.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cedr_data)");
    println!("cargo::rerun-if-env-changed=RIMMS_CEDR_DATA");
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/cedr");
    if beside.is_dir() {
        // Only watched when it exists: a missing path would make Cargo rerun this every build.
        println!("cargo::rerun-if-changed={}", beside.display());
    }
    if std::env::var_os("RIMMS_CEDR_DATA").is_some() || beside.is_dir() {
        println!("cargo::rustc-cfg=cedr_data");
    }
}
