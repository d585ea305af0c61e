//! Issue 29's per-call figures in one run, in instructions: each case runs under callgrind at
//! two lengths and the difference is divided by the extra calls, so set-up, teardown and
//! first-call costs cancel and what is left is what one more call costs. Instructions rather
//! than time because these machines are shared: load does not change a count.
//!
//! `cargo bench -p rimms-runtime --bench per_call_instructions` (needs valgrind; without it the
//! bench says so and exits cleanly).
//!
//! How it counts: the bench runs itself under `valgrind --tool=callgrind
//! --toggle-collect=*measured*` with the case and the length in environment variables, and reads
//! the `totals:` (or `summary:`) line of the profile. Only what runs inside [`measured`] on the
//! calling thread is counted, so a scope case counts the submission of its row calls and not
//! the merged kernel that runs when the scope closes.

use num_complex::Complex32;
use rimms_runtime::{
    backend::host_kernels, ApiDecl, Device, FftDirection, HeteData, KernelArg, Runtime, ZipOp,
};
use std::hint::black_box;
use std::path::Path;
use std::process::{Command, ExitCode};

/// The counted region: everything `body` runs, on this thread.
#[inline(never)]
fn measured<R>(body: impl FnOnce() -> R) -> R {
    body()
}

/// One figure of the table: what it is, its unit, the target, and how to run `calls`
/// of it inside [`measured`].
struct Case {
    name: &'static str,
    per: &'static str,
    target: Option<f64>,
    /// Calls at the shorter length; the longer runs twice as many.
    calls: usize,
    run: fn(usize),
}

const CASES: [Case; 7] = [
    Case {
        name: "direct no-op dispatch, 3 resident arguments",
        per: "call",
        target: Some(250.0),
        calls: 2000,
        run: noop_three_resident,
    },
    Case {
        name: "built-in zip of one resident element (cpu)",
        per: "call",
        target: Some(450.0),
        calls: 2000,
        run: zip_one_element,
    },
    Case {
        name: "row FFT joining a scope's group (cpu, 512 points)",
        per: "row",
        target: Some(120.0),
        calls: 2000,
        run: scope_fft_rows,
    },
    Case {
        name: "row zip joining a scope's group (cpu, 512 elements)",
        per: "row",
        target: Some(120.0),
        calls: 2000,
        run: scope_zip_rows,
    },
    Case {
        name: "host magnitude",
        per: "element",
        target: None,
        calls: 16 * 1024,
        run: magnitude_elements,
    },
    Case {
        name: "host magnitude, data without exact zeros",
        per: "element",
        target: None,
        calls: 16 * 1024,
        run: magnitude_elements_without_zeros,
    },
    Case {
        name: "plain f32 magnitude loop (the reference)",
        per: "element",
        target: None,
        calls: 16 * 1024,
        run: f32_loop_elements,
    },
];

const CASE_ENV: &str = "RIMMS_PER_CALL_CASE";
const CALLS_ENV: &str = "RIMMS_PER_CALL_CALLS";

fn main() -> ExitCode {
    if let (Ok(case), Ok(calls)) = (std::env::var(CASE_ENV), std::env::var(CALLS_ENV)) {
        return run_case(&case, &calls);
    }
    let valgrind = Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|out| out.status.success()) {
        println!(
            "per_call_instructions: skipped, valgrind is not installed (apt-get install valgrind)"
        );
        return ExitCode::SUCCESS;
    }
    let me = match std::env::current_exe() {
        Ok(me) => me,
        Err(e) => {
            eprintln!("per_call_instructions: cannot find this bench's binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let scratch = std::env::temp_dir().join(format!("rimms-per-call-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&scratch) {
        eprintln!("per_call_instructions: {}: {e}", scratch.display());
        return ExitCode::FAILURE;
    }
    println!(
        "{:<52} {:>12} {:>8}",
        "instructions (callgrind)", "per", "target"
    );
    let mut failed = false;
    for (i, case) in CASES.iter().enumerate() {
        let count = |calls: usize| instructions(&me, &scratch, i, calls);
        match (count(case.calls), count(2 * case.calls)) {
            (Ok(short), Ok(long)) => {
                let per = long.saturating_sub(short) as f64 / case.calls as f64;
                let target = case.target.map_or("-".to_string(), |t| format!("≤ {t}"));
                // Per element, a tenth is 3 % of the figure: the ratios need the hundredths.
                let digits = if case.per == "element" { 2 } else { 1 };
                println!(
                    "{:<52} {:>7.*} {:<4} {:>8}",
                    case.name, digits, per, case.per, target
                );
            }
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{}: {e}", case.name);
                failed = true;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs case `index` at `calls` under callgrind and reads the instructions it counted.
fn instructions(me: &Path, scratch: &Path, index: usize, calls: usize) -> Result<u64, String> {
    let profile = scratch.join(format!("case{index}-{calls}.out"));
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--toggle-collect=*measured*",
            "--dump-instr=no",
        ])
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(me)
        .env(CASE_ENV, index.to_string())
        .env(CALLS_ENV, calls.to_string())
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the case failed under valgrind: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text =
        std::fs::read_to_string(&profile).map_err(|e| format!("{}: {e}", profile.display()))?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{}: no totals line", profile.display()))
}

fn run_case(case: &str, calls: &str) -> ExitCode {
    match (case.parse::<usize>(), calls.parse::<usize>()) {
        (Ok(i), Ok(calls)) if i < CASES.len() => {
            (CASES[i].run)(calls);
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("per_call_instructions: bad case {case:?} or calls {calls:?}");
            ExitCode::FAILURE
        }
    }
}

/// A runtime with the CPU and one sim card, and `n` buffers of `len` elements written on the
/// host, so that every case's data is resident where it runs.
fn resident(len: usize, n: usize) -> (Runtime, Vec<HeteData<Complex32>>) {
    let rt = Runtime::new().expect("runtime");
    let buffers = (0..n)
        .map(|k| {
            let mut x = HeteData::alloc(&rt, len).expect("alloc");
            x.host_write()
                .expect("host view")
                .fill(Complex32::new(k as f32 + 1.0, 0.5));
            x
        })
        .collect();
    (rt, buffers)
}

fn noop_three_resident(calls: usize) {
    static NOOP: ApiDecl = ApiDecl::new("noop");
    let (rt, mut x) = resident(1024, 3);
    let [a, b, c] = &mut x[..] else {
        unreachable!("three buffers")
    };
    measured(|| {
        for _ in 0..calls {
            let outcome = rt.launch_host(
                black_box(Device::Cpu),
                &NOOP,
                [
                    KernelArg::read("a", &*a),
                    KernelArg::read("b", &*b),
                    KernelArg::write::<Complex32>("c", c),
                ],
                |args| {
                    black_box(args);
                    Ok(())
                },
            );
            black_box(outcome.is_ok());
        }
    });
    std::mem::forget((rt, x));
}

fn zip_one_element(calls: usize) {
    let (rt, mut x) = resident(1, 3);
    let [a, b, c] = &mut x[..] else {
        unreachable!("three buffers")
    };
    measured(|| {
        for _ in 0..calls {
            let outcome = rt.zip(black_box(Device::Cpu), ZipOp::Mul, &*a, &*b, c);
            black_box(outcome.is_ok());
        }
    });
    std::mem::forget((rt, x));
}

/// Row length of the scope cases: one 4 KiB fragment of complex values (a row view must start
/// on a fragment); only the submission is counted, so the length does not matter otherwise.
const ROW: usize = 512;

fn scope_fft_rows(calls: usize) {
    let (rt, mut x) = resident(ROW * calls, 2);
    let [input, output] = &mut x[..] else {
        unreachable!("two buffers")
    };
    let rows = input.rows(ROW).expect("rows");
    let mut outs = output.rows_mut(ROW).expect("rows");
    rt.scope(|s| {
        measured(|| {
            for (row, out) in rows.iter().zip(outs.iter_mut()) {
                black_box(
                    s.fft(Device::Cpu, FftDirection::Forward, ROW, row, out)
                        .is_ok(),
                );
            }
        });
        Ok::<(), rimms_runtime::Error>(())
    })
    .expect("scope")
    .expect("rows");
    drop((rows, outs));
    std::mem::forget((rt, x));
}

fn scope_zip_rows(calls: usize) {
    let (rt, mut x) = resident(ROW * calls, 3);
    let [a, b, output] = &mut x[..] else {
        unreachable!("three buffers")
    };
    let b_rows = b.rows(ROW).expect("rows");
    let rows = a.rows(ROW).expect("rows");
    let mut outs = output.rows_mut(ROW).expect("rows");
    rt.scope(|s| {
        measured(|| {
            for ((row, b), out) in rows.iter().zip(&b_rows).zip(outs.iter_mut()) {
                black_box(s.zip(Device::Cpu, ZipOp::Mul, row, b, out).is_ok());
            }
        });
        Ok::<(), rimms_runtime::Error>(())
    })
    .expect("scope")
    .expect("rows");
    drop((rows, b_rows, outs));
    std::mem::forget((rt, x));
}

/// `n` samples, and room for their magnitudes. `re_offset` 48.0 puts an exact zero every
/// 97 × 31 = 3,007 samples (where both parts are 0), which costs `magnitude` a second look at
/// its block; 48.5 leaves none.
fn samples(n: usize, re_offset: f32) -> (Vec<Complex32>, Vec<f32>) {
    let input = (0..n)
        .map(|k| Complex32::new((k % 97) as f32 - re_offset, (k % 31) as f32 * 0.25))
        .collect();
    (input, vec![0.0; n])
}

fn magnitude_of(input: Vec<Complex32>, mut out: Vec<f32>) {
    measured(|| host_kernels::magnitude(black_box(&input), black_box(&mut out)));
    black_box(out);
}

fn magnitude_elements(n: usize) {
    let (input, out) = samples(n, 48.0);
    magnitude_of(input, out);
}

fn magnitude_elements_without_zeros(n: usize) {
    let (input, out) = samples(n, 48.5);
    magnitude_of(input, out);
}

fn f32_loop_elements(n: usize) {
    let (input, mut out) = samples(n, 48.0);
    measured(|| {
        for (o, v) in black_box(&mut out).iter_mut().zip(black_box(&input)) {
            *o = (v.re * v.re + v.im * v.im).sqrt();
        }
    });
    black_box(out);
}
