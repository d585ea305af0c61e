//! A test that needs a process of its own runs this test binary again, filtered to one test.
//! Shared by the facade's and the runtime's test binaries (the runtime includes this file by
//! path), which both re-execute themselves this way.

use std::process::Command;

/// A command that runs only `test` of the module `module_path` (from `module_path!()`) in a
/// new process of this test binary, on one thread, with its output shown; add the
/// environment the child needs and spawn or run it.
pub fn rerun_test(module_path: &str, test: &str) -> Command {
    // libtest names a test by its path without the binary's crate name.
    let name = match module_path.split_once("::") {
        Some((_, module)) if !module.is_empty() => format!("{module}::{test}"),
        _ => test.to_string(),
    };
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name.as_str(), "--nocapture", "--test-threads=1"]);
    cmd
}
