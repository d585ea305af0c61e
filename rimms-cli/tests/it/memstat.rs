//! `rimms memstat` against a real running process: a `rimms run` started with
//! `RIMMS_STATS_PAGE=1` publishes its page, and memstat in another process reads its spaces
//! and the bytes on its links; without a page, memstat says how to get one.

use crate::common::command::Running;
use crate::common::{fifo, output_within};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn memstat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rimms"))
        .arg("memstat")
        .args(args)
        .output()
        .expect("the rimms binary runs")
}

fn page_of(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("rimms-stats-{pid}"))
}

/// The number in the `bytes` column of the `from -> to` row, if the table has one.
fn link_bytes(table: &str, from: &str, to: &str) -> Option<u64> {
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{from} -> {to} ")))?;
    row.split_whitespace().nth(4)?.parse().ok()
}

/// What the first FZF frame moves to the card: its filter and its input, 64 rows of 2048
/// complex f32 points each.
const FIRST_FRAME_BYTES: u64 = 2 * 64 * 2048 * 8;

#[test]
fn memstat_shows_a_running_programs_spaces_and_links() {
    let child = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(["run", "fzf", "--map", "sim", "--frames", "100000"])
        .env("RIMMS_STATS_PAGE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rimms run starts");
    let mut child = Running(child);
    let pid = child.0.id();
    let page = page_of(pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    // The page appears once the runtime is built; bytes appear once the first frame moved
    // its input to the device.
    let table = loop {
        assert!(
            child.0.try_wait().expect("wait").is_none(),
            "rimms run ended before the test read its page"
        );
        if page.exists() {
            let out = memstat(&["--pid", &pid.to_string()]);
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "memstat failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The filter and each frame's input go to the card, at least 2 × 64 rows of 2048
            // points; the first reading may come between the two copies.
            if link_bytes(&stdout, "host", "sim0").is_some_and(|b| b >= FIRST_FRAME_BYTES) {
                break stdout;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no page with {FIRST_FRAME_BYTES} bytes on host -> sim0 at {} within 60 s",
            page.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(table.contains(&format!("process {pid}: ")), "{table}");
    for space in ["host", "sim0"] {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(space))
            .unwrap_or_else(|| panic!("no {space} row in\n{table}"));
        let allocations: u64 = row
            .split_whitespace()
            .nth(4)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no allocations column in {row:?}"));
        assert!(allocations > 0, "{space} allocated nothing: {row}");
    }
    let bytes = link_bytes(&table, "host", "sim0").expect("host -> sim0 row");

    // The figures are live: later readings never go back, and the program keeps moving data.
    let later = loop {
        let out = memstat(&["--pid", &pid.to_string()]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let now = link_bytes(&stdout, "host", "sim0").unwrap_or(0);
        assert!(now >= bytes, "bytes went back from {bytes} to {now}");
        if now > bytes {
            break now;
        }
        assert!(Instant::now() < deadline, "the page stopped changing");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(later > bytes);

    drop(child);
    // Killed, the process cannot remove its page; memstat says it is stale.
    if page.exists() {
        let out = memstat(&["--pid", &pid.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains("not running"), "{stderr}");
        let _ = std::fs::remove_file(&page);
    }
}

#[test]
fn memstat_without_a_page_says_how_to_get_one() {
    // This test process has a pid, and no runtime here publishes a page.
    let pid = std::process::id();
    let out = memstat(&["--pid", &pid.to_string()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "process {pid} publishes no stats page ({} does not exist); start it with RIMMS_STATS_PAGE=1",
            page_of(pid).display()
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn memstat_reads_an_explicit_page_and_refuses_a_foreign_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("not-a-page");
    std::fs::write(&path, vec![0u8; 4096]).expect("write");
    let out = memstat(&["--page", path.to_str().expect("utf-8 path")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a RIMMS stats page"), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
}

#[test]
fn memstat_refuses_a_fifo_as_a_page_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("page");
    fifo(&page);
    let limit = Duration::from_secs(20);
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_rimms"))
            .args(["memstat", "--page"])
            .arg(&page),
        limit,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{} is a FIFO, not a regular file", page.display())),
        "{stderr}"
    );
    // Planted where `--pid` looks for a running process's page (the temp dir is TMPDIR's).
    let pid = std::process::id();
    let planted = dir.path().join(format!("rimms-stats-{pid}"));
    fifo(&planted);
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_rimms"))
            .args(["memstat", "--pid", &pid.to_string()])
            .env("TMPDIR", dir.path()),
        limit,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is a FIFO, not a regular file",
            planted.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
