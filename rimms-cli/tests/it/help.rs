//! Help as a newcomer reads it (issue 32): wrapped to the terminal, and ending in examples
//! that run as written. Every example of every subcommand's help, and every whole `rimms`
//! command of the README, is run here and must succeed, so an example that stops working
//! fails the suite instead of the reader.

use crate::common::command::{rimms, rimms_args, run, Running};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Issue 32's conventions: help is wrapped to the terminal (COLUMNS here, at most 100), not
/// lines of 247 characters.
#[test]
fn help_is_wrapped_to_the_terminal() {
    for sub in [
        "",
        "run",
        "bench",
        "devices",
        "memstat",
        "fpga-emu",
        "completions",
        "man",
    ] {
        let args: Vec<&str> = [sub, "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        for (columns, widest) in [("80", 80), ("200", 100)] {
            let (code, stdout, stderr) = run(rimms().args(&args).env("COLUMNS", columns));
            assert_eq!(code, Some(0), "{stderr}");
            // The options' part, which clap wraps; examples are written to fit 100 columns.
            let options = stdout.split("Examples:").next().unwrap_or_default();
            for line in options.lines() {
                assert!(
                    line.chars().count() <= widest,
                    "rimms {sub} --help at COLUMNS={columns}: {line}"
                );
            }
            for line in stdout.lines() {
                assert!(line.chars().count() <= 100, "rimms {sub} --help: {line}");
            }
        }
    }
}

/// One example line of a help text: the command before its description, run as written
/// with `rimms` being this build, in `dir`. `VAR=value` words before the program are its
/// environment, `> FILE` its standard output, `$!` the last command run with `&`, which is
/// returned still running.
fn run_example(line: &str, dir: &std::path::Path, last: &mut Vec<Running>) -> Result<(), String> {
    let command = line.trim().split("  ").next().unwrap_or_default();
    let mut words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    let background = words.last().is_some_and(|w| w == "&");
    if background {
        words.pop();
    }
    let pid = last.last().map(|r| r.0.id().to_string());
    let mut env = Vec::new();
    while words
        .first()
        .is_some_and(|w| w.contains('=') && !w.starts_with('-'))
    {
        let word = words.remove(0);
        let (k, v) = word.split_once('=').unwrap_or((&word, ""));
        env.push((k.to_string(), v.to_string()));
    }
    let mut stdout_to = None;
    if let Some(at) = words.iter().position(|w| w == ">") {
        stdout_to = words.get(at + 1).cloned();
        words.truncate(at);
    }
    let program = words.first().cloned().ok_or("an empty example")?;
    let mut cmd = if program == "rimms" {
        rimms()
    } else {
        Command::new(&program)
    };
    for word in &words[1..] {
        match (word.as_str(), &pid) {
            ("$!", Some(pid)) => cmd.arg(pid),
            _ => cmd.arg(word),
        };
    }
    cmd.current_dir(dir).envs(env).stdin(Stdio::null());
    if background {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        last.push(Running(child));
        return Ok(());
    }
    if let Some(file) = stdout_to {
        let file = std::fs::File::create(dir.join(file)).map_err(|e| e.to_string())?;
        cmd.stdout(file);
    }
    let out = cmd.output().map_err(|e| format!("{program}: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{line}: {stderr}");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{line}: {:?}: {stderr}", out.status.code()))
    }
}

/// The command lines of a help text's "Examples:" section: lines indented two spaces (a
/// description carried onto a line of its own is indented further).
fn examples(help: &str) -> Vec<String> {
    let Some(section) = help.split("Examples:\n").nth(1) else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .map(str::to_string)
        .collect()
}

/// Runs `lines` in order in a fresh folder. A line after one left running with `&` is tried
/// again until it succeeds (60 s at most): the program it talks to is still starting.
fn run_examples(what: &str, lines: &[String]) {
    let dir = tempfile::tempdir().expect("dir");
    let mut running = Vec::new();
    for line in lines {
        let patient = !running.is_empty();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match run_example(line, dir.path(), &mut running) {
                Ok(()) => break,
                Err(e) if patient && Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("{what}: {e}"),
            }
        }
    }
}

/// Issue 32's "must show": every example in every subcommand's help runs as written and
/// succeeds.
#[test]
fn every_subcommands_help_examples_run() {
    for sub in [
        "run",
        "bench",
        "devices",
        "memstat",
        "fpga-emu",
        "completions",
        "man",
    ] {
        let (code, stdout, _) = rimms_args(&[sub, "--help"]);
        assert_eq!(code, Some(0));
        let lines = examples(&stdout);
        assert!(
            !lines.is_empty(),
            "rimms {sub} --help has no examples:\n{stdout}"
        );
        run_examples(&format!("rimms {sub} --help"), &lines);
    }
}

/// Issue 32's "must show": the `rimms` commands the README gives whole (in backticks, with no
/// placeholder such as N or DIR) run and succeed. Runs and benches take `--frames 1` (and a
/// bench one app) so that the test takes seconds, not the README's minutes.
#[test]
fn the_readmes_rimms_commands_run() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README");
    let mut commands: Vec<String> = readme
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|span| span.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|span| span.starts_with("rimms "))
        .filter(|span| {
            let words: Vec<&str> = span.split_whitespace().collect();
            let placeholder = words.iter().any(|w| {
                w.contains(['[', '<', '|', '.', '…'])
                    && !w.ends_with(".svg")
                    && !w.ends_with(".txt")
                    || (w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase()))
            });
            // `rimms run --no-merge` names an option of `run`, and `rimms memstat` the
            // command, not a command line.
            let incomplete = (words.get(1) == Some(&"run")
                && words.get(2).is_none_or(|w| w.starts_with('-')))
                || (words.len() == 2 && ["memstat", "fpga-emu", "completions"].contains(&words[1]));
            !placeholder && !incomplete
        })
        .collect();
    commands.sort();
    commands.dedup();
    assert!(commands.len() >= 4, "{commands:?}");
    for command in &commands {
        let mut line = command.clone();
        if line.starts_with("rimms run ") || line.starts_with("rimms bench") {
            if !line.contains("--frames") {
                line += " --frames 1";
            }
            if line.starts_with("rimms bench")
                && !line.contains("--app")
                && !line.contains("--ranks")
            {
                line += " --app zip3x";
            }
        }
        run_examples("README", &[format!("  {line}")]);
    }
}
