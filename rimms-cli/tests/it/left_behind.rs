//! What an interrupted command leaves behind, as a user meets it: Ctrl-C or SIGTERM during
//! `rimms run` ends the run between frames, so its runtime removes the stats page
//! (`$TMPDIR/rimms-stats-<pid>`) and the FPGA emulator's folder, and the process still ends
//! by the signal.

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
