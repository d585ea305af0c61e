//! The `rimms run` command as a user runs it: the JSON object's fields, SAR's image file, and
//! errors that say what and where with a failing exit status.

use crate::common;

use serde_json::Value;
use std::process::Command;

/// `rimms ARGS`: its exit code, standard output and standard error.
fn rimms_exit(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(args)
        .output()
        .expect("the rimms binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn rimms(args: &[&str]) -> (bool, String, String) {
    let (code, stdout, stderr) = rimms_exit(args);
    (code == Some(0), stdout, stderr)
}

fn json(args: &[&str]) -> Value {
    let (ok, stdout, stderr) = rimms(args);
    assert!(ok, "rimms {args:?} failed: {stderr}");
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

#[test]
fn run_json_has_every_field_and_the_result() {
    let v = json(&[
        "run",
        "correlator",
        "--json",
        "--map",
        "sim",
        "--frames",
        "3",
        "--delay",
        "60",
        "--seed",
        "9",
    ]);
    assert_eq!(v["app"], "correlator");
    assert_eq!(v["mode"], "rimms");
    assert_eq!(v["map"], "sim");
    assert_eq!(v["frames"], 3);
    assert!(v["median_ms"].as_f64().is_some_and(|ms| ms > 0.0));
    assert!(v["allocations"].as_u64().is_some_and(|a| a > 0));
    assert_eq!(v["result"], serde_json::json!({ "delay_samples": 60 }));
    // The reference once, the received signal each frame; the 512 magnitudes back each frame.
    let links = v["links"].as_array().expect("links");
    let link = |from: &str, to: &str| {
        links
            .iter()
            .find(|l| l["from"] == from && l["to"] == to)
            .unwrap_or_else(|| panic!("no {from} -> {to} link in {links:?}"))
            .clone()
    };
    assert_eq!(link("host", "sim0")["bytes"], 4 * 4096);
    assert_eq!(link("sim0", "host")["bytes"], 3 * 2048);
    assert_eq!(link("sim0", "host")["copies"], 3);
    assert_eq!(links.len(), 2);
}

#[test]
#[cfg_attr(
    not(cedr_data),
    ignore = "no CEDR data: set RIMMS_CEDR_DATA to the folder of CEDR's input files"
)]
fn pulse_doppler_json_on_cedr_input_and_sar_image_file() {
    let dir = common::cedr_dir();
    let dir = dir.to_str().expect("a UTF-8 path");
    let v = json(&[
        "run",
        "pulse-doppler",
        "--input",
        dir,
        "--json",
        "--frames",
        "1",
    ]);
    let result = v["result"].as_object().expect("result");
    assert_eq!(result.len(), 3, "{result:?}");
    assert!(result["doppler_shift_hz"].is_f64() && result["time_delay_s"].is_f64());
    assert_eq!(result["target"], true);

    let out = std::env::temp_dir().join(format!("rimms-sar-{}.txt", std::process::id()));
    let out_arg = out.to_str().expect("a UTF-8 path");
    let v = json(&[
        "run", "sar", "--input", dir, "--json", "--frames", "1", "--out", out_arg,
    ]);
    let text = std::fs::read_to_string(&out).expect("image file");
    std::fs::remove_file(&out).ok();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .map(|l| l.split(' ').map(|t| t.parse().expect("number")).collect())
        .collect();
    assert_eq!(rows.len(), 256);
    assert!(rows.iter().all(|r| r.len() == 512));
    let (r, c) = (
        v["result"]["peak_row"].as_u64().expect("row") as usize,
        v["result"]["peak_col"].as_u64().expect("col") as usize,
    );
    let max = rows.iter().flatten().fold(0.0f64, |a, &b| a.max(b));
    assert_eq!(rows[r][c], max);
    assert_eq!(v["result"]["peak"].as_f64(), Some(max));
}

/// CEDR-format pulse-Doppler files of zeros: a flat map, whose first cell CEDR's formulas
/// would report as a target at −3906 Hz and −127 µs.
#[test]
fn all_zero_pulse_doppler_input_says_there_is_no_target() {
    let dir = tempfile::tempdir().expect("dir");
    // One line of 64 complex zeros, "re im" each.
    let line = "0 0 ".repeat(64).trim_end().to_string() + "\n";
    std::fs::write(
        dir.path().join("pulse_doppler_pulses.txt"),
        line.repeat(128),
    )
    .expect("pulses");
    std::fs::write(dir.path().join("pulse_doppler_pulse.txt"), &line).expect("pulse");
    let input = dir.path().to_str().expect("a UTF-8 path");
    let args = ["run", "pulse-doppler", "--input", input, "--frames", "1"];
    let (ok, stdout, stderr) = rimms(&args);
    assert!(ok, "{stderr}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.contains("): no target: the range-Doppler map is flat"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("Compare the bins"),
        "no reading guide for figures that mean nothing: {stdout}"
    );
    let v = json(&[&args[..], &["--json"]].concat());
    assert_eq!(v["result"]["target"], false, "{v}");
}

#[test]
fn bad_input_fails_with_a_message_that_says_where() {
    let (ok, _, stderr) = rimms(&["run", "sar", "--input", "/nonexistent/cedr"]);
    assert!(!ok);
    assert!(
        stderr.contains("cannot read /nonexistent/cedr/SAR_rawdata_rda.txt"),
        "{stderr}"
    );
    let (ok, _, stderr) = rimms(&["run", "correlator", "--delay", "256"]);
    assert!(!ok);
    assert!(stderr.contains("below 256 samples, got 256"), "{stderr}");
    let (ok, _, stderr) = rimms(&["run", "2fft", "--out", "x.txt"]);
    assert!(!ok);
    assert!(stderr.contains("--out writes SAR's image"), "{stderr}");
}

#[test]
fn fpga_emu_runs_as_its_own_process_and_rimms_run_drives_it_through_the_board_file() {
    let dir = tempfile::tempdir().expect("dir");
    let mut emulator = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(["fpga-emu", "--seconds", "60", "--dir"])
        .arg(dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("rimms fpga-emu starts");
    let board = dir.path().join("board.toml");
    let started = std::time::Instant::now();
    while !board.exists() && started.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = board.exists().then(|| {
        Command::new(env!("CARGO_BIN_EXE_rimms"))
            // Baseline stages every FPGA call through the u-dma-buf (tracked, nothing moves).
            .args([
                "run", "fzf", "--map", "fpga", "--mode", "baseline", "--frames", "2", "--json",
            ])
            .env("RIMMS_FPGA_BOARD", &board)
            .output()
            .expect("rimms run")
    });
    std::fs::write(dir.path().join("stop"), b"").expect("stop file");
    let stopped = (0..500).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        emulator.try_wait().ok().flatten().is_some()
    });
    let _ = emulator.kill();
    let out = out.expect("the emulator wrote its board configuration");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["map"], "fpga");
    // The FPGA's memory is the emulator's u-dma-buf: the calls' arguments went there.
    let links = v["links"].as_array().expect("links");
    assert!(links.iter().any(|l| l["to"] == "udmabuf0"), "{links:?}");
    assert!(stopped, "the emulator stops when its stop file appears");
}

#[test]
fn rimms_trace_file_is_a_chrome_trace_whose_transfers_add_up_to_the_reported_bytes() {
    let dir = tempfile::tempdir().expect("dir");
    let trace = dir.path().join("trace.json");
    let out = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .args(["run", "fzf", "--map", "sim", "--frames", "2", "--json"])
        .env("RIMMS_TRACE_FILE", &trace)
        .output()
        .expect("rimms run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let reported: u64 = report["links"]
        .as_array()
        .expect("links")
        .iter()
        .map(|l| l["bytes"].as_u64().expect("bytes"))
        .sum();
    let text = std::fs::read_to_string(&trace).expect("the trace file was written");
    let trace: Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let complete = |cat: &str| {
        events
            .iter()
            .filter(move |e| e["ph"] == "X" && e["cat"] == cat)
            .collect::<Vec<_>>()
    };
    let traced: u64 = complete("transfer")
        .iter()
        .map(|e| e["args"]["bytes"].as_u64().expect("bytes"))
        .sum();
    assert!(reported > 0);
    assert_eq!(
        traced, reported,
        "transfer events add up to the reported bytes"
    );
    // Two frames of FFT, ZIP, inverse FFT, each a complete event with a time and a lane.
    let kernels = complete("kernel");
    assert!(kernels.len() >= 6, "{} kernel events", kernels.len());
    assert!(kernels
        .iter()
        .all(|e| e["ts"].is_number() && e["dur"].is_number()));
    // Every lane is named (a device or a link).
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "sim0"));
}

#[test]
fn bench_plot_draws_one_bar_per_mode_and_mapping() {
    let dir = tempfile::tempdir().expect("dir");
    let svg = dir.path().join("bench.svg");
    let (ok, table, stderr) = rimms(&[
        "bench",
        "--frames",
        "1",
        "--app",
        "zip3x",
        "--wide",
        "--plot",
        svg.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "{stderr}");
    let rows = table.lines().filter(|l| l.starts_with("zip3x")).count();
    let text = std::fs::read_to_string(&svg).expect("the plot was written");
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    // One speedup bar per row, and a bytes bar per mode measured in each row (native only
    // where the mapping has it, shown as "-" in the table).
    let natives = table
        .lines()
        .filter(|l| l.starts_with("zip3x"))
        // app, map, frames, then "median (fastest–slowest)" for baseline, rimms, unmerged and
        // no prefetch: the native cell is the twelfth word.
        .filter(|l| l.split_whitespace().nth(11) != Some("-"))
        .count();
    // Bars by their mode's colour, less each chart's legend swatch for the mode.
    let bars = |fill: &str| text.matches(&format!("fill=\"{fill}\"")).count();
    assert_eq!(
        bars("#2A7AB9") - 2,
        2 * rows,
        "a speedup and a bytes bar per row"
    );
    assert_eq!(bars("#B0B0B0") - 1, rows, "a baseline bytes bar per row");
    assert_eq!(
        bars("#5AA05A") - usize::from(natives > 0),
        natives,
        "{rows} rows, {natives} with native code"
    );
    // Labelled axes, a legend of the modes, and the table's legend of terms.
    for words in [
        "MiB moved",
        "speedup (×)",
        ">\nbaseline\n<",
        "baseline time ÷ rimms time",
    ] {
        assert!(text.contains(words), "no {words:?} in the chart");
    }
}

/// The chart's speedup bars carry the table's figures, row by row: the median of the
/// per-frame ratios, or "can't tell, N frames" where its interval holds 1.0, never a figure
/// of its own (it drew baseline median ÷ rimms median, 0.52 where the table said ~1.0x).
#[test]
fn the_chart_labels_each_speedup_with_the_tables_figure() {
    let dir = tempfile::tempdir().expect("dir");
    let svg = dir.path().join("bench.svg");
    let (ok, table, stderr) = rimms(&[
        "bench",
        "--frames",
        "3",
        "--app",
        "zip3x",
        "--wide",
        "--plot",
        svg.to_str().expect("utf-8 path"),
    ]);
    assert!(ok, "{stderr}");
    // The speedup cell is the first with an interval "[lo–hi]"; before it come the time cells,
    // which end in ")" or, without native code, "-".
    let from_table: Vec<String> = table
        .lines()
        .filter(|l| l.starts_with("zip3x"))
        .map(|l| {
            let before = &l[..l.find('[').expect("a ratio cell")];
            let after_times = &before[before.rfind(')').expect("time cells") + 1..];
            after_times
                .trim()
                .trim_start_matches('-')
                .trim()
                .to_string()
        })
        .collect();
    assert!(from_table.len() >= 4, "{table}");
    let text = std::fs::read_to_string(&svg).expect("the chart");
    // The speedup chart is drawn first, its labels along the bars in row order: turned, and
    // starting at the bar's foot (the turned axis title is centred).
    let from_chart: Vec<String> = text
        .split("<text")
        .filter(|t| t.contains("rotate(270") && t.contains("text-anchor=\"start\""))
        .take(from_table.len())
        .map(|t| {
            let inner = &t[t.find('>').expect("text") + 1..t.find("</text>").expect("end")];
            inner
                .trim()
                .replace("&apos;", "'")
                .trim_end_matches(" ↑")
                .to_string()
        })
        .collect();
    assert_eq!(
        from_chart, from_table,
        "chart labels against the table's speedups"
    );
    assert!(
        text.contains("median of per-frame ratios, 95 % interval"),
        "the chart says what it draws"
    );
}

#[test]
fn the_gpu_mapping_runs_where_there_is_a_gpu_and_says_why_not_where_there_is_none() {
    let have_gpu = rimms::Runtime::builder().gpu(0).build().is_ok();
    let args = ["run", "fzf", "--map", "gpu", "--frames", "2", "--json"];
    let (ok, stdout, stderr) = rimms(&args);
    if have_gpu {
        assert!(ok, "fzf on the gpu failed: {stderr}");
        let rimms_run: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
        let (_, base, _) = rimms(&[&args[..], &["--mode", "baseline"]].concat());
        let baseline: Value = serde_json::from_str(base.trim()).expect("one JSON object");
        assert_eq!(rimms_run["result"], baseline["result"]);
    } else {
        assert!(!ok, "fzf on a gpu that is not there succeeded");
        assert!(stderr.contains("no GPU"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_fifo_or_dev_zero_as_an_input_or_board_file_fails_without_blocking() {
    use std::time::Duration;
    let limit = Duration::from_secs(30);
    let rimms = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rimms"));
        cmd.env_remove("RIMMS_FPGA_BOARD")
            .env_remove("RIMMS_STATS_PAGE");
        cmd
    };
    let check = |out: std::process::Output, want: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(want), "wanted {want:?} in: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        stderr
    };
    // A CEDR input folder whose raw data is a FIFO (first: before the fix it blocks forever),
    // then one whose raw data is /dev/zero (read whole, it would take all memory).
    let dir = tempfile::tempdir().expect("dir");
    let raw = dir.path().join("SAR_rawdata_rda.txt");
    common::fifo(&raw);
    let out = common::output_within(
        rimms().args(["run", "sar", "--input"]).arg(dir.path()),
        limit,
    );
    check(
        out,
        &format!("{} is a FIFO, not a regular file", raw.display()),
    );
    let zero = tempfile::tempdir().expect("dir");
    let raw = zero.path().join("SAR_rawdata_rda.txt");
    std::os::unix::fs::symlink("/dev/zero", &raw).expect("symlink");
    let out = common::output_within(
        rimms().args(["run", "sar", "--input"]).arg(zero.path()),
        limit,
    );
    check(
        out,
        &format!(
            "{} is a character device, not a regular file",
            raw.display()
        ),
    );
    // The same as the board file RIMMS_FPGA_BOARD names, by the runtime and the native apps.
    let board = dir.path().join("board.toml");
    common::fifo(&board);
    for mode in ["rimms", "native"] {
        for (file, what) in [
            (board.as_path(), "a FIFO"),
            (std::path::Path::new("/dev/zero"), "a character device"),
        ] {
            let out = common::output_within(
                rimms()
                    .args(["run", "fzf", "--map", "fpga", "--mode", mode])
                    .env("RIMMS_FPGA_BOARD", file),
                limit,
            );
            let stderr = check(
                out,
                &format!("{} is {what}, not a regular file", file.display()),
            );
            assert!(
                stderr.contains("comes from RIMMS_FPGA_BOARD"),
                "{mode}: {stderr}"
            );
        }
    }
}

/// Completion scripts and the man page come from the command's own definition, so they name
/// every subcommand; an unknown shell is a usage error.
#[test]
fn completions_and_the_man_page_name_every_subcommand() {
    let subcommands = ["run", "bench", "devices", "memstat", "fpga-emu"];
    let (ok, bash, stderr) = rimms(&["completions", "bash"]);
    assert!(ok, "{stderr}");
    assert!(
        bash.contains("_rimms()") && bash.contains("complete -F _rimms"),
        "{bash}"
    );
    let (ok, zsh, _) = rimms(&["completions", "zsh"]);
    assert!(ok && zsh.starts_with("#compdef rimms"), "{zsh}");
    let (ok, man, stderr) = rimms(&["man"]);
    assert!(ok, "{stderr}");
    assert!(man.contains(".TH rimms 1"), "{man}");
    for sub in subcommands {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
        // roff escapes a hyphen.
        let roff = format!("rimms\\-{}", sub.replace('-', "\\-"));
        assert!(man.contains(&roff), "the man page lacks {roff}");
    }
    let (code, _, _) = rimms_exit(&["completions", "cmd.exe"]);
    assert_eq!(code, Some(2), "a usage error");
}

/// A run under pressure that succeeds warns on stderr with `-v` (by default it sums the
/// warnings up in its output); `-q` keeps only errors, so it prints nothing there and the
/// result is the same. `-q` and `-v` together are a usage error.
#[test]
fn quiet_keeps_a_successful_run_silent_on_stderr() {
    let args = [
        "run",
        "sar",
        "--map",
        "sim",
        "--frames",
        "1",
        "--pool",
        "sim0=2MiB",
    ];
    let loud: Vec<&str> = std::iter::once("-v").chain(args).collect();
    let (ok, loud_out, loud_err) = rimms(&loud);
    assert!(ok, "{loud_err}");
    assert!(
        loud_err.contains("WARN"),
        "the pressure run warns: {loud_err}"
    );
    let quiet: Vec<&str> = std::iter::once("-q").chain(args).collect();
    let (ok, quiet_out, quiet_err) = rimms(&quiet);
    assert!(ok, "{quiet_err}");
    assert_eq!(quiet_err, "", "nothing but errors on stderr");
    let checksum = |out: &str| {
        out.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_owned)
    };
    assert_eq!(checksum(&quiet_out), checksum(&loud_out), "the same result");
    let (code, _, _) = rimms_exit(&["-q", "-v", "devices"]);
    assert_eq!(code, Some(2));
}

/// A negative number is a value out of range, named with the range, not an unknown option;
/// each is a usage error.
#[test]
fn negative_numbers_get_the_allowed_range() {
    for (args, range) in [
        (vec!["run", "fzf", "--frames", "-1"], "1 … 1000000"),
        (vec!["run", "fzf", "--seed", "-5"], "from 0 up to u64::MAX"),
        (
            vec!["run", "correlator", "--delay", "-3"],
            "from 0 up to usize::MAX",
        ),
        (vec!["memstat", "--pid", "-1"], "from 0 up to u32::MAX"),
        (
            vec!["memstat", "--page", "p", "--watch", "-1"],
            "seconds above 0",
        ),
        (
            vec!["fpga-emu", "--dir", "d", "--seconds", "-1"],
            "from 0 up to u64::MAX",
        ),
    ] {
        let (code, _, stderr) = rimms_exit(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(range) && !stderr.contains("unexpected argument"),
            "{args:?}: {stderr}"
        );
    }
}

/// `rimms devices` says where the FPGA comes from and why there is no GPU; a broken board is
/// reported as broken while the other devices are still listed, and the command fails.
#[test]
fn devices_say_where_each_device_comes_from_and_list_the_rest_past_a_broken_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .arg("devices")
        .env_remove("RIMMS_FPGA_BOARD")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("fpga: the embedded register-level emulator"),
        "{stdout}"
    );
    assert!(
        stdout.contains("gpu0 (") || stdout.contains("gpu: none here ("),
        "a GPU, or why there is none: {stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rimms"))
        .arg("devices")
        .env("RIMMS_FPGA_BOARD", "/nonexistent/board.toml")
        .output()
        .expect("runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stdout.contains("cpu (") && stdout.contains("sim0 ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("fpga: not listed, its board is broken"),
        "{stdout}"
    );
    assert!(stderr.contains("/nonexistent/board.toml"), "{stderr}");
}

/// `--no-prefetch` and the report of copies ahead: pulse Doppler on sim behind a 1 GB/s link
/// moves the same bytes over the same links either way (and a link of 0 GB/s is refused); with copies ahead (the default) the
/// JSON names each space that received them, every byte of them used and none wasted, and
/// without them there is no such entry.
#[test]
fn copies_ahead_are_reported_and_no_prefetch_moves_the_same_bytes_without_them() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "pulse-doppler",
            "--map",
            "sim",
            "--frames",
            "4",
            "--sim-link",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let (ahead, plain) = (run(&[]), run(&["--no-prefetch"]));
    // The same bytes over the same links (a scope's pieces make more, smaller copies).
    let bytes = |run: &Value| -> Vec<(Value, Value, Value)> {
        let links = run["links"].as_array().expect("links");
        links
            .iter()
            .map(|l| (l["from"].clone(), l["to"].clone(), l["bytes"].clone()))
            .collect()
    };
    assert_eq!(bytes(&ahead), bytes(&plain));
    assert!(plain.get("prefetches").is_none(), "{plain}");
    let spaces = ahead["prefetches"]
        .as_array()
        .expect("copies ahead reported");
    assert!(
        spaces.iter().any(|p| p["space"] == "sim0"),
        "the scope's inputs: {ahead}"
    );
    for p in spaces {
        assert!(p["bytes"].as_u64() > Some(0), "{p}");
        assert_eq!(
            p["used_bytes"], p["bytes"],
            "every byte copied ahead is used: {p}"
        );
        assert_eq!(p["wasted_bytes"], 0, "{p}");
    }
    let (ok, text, stderr) = rimms(&["run", "pulse-doppler", "--map", "sim", "--frames", "3"]);
    assert!(ok, "{stderr}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("copied ahead into sim0: ") && l.ends_with(" wasted")),
        "{text}"
    );
    let (ok, _, stderr) = rimms(&["run", "sar", "--sim-link", "0"]);
    assert!(!ok && stderr.contains("--sim-link"), "{stderr}");
}

/// Double-buffered frames compute what one frame at a time computes, and move no more than
/// its bytes plus the copies ahead they report wasted (the next frame's input sent by the last
/// call, the last frame's result brought back and never read), link by link, in every app.
#[test]
fn double_buffered_frames_give_the_same_results_and_report_every_extra_byte_as_wasted() {
    for app in ["2fft", "fzf", "zip3x", "correlator", "pulse-doppler", "sar"] {
        let run = |submit: &str| {
            json(&[
                "run", app, "--map", "sim", "--frames", "3", "--submit", submit, "--json",
            ])
        };
        let (one, two) = (run("scoped"), run("double-buffered"));
        assert_eq!(one["result"], two["result"], "{app}");
        let wasted_into = |to: &Value| -> u64 {
            two["prefetches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| &p["space"] == to)
                .map(|p| p["wasted_bytes"].as_u64().expect("wasted bytes"))
                .sum()
        };
        let bytes = |run: &Value, from: &Value, to: &Value| -> u64 {
            run["links"]
                .as_array()
                .expect("links")
                .iter()
                .filter(|l| &l["from"] == from && &l["to"] == to)
                .map(|l| l["bytes"].as_u64().expect("bytes"))
                .sum()
        };
        for link in two["links"].as_array().expect("links") {
            let (from, to) = (&link["from"], &link["to"]);
            let (once, twice) = (bytes(&one, from, to), bytes(&two, from, to));
            assert!(
                twice <= once + wasted_into(to),
                "{app}, {from} -> {to}: {twice} bytes double-buffered, {once} one frame at a time, {} reported wasted",
                wasted_into(to)
            );
        }
    }
}
