//! What an interrupted command leaves behind, as a user meets it: Ctrl-C or SIGTERM during
//! `rimms run` ends the run between frames, so its runtime removes the stats page
//! (`$TMPDIR/rimms-stats-<pid>`) and the FPGA emulator's folder, and the process still ends
//! by the signal. And what an environment or a pool could leave unbounded: switch variables
//! that are not switches, pools larger than their memory.

use crate::common::sigint_ignored;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn an_interrupted_run_leaves_no_stats_page_and_no_emulator_folder() {
    let tmp = tempfile::tempdir().expect("dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args([
            "run",
            "pulse-doppler",
            "--map",
            "fpga",
            "--frames",
            "1000000",
        ])
        .env_remove("RIMMS_FPGA_BOARD")
        .env_remove("RIMMS_TRACE_FILE")
        .env("RIMMS_STATS_PAGE", "1")
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rimms runs");
    let names = || -> Vec<String> {
        std::fs::read_dir(tmp.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    // Running once both are there.
    while !(names().iter().any(|n| n.starts_with("rimms-stats-"))
        && names().iter().any(|n| n.starts_with("rimms-fpga-emu")))
    {
        if Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            let _ = child.kill();
            panic!(
                "no stats page and emulator folder within 60 s: {:?}",
                names()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SIGINT where a background process can receive it, else SIGTERM (see sigint_ignored).
    let (name, number) = if sigint_ignored() {
        ("-TERM", 15)
    } else {
        ("-INT", 2)
    };
    let sent = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rimms still ran 30 s after kill {name}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.signal(),
        Some(number),
        "ends by the signal: {status:?}"
    );
    assert_eq!(names(), Vec::<String>::new(), "left in TMPDIR");
}

/// `rimms ARGS` with `env` set: its exit code and standard error.
fn rimms_with(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(args)
        .env_remove("RIMMS_FPGA_BOARD")
        .envs(env.iter().copied())
        .output()
        .expect("the rimms binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A switch variable that is not a switch is refused, naming it, as `RIMMS_TRACE` always was,
/// instead of read as "off".
#[test]
fn switch_variables_refuse_what_is_not_a_switch() {
    for (var, args) in [
        (
            "RIMMS_FPGA_STRICT",
            ["run", "fzf", "--map", "fpga", "--frames", "1"],
        ),
        (
            "RIMMS_STATS_PAGE",
            ["run", "fzf", "--map", "cpu", "--frames", "1"],
        ),
        (
            "RIMMS_TRACE",
            ["run", "fzf", "--map", "cpu", "--frames", "1"],
        ),
    ] {
        let (code, stderr) = rimms_with(&args, &[(var, "banana")]);
        assert_ne!(code, Some(0), "{var}=banana: {stderr}");
        assert!(
            stderr.contains(&format!("{var}=\"banana\" is not a switch")),
            "{var}: {stderr}"
        );
        let (code, stderr) = rimms_with(&args, &[(var, "0")]);
        assert_eq!(code, Some(0), "{var}=0: {stderr}");
    }
}

/// A pool larger than the memory behind its space (the emulator's 64 MiB u-dma-buf) is
/// refused with both sizes, not capped silently.
#[test]
fn a_pool_larger_than_its_memory_is_refused() {
    let (code, stderr) = rimms_with(
        &["run", "fzf", "--map", "fpga", "--pool", "udmabuf0=1024GiB"],
        &[],
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("a pool of 1099511627776 bytes for space udmabuf0, whose memory holds ")
            && stderr.contains("give it at most that"),
        "{stderr}"
    );
}

/// A board file whose `poll_timeout_ms` is `i64::MAX`, with no emulator behind it (one that
/// `rimms fpga-emu` wrote and then stopped): every wait for the hardware would last that
/// long, which the user meets as a hang. It is refused instead, naming the field and the file.
#[test]
fn an_endless_poll_timeout_is_refused_not_waited_for() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("board");
    let out = crate::common::output_within(
        Command::new(env!("CARGO_BIN_EXE_rimms"))
            .args(["fpga-emu", "--seconds", "1", "--dir"])
            .arg(&dir),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{out:?}");
    let board = dir.join("board.toml");
    let text = std::fs::read_to_string(&board).expect("the emulator's board file");
    assert!(text.contains("poll_timeout_ms = 200"), "{text}");
    let endless = text.replace(
        "poll_timeout_ms = 200",
        &format!("poll_timeout_ms = {}", i64::MAX),
    );
    std::fs::write(&board, endless).expect("edit the board file");
    let out = crate::common::output_within(
        Command::new(env!("CARGO_BIN_EXE_rimms"))
            .args(["run", "zip3x", "--map", "fpga", "--frames", "1"])
            .env("RIMMS_FPGA_BOARD", &board),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("poll_timeout_ms")
            && stderr.contains("60000 ms")
            && stderr.contains(&board.display().to_string()),
        "{stderr}"
    );
}
