//! What a scope costs, beside rayon's own `scope` doing the same: opening and closing one with
//! no jobs, and with `n` jobs that do nothing, so what is timed is the scope's overhead
//! (submission, hand-off, completion, the wait). Goal: an empty scope under 1 µs, each job
//! under 1 µs of overhead. Per-job overhead is `(jobs(n) − empty) / n`.
//!
//! `cargo bench -p rimms-runtime --bench scope -- --sample-count 50 --min-time 0.05`
//!
//! Before divan's table it prints the hand-off to an accelerator's queue as percentiles
//! (`handoff_report`): a one-job scope on a sim device, timed one scope at a time over
//! [`SCOPES`] scopes, [`ROUNDS`] times, with the machine's load. A median alone hides what
//! matters there: a late wake-up of the device's worker or of the scope's thread, which shows
//! in the tail, and on a loaded machine in whole rounds. Issue 29's target: at most 2 µs at the
//! median and 10 µs at the 99th percentile.

use divan::{black_box, Bencher};
use rimms_runtime::{Device, Runtime, SimConfig};
use std::time::{Duration, Instant};

fn main() {
    handoff_report();
    divan::main();
}

/// Scopes timed per round of the hand-off report.
const SCOPES: usize = 1000;
/// Rounds of the hand-off report, each on a fresh runtime.
const ROUNDS: usize = 7;

/// A one-job scope on sim0, [`SCOPES`] times, each timed on its own: median and 99th
/// percentile per round, the load before and after. Twice: as a program writes it (the job
/// runs wherever the runtime puts it), and with a body that waits until the job has run, so
/// the job cannot run on the scope's thread and what is timed is the hand-off to the device's
/// worker.
fn handoff_report() {
    println!("  load before: {}", loadavg());
    for (what, scope) in [
        (
            "one-job scope on sim0",
            one_job_on_sim as fn(&Runtime, usize),
        ),
        (
            "one-job scope on sim0, run by its worker",
            one_job_on_sim_worker,
        ),
    ] {
        println!("{what}, {SCOPES} scopes a round (median / p99 / max):");
        for round in 0..ROUNDS {
            let rt = Runtime::builder()
                .sim(SimConfig::default())
                .build()
                .expect("runtime");
            // The worker starts on the first job; that is not the hand-off.
            scope(&rt, usize::MAX);
            let mut times: Vec<Duration> = (0..SCOPES)
                .map(|i| {
                    let start = Instant::now();
                    scope(&rt, i);
                    start.elapsed()
                })
                .collect();
            times.sort_unstable();
            let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
            println!(
                "  round {round}: {:>8.2?} / {:>8.2?} / {:>8.2?}",
                at(0.5),
                at(0.99),
                at(1.0)
            );
        }
    }
    println!("  load after:  {}", loadavg());
}

/// A one-job scope whose body returns only once the job has run: the device's worker runs it.
fn one_job_on_sim_worker(rt: &Runtime, i: usize) {
    let ran = std::sync::atomic::AtomicBool::new(false);
    rt.scope(|s| {
        let ran = &ran;
        s.spawn_on(Device::Sim(0), move |_| {
            black_box(i);
            ran.store(true, std::sync::atomic::Ordering::Release);
            Ok(())
        });
        let mut spins = 0u32;
        while !ran.load(std::sync::atomic::Ordering::Acquire) {
            spins += 1;
            if spins % 64 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    })
    .expect("scope");
}

fn one_job_on_sim(rt: &Runtime, i: usize) {
    rt.scope(|s| {
        s.spawn_on(Device::Sim(0), move |_| {
            black_box(i);
            Ok(())
        });
    })
    .expect("scope");
}

/// `/proc/loadavg`'s three load averages, or a note where there is none.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "(no /proc/loadavg)".into(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

const JOBS: [usize; 3] = [1, 16, 64];

#[divan::bench]
fn empty_rimms(bencher: Bencher) {
    let rt = Runtime::new().expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            black_box(s);
        })
        .expect("scope")
    });
}

#[divan::bench]
fn empty_rayon(bencher: Bencher) {
    bencher.bench_local(|| rayon::scope(|s| black_box(s).spawn(|_| {})));
}

/// rayon's scope with no spawn at all (the previous one spawns one no-op, as a scope with no
/// jobs still hands its body to a worker).
#[divan::bench]
fn empty_rayon_no_spawn(bencher: Bencher) {
    bencher.bench_local(|| {
        rayon::scope(|s| {
            black_box(s);
        })
    });
}

#[divan::bench(args = JOBS)]
fn jobs_rimms(bencher: Bencher, n: usize) {
    let rt = Runtime::new().expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            for i in 0..n {
                s.spawn(move |_| {
                    black_box(i);
                    Ok(())
                });
            }
        })
        .expect("scope")
    });
}

#[divan::bench(args = JOBS)]
fn jobs_rayon(bencher: Bencher, n: usize) {
    bencher.bench_local(|| {
        rayon::scope(|s| {
            for i in 0..n {
                s.spawn(move |_| {
                    black_box(i);
                });
            }
        })
    });
}

/// A one-job scope on an accelerator (a sim device): the hand-off alone, as divan times it;
/// `handoff_report` gives its percentiles.
#[divan::bench]
fn one_job_scope_on_sim(bencher: Bencher) {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    bencher.bench_local(|| one_job_on_sim(&rt, 0));
}

/// Jobs on an accelerator's queue (a sim device: one worker, jobs in order).
#[divan::bench(args = JOBS)]
fn jobs_rimms_on_sim(bencher: Bencher, n: usize) {
    let rt = Runtime::builder()
        .sim(SimConfig::default())
        .build()
        .expect("runtime");
    bencher.bench_local(|| {
        rt.scope(|s| {
            for i in 0..n {
                s.spawn_on(Device::Sim(0), move |_| {
                    black_box(i);
                    Ok(())
                });
            }
        })
        .expect("scope")
    });
}
