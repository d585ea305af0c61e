//! Running the `rimms` binary as a user would, for the tests that meet it from outside: with
//! none of the user's RIMMS variables, its output captured, a panic always a failure.

use std::process::{Child, Command, Output};

/// The built `rimms`, without the user's variables that could change its answers.
pub fn rimms() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rimms"));
    cmd.env_remove("RIMMS_FPGA_BOARD")
        .env_remove("RIMMS_TRACE")
        .env_remove("RIMMS_TRACE_FILE")
        .env_remove("RIMMS_STATS_PAGE");
    cmd
}

/// Runs `cmd` to its end: its exit code, standard output and standard error, checking that
/// nothing panicked.
pub fn run(cmd: &mut Command) -> (Option<i32>, String, String) {
    let out: Output = cmd.output().expect("the rimms binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    )
}

/// [`run`] of `rimms ARGS`.
pub fn rimms_args(args: &[&str]) -> (Option<i32>, String, String) {
    run(rimms().args(args))
}

/// A command left running (a background program, an emulator), killed however the test ends.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
