//! The protocol over MPI: this binary launches itself under `mpirun` for each configuration
//! (2, 3 and 4 ranks, over Open MPI's shared-memory transport and over TCP on loopback) and a
//! singleton (no `mpirun`, one rank), and, as each rank, runs the same programs the in-process
//! tests run: random distributed programs against the sequential model with bytes per peer
//! equal to the plans, a corner turn of the analytic bytes, a drifting rank that every rank
//! reports, and the distributed programs on real runtimes (`scenarios/`). Without `mpirun` on PATH it says it skipped and why.

mod common;
mod netns;
mod scenarios;

use common::{drifting_program, program, run_rank};
use rimms_dist::{Cluster, Distribution, Mpi, Rank, Transport, TransportError};
use rimms_runtime::Runtime;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

/// Set for a run without `mpirun`.
const SINGLETON: &str = "RIMMS_MPI_SINGLETON";

fn main() -> ExitCode {
    let under_mpirun = std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some();
    if under_mpirun || std::env::var_os(SINGLETON).is_some() {
        return rank_main();
    }
    launch()
}

/// One rank: every check, an exit code of 0 only if all passed.
fn rank_main() -> ExitCode {
    let transport = match Mpi::start() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cannot start MPI: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ranks = transport.ranks();
    let mut failures = 0;
    let mut check = |what: &str, outcome: Result<(), String>| {
        if let Err(why) = outcome {
            eprintln!("{} of {ranks}: {what}: {why}", transport.rank());
            failures += 1;
        }
    };
    // The rows, distribution and seed come from the seed alone, so every rank draws the same.
    for seed in 0..12u64 {
        let rows = 4 + (seed as usize * 7) % 9;
        let dist = [
            Distribution::BlockRows,
            Distribution::BlockCyclic { block: 2 },
            Distribution::Replicated,
            Distribution::OnRank(Rank(0)),
        ][seed as usize % 4];
        if matches!(dist, Distribution::BlockRows) && rows < ranks {
            continue;
        }
        let ops = program(seed, ranks, rows, 24);
        let outcome = run_rank(&transport, dist, rows, &ops).map_err(|e| e.to_string());
        check(
            &format!("program {seed} ({dist:?}, {rows} rows)"),
            outcome.and_then(|o| {
                (o.sent == o.planned)
                    .then_some(())
                    .ok_or(format!("sent {:?}, planned {:?}", o.sent, o.planned))
            }),
        );
    }
    if ranks > 1 {
        let mine = drifting_program(transport.rank());
        let outcome = run_rank(&transport, Distribution::BlockCyclic { block: 1 }, 8, &mine);
        check(
            "a drifting rank 1",
            match outcome {
                Err(TransportError::Drift { ranks, .. }) if ranks == vec![Rank(1)] => Ok(()),
                Err(other) => Err(format!("another error: {other}")),
                Ok(_) => Err("the drift went unseen".into()),
            },
        );
    }
    // The distributed programs on real runtimes, one cluster each over the one MPI handle.
    for (name, program) in scenarios::PROGRAMS {
        let outcome = Runtime::new()
            .map_err(|e| e.to_string())
            .and_then(|rt| program(&Cluster::new(rt, &transport)));
        check(&format!("cluster program {name}"), outcome);
    }
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The launcher: runs this binary as each configuration's ranks.
fn launch() -> ExitCode {
    let exe = std::env::current_exe().expect("this test binary");
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("mpi_ranks: skipped: no `mpirun` on PATH (Debian: apt-get install openmpi-bin libopenmpi-dev)");
        println!("0 passed, 0 failed, 1 skipped");
        return ExitCode::SUCCESS;
    }
    let mut runs: Vec<(String, Command)> = Vec::new();
    let mut singleton = Command::new(&exe);
    singleton.env(SINGLETON, "1");
    runs.push(("singleton (no mpirun)".into(), singleton));
    for np in [2, 3, 4] {
        for (name, btl) in [
            ("shared memory", "self,vader"),
            ("tcp on loopback", "self,tcp"),
        ] {
            let mut run = Command::new("mpirun");
            run.args([
                "--oversubscribe",
                "-np",
                &np.to_string(),
                "--mca",
                "btl",
                btl,
            ]);
            if btl.contains("tcp") {
                run.args(["--mca", "btl_tcp_if_include", "lo"]);
            }
            run.arg(&exe);
            runs.push((format!("np {np} over {name}"), run));
        }
    }
    // Two virtual hosts where this machine allows network namespaces (root, iproute2).
    let hosts = netns::Hosts::make();
    let mut skipped = Vec::new();
    match &hosts {
        Ok(hosts) => runs.push(("np 2 on two network namespaces".into(), hosts.mpirun(&exe))),
        Err(why) => skipped.push(format!("np 2 on two network namespaces: {why}")),
    }
    let (mut passed, mut failed) = (0, 0);
    for (name, mut run) in runs {
        run.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
        let started = Instant::now();
        let ok = match run_with_deadline(run, Duration::from_secs(180)) {
            Ok(status) => status,
            Err(why) => {
                eprintln!("{name}: {why}");
                false
            }
        };
        println!(
            "test mpi_ranks::{} ... {} ({:.1} s)",
            name.replace(' ', "_"),
            if ok { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    if let Ok(hosts) = &hosts {
        // The namespaces' run must have put its traffic on the wire between them.
        match hosts.bytes_sent() {
            Some(bytes) if bytes > 0 => {
                println!("network namespaces: {bytes} bytes left the first host through its veth")
            }
            other => {
                eprintln!("network namespaces: no traffic seen on the veth ({other:?})");
                failed += 1;
            }
        }
    }
    for why in &skipped {
        println!("test mpi_ranks::{} ... skipped", why.replace(' ', "_"));
    }
    if skipped.is_empty() {
        println!("{passed} passed, {failed} failed");
    } else {
        println!(
            "{passed} passed, {failed} failed, {} skipped",
            skipped.len()
        );
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `command`, killing it past `deadline`: a hang is a failure, never a stuck test.
fn run_with_deadline(mut command: Command, deadline: Duration) -> Result<bool, String> {
    let mut child = command.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let until = Instant::now() + deadline;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Ok(status.success());
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "still running after {} s; killed",
                deadline.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
