//! The `RIMMS_TRACE_FILE` timeline as a user meets it: slices on every track nest (so Perfetto
//! and chrome://tracing draw them right) even with scoped submission, a run stopped by Ctrl-C
//! leaves a valid file, a file that cannot be written fails the run, and `RIMMS_TRACE` takes
//! the usual spellings of a switch. Also: log lines carry no colour codes into a pipe.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The user's `rimms`, without the variables that change how the log looks either.
fn rimms() -> Command {
    let mut cmd = crate::common::command::rimms();
    cmd.env_remove("NO_COLOR").env_remove("RUST_LOG");
    cmd
}

fn checked(out: Output) -> (Option<i32>, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (out.status.code(), stderr)
}

fn load(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("the trace file exists");
    let trace: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    trace["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .clone()
}

/// Microseconds as written ("12.345") in whole nanoseconds, so that comparisons are exact.
fn ns(v: &Value) -> u64 {
    let text = v.to_string();
    let (whole, frac) = text.split_once('.').unwrap_or((&text, "0"));
    let frac = format!("{frac:0<3}");
    whole.parse::<u64>().expect("µs") * 1000 + frac[..3].parse::<u64>().expect("ns")
}

/// A slice's start and end (ns) and name.
type Slice = (u64, u64, String);

/// Checks that on every (pid, tid) track, any two slices are disjoint or one contains the
/// other, which is what a trace viewer needs to draw them as a stack; returns the number of
/// slices and of tracks.
fn assert_slices_nest(events: &[Value]) -> (usize, usize) {
    let mut tracks: HashMap<(u64, u64), Vec<Slice>> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let start = ns(&e["ts"]);
        let end = start + ns(&e["dur"]);
        let key = (
            e["pid"].as_u64().expect("pid"),
            e["tid"].as_u64().expect("tid"),
        );
        tracks
            .entry(key)
            .or_default()
            .push((start, end, e["name"].to_string()));
    }
    let mut slices = 0;
    for (track, mut list) in tracks.clone() {
        slices += list.len();
        // Sorted by start, longest first: each slice must end by the end of every open one.
        list.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        let mut open: Vec<u64> = Vec::new();
        for (s, e, name) in &list {
            while open.last().is_some_and(|&end| end <= *s) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(*e <= end, "track {track:?}: {name} [{s}, {e}) overlaps a slice ending at {end} without nesting");
            }
            open.push(*e);
        }
    }
    // Every track is named, under a named process.
    for (pid, tid) in tracks.keys() {
        assert!(events.iter().any(|e| e["ph"] == "M"
            && e["name"] == "thread_name"
            && e["pid"] == *pid
            && e["tid"] == *tid));
        assert!(events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == *pid));
    }
    (slices, tracks.len())
}

#[test]
fn slices_on_every_track_nest_with_scoped_submission() {
    let dir = tempfile::tempdir().expect("dir");
    // Whether the mapping pins the calls on two devices (the CPU's steps and the card's), so
    // that the trace must have two tracks at least. `auto` leaves placement to the scheduler,
    // which on a busy machine may put every call on one device: its slices must nest all the
    // same, on however many tracks.
    for (app, map, pinned) in [
        ("sar", "auto", false),
        ("sar", "sim", true),
        ("pulse-doppler", "fpga", true),
        ("pulse-doppler", "sim", true),
    ] {
        let trace = dir.path().join(format!("{app}-{map}.json"));
        let (code, stderr) = checked(
            rimms()
                .args([
                    // Unmerged, so that every row's call is a slice of its own.
                    "run",
                    app,
                    "--map",
                    map,
                    "--frames",
                    "2",
                    "--submit",
                    "scoped",
                    "--no-merge",
                ])
                .env("RIMMS_TRACE_FILE", &trace)
                .output()
                .expect("rimms runs"),
        );
        assert_eq!(code, Some(0), "{app} on {map}: {stderr}");
        let events = load(&trace);
        let (slices, tracks) = assert_slices_nest(&events);
        assert!(slices > 100, "{app} on {map}: {slices} slices");
        if pinned {
            assert!(tracks >= 2, "{app} on {map}: {tracks} tracks");
        }
    }
}

/// `RIMMS_TRACE_FILE` with `rimms bench`: every row and mode that runs on the runtime leaves
/// its timeline in a file named for it, with its kernels, and the sim and fpga rows' copies.
#[test]
fn bench_keeps_a_trace_of_every_row_and_mode() {
    let dir = tempfile::tempdir().expect("dir");
    let out = rimms()
        .args(["bench", "--app", "zip3x", "--frames", "1", "--json"])
        .env("RIMMS_TRACE_FILE", dir.path().join("trace.json"))
        .output()
        .expect("rimms runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (code, stderr) = checked(out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("one trace per row and mode") && stderr.contains("trace.APP.MAP.MODE.json"),
        "{stderr}"
    );
    let rows: Value = serde_json::from_str(stdout.trim()).expect("JSON rows");
    let maps: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["map"].as_str().expect("map"))
        .collect();
    for map in ["cpu", "sim", "fpga"] {
        assert!(maps.contains(&map), "{maps:?}");
    }
    for map in &maps {
        for mode in ["baseline", "rimms", "unmerged"] {
            let file = dir.path().join(format!("trace.zip3x.{map}.{mode}.json"));
            assert!(
                file.is_file(),
                "no {}: {:?}",
                file.display(),
                std::fs::read_dir(dir.path()).map(|d| d.count())
            );
            let events = load(&file);
            assert!(
                events
                    .iter()
                    .any(|e| e["ph"] == "X" && e["cat"] == "kernel"),
                "{map} {mode}: no kernel in its trace"
            );
            if *map == "sim" || (*map == "fpga" && mode == "baseline") {
                assert!(
                    events
                        .iter()
                        .any(|e| e["ph"] == "X" && e["cat"] == "transfer"),
                    "{map} {mode}: no copy in its trace"
                );
            }
        }
    }
}

#[test]
fn an_interrupted_run_leaves_a_valid_trace() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = dir.path().join("trace.json");
    let mut child = rimms()
        .args(["run", "fzf", "--map", "sim", "--frames", "1000000"])
        .env("RIMMS_TRACE_FILE", &trace)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rimms runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Wait until a few frames are in the file, then press Ctrl-C.
    while std::fs::metadata(&trace).map_or(0, |m| m.len()) < 50_000 {
        assert!(Instant::now() < deadline, "no trace written within 60 s");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended by itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A process started in the background by a non-interactive shell (`cmd &`, nohup)
    // inherits SIGINT ignored, and so does `rimms`: Ctrl-C cannot reach it there, so the
    // test ends it with SIGTERM, which kills it mid-frame the same way.
    let signal = if crate::common::sigint_ignored() {
        "-TERM"
    } else {
        "-INT"
    };
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().expect("kill");
            panic!("rimms was still running 30 s after kill {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "the run was interrupted, not finished");
    let events = load(&trace);
    let (slices, _) = assert_slices_nest(&events);
    assert!(slices > 10, "{slices} slices");
    assert!(events.iter().any(|e| e["cat"] == "transfer"));
}

#[test]
fn a_trace_file_that_cannot_be_written_fails_the_run() {
    let dir = tempfile::tempdir().expect("dir");
    for bad in [
        dir.path().join("missing/folder/trace.json"),
        dir.path().to_path_buf(),
    ] {
        let (code, stderr) = checked(
            rimms()
                .args(["run", "fzf", "--frames", "1"])
                .env("RIMMS_TRACE_FILE", &bad)
                .output()
                .expect("rimms runs"),
        );
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("cannot create the trace file"), "{stderr}");
        assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
    }
}

#[test]
fn rimms_trace_takes_the_usual_switch_spellings_and_refuses_others() {
    for on in ["1", "yes", "true", "ON"] {
        let (code, stderr) = checked(
            rimms()
                .args(["run", "fzf", "--map", "sim", "--frames", "1"])
                .env("RIMMS_TRACE", on)
                .stdout(Stdio::null())
                .output()
                .expect("rimms runs"),
        );
        assert_eq!(code, Some(0), "{on}: {stderr}");
        assert!(
            stderr.contains("rimms::transfer") && stderr.contains("reason"),
            "{on}: {stderr}"
        );
    }
    for off in ["0", "no", "false", ""] {
        let (code, stderr) = checked(
            rimms()
                .args(["run", "fzf", "--map", "sim", "--frames", "1"])
                .env("RIMMS_TRACE", off)
                .stdout(Stdio::null())
                .output()
                .expect("rimms runs"),
        );
        assert_eq!(code, Some(0), "{off:?}: {stderr}");
        assert!(!stderr.contains("rimms::transfer"), "{off:?}: {stderr}");
    }
    let (code, stderr) = checked(
        rimms()
            .args(["run", "fzf", "--frames", "1"])
            .env("RIMMS_TRACE", "ture")
            .output()
            .expect("rimms runs"),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("RIMMS_TRACE=\"ture\" is not a switch"),
        "{stderr}"
    );
}

#[test]
fn log_lines_into_a_pipe_carry_no_colour_codes() {
    for no_color in [None, Some("1")] {
        let mut cmd = rimms();
        cmd.args(["run", "fzf", "--map", "sim", "--frames", "1"])
            .env("RIMMS_TRACE", "1")
            .stdout(Stdio::null());
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let (code, stderr) = checked(cmd.output().expect("rimms runs"));
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains("rimms::transfer"), "{stderr}");
        assert!(!stderr.contains('\u{1b}'), "escape codes in {stderr:?}");
    }
}

/// `RIMMS_TRACE_FILE` naming a file of the user's that is not a trace (notes, a config): the
/// runtime creates the trace afresh, so even a run that then failed (here on a pool too
/// small) had emptied the file and left a trace in its place; so had a bench, for each file
/// named like a cell's trace. Refused before the run, naming the file, which is kept; a
/// trace from an earlier run is still replaced.
#[test]
fn a_trace_file_naming_a_file_that_is_not_a_trace_is_refused_and_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n").expect("write");
    let (code, stderr) = checked(
        rimms()
            .args([
                "run",
                "sar",
                "--map",
                "sim",
                "--pool",
                "sim0=4KiB",
                "--frames",
                "1",
            ])
            .env("RIMMS_TRACE_FILE", &notes)
            .output()
            .expect("rimms runs"),
    );
    assert_eq!(
        std::fs::read_to_string(&notes).expect("still there"),
        "my notes\n",
        "{stderr}"
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("RIMMS_TRACE_FILE") && stderr.contains(&notes.display().to_string()),
        "{stderr}"
    );

    // A bench traces each cell to a file named for it beside the path given.
    let cell = dir.path().join("trace.zip3x.cpu.baseline.json");
    std::fs::write(&cell, "my notes\n").expect("write");
    let (code, stderr) = checked(
        rimms()
            .args(["bench", "--app", "zip3x", "--frames", "1"])
            .env("RIMMS_TRACE_FILE", dir.path().join("trace.json"))
            .env("RIMMS_FPGA_BOARD", dir.path().join("no-board.toml"))
            .output()
            .expect("rimms runs"),
    );
    assert_eq!(
        std::fs::read_to_string(&cell).expect("still there"),
        "my notes\n",
        "{stderr}"
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&cell.display().to_string()), "{stderr}");

    // A trace an earlier run left is replaced, as before.
    let trace = dir.path().join("trace.json");
    for _ in 0..2 {
        let (code, stderr) = checked(
            rimms()
                .args(["run", "fzf", "--frames", "1"])
                .env("RIMMS_TRACE_FILE", &trace)
                .output()
                .expect("rimms runs"),
        );
        assert_eq!(code, Some(0), "{stderr}");
        assert!(!load(&trace).is_empty());
    }
}
