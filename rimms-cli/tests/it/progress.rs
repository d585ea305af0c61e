//! The progress bar as a user meets it (issue 32's conventions): `rimms run` and `rimms
//! bench` show frames done, a rate and the time left on a terminal, and nothing of it where
//! standard error is a pipe or a file, or with `-q`.

use crate::common::command::rimms;
use std::io::Read;
use std::process::Stdio;

/// What `args` writes to standard error when that is a terminal (a pseudo-terminal here).
fn stderr_on_a_terminal(args: &[&str]) -> String {
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let mut child = rimms()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .expect("the rimms binary runs");
    // The child holds the only other end now: reading ends (EIO) once it has exited.
    let mut master = std::fs::File::from(pty.master);
    let mut text = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = master.read(&mut chunk) {
        if n == 0 {
            break;
        }
        text.extend_from_slice(&chunk[..n]);
    }
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&text)
    );
    String::from_utf8_lossy(&text).into_owned()
}

#[test]
fn run_and_bench_show_frames_rate_and_time_left_on_a_terminal_unless_quiet() {
    for args in [
        &["run", "zip3x", "--frames", "40"][..],
        &[
            "run", "sar", "--ranks", "2", "--size", "256x256", "--frames", "5",
        ],
        &["bench", "--app", "zip3x", "--frames", "3"],
    ] {
        let shown = stderr_on_a_terminal(args);
        assert!(!shown.contains("panicked"), "{shown}");
        assert!(
            shown.contains(" frames, ") && shown.contains(" frames/s, ") && shown.contains(" left"),
            "{args:?} on a terminal: {shown:?}"
        );
        let quiet: Vec<&str> = ["-q"].iter().chain(args).copied().collect();
        let shown = stderr_on_a_terminal(&quiet);
        assert!(
            !shown.contains("frames/s"),
            "-q {args:?} on a terminal: {shown:?}"
        );
        let piped = rimms().args(args).output().expect("the rimms binary runs");
        assert!(piped.status.success());
        let stderr = String::from_utf8_lossy(&piped.stderr);
        assert!(
            !stderr.contains("frames/s"),
            "{args:?} into a pipe: {stderr}"
        );
    }
}
