//! Files the user names for results (`run --out`, `bench --plot`), as a user meets them: a run
//! that fails or is interrupted leaves the old file as it was and no file of its own, and a
//! path that is not a regular file (a FIFO, a device) is refused without blocking and without
//! being removed.

use crate::common::command::rimms;
use crate::common::{fifo, output_within};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `cmd` to its end (failing the test after a minute) and returns its exit code and
/// standard error, checking that nothing panicked.
fn outcome(cmd: &mut Command) -> (Option<i32>, String) {
    let out = output_within(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (out.status.code(), stderr)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_run_leaves_the_out_file_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, "precious\n").expect("write");
    // A 4 KiB pool cannot hold SAR's buffers: the run fails after the path was checked.
    let (code, stderr) = outcome(
        rimms()
            .args([
                "run",
                "sar",
                "--map",
                "sim",
                "--frames",
                "1",
                "--pool",
                "sim0=4KiB",
                "--out",
            ])
            .arg(&precious),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("sim0"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&precious).expect("still there"),
        "precious\n"
    );
    assert_eq!(
        names(dir.path()),
        ["precious.txt"],
        "no file of rimms' own is left"
    );
    // The same run that succeeds replaces the file whole.
    let (code, stderr) = outcome(
        rimms()
            .args(["run", "sar", "--frames", "1", "--out"])
            .arg(&precious),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let image = std::fs::read_to_string(&precious).expect("the image");
    assert_eq!(image.lines().count(), 256, "one line per image row");
    assert_eq!(names(dir.path()), ["precious.txt"]);
}

#[test]
fn an_out_path_that_is_not_a_regular_file_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let pipe = dir.path().join("pipe");
    fifo(&pipe);
    for (path, says) in [
        (pipe.as_path(), "is a FIFO"),
        (Path::new("/dev/null"), "is a device"),
    ] {
        let (code, stderr) = outcome(
            rimms()
                .args(["run", "sar", "--frames", "1", "--out"])
                .arg(path),
        );
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains("--out")
                && stderr.contains(says)
                && stderr.contains(&path.display().to_string()),
            "{stderr}"
        );
        assert!(!std::fs::metadata(path).expect("still there").is_file());
    }
}

#[test]
fn a_failed_bench_leaves_the_old_chart_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let chart = dir.path().join("chart.svg");
    std::fs::write(&chart, "<svg>the last good chart</svg>").expect("write");
    // A board file that does not exist fails the fpga rows, after the cpu and sim rows ran.
    let (code, stderr) = outcome(
        rimms()
            .args(["bench", "--app", "zip3x", "--frames", "1", "--plot"])
            .arg(&chart)
            .env("RIMMS_FPGA_BOARD", dir.path().join("no-board.toml")),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no-board.toml"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&chart).expect("still there"),
        "<svg>the last good chart</svg>"
    );
    assert_eq!(names(dir.path()), ["chart.svg"]);
}

#[test]
fn an_interrupted_bench_leaves_no_chart_and_the_old_one_as_it_was() {
    let dir = tempfile::tempdir().expect("dir");
    let old = dir.path().join("old.svg");
    std::fs::write(&old, "<svg>the last good chart</svg>").expect("write");
    for chart in [dir.path().join("new.svg"), old.clone()] {
        let mut child = rimms()
            .args(["bench", "--frames", "100000", "--plot"])
            .arg(&chart)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rimms runs");
        // Long enough to be measuring (the path is checked first), far from done.
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the bench ended by itself"
        );
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let _ = child.wait();
    }
    assert_eq!(names(dir.path()), ["old.svg"], "no new chart, empty or not");
    assert_eq!(
        std::fs::read_to_string(&old).expect("still there"),
        "<svg>the last good chart</svg>"
    );
}
