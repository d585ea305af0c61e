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

/// SAR's raw-data file in CEDR's format (256 lines of 512 complex values), small numbers
/// that are not an image: any change to it shows.
fn sar_input(dir: &Path) -> std::path::PathBuf {
    let line: String = (0..1024)
        .map(|i| format!("{}", ((i * 37) % 101) as f32 / 100.0 - 0.5))
        .collect::<Vec<_>>()
        .join(" ");
    let raw = dir.join("SAR_rawdata_rda.txt");
    std::fs::write(&raw, format!("{line}\n").repeat(256)).expect("raw data");
    raw
}

#[test]
fn an_out_path_naming_the_input_file_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let raw = sar_input(dir.path());
    let before = std::fs::read(&raw).expect("read");
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink(&raw, &link).expect("symlink");
    let dotted = dir.path().join(".").join("SAR_rawdata_rda.txt");
    for out in [raw.clone(), dotted, link] {
        for ranks in [None, Some("2")] {
            let mut cmd = rimms();
            cmd.args(["run", "sar", "--frames", "1", "--input"])
                .arg(dir.path())
                .arg("--out")
                .arg(&out);
            if let Some(n) = ranks {
                cmd.args(["--ranks", n]);
            }
            let (code, stderr) = outcome(&mut cmd);
            assert_eq!(code, Some(1), "{}: {stderr}", out.display());
            assert!(
                stderr.contains("--out") && stderr.contains("the input"),
                "{stderr}"
            );
            assert!(
                std::fs::read(&raw).expect("still there") == before,
                "--out {} (ranks {ranks:?}) replaced the input it was computed from",
                out.display()
            );
        }
    }
}

#[test]
fn an_out_path_that_is_standard_output_is_refused_and_the_log_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("log.txt");
    for out in [Path::new("/dev/stdout"), log.as_path()] {
        std::fs::write(&log, "precious log line\n").expect("write");
        // `rimms run sar --out OUT >> log.txt`
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        // `run`, not `outcome`: that one takes standard output for a pipe of its own.
        let (code, _, stderr) = crate::common::command::run(
            rimms()
                .args(["run", "sar", "--frames", "1", "--out"])
                .arg(out)
                .stdout(appended),
        );
        assert_eq!(code, Some(1), "{}: {stderr}", out.display());
        assert!(
            stderr.contains("--out") && stderr.contains("standard output"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&log).expect("still there"),
            "precious log line\n",
            "--out {} replaced the log standard output appends to",
            out.display()
        );
    }
}

#[test]
fn a_write_protected_out_file_is_refused_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("dir");
    let kept = dir.path().join("kept.txt");
    std::fs::write(&kept, "do not replace\n").expect("write");
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let (code, stderr) = outcome(
        rimms()
            .args(["run", "sar", "--frames", "1", "--out"])
            .arg(&kept),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("write-protected"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&kept).expect("still there"),
        "do not replace\n"
    );
    assert_eq!(names(dir.path()), ["kept.txt"]);
}

#[test]
fn a_trace_file_naming_the_input_file_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let raw = sar_input(dir.path());
    let before = std::fs::read(&raw).expect("read");
    let dotted = dir.path().join(".").join("SAR_rawdata_rda.txt");
    for ranks in [None, Some("2")] {
        let mut cmd = rimms();
        cmd.args(["run", "sar", "--frames", "1", "--input"])
            .arg(dir.path())
            .env("RIMMS_TRACE_FILE", &dotted);
        if let Some(n) = ranks {
            cmd.args(["--ranks", n]);
        }
        let (code, stderr) = outcome(&mut cmd);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("RIMMS_TRACE_FILE") && stderr.contains("the input"),
            "{stderr}"
        );
        assert!(
            std::fs::read(&raw).expect("still there") == before,
            "the trace (ranks {ranks:?}) replaced the input"
        );
    }
    assert_eq!(names(dir.path()), ["SAR_rawdata_rda.txt"]);
}

#[test]
fn an_out_file_with_a_name_near_the_longest_allowed_is_written() {
    let dir = tempfile::tempdir().expect("dir");
    // 250 bytes: a valid name (the limit is 255), too long once the temporary file beside it
    // adds its prefix and suffix to it.
    let long = dir.path().join(format!("{}.txt", "é".repeat(123)));
    std::fs::write(&long, "old\n").expect("a valid name");
    let (code, stderr) = outcome(
        rimms()
            .args(["run", "sar", "--frames", "1", "--out"])
            .arg(&long),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let image = std::fs::read_to_string(&long).expect("the image");
    assert_eq!(image.lines().count(), 256);
    assert_eq!(names(dir.path()).len(), 1, "{:?}", names(dir.path()));
}
