//! What the workspace's integration test binaries share. Its one home is this dev-only crate,
//! so that the facade's tests (`tests/it/`) and the runtime's (`rimms-runtime/tests/it/`) both
//! depend on it instead of one crate's tests including the other's files by path.

use std::process::Command;

/// A command that runs only `test` of the module `module_path` (from `module_path!()`) in a
/// new process of the current test binary, on one thread, with its output shown; add the
/// environment the child needs and spawn or run it.
///
/// A test that needs a process of its own (a changed environment, a driver loaded afresh, an
/// emulator as a separate process) runs its own binary again this way, filtered to one test.
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
