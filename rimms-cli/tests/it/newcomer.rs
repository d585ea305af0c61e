//! The command as a newcomer meets it (issue 17): no panics, clear errors with a failing exit
//! status, a closed pipe ending quietly, figures and words written for people.
//!
//! Every case checks the exit status, the message, and that nothing panicked.

use crate::common::command::{rimms, rimms_args, run, Running};
use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn frame_counts_out_of_range_are_refused_up_front() {
    for frames in [
        "18446744073709551615",
        "10000000000",
        "1000001",
        "0",
        "-1",
        "ten",
    ] {
        for cmd in ["run", "bench"] {
            let flag = format!("--frames={frames}");
            let args: Vec<&str> = match cmd {
                "run" => vec!["run", "zip3x", &flag],
                _ => vec!["bench", &flag],
            };
            let (code, _, stderr) = rimms_args(&args);
            assert_eq!(code, Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("1 … 1000000"), "{args:?}: {stderr}");
        }
    }
    let (code, stdout, stderr) = rimms_args(&["run", "zip3x", "--frames", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains(", 1 frame, "), "{stdout}");
}

/// Issue 32's conventions row: a command line asking for what the command does not do exits
/// 2, as clap's own errors do; a run that starts and fails exits 1.
#[test]
fn usage_errors_exit_2_and_failed_runs_exit_1() {
    for (args, says) in [
        (
            &["run", "fzf", "--out", "x.txt"][..],
            "--out writes SAR's image",
        ),
        (
            &["run", "fzf", "--mode", "native", "--map", "auto"],
            "native mode on auto",
        ),
        (
            &["run", "fzf", "--pool", "nosuch=1MiB"],
            "no memory space named nosuch",
        ),
        (
            &["run", "fzf", "--map", "sim", "--pool", "nosuch=1MiB"],
            "no memory space named nosuch",
        ),
        (&["run", "fzf", "--delay", "3"], "fzf takes no delay"),
        (
            &["run", "sar", "--input", ".", "--delay", "3"],
            "with --input the files decide",
        ),
        (&["run", "sar", "--no-such-flag"], "unexpected argument"),
    ] {
        let (code, stdout, stderr) = rimms_args(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
    }
    // Runs that start and fail: a pool too small for the app, and input files that are not there.
    for (args, says) in [
        (
            &[
                "run",
                "sar",
                "--map",
                "sim",
                "--frames",
                "1",
                "--pool",
                "sim0=4KiB",
            ][..],
            "sim0 cannot fit",
        ),
        (
            &["run", "sar", "--input", "/nonexistent", "--frames", "1"],
            "/nonexistent",
        ),
    ] {
        let (code, _, stderr) = rimms_args(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[test]
fn huge_numeric_knobs_are_errors_not_overflows() {
    let (code, _, stderr) = rimms_args(&["run", "pulse-doppler", "--delay", &u64::MAX.to_string()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("delays of 0 … 48 samples"), "{stderr}");
    let (code, _, stderr) = rimms_args(&["run", "correlator", "--delay", &u64::MAX.to_string()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("below 256 samples"), "{stderr}");
}

#[test]
fn a_closed_pipe_ends_run_and_bench_quietly() {
    for args in [
        &["run", "fzf", "--frames", "3"][..],
        &["run", "fzf", "--frames", "3", "--json"],
        &["bench", "--frames", "1", "--app", "zip3x"],
    ] {
        let mut child = rimms()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rimms starts");
        // The reader goes away before anything is written, as `rimms run … | true` does.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("rimms ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("rimms run:"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_full_disk_is_a_clean_error() {
    if !std::path::Path::new("/dev/full").exists() {
        eprintln!("a_full_disk_is_a_clean_error: skipped, no /dev/full here");
        return;
    }
    for args in [
        &["run", "fzf", "--frames", "2"][..],
        &["run", "fzf", "--frames", "2", "--json"],
    ] {
        let full = std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full opens");
        let (code, _, stderr) = run(rimms().args(args).stdout(full));
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("rimms run: cannot write to standard output: No space left"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn memstat_watch_into_a_closed_pipe_ends_quietly() {
    let publisher = rimms()
        .args(["run", "fzf", "--map", "sim", "--frames", "100000"])
        .env("RIMMS_STATS_PAGE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rimms run starts");
    let publisher = Running(publisher);
    let pid = publisher.0.id();
    let page = std::env::temp_dir().join(format!("rimms-stats-{pid}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !page.exists() {
        assert!(Instant::now() < deadline, "no stats page within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut watch = rimms()
        .args(["memstat", "--pid", &pid.to_string(), "--watch", "0.05"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memstat starts");
    // Read the first table, as `| head -3` would, then hang up.
    let mut stdout = watch.stdout.take().expect("piped");
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).expect("memstat prints");
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("process "));
    drop(stdout);
    let out = watch.wait_with_output().expect("memstat ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn memstat_names_a_missing_process_and_a_folder_given_as_a_page() {
    // Above the kernel's largest pid (4194304), so never a running process.
    let (code, _, stderr) = rimms_args(&["memstat", "--pid", "4294967295"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("no process 4294967295 is running"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, _, stderr) = rimms_args(&["memstat", "--page", dir.path().to_str().expect("utf-8")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("is a folder; --page takes the stats page file"),
        "{stderr}"
    );
    assert!(!stderr.contains("No such device"), "{stderr}");
    let (code, _, stderr) = rimms_args(&["memstat", "--pid", "1", "--watch", "1e300"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--watch takes a positive number of seconds"),
        "{stderr}"
    );
}

#[test]
fn board_errors_say_the_path_came_from_rimms_fpga_board() {
    // Empty means unset, as a shell's `RIMMS_FPGA_BOARD= rimms …` intends: the emulator.
    let (code, stdout, stderr) = run(rimms()
        .args(["run", "fzf", "--map", "fpga", "--frames", "1"])
        .env("RIMMS_FPGA_BOARD", ""));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("fzf (rimms on fpga"), "{stdout}");
    let missing = PathBuf::from("/nonexistent/rimms-board.toml");
    for mode in ["rimms", "native"] {
        let (code, _, stderr) = run(rimms()
            .args(["run", "fzf", "--map", "fpga", "--mode", mode])
            .env("RIMMS_FPGA_BOARD", &missing));
        assert_eq!(code, Some(1), "{mode}: {stderr}");
        assert!(
            stderr.contains("/nonexistent/rimms-board.toml: cannot read"),
            "{mode}: {stderr}"
        );
        assert!(
            stderr.contains("comes from RIMMS_FPGA_BOARD"),
            "{mode}: {stderr}"
        );
    }
}

#[test]
fn native_on_the_gpu_names_both_hand_written_examples() {
    let (code, _, stderr) = rimms_args(&["run", "sar", "--mode", "native", "--map", "gpu"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--example gpu_fzf_bench"), "{stderr}");
    assert!(stderr.contains("--example gpu_sar"), "{stderr}");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README");
    assert!(readme.contains("--example gpu_sar") && readme.contains("--example gpu_fzf_bench"));
}

#[test]
fn figures_are_written_for_people() {
    let (code, stdout, stderr) =
        rimms_args(&["run", "correlator", "--delay", "240", "--frames", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    // 240 samples of T/n = 2 µs each.
    assert!(
        stdout.contains(": delay 240 samples (480 µs)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("truth: delay 240 samples (480 µs)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("1 frame,"), "{stdout}");
    let (code, stdout, stderr) = rimms_args(&[
        "run",
        "correlator",
        "--delay",
        "1",
        "--frames",
        "1",
        "--map",
        "sim",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("delay 1 sample (2 µs)"), "{stdout}");
    // One copy of the reference plus one of the received signal in, one of the magnitudes out.
    assert!(
        stdout.contains("sim0 -> host: 1 copy, 2048 bytes"),
        "{stdout}"
    );
    assert!(
        stdout.contains("host -> sim0: 2 copies, 8192 bytes"),
        "{stdout}"
    );
}

#[test]
fn help_ends_with_examples_and_bench_help_explains_the_table() {
    let (code, stdout, _) = rimms_args(&["--help"]);
    assert_eq!(code, Some(0));
    let examples = stdout
        .split("Examples:")
        .nth(1)
        .expect("an Examples section");
    assert!(examples.contains("rimms run fzf --map sim"), "{stdout}");
    assert!(examples.contains("rimms bench"), "{stdout}");
    let (code, stdout, _) = rimms_args(&["bench", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("\nspeedup       baseline time ÷ rimms time"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n-             no hand-written version"),
        "{stdout}"
    );
}

/// Issue 32's conventions: the default table fits 100 columns, legend and all; `--wide`
/// shows every column, and each legend explains only the columns its table has.
#[test]
fn the_default_table_fits_100_columns_and_wide_shows_everything() {
    let (code, narrow, stderr) = rimms_args(&["bench", "--frames", "1", "--app", "zip3x"]);
    assert_eq!(code, Some(0), "{stderr}");
    for line in narrow.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let header = narrow
        .lines()
        .find(|l| l.starts_with("app "))
        .expect("a header");
    for column in [
        "baseline ms",
        "rimms ms",
        "speedup",
        "baseline MiB",
        "rimms MiB",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        !header.contains("native") && !narrow.contains("\nunmerged "),
        "{narrow}"
    );
    assert!(narrow.contains("--wide adds"), "{narrow}");
    let (code, wide, stderr) = rimms_args(&["bench", "--frames", "1", "--app", "zip3x", "--wide"]);
    assert_eq!(code, Some(0), "{stderr}");
    let header = wide
        .lines()
        .find(|l| l.starts_with("app "))
        .expect("a header");
    for column in [
        "native ms",
        "unmerged ms",
        "vs native",
        "minimum MiB",
        "allocs rimms",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(wide.contains("\nminimum       what native moves"), "{wide}");
}

#[test]
fn the_bench_table_has_a_legend_and_names_mappings_as_run_takes_them() {
    let (code, stdout, stderr) = rimms_args(&["bench", "--frames", "1", "--app", "correlator"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("1 frame per cell"), "{stdout}");
    for term in [
        "\nbaseline      CEDR's",
        "\nrimms         the same app",
        "\nspeedup       baseline time ÷ rimms time",
        "\nMiB           bytes moved",
    ] {
        assert!(stdout.contains(term), "no {term:?} in\n{stdout}");
    }
    let maps: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("correlator "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        maps.contains(&"sim") && !maps.contains(&"sim-pcie"),
        "{maps:?}"
    );
    // Every row's mapping is one `run --map` takes.
    for map in maps {
        let (code, _, stderr) = rimms_args(&["run", "correlator", "--map", map, "--frames", "1"]);
        assert_eq!(code, Some(0), "--map {map}: {stderr}");
    }
}

#[test]
fn a_bad_plot_path_fails_before_the_bench_runs() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("missing/chart.svg");
    let png = dir.path().join("chart.png");
    // 1000 frames of every default app would take minutes: failing at once shows the check
    // came first, and nothing was printed.
    // A folder that is not there fails the run (1); a name the option cannot take is a usage
    // error (2).
    for (path, says, status) in [
        (&missing, "cannot create the file", 1),
        (&png, "must end in .svg", 2),
    ] {
        let (code, stdout, stderr) = rimms_args(&[
            "bench",
            "--frames",
            "1000",
            "--plot",
            path.to_str().expect("utf-8"),
        ]);
        assert_eq!(code, Some(status), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        assert!(!png.exists(), "no PNG file, not even an empty one");
    }
}

#[test]
fn zero_byte_bars_are_drawn_and_marked_as_zero() {
    let dir = tempfile::tempdir().expect("dir");
    let svg = dir.path().join("chart.svg");
    let (code, stdout, stderr) = rimms_args(&[
        "bench",
        "--frames",
        "1",
        "--app",
        "zip3x",
        "--json",
        "--plot",
        svg.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let rows: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
    let zero_cells: usize = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            ["baseline", "rimms", "native"]
                .iter()
                .filter(|m| r[**m]["bytes"].as_u64() == Some(0))
                .count()
        })
        .sum();
    // On the cpu row nothing moves in any mode.
    assert!(zero_cells >= 3, "{zero_cells}");
    let text = std::fs::read_to_string(&svg).expect("chart");
    // A zero bar is marked with an upright "0" (axis ticks are not turned).
    let marks = text
        .split("<text")
        .filter(|t| t.contains("rotate(270") && t.contains(">\n0\n</text>"))
        .count();
    assert_eq!(marks, zero_cells, "one mark per zero-byte bar");
}

#[test]
fn radar_output_says_what_to_make_of_it_and_sar_offers_a_focusing_variant() {
    let (code, stdout, stderr) = rimms_args(&["run", "pulse-doppler", "--frames", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    // 5 bins of 1/(128·PRI) simulated; CEDR's formula gives (5 + 1)/(127·PRI).
    assert!(
        stdout.contains("Doppler 5 bins (307.6 Hz simulated)"),
        "{stdout}"
    );
    assert!(stdout.contains("Doppler shift 372 Hz"), "{stdout}");
    assert!(
        stdout.contains("note: the shift and delay follow CEDR's formulas"),
        "{stdout}"
    );
    let (code, stdout, stderr) = rimms_args(&["run", "sar", "--frames", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("note: this is CEDR's range-Doppler formulation"),
        "{stdout}"
    );
    assert!(stdout.contains("--azimuth focused"), "{stdout}");
    // The focused image's brightest pixel is one of the default scene's scatterers: columns
    // 238, 346, 454 and rows 51, 76, 178 (x = 10, 15, 35 m of the 50 m path).
    let (code, stdout, stderr) = rimms_args(&[
        "run",
        "sar",
        "--azimuth",
        "focused",
        "--frames",
        "1",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
    let (row, col) = (
        v["result"]["peak_row"].as_u64().expect("row"),
        v["result"]["peak_col"].as_u64().expect("col"),
    );
    assert!(
        [(51, 238), (76, 346), (178, 454)]
            .iter()
            .any(|&(r, c)| row.abs_diff(r) <= 5 && col.abs_diff(c) <= 1),
        "peak at row {row}, column {col}"
    );
    let (code, _, stderr) = rimms_args(&["run", "fzf", "--azimuth", "focused"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--azimuth is SAR's"), "{stderr}");
}

#[test]
fn a_bad_image_path_fails_before_sar_runs() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("missing/image.txt");
    let (code, stdout, stderr) = rimms_args(&[
        "run",
        "sar",
        "--frames",
        "1000",
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("cannot create the file"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

/// `--fpga-timing zcu102` runs the emulator with its timing model and labels exactly the FPGA
/// rows with modelled time as modelled, in the JSON and under the table; an unknown model is
/// refused up front.
#[test]
fn fpga_timing_labels_the_fpga_rows_as_modelled() {
    let (code, _, stderr) = rimms_args(&["bench", "--fpga-timing", "vcu128", "--frames", "1"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no timing model named \"vcu128\""),
        "{stderr}"
    );

    let (code, stdout, stderr) = run(rimms().env_remove("RIMMS_FPGA_TIMING").args([
        "bench",
        "--fpga-timing",
        "zcu102",
        "--frames",
        "1",
        "--app",
        "zip3x",
        "--json",
    ]));
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Vec<(String, String)> = stdout
        .split("{\"app\"")
        .skip(1)
        .map(|row| {
            let field = |key: &str| {
                let at = row.find(key).map(|i| i + key.len()).unwrap_or(row.len());
                row[at..]
                    .split([',', '}'])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            };
            (field("\"map\":"), field("\"modelled\":"))
        })
        .collect();
    assert!(rows.len() >= 4, "{stdout}");
    // Each cell's modelled time by term; the emulated ZIPs' DMA time is there.
    assert!(
        stdout.contains("\"modelled_ms\":{\"cache sync\""),
        "{stdout}"
    );
    for (map, modelled) in &rows {
        // zip3x on fpga-cpu runs its ZIPs on the CPU: nothing of it is modelled.
        let want = if map == "\"fpga\"" {
            "\"zcu102\""
        } else {
            "null"
        };
        assert_eq!(modelled, want, "row {map}");
    }

    let (code, stdout, stderr) = run(rimms().env_remove("RIMMS_FPGA_TIMING").args([
        "bench",
        "--fpga-timing",
        "zcu102",
        "--frames",
        "1",
        "--app",
        "zip3x",
    ]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(
            "fpga rows are modelled: the host's own work measured here, plus the zcu102 timing"
        ),
        "{stdout}"
    );
    // The FPGA rows taken apart by term, and the model beside the paper's figures.
    for line in [
        "zip3x       fpga     rimms",
        "dma+core",
        "the zcu102 model beside the paper's ZCU102 figures",
        "2FFT FPGA-FPGA   not run",
    ] {
        assert!(stdout.contains(line), "{line:?} missing: {stdout}");
    }
    let (_, stdout, _) = run(rimms()
        .env_remove("RIMMS_FPGA_TIMING")
        .args(["bench", "--frames", "1", "--app", "zip3x"]));
    assert!(
        !stdout.contains("fpga rows are modelled"),
        "without the flag nothing is modelled: {stdout}"
    );
}

/// Issue 32's conventions: a pool too small says the smallest pool that runs the app, and
/// every app runs at the size it states, on the simulated card and the FPGA emulator, in
/// baseline and rimms mode; the `--pool` help's example size runs every app.
#[test]
fn a_pool_too_small_names_the_smallest_that_works() {
    let (code, _, stderr) = rimms_args(&[
        "run",
        "fzf",
        "--map",
        "sim",
        "--frames",
        "1",
        "--pool",
        "sim0=2MiB",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("fzf runs with a device pool of 4MiB or more")
            && stderr.contains("sar 4MiB")
            && stderr.contains("zip3x 256KiB"),
        "{stderr}"
    );
    for (app, size) in rimms_cli::pools::SMALLEST {
        let size = format!("{}KiB", size >> 10);
        for (map, space) in [("sim", "sim0"), ("fpga", "udmabuf0")] {
            for mode in ["baseline", "rimms"] {
                let pool = format!("{space}={size}");
                let (code, _, stderr) = rimms_args(&[
                    "run",
                    app.name(),
                    "--map",
                    map,
                    "--mode",
                    mode,
                    "--frames",
                    "1",
                    "--pool",
                    &pool,
                ]);
                assert_eq!(
                    code,
                    Some(0),
                    "{} {map} {mode} {pool}: {stderr}",
                    app.name()
                );
            }
        }
    }
    let (_, help, _) = rimms_args(&["run", "--help"]);
    assert!(help.contains("sim0=4MiB on --map sim"), "{help}");
}

/// Issue 32's conventions: a run under memory pressure that succeeds sums its evictions and
/// its merged calls run again one by one in a line each, instead of a warning of some 400
/// characters per call; `-v` still shows each.
#[test]
fn a_run_under_pressure_sums_up_instead_of_warning_per_call() {
    let args = [
        "run",
        "sar",
        "--map",
        "sim",
        "--frames",
        "2",
        "--pool",
        "sim0=2MiB",
    ];
    let (code, stdout, stderr) = rimms_args(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.trim().is_empty(), "nothing on stderr: {stderr}");
    assert!(
        stdout.contains("evicted from sim0: ") && stdout.contains(" written back"),
        "{stdout}"
    );
    assert!(
        stdout.contains("merged calls did not fit and ran again one call a row (-v says why)"),
        "{stdout}"
    );
    let summed: u64 = stdout
        .lines()
        .find(|l| l.contains("merged calls did not fit"))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count of merged calls run again");
    let verbose: Vec<&str> = ["-v"].into_iter().chain(args).collect();
    let (code, _, stderr) = rimms_args(&verbose);
    assert_eq!(code, Some(0), "{stderr}");
    // The count is the runtime's, the same as the warnings `-v` shows one by one, and the
    // same in --json.
    let warned = stderr.matches("its calls run again one by one").count() as u64;
    assert_eq!(summed, warned, "{stderr}");
    let json: Vec<&str> = args.into_iter().chain(["--json"]).collect();
    let (code, stdout, stderr) = rimms_args(&json);
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["merge_retries"], summed, "{report}");
}

/// The apps' notes, paragraphs of several hundred characters, wrap at the 100 columns the
/// output keeps to.
#[test]
fn a_runs_note_wraps_at_100_columns() {
    for app in ["sar", "pulse-doppler"] {
        let (code, stdout, stderr) = rimms_args(&["run", app, "--frames", "1"]);
        assert_eq!(code, Some(0), "{stderr}");
        let note: Vec<&str> = stdout
            .lines()
            .skip_while(|l| !l.starts_with("note: "))
            .take_while(|l| !l.starts_with("moved: "))
            .collect();
        assert!(note.len() > 1, "{stdout}");
        for line in note {
            assert!(line.chars().count() <= 100, "{app}: {line}");
        }
    }
}

/// Issue 32's conventions: 2fft, fzf and zip3x say what they computed and print the
/// expected checksum, computed apart in f64, beside their own; on every device the two agree
/// to f32 rounding.
#[test]
fn chains_print_what_they_computed_and_the_expected_checksum() {
    let value_after = |text: &str, key: &str| -> f64 {
        let at = text.find(key).map(|i| i + key.len()).unwrap_or(text.len());
        text[at..]
            .split([',', ' ', '\n'])
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no figure after {key:?} in {text}"))
    };
    for (app, what) in [
        (
            "2fft",
            "FFT then inverse FFT of 64 rows × 2048 points, checksum Σ|y| = ",
        ),
        (
            "fzf",
            "filtered (FFT, multiply, inverse FFT) of 64 rows × 2048 points, checksum Σ|y| = ",
        ),
        ("zip3x", "a·b + c·d over 4096 elements, checksum Σ|y| = "),
    ] {
        for map in ["cpu", "sim", "fpga"] {
            let (code, stdout, stderr) = rimms_args(&["run", app, "--map", map, "--frames", "1"]);
            assert_eq!(code, Some(0), "{stderr}");
            let got = value_after(&stdout, what);
            let expected = value_after(&stdout, "\nexpected: Σ|y| = ");
            assert!(
                stdout.contains("computed from the input in f64 (relative difference "),
                "{stdout}"
            );
            assert!(
                (got - expected).abs() <= 1e-5 * expected.abs(),
                "{app} on {map}: {got} against {expected}\n{stdout}"
            );
        }
    }
}
