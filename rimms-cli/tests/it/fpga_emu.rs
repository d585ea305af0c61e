//! `rimms fpga-emu` as a user drives it: the `RIMMS_FPGA_BOARD=` line it prints works from
//! where it was started, whatever `--dir` was; `touch DIR/stop` stops it and a restart runs;
//! a second emulator on a folder that has one is refused.

use crate::common::command::{rimms, Running};
use crate::common::output_within;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Starts `rimms fpga-emu --dir DIR` in `cwd`, its messages going to `log`.
fn emulator(cwd: &Path, dir: &Path, log: &Path) -> Running {
    let log = std::fs::File::create(log).expect("log file");
    Running(
        rimms()
            .args(["fpga-emu", "--seconds", "120", "--dir"])
            .arg(dir)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("rimms fpga-emu starts"),
    )
}

/// Waits (20 s at most) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "{what} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs FZF on the FPGA the board file `board` describes, from `cwd`; returns its stderr on
/// failure.
fn fzf_on(board: &str, cwd: &Path) -> Result<(), String> {
    let out = output_within(
        rimms()
            .args([
                "run", "fzf", "--map", "fpga", "--mode", "baseline", "--frames", "1",
            ])
            .env("RIMMS_FPGA_BOARD", board)
            .current_dir(cwd),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    if out.status.success() {
        Ok(())
    } else {
        Err(stderr)
    }
}

/// Stops the emulator with its stop file and waits for it to end.
fn stop(emu: &mut Running, dir: &Path) {
    std::fs::write(dir.join("stop"), b"").expect("stop file");
    wait_for("the emulator stops", || {
        emu.0.try_wait().expect("wait").is_some()
    });
}

#[test]
fn the_board_line_works_from_where_a_relative_dir_was_given() {
    let cwd = tempfile::tempdir().expect("dir");
    let log = cwd.path().join("emu.log");
    let mut emu = emulator(cwd.path(), Path::new("board"), &log);
    // What the user copies: the value after RIMMS_FPGA_BOARD= in the emulator's first line.
    let mut board = String::new();
    wait_for("the RIMMS_FPGA_BOARD= line", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        match text.split_once("RIMMS_FPGA_BOARD=") {
            Some((_, rest)) if rest.contains(')') => {
                board = rest[..rest.find(')').expect("a closing parenthesis")].to_string();
                true
            }
            _ => false,
        }
    });
    let board_path = cwd.path().join(&board);
    wait_for("the board file", || board_path.exists());
    let ran = fzf_on(&board, cwd.path());
    stop(&mut emu, &cwd.path().join("board"));
    ran.unwrap_or_else(|e| panic!("RIMMS_FPGA_BOARD={board}: {e}"));
}

#[test]
fn a_stopped_emulator_restarts_and_a_second_one_on_its_folder_is_refused() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir: PathBuf = tmp.path().join("board");
    let board = dir.join("board.toml");
    let log = tmp.path().join("emu.log");
    let mut first = emulator(tmp.path(), &dir, &log);
    wait_for("the board file", || board.exists());

    let second = output_within(
        rimms()
            .args(["fpga-emu", "--seconds", "120", "--dir"])
            .arg(&dir),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("another emulator runs on") && stderr.contains(&dir.display().to_string()),
        "{stderr}"
    );
    // The refused one took nothing from the first.
    fzf_on(board.to_str().expect("utf-8"), tmp.path()).expect("the first still serves");

    stop(&mut first, &dir);
    assert!(!dir.join("stop").exists(), "the stop file is consumed");

    // A new board file tells when the restarted emulator is ready.
    std::fs::remove_file(&board).expect("remove the old board file");
    let mut again = emulator(tmp.path(), &dir, &log);
    wait_for("the restarted emulator's board file", || {
        board.exists() || again.0.try_wait().expect("wait").is_some()
    });
    assert!(
        again.0.try_wait().expect("wait").is_none(),
        "the restarted emulator runs: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    fzf_on(board.to_str().expect("utf-8"), tmp.path()).expect("the restarted one serves");
    stop(&mut again, &dir);
}

/// A layout with the zcu102 timing model: one FFT core on a 4 MiB u-dma-buf.
const TIMED_LAYOUT: &str = r#"
[[udmabuf]]
name = "udmabuf0"
size = 4194304
phys_addr = 1879048192

[[accelerator]]
kind = "fft"
name = "fft0"
memory = "udmabuf0"

[timing]
name = "zcu102"
pl_clock_hz = 100e6
fft_stream_bytes = 8.0
zip_stream_bytes = 4.0
dma_setup_ns = 1000
fft_latency_clocks_per_point = 1.0
cpu_copy_cached_bps = 1.2e9
cpu_copy_uncached_bps = 0.15e9
cpu_copy_latency_ns = 2000
register_write_ns = 30
register_read_ns = 200
"#;

/// Under a timing model a standalone emulator's board file names modelled register times (so
/// the driver in the other process spins them out) only with `--real-time`: by default the
/// modelled time is counted, not spent.
#[test]
fn a_timed_standalone_emulator_paces_only_with_real_time() {
    for (real_time, paced) in [(false, false), (true, true)] {
        let tmp = tempfile::tempdir().expect("dir");
        let layout = tmp.path().join("layout.toml");
        std::fs::write(&layout, TIMED_LAYOUT).expect("layout");
        let dir = tmp.path().join("board");
        let board = dir.join("board.toml");
        let log = std::fs::File::create(tmp.path().join("emu.log")).expect("log file");
        let mut cmd = rimms();
        cmd.args(["fpga-emu", "--seconds", "120", "--config"])
            .arg(&layout)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if real_time {
            cmd.arg("--real-time");
        }
        let mut emu = Running(cmd.spawn().expect("rimms fpga-emu starts"));
        wait_for("the board file", || board.exists());
        let text = std::fs::read_to_string(&board).expect("board file");
        assert_eq!(
            text.contains("model_access_ns"),
            paced,
            "real_time {real_time}: {text}"
        );
        stop(&mut emu, &dir);
    }
}

/// A layout given as the board file the emulator writes in `--dir` (by that name or a link
/// to it) is refused before anything is written: the emulator would replace the user's
/// layout with its own board file.
#[test]
fn a_layout_that_is_the_board_file_it_writes_is_refused_and_kept() {
    let tmp = tempfile::tempdir().expect("dir");
    let dir = tmp.path().join("board");
    std::fs::create_dir(&dir).expect("dir");
    let layout = dir.join("board.toml");
    std::fs::write(&layout, TIMED_LAYOUT).expect("layout");
    let link = tmp.path().join("layout.toml");
    std::os::unix::fs::symlink(&layout, &link).expect("symlink");
    for given in [&layout, &link] {
        let out = output_within(
            rimms()
                .args(["fpga-emu", "--seconds", "5", "--config"])
                .arg(given)
                .arg("--dir")
                .arg(&dir),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("--config") && stderr.contains("board.toml"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&layout).expect("still there"),
            TIMED_LAYOUT,
            "--config {} was replaced by the emulator's board file",
            given.display()
        );
    }
}
