//! RIMMS against StarPU-MPI, the runtime a peer would pick, and bare MPI: the same 2048 × 2048
//! complex corner turn, and one distributed pipeline (a window on every row, the corner turn,
//! |x|² of every element), at np 2 and 4 over shared memory, in one run.
//!
//! `cargo run --release --manifest-path peer-bench/Cargo.toml [-- ROUNDS REPS]`
//!
//! Each configuration is its own `mpirun` launch (MPI and StarPU initialise once per process),
//! the launches alternate round by round so that a slow spell of a shared machine hits them
//! alike, and each launch reports the median of `REPS` repetitions after an untimed one, timed
//! between barriers; a cell is the median over rounds. Every rank gets one core's worth of
//! workers (`STARPU_NCPU=1`, `RAYON_NUM_THREADS=1`). StarPU-MPI writes the corner turn as a
//! user of it would: one task per block, `starpu_mpi_task_insert`, owner computes, its cache
//! flushed between repetitions so that each one sends again.

use rimms_dist::{Cluster, Distribution, Mpi, Transport};
use rimms_runtime::{Complex32, Device, Runtime, ZipOp};
use std::collections::HashMap;
use std::ffi::c_int;
use std::process::{Command, ExitCode};
use std::time::Instant;

extern "C" {
    fn starpu_run(
        rows: c_int,
        cols: c_int,
        blocks: c_int,
        reps: c_int,
        turn: *mut f64,
        pipe: *mut f64,
    ) -> c_int;
    fn mpi_run(rows: c_int, cols: c_int, reps: c_int, bare: *mut f64, hand: *mut f64) -> c_int;
}

const N: usize = 2048;
const BLOCKS: [usize; 3] = [2, 4, 8];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
        return rank_main(&args);
    }
    let rounds: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(3);
    let reps: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    for np in [2, 4] {
        let mut configs = vec!["mpi".to_string(), "rimms".to_string()];
        configs.extend(BLOCKS.map(|b| format!("starpu {b}")));
        let mut results: HashMap<String, Vec<f64>> = HashMap::new();
        for _ in 0..rounds {
            for config in &configs {
                match launch(np, config, reps) {
                    Ok(lines) => {
                        for (key, ms) in lines {
                            results.entry(key).or_default().push(ms);
                        }
                    }
                    Err(why) => {
                        eprintln!("np {np}, {config}: {why}");
                        return ExitCode::FAILURE;
                    }
                }
            }
        }
        print_table(np, rounds, reps, &results);
    }
    ExitCode::SUCCESS
}

/// One `mpirun` launch: the `RESULT key ms` lines rank 0 printed.
fn launch(np: usize, config: &str, reps: usize) -> Result<Vec<(String, f64)>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("mpirun")
        .args([
            "--oversubscribe",
            "-np",
            &np.to_string(),
            "--mca",
            "btl",
            "self,vader",
        ])
        .arg(exe)
        .args(config.split(' '))
        .arg(reps.to_string())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("STARPU_NCPU", "1")
        .env("STARPU_SILENT", "1")
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .map_err(|e| format!("cannot run mpirun: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.strip_prefix("RESULT ")?.rsplitn(2, ' ');
            let ms = words.next()?.parse().ok()?;
            Some((words.next()?.to_string(), ms))
        })
        .collect())
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn print_table(np: usize, rounds: usize, reps: usize, results: &HashMap<String, Vec<f64>>) {
    let get = |key: &str| results.get(key).map_or(f64::NAN, |v| median(v));
    let bare = get("bare");
    println!(
        "np {np}, {N} × {N} complex (32 MiB), shared memory; median over {rounds} launches of the median of {reps} repetitions:"
    );
    println!(
        "  {:<28} {:>12} {:>10} {:>14}",
        "", "corner turn", "÷ bare", "pipeline"
    );
    let row = |name: &str, turn: f64, pipeline: Option<f64>| {
        println!(
            "  {name:<28} {turn:>9.2} ms {:>9.2}x {}",
            turn / bare,
            pipeline.map_or(String::new(), |p| format!("{p:>11.2} ms"))
        );
    };
    row("bare MPI_Ialltoall", bare, None);
    row("hand-written MPI", get("hand"), None);
    let (rimms, rimms_pipe) = (get("rimms corner turn"), get("rimms pipeline"));
    row("RIMMS", rimms, Some(rimms_pipe));
    let mut best = (f64::INFINITY, f64::INFINITY);
    for b in BLOCKS {
        let (turn, pipe) = (
            get(&format!("starpu {b} corner turn")),
            get(&format!("starpu {b} pipeline")),
        );
        best = (best.0.min(turn), best.1.min(pipe));
        row(&format!("StarPU-MPI, {} blocks", b * b), turn, Some(pipe));
    }
    println!(
        "  RIMMS ÷ the best StarPU-MPI: {:.2}x on the corner turn, {:.2}x on the pipeline (below 1: RIMMS is faster)",
        rimms / best.0,
        rimms_pipe / best.1
    );
}

/// One configuration as this rank: prints `RESULT key ms` on rank 0.
fn rank_main(args: &[String]) -> ExitCode {
    let reps: usize = args.last().and_then(|a| a.parse().ok()).unwrap_or(10);
    match args.first().map(String::as_str) {
        Some("mpi") => {
            let (mut bare, mut hand) = (0.0, 0.0);
            // SAFETY: plain C over owned out-pointers; MPI is initialised (once) inside.
            let wrong =
                unsafe { mpi_run(N as c_int, N as c_int, reps as c_int, &mut bare, &mut hand) };
            if wrong != 0 {
                eprintln!("bare MPI: {wrong} elements of the transpose are wrong");
                return ExitCode::FAILURE;
            }
            report(&[("bare", bare), ("hand", hand)]);
        }
        Some("starpu") => {
            let blocks: c_int = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
            let (mut turn, mut pipe) = (0.0, 0.0);
            // SAFETY: plain C over owned out-pointers; StarPU-MPI initialises MPI (once per
            // process) and finalises it inside.
            let wrong = unsafe {
                starpu_run(
                    N as c_int,
                    N as c_int,
                    blocks,
                    reps as c_int,
                    &mut turn,
                    &mut pipe,
                )
            };
            if wrong != 0 {
                eprintln!("StarPU-MPI: {wrong} (−1: it did not start; else wrong elements)");
                return ExitCode::FAILURE;
            }
            report(&[
                (&format!("starpu {blocks} corner turn"), turn),
                (&format!("starpu {blocks} pipeline"), pipe),
            ]);
        }
        Some("rimms") => match rimms(reps) {
            Ok((turn, pipe)) => report(&[("rimms corner turn", turn), ("rimms pipeline", pipe)]),
            Err(why) => {
                eprintln!("RIMMS: {why}");
                return ExitCode::FAILURE;
            }
        },
        other => {
            eprintln!("unknown configuration {other:?}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn report(results: &[(&str, f64)]) {
    if std::env::var("OMPI_COMM_WORLD_RANK").as_deref() == Ok("0") {
        for (key, ms) in results {
            println!("RESULT {key} {ms}");
        }
    }
}

/// RIMMS's corner turn and pipeline, medians in ms, each repetition between agreements (the
/// collective every rank passes, as the peers' barriers).
fn rimms(reps: usize) -> Result<(f64, f64), String> {
    let t = Mpi::start().map_err(|e| e.to_string())?;
    let cl = Cluster::new(Runtime::new().map_err(|e| e.to_string())?, &t);
    cl.check_drift(false);
    let err = |e: rimms_dist::ClusterError| e.to_string();
    let mut a = cl
        .alloc::<Complex32>(N, N, Distribution::BlockRows)
        .map_err(err)?;
    let mut turned = cl
        .alloc::<Complex32>(N, N, Distribution::BlockRows)
        .map_err(err)?;
    let mut windowed = cl
        .alloc::<Complex32>(N, N, Distribution::BlockRows)
        .map_err(err)?;
    let mut power = cl
        .alloc::<f32>(N, N, Distribution::BlockRows)
        .map_err(err)?;
    let window =
        rimms_runtime::HeteData::from_slice(cl.runtime(), &vec![Complex32::new(1.0, 0.0); N])
            .map_err(|e| e.to_string())?;
    let fill = |a: &mut rimms_dist::DistData<Complex32>| {
        cl.compute(a, 0..N, true, "fill", |_, rows, mut view| {
            let host = view.host_write()?;
            for (i, r) in rows.enumerate() {
                for c in 0..N {
                    host[i * N + c] = Complex32::new(r as f32, c as f32);
                }
            }
            Ok(())
        })
    };
    fill(&mut a).map_err(err)?;
    let (mut turns, mut pipes) = (Vec::new(), Vec::new());
    for rep in 0..=reps {
        let digest = rep as u64;
        t.agree(digest, "corner turn").map_err(|e| e.to_string())?;
        let start = Instant::now();
        cl.corner_turn(&mut a, &mut turned).map_err(err)?;
        t.agree(digest, "corner turn done")
            .map_err(|e| e.to_string())?;
        let turn = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        cl.compute_from(&a, &mut windowed, 0..N, "window", |rt, _, mine, mut out| {
            rt.zip_rows(Device::Cpu, ZipOp::Mul, &mine, &window, &mut out)
        })
        .map_err(err)?;
        cl.corner_turn(&mut windowed, &mut turned).map_err(err)?;
        cl.compute_from(
            &turned,
            &mut power,
            0..N,
            "power",
            |rt, _, mine, mut out| rt.power(Device::Cpu, &mine, &mut out),
        )
        .map_err(err)?;
        t.agree(digest, "pipeline done")
            .map_err(|e| e.to_string())?;
        let pipe = start.elapsed().as_secs_f64() * 1e3;
        if rep > 0 {
            turns.push(turn);
            pipes.push(pipe);
        }
    }
    Ok((median(&turns), median(&pipes)))
}
